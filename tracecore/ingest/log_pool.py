"""Parse a run's log files in order, on worker processes when they are big enough to pay for them.

Why processes: the JSON traces of a large job are parsed in Python, which holds the GIL, so threads
would not help; a spawned process costs about a second (its imports), so a pool is started only for
`POOL_MIN_BYTES` of files or more. Results come back in the order the files were given, one at a time,
so the ingest keeps the first file of a rank (`_collectives.claim_ranks`) and holds one file's
tables at a time, not every file's. A file whose parse fails is its message, never the ingest's end.
"""

from __future__ import annotations

import multiprocessing as mp
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from tracecore.errors import TracecoreError
from tracecore.logs import LogParser, ParsedLog, parsers

POOL_MIN_BYTES = 64 << 20  # log bytes of a run below which parsing stays in this process
POLL_S = 0.1


def parse_one(parser: LogParser, path: Path) -> ParsedLog | str:
    """The parsed file, or the one-line reason it could not be parsed."""
    import pyarrow as pa

    from tracecore.logs._chrome import RECORD_ERRORS

    try:
        return parser.parse(path)
    except (OSError, ValueError, TracecoreError) as err:
        return f"cannot parse as {parser.table}: {err}"
    except (*RECORD_ERRORS, pa.ArrowException) as err:  # a parser's fault: the file, never the ingest
        return f"cannot parse as {parser.table} (tracecore's fault: {type(err).__name__}: {str(err)[:200]})"


def _parse_in_worker(index: int, path: Path) -> ParsedLog | str:
    """`parse_one` in a pool's process: the parser named by its place in the registry (it pickles)."""
    return parse_one(parsers()[index], path)


def parse_in_order(files: list[tuple[Path, LogParser]], jobs: int) -> Iterator[ParsedLog | str]:
    """`parse_one` of each file, in the order given; on up to `jobs` processes when worth it."""
    total = sum(_size(path) for path, _ in files)
    procs = min(jobs, len(files))
    if procs < 2 or total < POOL_MIN_BYTES:
        for path, parser in files:
            yield parse_one(parser, path)
        return
    from concurrent.futures.process import BrokenProcessPool

    from tracecore.ingest.control import init_worker

    ctx = mp.get_context("spawn")  # not fork: the parent runs DuckDB's and Arrow's threads
    registry = parsers()
    pool = ProcessPoolExecutor(procs, mp_context=ctx, initializer=init_worker, initargs=(None, None))
    ahead: deque[tuple[Future, Path, LogParser]] = deque()
    waiting = iter(files)
    finished = False
    try:
        for _ in range(2 * procs):  # a bounded window: at most this many files' tables held at once
            _submit(pool, ahead, waiting, registry)
        while ahead:
            fut, path, parser = ahead.popleft()
            try:
                result = _wait(fut)
            except BrokenProcessPool:  # a worker died (killed, out of memory): the rest read here
                yield parse_one(parser, path)
                for _, path, parser in ahead:
                    yield parse_one(parser, path)
                for path, parser in waiting:
                    yield parse_one(parser, path)
                break
            _submit(pool, ahead, waiting, registry)
            yield result
        finished = True
    finally:
        if not finished:  # interrupted or left early: the workers' files are not waited for
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.terminate()
        pool.shutdown(wait=finished, cancel_futures=True)


def _wait(fut: Future) -> ParsedLog | str:
    """The future's result, waking every POLL_S so that a Ctrl-C reaches the main thread's handler."""
    while True:
        try:
            return fut.result(timeout=POLL_S)
        except TimeoutError:
            continue


def _submit(pool: ProcessPoolExecutor, ahead: deque, waiting: Iterator, registry: tuple) -> None:
    nxt = next(waiting, None)
    if nxt is not None:
        path, parser = nxt
        ahead.append((pool.submit(_parse_in_worker, registry.index(parser), path), path, parser))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
