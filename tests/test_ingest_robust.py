"""Crashes, concurrency and bad input: the dataset always queries correctly and bad files are reported."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.test_ingest_support import copy_run, records, repeat_pcap, retired_parts, write_pcap
from tracecore.errors import DatasetError, NoInputError
from tracecore.ingest import ingest, open_catalog, testpause
from tracecore.ingest.discover import NO_RUN
from tracecore.ingest.lock import dataset_lock
from tracecore.reader import CaptureReader
from tracecore.sample import SAMPLE_RUN, sample_run

REPO = Path(__file__).resolve().parent.parent


def _cli(*args: str, **kw: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tracecore", "ingest", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _consistent(out: Path) -> dict[str, int]:
    """Every committed run is whole: its packets equal its captures' counts; files on disk are complete."""
    con = open_catalog(out)
    try:
        per_run = dict(con.execute("SELECT run, count(*) FROM packets_all GROUP BY run").fetchall())
        expected = dict(con.execute("SELECT run, sum(packets) FROM captures GROUP BY run").fetchall())
        assert per_run == {r: n for r, n in expected.items() if n}
        workers = con.execute("SELECT run, count(*) FROM workers GROUP BY run").fetchall()
        assert all(n == 4 for _, n in workers)
        return per_run
    finally:
        con.close()


