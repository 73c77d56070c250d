"""Running the named views with parameters, checked against what the views and the dataset hold.

Why a module of its own: the CLI (`tracecore query`, `tracecore sql`), the figures and the report
all run views the same way, with the same checks. Each view in `queries/` is a DuckDB table macro
with named, defaulted parameters plus a plain view of the same name (the macro with its defaults),
so `SELECT * FROM link_util` and `SELECT * FROM link_util(bin_ns := 1000000)` both work in ad hoc
SQL. Here a request is checked against the macro's own parameter list and the catalog's runs
before DuckDB sees it, so a typo gets a message that lists what exists instead of a binder error.
Values travel as prepared-statement parameters, never spliced into SQL text.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import pyarrow as pa

from tracecore import views
from tracecore.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    import duckdb

T = TypeVar("T")

_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµμ]*)\s*$", re.IGNORECASE)
_MACRO = re.compile(
    r"CREATE\s+OR\s+REPLACE\s+MACRO\s+(\w+)\s*\((.*?)\)\s*AS\s+TABLE", re.IGNORECASE | re.DOTALL
)


def parse_duration_ns(text: str, bare_unit: str = "s") -> int:
    """'10ms' → 10_000_000; '100us', '1.5s', '2min' work too; a bare number is in `bare_unit`."""
    match = _DURATION.match(str(text))
    unit = (match.group(2).lower() or bare_unit) if match else ""
    if not match or unit not in _UNITS_NS:
        raise UsageError(
            f"cannot read duration {text!r}: use a number with a unit (ns, us, ms, s, min, h), e.g. 10ms"
        )
    value = float(match.group(1)) * _UNITS_NS[unit]
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"duration {text!r} must be a finite, non-negative time")
    return round(value)


@dataclass(frozen=True)
class ViewParam:
    """One parameter of a view's macro: its name and its default as written in the SQL."""

    name: str
    default: str


@functools.cache
def view_params(name: str) -> tuple[ViewParam, ...]:
    """The macro parameters of a view, in declaration order; () for a plain view."""
    match = _MACRO.search(views.view_sql(name))
    if not match:
        return ()
    params = []
    for part in _split_top_level(match.group(2)):
        key, _, default = part.partition(":=")
        params.append(ViewParam(key.strip(), default.strip()))
    return tuple(params)


def _split_top_level(text: str) -> list[str]:
    """Split a parameter list on commas outside brackets (defaults may be lists)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def known_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every run name in the catalog, sorted."""
    return [row[0] for row in con.sql("SELECT run FROM runs ORDER BY run").fetchall()]


def check_runs(con: duckdb.DuckDBPyConnection, runs: list[str] | None) -> list[str] | None:
    """The runs asked for, after checking each exists; None (= all runs) stays None."""
    if not runs:
        return None
    have = known_runs(con)
    missing = [r for r in runs if r not in have]
    if missing:
        listing = ", ".join(have) if have else "(none: the dataset is empty)"
        raise UsageError(f"unknown run {', '.join(map(repr, missing))}; runs in the dataset: {listing}")
    return list(dict.fromkeys(runs))


def convert_param(param: ViewParam, value: Any) -> Any:
    """A parameter value from the command line, typed by the parameter's declaration.

    `*_ns` parameters take durations ('10ms'; a bare integer is ns, as the name says); a
    parameter whose default is a list (`runs`, `bins_ns`) takes comma-separated items; anything
    else becomes an int, a float or stays a string.
    """
    if not isinstance(value, str):
        return value
    if param.name == "runs" or param.default.startswith("["):
        return [_scalar(param.name, v.strip()) for v in value.split(",") if v.strip()]
    return _scalar(param.name, value)


