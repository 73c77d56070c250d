"""Property tests: random captures built with dpkt read back exactly as they were written."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import oracle
from tests.strategies import COMPRESSORS, Capture, captures, pcap_files, pcapng_files
from tracecore.reader import CaptureReader
from tracecore.reader.linktypes import DECODED
from tracecore.schema import PACKET_SCHEMA

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read_back(cap: Capture, suffix: str, batch_rows: int) -> tuple[list[dict], CaptureReader]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"x.pcap{suffix}"
        path.write_bytes(COMPRESSORS[suffix](cap.data))
        reader = CaptureReader(path, batch_rows=batch_rows)
        batches = list(reader.batches())
        oracle_rows = list(oracle.iter_rows(path))  # the independent dpkt reader agrees too
    for batch in batches:
        assert 0 < batch.num_rows <= batch_rows
    rows = pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist()
    assert rows == oracle_rows
    return rows, reader


def _undecoded(cap: Capture) -> dict[int, int]:
    """Frames per link type the kernel does not decode, as the capture was built."""
    return dict(Counter(row["link_type"] for row in cap.rows if row["link_type"] not in DECODED))


@SETTINGS
@given(cap=pcap_files(), batch_rows=st.integers(1, 5))
def test_pcap_round_trip(cap: Capture, batch_rows: int) -> None:
    rows, reader = read_back(cap, "", batch_rows)
    assert rows == cap.rows
    assert reader.stats.undecoded_link_frames == _undecoded(cap)
    assert len(reader.warnings) == (1 if _undecoded(cap) else 0)
    assert reader.stats.formats == {cap.kind}


@SETTINGS
@given(cap=pcapng_files(), batch_rows=st.integers(1, 5))
def test_pcapng_round_trip(cap: Capture, batch_rows: int) -> None:
    rows, reader = read_back(cap, "", batch_rows)
    assert rows == cap.rows
    assert reader.stats.undecoded_link_frames == _undecoded(cap)


@settings(max_examples=40, deadline=None)
@given(cap=captures(), suffix=st.sampled_from([".gz", ".xz", ".zst"]))
def test_compressed_round_trip(cap: Capture, suffix: str) -> None:
    rows, reader = read_back(cap, suffix, 3)
    assert rows == cap.rows
    assert {"gzip": ".gz", "xz": ".xz", "zstd": ".zst"}[
        next(iter(reader.stats.formats & {"gzip", "xz", "zstd"}))
    ] == suffix
