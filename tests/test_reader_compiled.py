"""The reader's two ways to run one kernel source: built ahead of time (aot.py) and numba's JIT.

They must decode every byte identically, the checkout must carry a current ahead-of-time build
(`make kernels`), and a stale build must never run.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tracecore.errors import CaptureError
from tracecore.reader import CaptureReader, aot, compiled
from tracecore.sample import sample_run
from tracecore.schema import PACKET_SCHEMA

TOTAL_PACKETS = 18_249  # every packet of the corpus (1,222) and the sample (17,027) both kernels read


@pytest.fixture
def fresh_choice() -> Iterator[None]:
    """Let a test choose the kernels anew; the process's choice is restored afterwards."""
    compiled.kernels.cache_clear()
    yield
    compiled.kernels.cache_clear()


def _decode(path: Path) -> tuple[pa.Table, list[str], tuple | None]:
    """Every packet the reader yields (those before an error too), its warnings, and the error as
    (type, message, offset, packets_read); anything but a CaptureError fails the test."""
    reader = CaptureReader(path, batch_rows=4096)  # many batches: refills and table resets too
    batches: list[pa.RecordBatch] = []
    error = None
    try:
        for batch in reader.batches():
            batches.append(batch)
    except CaptureError as err:  # corrupt corpus files: the error must match as well
        error = (type(err).__name__, str(err), err.offset, err.packets_read)
    return pa.Table.from_batches(batches, schema=PACKET_SCHEMA), reader.warnings, error


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
    with (corpus_dir / "MANIFEST.csv").open(newline="") as fh:
        listed = [row["file"] for row in csv.DictReader(fh)]
    on_disk = {p.name for p in corpus_dir.iterdir() if p.is_file()} - {"MANIFEST.csv", "README.md"}
    assert sorted(listed) == sorted(on_disk)  # every corpus capture, each once
    assert len(listed) == 61
    files = [corpus_dir / name for name in listed]
    files += [sample_run() / f"worker-{i}-tcpdump.pcap" for i in range(4)]
    monkeypatch.delenv("TRACECORE_JIT", raising=False)
    assert compiled.kernels().source == "aot"
    ahead = {f.name: _decode(f) for f in files}
    compiled.kernels.cache_clear()
    monkeypatch.setenv("TRACECORE_JIT", "1")
    assert compiled.kernels().source == "jit"
    jit = {f.name: _decode(f) for f in files}
    assert list(jit) == list(ahead) == [f.name for f in files]
    for name, (table, warnings, error) in jit.items():
        a_table, a_warnings, a_error = ahead[name]
        assert (error, warnings) == (a_error, a_warnings), name
        assert table.equals(a_table), name  # the packets before an error included
    # what was compared: the corrupt files with the packets read before their error
    errors = {name: (e[2], e[3], t.num_rows) for name, (t, _, e) in ahead.items() if e is not None}
    assert errors == {
        "libpcap__pcap-invalid-version-1.pcap": (4, 0, 0),
        "libpcap__pcapng-invalid-vers-1.pcapng": (0, 0, 0),
        "libpcap__shb-option-too-long.pcapng": (0, 0, 0),
        "tcpdump__cfm_sender_id-oobr_pre-18d7f66.pcap": (74, 1, 1),
        "tcpdump__kday1_pre-eabcd87.pcap": (222, 1, 1),
    }
    assert sum(t.num_rows for t, _, _ in ahead.values()) == TOTAL_PACKETS


def test_make_test_kernels_fills_the_jit_cache_a_fresh_process_loads() -> None:
    """`make test-kernels` (aot.py --jit-cache) leaves numba's cache holding every kernel with the
    argument types the reader passes: a new TRACECORE_JIT=1 process decodes both formats without
    compiling (the comparison above then costs seconds, not numba's two minutes)."""
    import subprocess
    import sys

    built = subprocess.run(
        [sys.executable, "-m", "tracecore.reader.aot", "--if-stale", "--jit-cache"],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    script = (
        "from tracecore.reader import jit_cache, kernel\n"
        "jit_cache.fill_jit_cache()\n"
        "for name in ('pcap_records', 'pcapng_blocks', 'reset_table'):\n"
        "    stats = getattr(kernel, name).stats\n"
        "    print(name, sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    counts = {name: (int(hits), int(misses)) for name, hits, misses in rows}
    assert set(counts) == {"pcap_records", "pcapng_blocks", "reset_table"}
    assert all(hits >= 1 and misses == 0 for hits, misses in counts.values()), counts


def test_the_jit_warm_up_loads_a_kernel_from_the_cache() -> None:
    """`compiled.warm_up()` (ingest runs it on a thread, errors suppressed) pays numba's start-up in a
    new TRACECORE_JIT=1 process by loading `reset_table` from the cache `make test-kernels` filled:
    it once raised a TypeError (an argument short), so the first capture paid that start-up instead."""
    import subprocess
    import sys

    script = (
        "from tracecore.reader import compiled, kernel\n"
        "print(compiled.warm_up())\n"
        "stats = kernel.reset_table.stats\n"
        "print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))\n"
    )
    env = os.environ | {"TRACECORE_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["jit", "1", "0"]  # loaded once, never compiled
