"""The reader's batch arrays: reused (batch.ColumnsPool) only once the caller has dropped that batch, and
put in time order in place (Columns.sort_by_time) when asked."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.rdma_corpus import RDMA_CORPUS
from tests.test_ingest_support import records, write_pcap
from tracecore.reader import CaptureReader, read_batches
from tracecore.sample import sample_run

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


def _restamped(src: Path, dst: Path, stamps: list[int]) -> Path:
    """The first len(stamps) records of a real capture, stamped stamps[i] µs in file order."""
    header, recs = records(src)
    recs = [struct.pack("<II", t // 10**6, t % 10**6) + rec[8:] for t, rec in zip(stamps, recs, strict=False)]
    return write_pcap(dst, header, recs)


# Nearly sorted timestamps (a few packets early, ties, a swapped block) and some that are not at all.
NEARLY_SORTED = st.lists(st.integers(0, 40), min_size=1, max_size=80).map(
    lambda jumps: [sum(jumps[: i + 1]) for i in range(len(jumps))]
)


SAMPLE = sample_run() / "worker-0-tcpdump.pcap"
NCCL = RDMA_CORPUS / "linlinw5_nccl_ring2_node0.pcap"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(base=[10, 20, 30, 40, 50, 60], early=[(4, 45)], shuffled=False, batch_rows=30, source=SAMPLE)
@example(base=[10, 20, 20, 30, 40, 40], early=[(5, 20), (1, 0)], shuffled=False, batch_rows=6, source=NCCL)
@example(base=list(range(0, 400, 5)), early=[(70, 200), (9, 30)], shuffled=False, batch_rows=30, source=NCCL)
@given(
    base=NEARLY_SORTED,
    early=st.lists(st.tuples(st.integers(0, 79), st.integers(0, 200)), max_size=4),
    shuffled=st.booleans(),
    batch_rows=st.integers(1, 30),
    source=st.sampled_from([SAMPLE, NCCL]),
)
def test_sorted_batches_equal_a_stable_sort_of_each_batch(
    tmp_path: Path,
    base: list[int],
    early: list[tuple[int, int]],
    shuffled: bool,
    batch_rows: int,
    source: Path,
) -> None:
    stamps = list(base)
    for at, by in early:  # a packet stamped before those read ahead of it
        if at < len(stamps):
            stamps[at] = max(0, stamps[at] - by)
    if shuffled:
        stamps = stamps[::-1]
    path = _restamped(source, tmp_path / "x.pcap", stamps)
    as_read = list(CaptureReader(path, batch_rows=batch_rows).batches())
    got = list(CaptureReader(path, batch_rows=batch_rows, sort_batches=True).batches())
    assert len(got) == len(as_read)
    for mine, raw in zip(got, as_read, strict=True):
        order = np.argsort(raw.column("ts_ns").to_numpy(), kind="stable")
        assert mine.to_pylist() == raw.take(order).to_pylist()


@pytest.mark.parametrize(
    "path",
    [
        SAMPLE,
        CORPUS / "arkime__v6-http.pcap",
        CORPUS / "ndpi__6in4tunnel.pcap",
        RDMA_CORPUS / "tcpdump_vxlan.pcap",
        NCCL,
    ],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("batch_rows", [3, 1 << 16])
def test_address_rows_count_each_outer_address_as_source_and_destination(path: Path, batch_rows: int) -> None:
    reader = CaptureReader(path, batch_rows=batch_rows, count_addresses=True)
    table = pa.Table.from_batches(list(reader.batches()))
    want: dict[str, list[int]] = {}
    for slot, column in enumerate(["src_ip", "dst_ip"]):
        for address in table[column].to_pylist():
            if address is not None:
                want.setdefault(address, [0, 0])[slot] += 1
    assert reader.stats.address_rows == want
    assert sum(src for src, _ in want.values()) == len(table) - table["src_ip"].null_count > 0
    plain = CaptureReader(path, batch_rows=batch_rows)  # a plain read keeps no per-address state
    assert sum(b.num_rows for b in plain.batches()) == len(table)
    assert plain.stats.address_rows == {}
