"""View results shared by the figures of one report: several figures read the same views with the
same parameters (`accuracy_vs_data` feeds three, `run_bounds` nearly all), and each read is a scan
of the packets, so inside `shared_views()` each (view, runs, parameters) runs once, whichever
thread asks first (`report` builds figures on two threads, each with its own cursor)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tracecore import query

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_SHARED: ContextVar[tuple[dict[tuple, Future], threading.Lock] | None] = ContextVar(
    "tracecore_shared_views", default=None
)


def run_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    runs: list[str] | None = None,
    params: dict[str, Any] | None = None,
) -> pa.Table:
    """`tracecore.query.run_view`, answered from the results kept by `shared_views` when one is open."""
    key = (name, None if runs is None else tuple(runs), repr(sorted((params or {}).items())))
    return shared(key, lambda: query.run_view(con, name, runs=runs, params=params))


def shared(key: tuple, compute: Callable[[], Any]) -> Any:
    """`compute()`, kept by `shared_views` under `key` when one is open (as a view result is): the
    report asks whether the runs hold collectives for five of its parts."""
    shared_now = _SHARED.get()
    if shared_now is None:
        return compute()
    kept, lock = shared_now
    with lock:
        mine = key not in kept
        if mine:
            kept[key] = Future()
    if mine:
        try:
            kept[key].set_result(compute())
        except BaseException as err:
            kept[key].set_exception(err)
    return kept[key].result()


@contextmanager
def shared_views() -> Iterator[None]:
    """Keep view results (Arrow tables, never changed) until the block ends; the catalog must not
    change meanwhile, as within one report. Threads started from the block share them when they
    run in a copy of its context (`contextvars.copy_context`)."""
    token = _SHARED.set(({}, threading.Lock()))
    try:
        yield
    finally:
        _SHARED.reset(token)
