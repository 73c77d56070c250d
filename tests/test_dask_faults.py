"""A Dask worker SIGKILLed in the middle of a capture (issue 15, acceptance 2): the ingest completes,
every capture is committed exactly once, nothing half-written is visible, a rerun has nothing to do;
and a capture whose attempts keep killing workers ends as a failed capture, not a crashed ingest.

The worker to kill is started with the test-pause hook (TRACECORE_TEST_PAUSE_AT=reading): it stops
after the first batch of its first capture and names its pid in a marker file; it is killed by that pid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.test_dask_support import (
    dask_processes,
    inputs,
    reference,
    scheduler_address,
    snapshot,
    visible_parts,
)
from tracecore.errors import ClusterError
from tracecore.ingest import IngestSummary, ingest

BOUND_S = 60.0


def _pausing(tmp: Path) -> dict[str, str]:
    return {"TRACECORE_TEST_PAUSE_AT": "reading", "TRACECORE_TEST_PAUSE_MARKER": str(tmp / "paused")}


def _ingest_killing_the_paused_worker(tmp: Path, cluster, out: Path) -> IngestSummary:
    """Ingest on `cluster` while its worker w0 pauses mid-capture; SIGKILL w0 there; the summary."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["summary"] = ingest(inputs(), out, scheduler=cluster.address)
        except BaseException as err:
            box["error"] = err

    thread = threading.Thread(target=run, name="ingest")
    thread.start()
    marker = tmp / "paused"
    deadline = time.monotonic() + BOUND_S
    while not marker.is_file() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.is_file(), box
    phase, pid = marker.read_text().split()
    assert (phase, int(pid)) == ("reading", cluster.worker_pids["w0"])
    attempts = [p for p in (out / ".staging").glob("*.*-*") if p.is_dir()]
    assert attempts  # the killed attempt's folder: debris for the cleanup to remove
    os.kill(int(pid), signal.SIGKILL)
    thread.join(BOUND_S)
    assert not thread.is_alive()
    assert "error" not in box, box["error"]
    return box["summary"]  # type: ignore[return-value]


def _nothing_half_written(out: Path) -> None:
    assert not (out / ".staging").exists()
    on_disk, listed = visible_parts(out)
    assert on_disk == listed


@pytest.mark.slow
def test_a_worker_killed_mid_capture_is_retried_and_each_capture_committed_once(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with dask_processes(tmp_path / "dask", [_pausing(tmp_path), {}]) as cluster:
        summary = _ingest_killing_the_paused_worker(tmp_path, cluster, out)
        assert not [c for c in summary.captures if c.message and "died" in c.message]
        assert snapshot(out) == reference()  # each capture's parts exactly once: the same rows
        _nothing_half_written(out)
        again = ingest(inputs(), out, scheduler=cluster.address)
    assert sorted((c.file, c.status) for c in again.captures) == sorted(
        (c.file, "failed" if c.status == "failed" else "unchanged") for c in summary.captures
    )  # only the corrupt corpus file is read again (a failed capture always is)
    assert snapshot(out) == reference()


@pytest.mark.slow
def test_captures_that_kill_their_workers_end_as_failed_captures_not_a_crash(tmp_path: Path) -> None:
    out = tmp_path / "data"
    scheduler_env = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}  # one death is one too many
    with dask_processes(tmp_path / "dask", [_pausing(tmp_path), {}], scheduler_env) as cluster:
        summary = _ingest_killing_the_paused_worker(tmp_path, cluster, out)
        # Dask charges the death to every task the worker held: the one it was reading and any
        # queued behind it; each becomes a failed capture, the others are committed
        lost = sorted((c.run, c.file) for c in summary.captures if c.message and "died" in c.message)
        assert lost
        for c in summary.captures:
            if (c.run, c.file) in lost:
                assert c.status == "failed"
                assert c.message.endswith(
                    ": the Dask workers reading it died 1 time(s); "
                    "not retried: check the workers' memory and logs"
                )
        _nothing_half_written(out)
        again = ingest(inputs(), out, scheduler=cluster.address)  # the one worker left reads them
    assert sorted((c.run, c.file) for c in again.captures if c.status == "ingested") == lost
    assert snapshot(out, part_numbers=False) == reference(part_numbers=False)


