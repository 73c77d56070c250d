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

import pytest

from tests.test_ingest_support import copy_run, records, repeat_pcap
from tracecore.errors import DatasetError
from tracecore.ingest import ingest, open_catalog
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


@pytest.mark.slow
def test_sigkill_at_any_moment_then_rerun_completes(
    big_runs: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    root, expect = big_runs
    out = tmp_path / "out"
    start = time.monotonic()
    proc = _cli(str(root), "--out", str(out), "--jobs", "1", "-q")
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    full = time.monotonic() - start
    assert _consistent(out) == expect
    for i, frac in enumerate((0.35, 0.55, 0.7, 0.8, 0.88, 0.94, 0.98)):
        target = tmp_path / f"kill{i}"
        fresh = i % 2 == 0  # even: first ingest killed; odd: a --force re-ingest over a complete dataset
        if not fresh:
            shutil.copytree(out, target)
        proc = _cli(str(root), "--out", str(target), "--jobs", "1", "-q", *([] if fresh else ["--force"]))
        time.sleep(full * frac)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if (target / "tracecore.duckdb").exists():
            got = _consistent(target)  # old or new state, each run whole
            assert fresh or got == expect
        rerun = ingest([root], target, jobs=1)
        assert not rerun.failed
        assert _consistent(target) == expect
        assert not (target / ".staging").exists()
        on_disk = {p.relative_to(target).as_posix() for p in (target / "packets").rglob("*.parquet")}
        con = open_catalog(target)
        assert on_disk == {r[0] for r in con.execute("SELECT path FROM _files").fetchall()}
        con.close()


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
    (tmp_path / "empty").mkdir()
    summary = ingest([tmp_path / "nope", tmp_path / "empty"], tmp_path / "out", jobs=1)
    assert summary.failed
    assert dict(summary.problems) == {
        str(tmp_path / "nope"): "no such file or directory",
        str(tmp_path / "empty"): "no capture files in it or in its subfolders",
    }


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


def _placed(out: Path) -> bool:
    return not (out / "tracecore.duckdb").exists() and any((out / "packets").glob("*/*/*.parquet"))


def _catalog_tmp(out: Path) -> bool:
    return any(out.glob(".tracecore.duckdb.tmp-*"))


def _committed(out: Path) -> bool:
    return (out / "tracecore.duckdb").exists()


@pytest.mark.slow
def test_sigkill_in_each_phase_of_a_commit(big_runs: tuple[Path, dict[str, int]], tmp_path: Path) -> None:
    """Killed the moment a phase is seen on disk: while staging, after placing, mid-catalog, after commit."""
    root, expect = big_runs
    fired = []
    for i, (name, seen) in enumerate(
        [("staged", _staged), ("placed", _placed), ("catalog_tmp", _catalog_tmp), ("committed", _committed)]
    ):
        out = tmp_path / f"o{i}"
        proc = _cli(str(root), "--out", str(out), "--jobs", "1", "-q")
        while proc.poll() is None and not seen(out):
            time.sleep(0.0005)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            fired.append(name)
        proc.wait(timeout=60)
        if (out / "tracecore.duckdb").exists():
            _consistent(out)
        assert not ingest([root], out, jobs=1).failed
        assert _consistent(out) == expect
        on_disk = {p.relative_to(out).as_posix() for p in (out / "packets").rglob("*.parquet")}
        con = open_catalog(out)
        assert on_disk == {r[0] for r in con.execute("SELECT path FROM _files").fetchall()}
        con.close()
    assert len(fired) >= 3, fired  # the phases are short; nearly always all four are hit


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
    assert err.strip().splitlines()[-1] == "Interrupted; nothing half-written was kept."
    assert not (out / ".staging").exists()
    assert _consistent(out) == expect
