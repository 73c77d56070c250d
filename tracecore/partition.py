"""Views split by run: the header rules that make it exact, the parts a query is cut into, and the
driver's side of a combining view.

Why by run: nearly every view groups by run, and every macro takes `runs := [...]`, so a query over
many runs is the same query over a few runs at a time (docs/dataset.md, the Dask section; the design notes in
shared/reference/runners-and-scaleout.md §4.3). One SQL dialect stays: each part runs the view's own
macro in DuckDB on a Dask worker, and the driver only concatenates, or, for a view with a
`Combine:` line, runs that view's own SQL over the concatenated rows of the view it combines.

What makes a concatenation equal the local result, row for row and in order (`rules`):
- a `Partition: run` view that orders its rows orders them by `run` first, so rows of runs in
  DuckDB's run order, each run's rows in the view's order, are the local rows in the local order;
- its floating-point columns come from integer sums (DuckDB sums BIGINT exactly), not from float
  aggregates whose last bit depends on the order rows arrive in (`link_ci` computes its standard
  deviation from Σbytes and Σbytes², for this reason);
- a combining view reads only the view it combines and passes its own parameters through by name,
  so the driver can stand the parts in for that view and run the file unchanged.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tracecore import views
from tracecore.errors import UsageError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

RUN = "run"
NONE = "none"
PART_PACKETS = 4_000_000  # a part holds runs until it has this many packets: below, opening costs more
_ORDER_BY = re.compile(r"\bORDER\s+BY\b", re.IGNORECASE)
_FIRST_KEY = re.compile(r"^(?:\w+\.)?(\w+)(?:\s+(?:ASC|DESC|NULLS\s+FIRST|NULLS\s+LAST))*$", re.IGNORECASE)


@dataclass(frozen=True)
class Partitioning:
    """How a view runs on a cluster: split by run or not, and the view whose parts it combines."""

    by_run: bool
    combines: str | None = None  # with by_run: the workers compute this view; the driver combines


@functools.cache
def rules(name: str) -> Partitioning:
    """View `name`'s `Partition:` (and `Combine:`) header lines, checked; a UsageError names the file."""
    folder = views.installed_views()
    return check(folder, name)


def check(folder: views.ViewFolder, name: str) -> Partitioning:
    """The partitioning of view `name` of `folder`, or a UsageError naming the file and the rule broken."""
    file = folder.file(name)
    value = folder.header_value(name, "Partition")
    if value not in (RUN, NONE):
        raise UsageError(
            f"{file}: header needs a line '-- Partition: run' (its rows for a run depend on that run "
            f"alone) or '-- Partition: none' (it needs every run at once), got {value!r}"
        )
    combines = folder.header_value(name, "Combine")
    if combines is not None:
        _check_combine(folder, name, value, combines)
        return Partitioning(by_run=True, combines=combines)
    if value == RUN:
        keys = order_keys(folder, name)
        first = _FIRST_KEY.match(keys[0]) if keys else None
        if keys and (first is None or first.group(1).lower() != RUN):
            raise UsageError(
                f"{file}: a 'Partition: run' view that orders its rows orders them by run first "
                f"(its parts are joined in run order), got ORDER BY {', '.join(keys)}"
            )
    return Partitioning(by_run=value == RUN)


def _check_combine(folder: views.ViewFolder, name: str, partition: str, combines: str) -> None:
    file = folder.file(name)
    if partition != RUN:
        raise UsageError(f"{file}: 'Combine: {combines}' needs '-- Partition: run' (its parts are by run)")
    if folder.references(name) != {combines}:
        used = ", ".join(sorted(folder.references(name))) or "none"
        raise UsageError(
            f"{file}: a combining view reads only the view it combines ({combines}); it reads {used}"
        )
    inner = check(folder, combines)
    if not inner.by_run or inner.combines is not None:
        raise UsageError(f"{file}: combines {combines}, which is not '-- Partition: run' without a Combine")
    mine = [p.name for p in folder.params(name)]
    theirs = [p.name for p in folder.params(combines)]
    calls = re.findall(rf"\b{re.escape(combines)}\s*\(([^()]*)\)", folder.code(name))
    passed = [sorted(a.replace(" ", "") for a in views.split_top_level(call)) for call in calls]
    wanted = sorted(f"{p}:={p}" for p in mine)
    if sorted(mine) != sorted(theirs) or not calls or any(p != wanted for p in passed):
        raise UsageError(
            f"{file}: a combining view has the parameters of {combines} ({', '.join(theirs)}) and calls "
            f"it with each passed through (name := name)"
        )


def order_keys(folder: views.ViewFolder, name: str) -> list[str]:
    """The keys of the definition's last top-level ORDER BY ([] when its rows are not ordered)."""
    code = folder.code(name)
    depth, end, at_top = 0, len(code), []
    starts = {m.start(): m.end() for m in _ORDER_BY.finditer(code)}
    for i, ch in enumerate(code):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == ";" and depth == 0:
            end = i  # the first statement is the definition; the view after it is the macro's defaults
            break
        if depth == 0 and i in starts:
            at_top.append(starts[i])
    if not at_top:
        return []
    return views.split_top_level(code[at_top[-1] : end])


@dataclass(frozen=True)
class PartTask:
    """One part of a query split by run, as a worker runs it: which dataset (and which commit of
    it), which view, which runs, the parameters as the user gave them."""

    data_dir: str
    view: str
    runs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    state: str | None = None  # the catalog commit (`_meta.state`) the query was planned on


def plan_parts(runs: list[str], packets: dict[str, int], part_packets: int = PART_PACKETS) -> list[list[str]]:
    """`runs` (in run order) cut into consecutive groups of at least `part_packets` packets each (the
    last may hold fewer); a run of more is a group of its own. Consecutive, so that parts joined in
    order keep the run order."""
    groups: list[list[str]] = []
    held = part_packets
    for run in runs:
        if held >= part_packets:
            groups.append([])
            held = 0
        groups[-1].append(run)
        held += packets.get(run, 0)
    return groups


def combining_connection(name: str, parts: pa.Table) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB where the view `name` combines runs holds its own SQL over `parts`: the
    view it combines is a stand-in macro (same parameters) returning the parts' rows."""
    import duckdb

    combines = rules(name).combines
    assert combines is not None, name
    params = ", ".join(f'"{p.name}" := NULL' for p in views.view_params(combines))
    con = duckdb.connect()
    try:
        con.register("_parts", parts)
        con.execute(f'CREATE MACRO "{combines}"({params}) AS TABLE SELECT * FROM _parts')
        con.execute(views.view_sql(name))
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
