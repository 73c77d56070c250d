"""Run capture tasks: in this process, or in a pool of worker processes (`--jobs`).

Why processes: the reader's numba kernel holds the GIL, so threads would not read two captures at once.
Workers are spawned (not forked: the parent already runs DuckDB and Arrow threads), die with the parent
(PR_SET_PDEATHSIG), and stream (bytes, packets) ticks over a queue for the progress bar.
"""

from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from tracecore.ingest import writer
from tracecore.ingest.writer import CaptureResult, CaptureTask


class _Direct:
    """Stands in for the queue when tasks run in this process: ticks go straight to the callback."""

    def __init__(self, tick: Callable[[int, int], None]):
        self.tick = tick

    def put_nowait(self, item: tuple[int, int, int]) -> None:
        self.tick(item[1], item[2])


def run_tasks(
    tasks: list[CaptureTask], jobs: int, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    """Results as tasks finish (any order); largest captures are started first."""
    if jobs <= 1 or len(tasks) <= 1:
        writer._progress_queue = _Direct(tick)
        try:
            for task in tasks:
                yield writer.ingest_capture(task)
        finally:
            writer._progress_queue = None
        return
    ctx = mp.get_context("spawn")
    ticks = ctx.Queue()
    workers = min(jobs, len(tasks))
    pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=writer.init_worker, initargs=(ticks,))
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
        yield from run_tasks(list(left.values()), 1, tick)


def _drain(ticks: object, tick: Callable[[int, int], None]) -> None:
    while True:
        try:
            _, nbytes, packets = ticks.get_nowait()  # type: ignore[attr-defined]
        except (queue_mod.Empty, OSError, ValueError):
            return
        tick(nbytes, packets)
