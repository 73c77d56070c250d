"""The installed `tracecore` console script on numba's JIT path (`TRACECORE_JIT=1`, what runs wherever
the ahead-of-time kernels are absent) writes the same dataset as on the ahead-of-time path.

Why through the console script: `main()` is where start-up shortcuts live (CliRunner tests call `app`
and never meet them); one that hid pandas from pyarrow failed the JIT path's first capture and its
second ingest while the ahead-of-time path passed by winning a race. numba's JIT cache is the one
`make test-kernels` filled, so nothing is compiled here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tracecore.ingest import open_catalog

TRACECORE = Path(sys.executable).parent / "tracecore"
CORPUS_GPU = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus-gpu"
FIRST = CORPUS_GPU / "h100-nccl-socket-2rank" / "torch_ddp-mlp-sgd-32-nccl-0-ring"
SECOND = CORPUS_GPU / "gpu-nccl-profilers" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"

pytestmark = pytest.mark.slow  # four ingest processes


def _ingest(out: Path, runs: list[Path], jit: str) -> dict:
    """`tracecore ingest RUNS --out OUT --json --quiet` with TRACECORE_JIT=jit: its JSON summary;
    it must exit 0 and print nothing on stderr (no traceback, no failed capture, no ignored error)."""
    env = os.environ | {"TRACECORE_JIT": jit}
    argv = [str(TRACECORE), "ingest", *map(str, runs), "--out", str(out), "--json", "--quiet"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode, done.stderr) == (0, ""), (jit, done.stdout[-2000:])
    return json.loads(done.stdout)


def _statuses(summary: dict) -> dict[tuple[str, str], tuple[str, int]]:
    return {(c["run"], c["file"]): (c["status"], c["packets"]) for c in summary["captures"]}


def _packets(out: Path) -> pa.Table:
    """Every stored packet row, ordered by every column, and the deduplicated count."""
    con = open_catalog(out, read_only=True)
    try:
        rows = con.sql("SELECT * FROM packets_all ORDER BY ALL").to_arrow_table()
        kept = con.execute("SELECT count(*) FROM packets").fetchone()[0]
    finally:
        con.close()
    assert kept == rows.num_rows  # sender-only captures: no received copy to hide
    return rows


def _dataset(out: Path, jit: str) -> pa.Table:
    """Two captures into a new dataset, then a second ingest into it that adds two more."""
    first = _ingest(out, [FIRST], jit)
    assert _statuses(first) == {
        (FIRST.name, "worker-0-tcpdump.pcap"): ("ingested", 8_646),
        (FIRST.name, "worker-1-tcpdump.pcap"): ("ingested", 8_264),
    }
    second = _ingest(out, [FIRST, SECOND], jit)
    assert _statuses(second) == {
        (FIRST.name, "worker-0-tcpdump.pcap"): ("unchanged", 8_646),
        (FIRST.name, "worker-1-tcpdump.pcap"): ("unchanged", 8_264),
        (SECOND.name, "worker-0-tcpdump.pcap"): ("ingested", 5_677),
        (SECOND.name, "worker-1-tcpdump.pcap"): ("ingested", 5_737),
    }
    return _packets(out)


def test_console_script_ingests_on_the_jit_path_as_on_the_ahead_of_time_path(tmp_path: Path) -> None:
    if not (FIRST.is_dir() and SECOND.is_dir()):
        pytest.fail(f"corpus missing: {CORPUS_GPU} (the shared/ folder must sit beside the checkout)")
    assert TRACECORE.is_file(), f"{TRACECORE}: the console script is not installed (make .venv/.installed)"
    jit = _dataset(tmp_path / "jit", "1")
    ahead = _dataset(tmp_path / "aot", "0")
    assert jit.num_rows == 8_646 + 8_264 + 5_677 + 5_737
    assert jit.schema == ahead.schema
    assert jit.equals(ahead)  # row for row, every column
