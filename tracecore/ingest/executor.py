"""Run capture tasks on an executor: threads of this process, or a pool of worker processes.

Why threads first: nearly all the work releases the GIL (the reader's numba kernels are nogil;
Parquet encoding and zstd run in Arrow's C++), so captures read on two threads decode and encode in
parallel (measured, 4 captures of 134-byte packets, 2 cores: 4.4 → 6.4 Mpkt/s while the kernel still
held the GIL, 8.6 Mpkt/s with nogil kernels and the writer settings in writer.py), and threads cost
nothing to start. Processes pay ~1-2 s each (imports, numba cache) and are used only for large inputs
on many cores (see pipeline.POOL_MIN_BYTES). Workers are spawned (not forked: the parent already runs
DuckDB and Arrow threads), die with the parent (PR_SET_PDEATHSIG), and stream (bytes, packets) ticks
over their pool's queue for the progress bar. A broken pool falls back to threads. `results_from`
drives any `concurrent.futures.Executor`, so other executors (e.g. a cluster's) plug in the same way.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from tracecore.ingest.control import IngestControl, LocalChannel, TaskChannel, WorkerChannel, init_worker
from tracecore.ingest.writer import CaptureResult, CaptureTask, ingest_capture

POLL_S = 0.1  # how often a pool's ticks are drained and a cancel is passed on to its processes


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
) -> Iterator[CaptureResult]:
    """Submit every task to `executor` and yield results as they finish, until `stop` is set.

    `poll` runs every POLL_S while waiting (None: block until the next result).
    """
    pending = {executor.submit(ingest_capture, t, channel) for t in tasks}
    try:
        while pending and not stop.is_set():
            done, pending = wait(pending, timeout=POLL_S if poll else None, return_when=FIRST_COMPLETED)
            if poll is not None:
                poll()
            for fut in done:
                yield fut.result()
    finally:
        for fut in pending:
            fut.cancel()


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
