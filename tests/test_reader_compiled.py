"""The reader's two ways to run one kernel source: built ahead of time (aot.py) and numba's JIT.

They must decode every byte identically, the checkout must carry a current ahead-of-time build
(`make kernels`), and a stale build must never run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tracecore.reader import CaptureReader, aot, compiled
from tracecore.sample import sample_run


@pytest.fixture
def fresh_choice() -> Iterator[None]:
    """Let a test choose the kernels anew; the process's choice is restored afterwards."""
    compiled.kernels.cache_clear()
    yield
    compiled.kernels.cache_clear()


def _decode(path: Path) -> tuple[pa.Table, list[str], object]:
    reader = CaptureReader(path, batch_rows=4096)  # many batches: refills and table resets too
    batches: list[pa.RecordBatch] = []
    error = None
    try:
        batches = list(reader.batches())
    except Exception as err:  # corrupt corpus files: the error must match as well
        error = str(err)
    return pa.Table.from_batches(batches) if batches else None, reader.warnings, error


def test_the_checkout_runs_current_ahead_of_time_kernels(fresh_choice: None, monkeypatch) -> None:
    monkeypatch.delenv("TRACECORE_JIT", raising=False)
    assert aot.is_current(), "the ahead-of-time kernels are missing or stale: run `make kernels`"
    assert compiled.kernels().source == "aot"


def test_a_stale_build_falls_back_to_the_jit(fresh_choice: None, monkeypatch) -> None:
    monkeypatch.delenv("TRACECORE_JIT", raising=False)
    monkeypatch.setattr(aot, "fingerprint", lambda folder=aot.HERE: 12345)  # the sources "changed"
    assert aot.current_module() is None
    assert compiled.kernels().source == "jit"


def test_jit_and_ahead_of_time_kernels_decode_identically(
    corpus_dir: Path, fresh_choice: None, monkeypatch
) -> None:
    files = sorted(
        p for p in corpus_dir.iterdir() if p.suffix in (".pcap", ".pcapng", ".cap", ".gz", ".ntar")
    )
    files += sorted(sample_run().glob("*.pcap"))
    assert len(files) > 40
    monkeypatch.delenv("TRACECORE_JIT", raising=False)
    assert compiled.kernels().source == "aot"
    ahead = {f.name: _decode(f) for f in files}
    compiled.kernels.cache_clear()
    monkeypatch.setenv("TRACECORE_JIT", "1")
    assert compiled.kernels().source == "jit"
    for f in files:
        table, warnings, error = _decode(f)
        a_table, a_warnings, a_error = ahead[f.name]
        assert (error, warnings) == (a_error, a_warnings), f.name
        assert (table is None) == (a_table is None), f.name
        if table is not None:
            assert table.equals(a_table), f.name
