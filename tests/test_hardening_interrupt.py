"""Ctrl-C at each phase of an ingest: one line saying which state the dataset is in, exit 130, and
`tables/` always matching the catalog (issue 12, item 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.test_ingest_support import copy_run, records, write_pcap
from tracecore.ingest import ingest, open_catalog, testpause

REPO = Path(__file__).resolve().parent.parent
OLD = {"W1": 4531, "W2": 4170, "W3": 4216, "W4": 4110}
NEW = {**OLD, "W3": 3000}  # worker-2-tcpdump.pcap cut to its first 3000 records


def _state(out: Path) -> dict[str, int]:
    """Rows per worker in the packets, which must equal the captures table's and the exported one's."""
    con = open_catalog(out)
    try:
        rows = dict(con.execute("SELECT worker, count(*) FROM packets_all GROUP BY worker").fetchall())
        captured = con.execute("SELECT worker, file, packets FROM captures ORDER BY file").fetchall()
    finally:
        con.close()
    exported = pq.read_table(out / "tables" / "captures.parquet").sort_by("file")
    assert [(r["worker"], r["file"], r["packets"]) for r in exported.to_pylist()] == captured
    assert {w: n for w, _, n in captured} == rows
    return rows


def _ctrl_c_at(phase: str, run: Path, out: Path, marker: Path) -> tuple[int, list[str]]:
    """`tracecore ingest` paused at `phase` (testpause hook) gets SIGINT there: (exit, stderr lines)."""
    env = {**os.environ, "TRACECORE_TEST_PAUSE_AT": phase, "TRACECORE_TEST_PAUSE_MARKER": str(marker)}
    env["PYTHONFAULTHANDLER"] = "1"  # SIGABRT then writes every thread's stack to stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracecore", "ingest", str(run), "--out", str(out), "-j", "1", "-q"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.is_file(), f"never paused at {phase}: exit {proc.poll()}"
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            stacks = proc.communicate(timeout=60)[1]
            pytest.fail(f"still running 60 s after Ctrl-C at {phase}; its threads:\n{stacks[-8000:]}")
    finally:
        proc.kill()  # a no-op once it exited; stops a test that failed above
        proc.communicate()
    return proc.returncode, stderr.strip().splitlines()


@pytest.mark.parametrize("phase", testpause.PHASES)
def test_ctrl_c_in_each_phase_says_which_state_the_dataset_is_in(tmp_path: Path, phase: str) -> None:
    run = copy_run(tmp_path / "src")
    out = (tmp_path / "data").resolve()
    assert not ingest([run], out, jobs=1).failed
    assert not ingest([run], out, jobs=1, force=True).failed  # retires files the next commit deletes
    assert _state(out) == OLD
    header, recs = records(run / "worker-2-tcpdump.pcap")
    write_pcap(run / "worker-2-tcpdump.pcap", header, recs[:3000])
    got = _ctrl_c_at(phase, run, out, tmp_path / "paused")
    committed = phase in ("committed", "deleting")
    if committed:
        line = f"Interrupted after the commit: the dataset at {out} holds the new state (this ingest's)."
    else:
        line = f"Interrupted before the commit: the dataset at {out} is unchanged (its previous state)."
    assert got == (130, [line])
    assert _state(out) == (NEW if committed else OLD)
    assert not ingest([run], out, jobs=1).failed
    assert _state(out) == NEW


def test_ctrl_c_before_the_first_commit_says_there_is_no_dataset(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "src")
    out = (tmp_path / "data").resolve()
    got = _ctrl_c_at("draft", run, out, tmp_path / "paused")
    line = f"Interrupted before the commit: nothing was committed; {out} holds no dataset yet."
    assert got == (130, [line])
    assert not (out / "tracecore.duckdb").exists()