@pytest.fixture(scope="module")
def big_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Three runs of four ~6 MB captures (the sample's real packets, repeated later in time)."""
    root = tmp_path_factory.mktemp("big")
    expect = {}
    for k, bs in enumerate((16, 32, 64)):
        name = f"torch_ddp-resnet8w8-sgd-{bs}-gloo-normal-ring"
        (root / name).mkdir()
        total = 0
        for i in range(4):
            dst = repeat_pcap(
                sample_run() / f"worker-{i}-tcpdump.pcap", root / name / f"w{i}.pcap", 6_000_000 + k
            )
            total += sum(b.num_rows for b in CaptureReader(dst).batches())
        expect[name] = total
    return root, expect


def _snapshot(out: Path) -> dict[str, object] | None:
    """What a reader of the dataset sees (None: no dataset); files it names must all be on disk.

    Part file names are left out (an update numbers its parts after the old ones), and so are
    the input's mtime and the ingest time: the rest must be exactly the old or the new state.
    """
    if not (out / "tracecore.duckdb").exists():
        return None
    con = open_catalog(out)
    try:
        files = con.execute("SELECT path FROM _files").fetchall()
        assert all((out / p).is_file() for (p,) in files), "the catalog names a missing part file"
        q = {
            "packets": "SELECT run, worker, count(*), sum(ts_ns), sum(frame_len), count(src_ip)"
            " FROM packets_all GROUP BY ALL ORDER BY ALL",
            "files": "SELECT run, worker, file, rows FROM _files ORDER BY ALL",
            "captures": "SELECT run, file, worker, size, checksum, status, packets, bytes, first_ts_ns,"
            " last_ts_ns FROM captures ORDER BY ALL",
            "workers": "SELECT run, worker, ip, packets, bytes, dup_rows FROM workers ORDER BY ALL",
            "train_log": "SELECT count(*), sum(ts_ns) FROM train_log",
        }
        return {name: con.execute(sql).fetchall() for name, sql in q.items()}
    finally:
        con.close()


def _on_disk(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in (out / "packets").rglob("*.parquet")}


def _named(out: Path) -> set[str]:
    con = open_catalog(out)
    try:
        return {r[0] for r in con.execute("SELECT path FROM _files").fetchall()}
    finally:
        con.close()


@pytest.fixture(scope="module")
def kill_states(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The sample run, and the dataset an ingest gives before and after its worker-2 capture is
    cut to its first 3000 records (a real capture, changed: the update re-reads that one file)."""
    root = tmp_path_factory.mktemp("kill-states")
    run = copy_run(root / "in")
    header, recs = records(run / "worker-2-tcpdump.pcap")
    old = root / "old"
    assert not ingest([run], old, jobs=1).failed
    write_pcap(run / "worker-2-tcpdump.pcap", header, recs[:3000])
    new = root / "new"
    assert not ingest([run], new, jobs=1).failed
    states = {"run": run, "old_pcap": header + b"".join(recs), "old": _snapshot(old), "new": _snapshot(new)}
    assert states["old"] != states["new"]
    assert {w: n for _, w, n, *_ in states["new"]["packets"]}["W3"] == 3000
    return states


# (phase, update?): a fresh ingest has no retired files to delete, so it never reaches `deleting`.
KILLS = [(p, False) for p in testpause.PHASES if p != "deleting"] + [(p, True) for p in testpause.PHASES]


@pytest.mark.parametrize(
    ("phase", "update"), KILLS, ids=[f"{p}-{'update' if u else 'fresh'}" for p, u in KILLS]
)
def test_sigkill_in_each_phase_leaves_old_or_new_and_rerun_completes(
    kill_states: dict, tmp_path: Path, phase: str, update: bool
) -> None:
    """The ingest stops at `phase` (testpause hook) and is SIGKILLed there: the dataset is exactly
    the old state before the catalog rename and the new one after; the next ingest finishes it."""
    run = tmp_path / "in" / kill_states["run"].name
    shutil.copytree(kill_states["run"], run)
    out = tmp_path / "out"
    if update:  # the committed old state: the capture as it was, ingested twice (the second
        # commit retires the first one's files, which the next commit deletes)
        changed = (run / "worker-2-tcpdump.pcap").read_bytes()
        (run / "worker-2-tcpdump.pcap").write_bytes(kill_states["old_pcap"])
        assert not ingest([run], out, jobs=1).failed
        assert not ingest([run], out, jobs=1, force=True).failed
        (run / "worker-2-tcpdump.pcap").write_bytes(changed)
        old_files = _named(out)
        assert retired_parts(out) == _on_disk(out) - old_files != set()
    before_disk = _on_disk(out) if update else set()
    before = _snapshot(out)
    assert before == (kill_states["old"] if update else None)
    marker = tmp_path / "paused"
    env = {**os.environ, "TRACECORE_TEST_PAUSE_AT": phase, "TRACECORE_TEST_PAUSE_MARKER": str(marker)}
    proc = _cli(str(run), "--out", str(out), "--jobs", "1", "-q", env=env)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert marker.is_file(), f"never paused at {phase}: exit {proc.poll()}"
        assert marker.read_text() == f"{phase} {proc.pid}\n"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()  # a no-op once killed; stops a test that failed above
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL  # killed while paused in the phase, not exited
    stray = _on_disk(out) - before_disk  # part files only the new state names
    if phase == "reading":
        assert any((out / ".staging").glob("*/*.parquet"))
        assert not stray
    if phase in ("placed", "filled", "draft"):
        assert stray
        assert list(out.glob(".tracecore.duckdb.tmp-*"))
    if phase == "filled":  # the draft's one transaction is in its write-ahead log, not checkpointed
        assert list(out.glob(".tracecore.duckdb.tmp-*.wal"))
    committed = phase in ("committed", "deleting")
    assert _snapshot(out) == (kill_states["new"] if committed else before)
    if committed and update:
        left = old_files - _named(out)  # files only the old catalog used: kept one commit longer
        assert len(left) == 2
        assert left <= _on_disk(out)
        assert retired_parts(out) == left
        expired = before_disk - old_files  # retired by the old commit: deleted after this one
        assert len(expired & _on_disk(out)) == len(expired) - (phase == "deleting")
    rerun = ingest([run], out, jobs=1)
    assert not rerun.failed
    assert _snapshot(out) == kill_states["new"]
    assert not (out / ".staging").exists()
    assert not list(out.glob(".tracecore.duckdb.tmp-*"))
    assert _on_disk(out) == _named(out) | retired_parts(out)
    assert not _named(out) & retired_parts(out)
    con = open_catalog(out)
    try:
        stored = con.sql("SELECT * FROM captures ORDER BY run, file").to_arrow_table()
    finally:
        con.close()
    exported = pq.read_table(out / "tables" / "captures.parquet")
    assert exported.sort_by([("run", "ascending"), ("file", "ascending")]).to_pylist() == stored.to_pylist()


def test_second_ingest_into_the_same_dataset_is_refused_or_waits(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    with dataset_lock(out):
        with pytest.raises(DatasetError, match=r"another ingest is writing this dataset \(pid \d+\)"):
            ingest([run], out, jobs=1)
        proc = _cli(str(run), "--out", str(out), "-q")
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 4
        assert err.strip().startswith("Error: ")
        assert "another ingest is writing this dataset" in err
        assert len(err.strip().splitlines()) == 1
        waiting = _cli(str(run), "--out", str(out), "-q", "--wait", "60")
        time.sleep(1.0)
        assert waiting.poll() is None  # still waiting for the lock
    assert waiting.wait(timeout=120) == 0
    assert _consistent_sample(out) == 17027


def _consistent_sample(out: Path) -> int:
    con = open_catalog(out)
    try:
        return con.execute("SELECT count(*) FROM packets WHERE run = ?", [SAMPLE_RUN]).fetchone()[0]
    finally:
        con.close()


def test_two_concurrent_ingests_never_corrupt(big_runs: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, expect = big_runs
    out = tmp_path / "out"
    a = _cli(str(root), "--out", str(out), "--jobs", "1", "-q", "--wait", "300")
    b = _cli(str(root), "--out", str(out), "--jobs", "1", "-q", "--wait", "300")
    assert a.wait(timeout=300) == 0
    assert b.wait(timeout=300) == 0
    assert _consistent(out) == expect  # the second found everything unchanged: nothing duplicated


def test_bad_inputs_are_reported_and_the_rest_is_ingested(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    _header, recs = records(run / "worker-2-tcpdump.pcap")
    cut = 24 + sum(len(r) for r in recs[:3000])
    data = bytearray((run / "worker-2-tcpdump.pcap").read_bytes())
    data[cut + 8 : cut + 12] = (0xFFFFFF).to_bytes(4, "little")  # record 3001 claims a 16 MB caplen
    (run / "worker-2-tcpdump.pcap").write_bytes(bytes(data))
    (run / "w9.pcap").write_text("this is not a capture\n")
    (run / "w8.pcap").write_bytes(b"")
    log = (run / "train_history.log").read_text().splitlines()
    log.insert(5, "Batch,3,not-a-time,2.3,0.1")
    (run / "train_history.log").write_text("\n".join(log) + "\n")
    out = tmp_path / "out"
    proc = _cli(str(run), "--out", str(out), "--json")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    report = json.loads(stdout)
    assert not report["ok"]
    by_file = {c["file"]: c for c in report["captures"]}
    bad = by_file["worker-2-tcpdump.pcap"]
    assert bad["status"] == "partial"
    assert bad["packets"] == 3000  # the good packets before the corrupt record are kept
    assert str(run / "worker-2-tcpdump.pcap") in bad["message"]
    assert f"byte offset {cut}" in bad["message"]
    problems = {Path(p["path"]).name: p["reason"] for p in report["problems"]}
    assert problems["w9.pcap"] == "named like a capture but not pcap/pcapng (unknown magic bytes)"
    assert problems["w8.pcap"] == "named like a capture but not pcap/pcapng (empty file (0 bytes))"
    assert "1 unparseable line(s)" in problems["train_history.log"]
    assert "line 6" in problems["train_history.log"]
    con = open_catalog(out)
    got = dict(con.execute("SELECT worker, count(*) FROM packets GROUP BY worker").fetchall())
    assert got == {"W1": 4531, "W2": 4170, "W3": 3000, "W4": 4110}
    assert con.execute("SELECT count(*) FROM train_log").fetchone()[0] == 32
    status = con.execute("SELECT status, error FROM captures WHERE file = 'worker-2-tcpdump.pcap'").fetchone()
    assert status[0] == "partial"
    assert f"byte offset {cut}" in status[1]
    con.close()
    # an unchanged corrupt capture is not re-read; fixing it replaces the partial data
    assert {c.status for c in ingest([run], out, jobs=1).captures} == {"unchanged"}
    shutil.copy(sample_run() / "worker-2-tcpdump.pcap", run / "worker-2-tcpdump.pcap")
    again = ingest([run], out, jobs=1)
    assert {c.file: c.status for c in again.captures}["worker-2-tcpdump.pcap"] == "ingested"
    assert _consistent_sample(out) == 17027


def test_missing_input_and_empty_folder(tmp_path: Path) -> None:
    """No usable input: one error naming each problem, and nothing created (issue 13 item 5)."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoInputError) as err:
        ingest([tmp_path / "nope", tmp_path / "empty"], tmp_path / "out", jobs=1)
    assert str(err.value) == (
        f"nothing to ingest ({tmp_path / 'nope'}: no such file or directory; {tmp_path / 'empty'}: "
        f"{NO_RUN}); {tmp_path / 'out'} was not touched"
    )
    assert err.value.exit_code == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_parallel_jobs_match_serial(big_runs: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    root, expect = big_runs
    summary = ingest([root], tmp_path / "par", jobs=4, parallel_min_bytes=0)
    assert not summary.failed
    assert _consistent(tmp_path / "par") == expect
    env = {**os.environ, "TRACECORE_DATA": str(tmp_path / "default")}
    proc = _cli(str(root), "--json", env=env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert json.loads(out)["packets"] == sum(expect.values())
    assert _consistent(tmp_path / "default") == expect


def test_pool_failure_falls_back_to_one_process(
    big_runs: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    """A script without a __main__ guard: spawned workers re-run it and die; the parent reads alone."""
    root, expect = big_runs
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        "from tracecore.ingest import ingest\n"
        f"s = ingest([{str(root)!r}], {str(tmp_path / 'out')!r}, jobs=4, parallel_min_bytes=0)\n"
        "print(s.packets, s.failed)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[-2:] == [str(sum(expect.values())), "False"]
    assert _consistent(tmp_path / "out") == expect


def _staged(out: Path) -> bool:
    return any((out / ".staging").glob("*/*.parquet"))


def test_ctrl_c_stops_promptly_and_keeps_the_old_state(
    big_runs: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    root, expect = big_runs
    out = tmp_path / "out"
    assert not ingest([root], out, jobs=1).failed
    proc = _cli(str(root), "--out", str(out), "--force", "-q")
    while proc.poll() is None and not _staged(out):
        time.sleep(0.0005)
    assert proc.poll() is None, "the ingest finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == (
        f"Interrupted before the commit: the dataset at {out.resolve()} is unchanged (its previous state)."
    )
    assert not (out / ".staging").exists()
    assert _consistent(out) == expect
