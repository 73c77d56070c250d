"""View results shared by the figures of one report: several figures read the same views with the
same parameters (`accuracy_vs_data` feeds three, `run_bounds` nearly all), and each read is a scan
of the packets, so inside `shared_views()` each (view, runs, parameters) runs once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from tracecore import query

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_SHARED: ContextVar[dict[tuple, pa.Table] | None] = ContextVar("tracecore_shared_views", default=None)


def run_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    runs: list[str] | None = None,
    params: dict[str, Any] | None = None,
) -> pa.Table:
    """`tracecore.query.run_view`, answered from the results kept by `shared_views` when one is open."""
    kept = _SHARED.get()
    if kept is None:
        return query.run_view(con, name, runs=runs, params=params)
    key = (id(con), name, None if runs is None else tuple(runs), repr(sorted((params or {}).items())))
    if key not in kept:
        kept[key] = query.run_view(con, name, runs=runs, params=params)
    return kept[key]


@contextmanager
def shared_views() -> Iterator[None]:
    """Keep view results (Arrow tables, never changed) until the block ends; the catalog must not
    change meanwhile, as within one report."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)
