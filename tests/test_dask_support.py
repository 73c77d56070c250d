"""What the Dask tests share: real `dask scheduler` + `dask worker` processes over TCP on loopback, the
inputs, a catalog snapshot that two datasets must agree on exactly, and the tasks a cluster's workers
computed (an equal result alone would also come from work done on the driver, the cluster bypassed).

Why processes started here (not a fixture library): the fault tests give each worker its own
environment (the test-pause hook) and kill one by its pid; everything is in a temporary folder and
every process is killed and reaped on the way out.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import CORPUS
from tracecore.sample import both_directions_root, sample_root

# A few corpus files: plain, tunnelled, fragmented, loopback, one corrupt (failed) and one cut (partial).
CORPUS_FILES = (
    "dpkt__http.pcap",
    "ndpi__6in4tunnel.pcap",
    "pcapplusplus__ip4_fragments.pcap",
    "gopacket__test_loopback.pcap",
    "libpcap__pcap-invalid-version-1.pcap",
    "tcpdump__kday1_pre-eabcd87.pcap",
)
START_S = 60.0  # bound on a scheduler or its workers coming up
# Columns that name where or when, not what: they differ between two ingests of the same inputs.
VOLATILE = {"captures": ("mtime_ns", "ingested_at_ns")}


def inputs() -> list[Path]:
    """The sample's two run folders and a few corpus files."""
    return [sample_root(), both_directions_root(), *(CORPUS / f for f in CORPUS_FILES)]


def reference(part_numbers: bool = True) -> dict[str, list[tuple]]:
    """The snapshot of the inputs ingested on threads of this process: what every cluster must give."""
    return snapshot(reference_dir(), part_numbers)


@functools.cache
def reference_dir() -> Path:
    """The inputs ingested on threads of this process, once per session (removed at exit)."""
    from tracecore.ingest import ingest

    out = Path(tempfile.mkdtemp(prefix="tracecore-dask-ref-"))
    atexit.register(shutil.rmtree, out, True)
    summary = ingest(inputs(), out / "data", jobs=2)
    assert {c.status for c in summary.captures} == {"ingested", "failed", "partial"}
    return out / "data"


def snapshot(out: Path, part_numbers: bool = True) -> dict[str, list[tuple]]:
    """Every table the catalog holds and every view's whole output, rows sorted.

    Without `part_numbers`, part files are compared by folder: a dataset built in two ingests
    numbers its parts in commit order.
    """
    from tracecore.ingest import open_catalog
    from tracecore.views import view_names

    con = open_catalog(out, read_only=True, unsafe=True)  # unlocked: SET threads
    try:
        con.execute("SET threads = 1")  # one summation order: float sums equal to the last bit
        snap = {}
        for table in ("_files", "workers", "captures", "runs"):
            skip = VOLATILE.get(table)
            cols = f"* EXCLUDE ({', '.join(skip)})" if skip else "*"
            if table == "_files" and not part_numbers:
                cols += " REPLACE (regexp_replace(path, 'part-[0-9]+', 'part-N') AS path)"
            snap[table] = con.execute(f"SELECT {cols} FROM {table} ORDER BY ALL").fetchall()
        for view in view_names():
            snap[view] = con.execute(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
        return snap
    finally:
        con.close()


def visible_parts(out: Path) -> tuple[set[str], set[str]]:
    """(part files on disk under packets/, part files the catalog lists), as paths relative to out."""
    from tracecore.ingest import open_catalog

    on_disk = {p.relative_to(out).as_posix() for p in (out / "packets").rglob("*") if p.is_file()}
    con = open_catalog(out, read_only=True)
    try:
        listed = {r[0] for r in con.execute("SELECT path FROM _files").fetchall()}
    finally:
        con.close()
    return on_disk, listed


@contextlib.contextmanager
def worker_tasks(address: str) -> Iterator[list[tuple[str, str]]]:
    """(function, worker address) of every task the workers of the scheduler at `address` computed
    inside the block, filled in when it ends.

    From the scheduler's task stream: a record is made only when a worker reports a task it computed,
    so work done in the driver's own process (the cluster bypassed) leaves none.
    """
    from dask.utils import key_split
    from distributed import Client, get_task_stream

    computed: list[tuple[str, str]] = []
    with Client(address, set_as_default=False) as client:
        with get_task_stream(client=client) as stream:
            yield computed
        computed += [(key_split(r["key"]), r["worker"]) for r in stream.data]
        assert {w for _, w in computed} <= set(client.scheduler_info(n_workers=-1)["workers"])


@dataclass
class DaskProcesses:
    """A running scheduler and its workers: the address and each worker's pid by its name."""

    address: str
    worker_pids: dict[str, int]
    procs: list[subprocess.Popen]


def scheduler_address(sched_file: Path, proc: subprocess.Popen, log: Path) -> str:
    """The address the scheduler wrote, once the whole file is there: it creates it before it writes it."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return json.loads(sched_file.read_text())["address"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    raise RuntimeError(
        f"dask scheduler wrote no address to {sched_file} (exit {proc.poll()}): {log.read_text()[-2000:]}"
    )


@contextlib.contextmanager
def dask_processes(
    tmp: Path, worker_envs: list[dict[str, str]], scheduler_env: dict[str, str] | None = None
) -> Iterator[DaskProcesses]:
    """`dask scheduler` and one `dask worker` (1 thread, no nanny) per env, on 127.0.0.1."""
    from distributed import Client

    dask = str(Path(sys.executable).with_name("dask"))
    tmp.mkdir(parents=True, exist_ok=True)
    sched_file = tmp / "scheduler.json"
    procs: list[subprocess.Popen] = []

    def start(args: list[str], env: dict[str, str] | None, name: str) -> None:
        with open(tmp / f"{name}.log", "wb") as log:
            procs.append(
                subprocess.Popen(
                    [dask, *args],
                    cwd=tmp,
                    env={**os.environ, **(env or {})},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start(
            [
                *("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
                *("--scheduler-file", str(sched_file)),
            ],
            scheduler_env,
            "scheduler",
        )
        address = scheduler_address(sched_file, procs[0], tmp / "scheduler.log")
        for i, env in enumerate(worker_envs):
            start(
                [
                    *("worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"),
                    *("--name", f"w{i}", "--local-directory", str(tmp / f"w{i}")),
                ],
                env,
                f"w{i}",
            )
        with Client(address, set_as_default=False) as client:
            if worker_envs:
                client.wait_for_workers(len(worker_envs), timeout=START_S)
            pids = client.run(os.getpid)
            names = {a: w["name"] for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        yield DaskProcesses(address, {names[a]: pid for a, pid in pids.items()}, procs)
    finally:
        for proc in reversed(procs):  # workers first, then the scheduler; each by its own pid
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
