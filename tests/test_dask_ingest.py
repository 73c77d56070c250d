"""Ingest on a Dask cluster gives the very catalog threads give (issue 15, acceptance 1), each capture
read by a task the cluster's workers computed, and the CLI's --scheduler option: shown with its env
var, a one-line error for an unreachable scheduler, and `distributed` never imported without it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_dask_support import dask_processes, inputs, reference, snapshot, visible_parts, worker_tasks
from tracecore.errors import IngestCancelledError
from tracecore.ingest import ingest
from tracecore.ingest.control import IngestControl


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory):
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # else its HTTP server takes :8787, and a second cluster warns
        local_directory=str(tmp_path_factory.mktemp("dask-local")),
    ) as cluster:
        yield cluster


def test_local_cluster_of_two_processes_gives_the_threads_catalog(local_cluster, tmp_path: Path) -> None:
    ticks: list[int] = []
    control = IngestControl(lambda nbytes, packets: ticks.append(packets))
    address = local_cluster.scheduler_address
    with worker_tasks(address) as computed:
        summary = ingest(inputs(), tmp_path / "data", scheduler=address, control=control)
    assert snapshot(tmp_path / "data") == reference()
    assert [f for f, _ in computed] == ["attempt"] * len(summary.captures)  # every capture read on a worker
    # every packet read on the workers reached this ingest's progress callback
    assert sum(ticks) == summary.packets == sum(c.packets for c in summary.captures) > 0
    assert not (tmp_path / "data" / ".staging").exists()
    on_disk, listed = visible_parts(tmp_path / "data")
    assert on_disk == listed


def test_scheduler_and_two_worker_processes_over_tcp_give_the_threads_catalog(tmp_path: Path) -> None:
    with dask_processes(tmp_path / "dask", [{}, {}]) as cluster:
        assert len(set(cluster.worker_pids.values())) == 2
        with worker_tasks(cluster.address) as computed:
            summary = ingest(inputs(), tmp_path / "data", scheduler=cluster.address)
        assert snapshot(tmp_path / "data") == reference()
        with worker_tasks(cluster.address) as computed_again:
            again = ingest(inputs(), tmp_path / "data", scheduler=cluster.address)
    assert summary.packets == sum(c.packets for c in summary.captures)
    assert [f for f, _ in computed] == ["attempt"] * len(summary.captures)  # every capture read on a worker
    assert {c.status for c in again.captures} == {"unchanged", "failed"}  # failed ones are re-read ...
    reread = [c for c in again.captures if c.status == "failed"]
    assert [f for f, _ in computed_again] == ["attempt"] * len(reread) != []  # ... on the workers
    assert snapshot(tmp_path / "data") == reference()


def test_a_cancelled_cluster_ingest_commits_nothing(local_cluster, tmp_path: Path) -> None:
    control = IngestControl()
    control.on_progress = lambda nbytes, packets: control.cancel()
    with pytest.raises(IngestCancelledError):
        ingest(inputs(), tmp_path / "data", scheduler=local_cluster.scheduler_address, control=control)
    assert not (tmp_path / "data" / "tracecore.duckdb").exists()
    assert not (tmp_path / "data" / ".staging").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    code = (
        "import sys\nfrom tracecore.cli.app import app\ntry:\n    app()\nfinally:\n"
        "    print('distributed' in sys.modules)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_scheduler_option_help_error_and_no_import_without_it(tmp_path: Path) -> None:
    helped = _cli(["ingest", "--help"], {}, tmp_path)
    assert "--scheduler" in helped.stdout
    assert "TRACECORE_SCHEDULER" in helped.stdout
    local = _cli(["ingest", str(inputs()[0]), "--out", str(tmp_path / "a"), "--quiet"], {}, tmp_path)
    assert local.returncode == 0, local.stderr
    assert local.stdout.strip() == "False"  # no --scheduler: distributed never imported
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {"TRACECORE_SCHEDULER": address, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    lost = _cli(["ingest", str(inputs()[0]), "--out", str(tmp_path / "b"), "--quiet"], env, tmp_path)
    assert lost.returncode == 1
    assert lost.stdout.strip() == "True"
    lines = lost.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: cannot reach the Dask scheduler at {address}: ")