def _scalar(name: str, value: str) -> Any:
    if name.endswith("_ns"):
        return parse_duration_ns(value, bare_unit="ns")
    if name == "runs":
        return value
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def build_call(name: str, runs: list[str] | None, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """SQL that runs view `name` with the given parameters, and the prepared-statement values."""
    declared = view_params(name)
    names = [p.name for p in declared]
    if "runs" in params:
        raise UsageError("select runs with --run (or the runs argument), not as a view parameter")
    unknown = [k for k in params if k not in names]
    if unknown:
        offered = ", ".join(n for n in names if n != "runs") or "none"
        raise UsageError(
            f"view {name} has no parameter {', '.join(map(repr, unknown))}; its parameters: {offered}"
        )
    if not declared:
        sql = f"SELECT * FROM {name}"
        if runs:
            sql += " WHERE run IN (SELECT unnest($runs))"
            return sql, {"runs": runs}
        return sql, {}
    by_name = {p.name: p for p in declared}
    values: dict[str, Any] = {k: convert_param(by_name[k], v) for k, v in params.items() if v is not None}
    for key in ("bin_ns", "window_ns"):
        if key in values and not (isinstance(values[key], int) and values[key] > 0):
            raise UsageError(f"{key} must be a positive whole number of ns (e.g. 10ms), got {values[key]!r}")
    for width in values.get("bins_ns") or []:
        if not (isinstance(width, int) and width > 0):
            raise UsageError(f"bins_ns must be positive whole numbers of ns, got {width!r}")
    if runs and "runs" in names:
        values["runs"] = runs
    args = ", ".join(f"{k} := ${k}" for k in values)
    return f"SELECT * FROM {name}({args})", values


def run_view(
    con: duckdb.DuckDBPyConnection,
    name: str,
    runs: list[str] | None = None,
    params: dict[str, Any] | None = None,
) -> pa.Table:
    """Run one named view with parameters; unknown names, runs or parameters raise UsageError."""
    views.view_sql(name)  # unknown names: a message listing the views
    sql, values = build_call(name, check_runs(con, runs), params or {})
    return run_sql(con, sql, values)


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, Any] | None = None) -> pa.Table:
    """Any SQL over the catalog as an Arrow table; DuckDB's errors become one-line UsageErrors."""
    import duckdb

    try:
        rel = con.sql(sql, params=values or None)
    except duckdb.Error as err:
        raise UsageError(_first_line(err)) from err
    if rel is None:
        return pa.table({})
    try:
        return rel.to_arrow_table()
    except duckdb.Error as err:
        raise UsageError(_first_line(err)) from err


def _first_line(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


class ViewListing(NamedTuple):
    """One row of `tracecore query --list`: what a view is for and how to call it."""

    name: str
    kind: str  # views.ANSWER or views.BUILDING_BLOCK
    purpose: str
    params: tuple[str, ...]  # macro parameter names, () for a plain view


def view_listing() -> list[ViewListing]:
    """Every view, answers first and then the building blocks they use, each group by name."""
    rows = [
        ViewListing(
            name, views.view_kind(name), views.view_purpose(name), tuple(p.name for p in view_params(name))
        )
        for name in views.view_names()
    ]
    return sorted(rows, key=lambda row: (views.KINDS.index(row.kind), row.name))


def request_params(
    name: str, pairs: list[str], bin_: str | None = None, from_: str | None = None, to: str | None = None
) -> dict[str, Any]:
    """KEY=VALUE pairs plus the `--bin`/`--from`/`--to` shorthands, as view `name`'s parameter names.

    The bin width goes to `bin_ns` or, where a view has none, `window_ns`; a shorthand the view cannot
    take is refused with the parameters it does take.
    """
    declared = [p.name for p in view_params(name)]
    offered = ", ".join(n for n in declared if n != "runs") or "none"
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param takes KEY=VALUE, got {pair!r}")
        params[key.strip()] = value.strip()
    if bin_ is not None:
        width = next((k for k in ("bin_ns", "window_ns") if k in declared), None)
        if width is None:
            raise UsageError(f"view {name} has no bin width; its parameters: {offered}")
        params[width] = parse_duration_ns(bin_)
    for key, value in (("from_ns", from_), ("to_ns", to)):
        if value is not None:
            if key not in declared:
                raise UsageError(f"view {name} takes no time window; its parameters: {offered}")
            params[key] = parse_duration_ns(value)
    return params


def query_dataset(
    data_dir: Path, name: str, runs: list[str] | None = None, params: dict[str, Any] | None = None
) -> pa.Table:
    """Run view `name` over the dataset at `data_dir`, opened read-only for this one query."""
    return with_dataset(data_dir, lambda con: run_view(con, name, runs=runs, params=params))


def sql_dataset(data_dir: Path, sql: str) -> pa.Table:
    """Run any SQL over the dataset at `data_dir`, opened read-only so it cannot change the dataset."""
    return with_dataset(data_dir, lambda con: run_sql(con, sql))


def with_dataset(data_dir: Path, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    """`work(con)` over the dataset at `data_dir`, opened read-only and closed whatever happens."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data_dir, read_only=True)
    try:
        return work(con)
    finally:
        con.close()
