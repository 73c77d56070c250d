"""Run capture tasks on an executor: threads of this process, or a pool of worker processes.

Why threads first: nearly all the work releases the GIL (the reader's numba kernels are nogil;
Parquet encoding and zstd run in Arrow's C++), so captures read on two threads decode and encode in
parallel (measured, 4 captures of 134-byte packets, 2 cores: 4.4 → 6.4 Mpkt/s while the kernel still
held the GIL, 8.6 Mpkt/s with nogil kernels and the writer settings in writer.py), and threads cost
nothing to start. Processes pay ~1-2 s each (imports, numba cache) and are used only for large inputs
on many cores (see pipeline.POOL_MIN_BYTES). Workers are spawned (not forked: the parent already runs
DuckDB and Arrow threads), die with the parent (PR_SET_PDEATHSIG), and stream (bytes, packets) ticks
over their pool's queue for the progress bar. A broken pool falls back to threads. `results_from`
drives any `concurrent.futures.Executor`, so other executors plug in the same way: a Dask cluster's
(`cluster.py`, `ingest(..., scheduler=...)`). Every task attempt writes into a folder of its own
(`attempt`), so an executor that runs a task twice (Dask after a lost worker) never mixes two
attempts' parts: the commit takes only the parts the returned result lists.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

from tracecore.ingest.control import IngestControl, LocalChannel, TaskChannel, WorkerChannel, init_worker
from tracecore.ingest.writer import CaptureResult, CaptureTask, ingest_capture

POLL_S = 0.1  # how often a wait for results wakes: ticks drained, a cancel passed on, signals handled


def run_tasks(
    tasks: list[CaptureTask],
    procs: int,
    threads: int,
    control: IngestControl,
    tick: Callable[[int, int], None],
) -> Iterator[CaptureResult]:
    """Results as tasks finish (any order), tasks started in the order given; none after a cancel."""
    if procs > 1 and len(tasks) > 1:
        yield from _in_processes(tasks, procs, threads, control, tick)
    else:
        yield from _in_threads(tasks, threads, control, tick)


def results_from(
    executor: Executor,
    tasks: list[CaptureTask],
    channel: TaskChannel,
    stop: threading.Event,
    poll: Callable[[], None] | None = None,
    lost: Callable[[BaseException], str | None] | None = None,
) -> Iterator[CaptureResult]:
    """Submit every task to `executor` and yield results as they finish, until `stop` is set.

    `poll` runs every POLL_S while waiting. `lost` names the task errors that fail only their capture
    (it returns the capture's message, or None to raise). The wait wakes every POLL_S even without a
    `poll`: Python runs a signal's handler on the main thread only once it wakes, and a Ctrl-C that the
    kernel gives a capture thread does not wake it.
    """
    pending = {executor.submit(attempt, t, channel): t for t in tasks}
    try:
        while pending and not stop.is_set():
            done, _ = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            if poll is not None:
                poll()
            for fut in done:
                task = pending.pop(fut)
                try:
                    yield fut.result()
                except Exception as err:
                    message = lost(err) if lost is not None else None
                    if message is None:
                        raise
                    yield CaptureResult(task.index, error=message)
    finally:
        for fut in pending:
            fut.cancel()


def attempt(task: CaptureTask, channel: TaskChannel) -> CaptureResult:
    """One attempt at a task, in a staging folder of its own (`<ingest's stage>.<index>-<attempt id>`).

    Why: an executor may run a task again while (or after) an earlier attempt wrote parts; with a
    folder per attempt the result names only its own parts, and the others are debris that the
    ingest's staging cleanup removes. The folder is made beside the ingest's stage, without parents,
    so an attempt that starts after its ingest ended (and removed the staging) fails instead.
    """
    stage = Path(f"{task.stage_dir}.{task.index:06d}-{uuid.uuid4().hex[:12]}")
    try:
        stage.mkdir()
    except OSError as err:
        return CaptureResult(task.index, error=f"cannot stage its parts: {err.strerror or err}")
    return ingest_capture(replace(task, stage_dir=str(stage)), channel)


def _in_threads(
    tasks: list[CaptureTask], threads: int, control: IngestControl, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    leaving = threading.Event()  # stops running captures at their next batch when we leave early
    pool = ThreadPoolExecutor(max(1, min(threads, len(tasks))), thread_name_prefix="capture")
    try:
        yield from results_from(pool, tasks, LocalChannel(tick, control.stop, leaving), control.stop)
    finally:
        leaving.set()
        pool.shutdown(wait=True, cancel_futures=True)


def _in_processes(
    tasks: list[CaptureTask],
    procs: int,
    threads: int,
    control: IngestControl,
    tick: Callable[[int, int], None],
) -> Iterator[CaptureResult]:
    ctx = mp.get_context("spawn")
    ticks, stop = ctx.Queue(), ctx.Event()
    pool = ProcessPoolExecutor(
        min(procs, len(tasks)), mp_context=ctx, initializer=init_worker, initargs=(ticks, stop)
    )

    def poll() -> None:
        _drain(ticks, tick)
        if control.cancelled:
            stop.set()

    left = {t.index for t in tasks}
    try:
        for res in results_from(pool, tasks, WorkerChannel(), control.stop, poll):
            left.discard(res.index)
            yield res
        _drain(ticks, tick)
    except BrokenProcessPool:
        # A worker died (killed, out of memory, or a script without a __main__ guard): what is left
        # is read in this process instead.
        pass
    finally:
        stop.set()  # running captures stop at their next batch when we leave early
        pool.shutdown(wait=True, cancel_futures=True)
        ticks.close()
    if left and not control.cancelled:
        yield from _in_threads([t for t in tasks if t.index in left], threads, control, tick)


def _drain(ticks: object, tick: Callable[[int, int], None]) -> None:
    while True:
        try:
            _, nbytes, packets = ticks.get_nowait()  # type: ignore[attr-defined]
        except (queue_mod.Empty, OSError, ValueError):
            return
        tick(nbytes, packets)
