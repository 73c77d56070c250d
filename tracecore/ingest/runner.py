"""Run capture tasks: on threads in this process, or in a pool of worker processes.

Why threads first: nearly all the work releases the GIL (the reader's numba kernels are nogil;
Parquet encoding and zstd run in Arrow's C++), so captures read on two threads decode and encode in
parallel (measured, 4 captures of 134-byte packets, 2 cores: 4.4 → 6.4 Mpkt/s while the kernel still
held the GIL, 8.6 Mpkt/s with nogil kernels and the writer settings in writer.py), and threads cost
nothing to start. Processes pay ~1-2 s each (imports, numba cache) and are used only for large inputs
on many cores (see pipeline.POOL_MIN_BYTES). Workers are spawned (not forked: the parent already runs
DuckDB and Arrow threads), die with the parent (PR_SET_PDEATHSIG), and stream (bytes, packets) ticks
over a queue for the progress bar. A broken pool falls back to threads.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from tracecore.ingest import writer
from tracecore.ingest.writer import CaptureResult, CaptureTask


class _Direct:
    """Stands in for the queue when tasks run in this process: ticks go straight to the callback."""

    def __init__(self, tick: Callable[[int, int], None]):
        self.tick = tick
        self.lock = threading.Lock()

    def put_nowait(self, item: tuple[int, int, int]) -> None:
        with self.lock:
            self.tick(item[1], item[2])


def run_tasks(
    tasks: list[CaptureTask], procs: int, threads: int, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    """Results as tasks finish (any order), tasks started in the order given."""
    if procs > 1 and len(tasks) > 1:
        yield from _in_processes(tasks, procs, threads, tick)
    else:
        yield from _in_threads(tasks, threads, tick)


def _in_threads(
    tasks: list[CaptureTask], threads: int, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    writer._progress_queue = _Direct(tick)
    pool = ThreadPoolExecutor(max(1, min(threads, len(tasks))), thread_name_prefix="capture")
    try:
        pending: set[Future] = {pool.submit(writer.ingest_capture, t) for t in tasks}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()
    finally:
        writer.CANCEL.set()  # stops running captures at their next batch when we leave early
        pool.shutdown(wait=True, cancel_futures=True)
        writer.CANCEL.clear()
        writer._progress_queue = None


def _in_processes(
    tasks: list[CaptureTask], procs: int, threads: int, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    ctx = mp.get_context("spawn")
    ticks = ctx.Queue()
    pool = ProcessPoolExecutor(
        min(procs, len(tasks)), mp_context=ctx, initializer=writer.init_worker, initargs=(ticks,)
    )
    left = {t.index: t for t in tasks}
    try:
        pending = {pool.submit(writer.ingest_capture, t) for t in tasks}
        while pending:
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            _drain(ticks, tick)
            for fut in done:
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    # A worker died (killed, out of memory, or a script without a __main__ guard):
                    # what is left is read in this process instead.
                    pending = set()
                    break
                left.pop(res.index, None)
                yield res
        _drain(ticks, tick)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        ticks.close()
    if left:
        yield from _in_threads([t for t in tasks if t.index in left], threads, tick)


def _drain(ticks: object, tick: Callable[[int, int], None]) -> None:
    while True:
        try:
            _, nbytes, packets = ticks.get_nowait()  # type: ignore[attr-defined]
        except (queue_mod.Empty, OSError, ValueError):
            return
        tick(nbytes, packets)