def test_ctrl_c_cancels_the_clusters_futures_and_commits_nothing(tmp_path: Path) -> None:
    from distributed import Client

    out = tmp_path / "data"
    with dask_processes(tmp_path / "dask", [_pausing(tmp_path), {}]) as cluster:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracecore", "ingest", *map(str, inputs()), "--out", str(out), "-q"],
            cwd=tmp_path,
            env={**os.environ, "TRACECORE_SCHEDULER": cluster.address},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + BOUND_S
        while not (tmp_path / "paused").is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()  # w0 holds its capture: the ingest waits
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND_S)
        with Client(cluster.address, set_as_default=False) as client:
            deadline = time.monotonic() + BOUND_S
            while client.run_on_scheduler(_task_count) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert client.run_on_scheduler(_task_count) == 0  # every future was cancelled
    assert proc.returncode == 130
    assert err.strip().splitlines() == [
        f"Interrupted before the commit: nothing was committed; {out} holds no dataset yet."
    ]
    assert not (out / ".staging").exists()
    assert not (out / "tracecore.duckdb").exists()


def _task_count(dask_scheduler: object) -> int:
    """Tasks the scheduler still holds (Dask passes itself by this parameter's name)."""
    return len(dask_scheduler.tasks)  # type: ignore[attr-defined]


def test_a_scheduler_lost_mid_ingest_is_one_cluster_error_and_the_dataset_is_unchanged(
    tmp_path: Path,
) -> None:
    import dask

    out = tmp_path / "data"
    box: dict[str, BaseException] = {}
    with dask_processes(tmp_path / "dask", [_pausing(tmp_path), {}]) as cluster:

        def run() -> None:
            try:
                with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
                    ingest(inputs(), out, scheduler=cluster.address)
            except BaseException as err:
                box["error"] = err

        thread = threading.Thread(target=run, name="ingest")
        thread.start()
        deadline = time.monotonic() + BOUND_S
        while not (tmp_path / "paused").is_file() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        scheduler = cluster.procs[0]
        os.kill(scheduler.pid, signal.SIGKILL)
        scheduler.wait(timeout=BOUND_S)
        thread.join(BOUND_S)
    assert not thread.is_alive()
    assert isinstance(box.get("error"), ClusterError), box
    assert str(box["error"]).startswith(f"lost the Dask scheduler at {cluster.address}: ")
    assert not (out / "tracecore.duckdb").exists()
    assert not (out / ".staging").exists()


def test_a_scheduler_without_workers_is_one_cluster_error(tmp_path: Path) -> None:
    import dask

    with (
        dask_processes(tmp_path / "dask", []) as cluster,
        dask.config.set({"distributed.comm.timeouts.connect": "2s"}),
        pytest.raises(ClusterError) as err,
    ):
        ingest(inputs(), tmp_path / "data", scheduler=cluster.address)
    assert str(err.value) == f"the Dask scheduler at {cluster.address} has no workers"
    assert not (tmp_path / "data" / "tracecore.duckdb").exists()


def test_the_scheduler_file_is_read_once_the_scheduler_has_written_it(tmp_path: Path) -> None:
    # dask creates --scheduler-file before it writes it: CI once read it empty and the fixture crashed
    sched_file, log = tmp_path / "scheduler.json", tmp_path / "scheduler.log"
    sched_file.touch()
    log.write_text("")
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as alive:
        writer = threading.Timer(0.3, sched_file.write_text, ['{"address": "tcp://127.0.0.1:1"}'])
        writer.start()
        try:
            assert scheduler_address(sched_file, alive, log) == "tcp://127.0.0.1:1"
        finally:
            writer.join()
            alive.kill()


def test_a_scheduler_that_exits_before_writing_its_file_is_named_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "scheduler.log"
    log.write_text("OSError: [Errno 98] Address already in use\n")
    with subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"]) as dead:
        dead.wait(timeout=BOUND_S)
        with pytest.raises(RuntimeError, match=r"wrote no address to .*scheduler.json \(exit 3\): OSError"):
            scheduler_address(tmp_path / "scheduler.json", dead, log)
