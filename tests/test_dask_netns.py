"""Ingest through a Dask scheduler and two workers in network namespaces of their own (issue 15,
acceptance 3): scheduler and driver in one namespace, each worker in another with its own local
directory, so every task and result crosses the testbed's veth + bridge link; the catalog equals the
threads one, and no process or namespace is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import netns_made_by, require_tool
from tests.test_dask_support import START_S, inputs, reference, snapshot
from tracecore.runners.testbed import Testbed

pytestmark = pytest.mark.netns

PORT = 8786


@pytest.mark.slow
def test_scheduler_and_workers_in_their_own_namespaces_give_the_threads_catalog(tmp_path: Path) -> None:
    require_tool("ip")
    dask = str(Path(sys.executable).with_name("dask"))
    out, logs = tmp_path / "data", tmp_path / "logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    with Testbed(n_workers=3, subnet="192.168.91.0/24") as tb:
        address = f"tcp://{tb.ip(0)}:{PORT}"

        def start(i: int, argv: list[str], name: str) -> None:
            with open(logs / f"{name}.log", "wb") as log:
                procs.append(tb.popen(i, argv, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path))

        try:
            scheduler = [dask, "scheduler", "--host", tb.ip(0), "--port", str(PORT), "--no-dashboard"]
            start(0, scheduler, "scheduler")
            for i in (1, 2):
                local = tmp_path / f"local-w{i}"  # each worker's own local directory
                local.mkdir()
                start(
                    i,
                    [
                        *(dask, "worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"),
                        *("--name", f"w{i}", "--local-directory", str(local)),
                    ],
                    f"w{i}",
                )
            _wait_for_workers(logs / "scheduler.log", [tb.ip(1), tb.ip(2)])
            done = tb.exec(
                0,
                [
                    *(sys.executable, "-m", "tracecore", "ingest", *map(str, inputs())),
                    *("--out", str(out), "--scheduler", address, "--json"),
                ],
                check=False,
                timeout=START_S,
                cwd=tmp_path,
            )
            assert done.returncode == 3, done.stderr  # 3: the corrupt corpus files, as with threads
            summary = json.loads(done.stdout)
            assert summary["packets"] > 0
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        names = tb.namespaces
    assert snapshot(out) == reference()
    assert not set(names) & netns_made_by(os.getpid())


def _wait_for_workers(log: Path, ips: list[str]) -> None:
    """Until the scheduler's log registers a worker at each of `ips` (bounded)."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.is_file() else ""
        if all(f"Register worker addr: tcp://{ip}:" in text for ip in ips):
            return
        time.sleep(0.1)
    pytest.fail(f"workers at {ips} never registered:\n{log.read_text(errors='replace')[-2000:]}")
