"""The reader reuses a batch's arrays (batch.ColumnsPool) only once the caller has dropped that batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rdma_corpus import RDMA_CORPUS
from tracecore.reader import read_batches

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CAPTURES = [CORPUS / "tcpreplay__test.pcap", RDMA_CORPUS / "linlinw5_nccl_ring2_node0.pcap"]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_held_batches_keep_their_rows_and_dropped_ones_lend_their_arrays(path: Path) -> None:
    streamed, addresses = [], set()
    for batch in read_batches(path, batch_rows=8):
        streamed.append(batch.to_pylist())
        addresses.add(batch.column("ts_ns").buffers()[1].address)
    held = list(read_batches(path, batch_rows=8))
    assert len(held) == len(streamed) > 10
    # Every batch kept alive still has its own rows: none was overwritten by a later one.
    assert [b.to_pylist() for b in held] == streamed
    assert len({b.column("ts_ns").buffers()[1].address for b in held}) == len(held)
    # Streamed one at a time, the arrays of the batches already dropped are filled again.
    assert len(addresses) <= 3
    if any(row["rdma_opcode"] is not None for rows in streamed for row in rows):
        assert any(row["rdma_opcode"] is None for rows in streamed for row in rows)
