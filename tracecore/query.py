"""Running the named views with parameters, and writing any result as table, CSV, JSON or Parquet.

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
import io
import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracecore import views
from tracecore.errors import UsageError

if TYPE_CHECKING:
    import duckdb

FORMATS = ("table", "csv", "json", "parquet")

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
    for key, value in values.items():  # DuckDB's BIGINT: a raw overflow error otherwise
        if key.endswith("_ns") and any(abs(v) > MAX_NS for v in _ints(value)):
            shown = _duration(value) if isinstance(value, int) else repr(value)
            raise UsageError(f"{key} {shown} is too large: at most {MAX_NS:,} ns (about 292 years)")
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
    check_size(con, name, values)
    return run_sql(con, sql, values)


MAX_NS = 2**63 - 1
MAX_CELLS = 5_000_000  # time bins × worker pairs a binned view may build (~300 B each in DuckDB)


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool)]


def check_size(con: duckdb.DuckDBPyConnection, name: str, values: dict[str, Any]) -> None:
    """Refuse a binned view whose grid (bins × worker pairs over the runs' spans) exceeds MAX_CELLS.

    Why before running: DuckDB materialises the zero-filled grid, so `--bin 10us` on a 6.6 s run
    took 2.4 GB and 1 ns would take 64 GiB; the estimate comes from the small tables in a few ms.
    """
    declared = {p.name: p for p in view_params(name)}
    widths: list[int] = []
    for key in ("bin_ns", "window_ns"):  # burstiness' bins_ns are counted, not built: no grid
        if key in declared:
            given = values.get(key)
            widths += _ints(given if given is not None else int(declared[key].default))
    if not widths or min(widths) <= 0:
        return
    width = min(widths)
    runs = values.get("runs")
    spans = con.execute(
        "SELECT c.run, max(c.last_ts_ns) - min(c.first_ts_ns), any_value(w.n) FROM captures c "
        "JOIN (SELECT run, count(*) AS n FROM workers GROUP BY run) w USING (run) "
        "WHERE c.first_ts_ns IS NOT NULL GROUP BY c.run"
    ).fetchall()
    lo, hi = values.get("from_ns") or 0, values.get("to_ns")
    cells, weighted, fixed, seconds = 0, 0, 0, 0.0
    for run, span, workers in spans:
        if runs and run not in runs:
            continue
        window = max((span if hi is None else min(hi, span)) - lo, 0)
        pairs = max(workers * (workers - 1), 1)
        cells += (window // width + 2) * pairs
        weighted += window * pairs
        fixed += 2 * pairs
        seconds += window / 1e9
    if cells <= MAX_CELLS:
        return
    fits = -(-weighted // max(MAX_CELLS - fixed, 1))
    raise UsageError(
        f"{name} with bin_ns = {_duration(width)} would produce about {cells:,} rows "
        f"({seconds:.1f} s of traffic; at most {MAX_CELLS:,}); narrow it with --run, --from/--to, "
        f"or a larger --bin (at least {_duration(fits)} here)"
    )


def _duration(ns: int) -> str:
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= size:
            return f"{ns / size:.4g}{unit}"
    return f"{ns}ns"


READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN")


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, Any] | None = None, *, unsafe: bool = False
) -> pa.Table:
    """Any SQL over the catalog as an Arrow table; DuckDB's errors become one-line UsageErrors.

    Only one SELECT or EXPLAIN statement runs unless `unsafe`: why: DuckDB's settings cannot stop a
    COPY over a file the query may read (a part file), and a string may hold several statements.
    """
    import duckdb

    try:
        if not unsafe:
            _check_read_only(duckdb.extract_statements(sql))
        rel = con.sql(sql, params=values or None)
    except duckdb.Error as err:
        raise UsageError(_first_line(err)) from err
    if rel is None:
        return pa.table({})
    try:
        return rel.to_arrow_table()
    except duckdb.Error as err:
        raise UsageError(_first_line(err)) from err


_LEAD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.DOTALL)
# DuckDB parses a PIVOT into several statements (type MULTI): read-only when the text starts as a query
READ_ONLY_LEADS = ("PIVOT", "UNPIVOT", "SELECT", "WITH", "FROM", "VALUES")


def _check_read_only(statements: list) -> None:
    kinds = [st.type.name for st in statements]
    if kinds == ["MULTI"]:
        lead = _LEAD.match(statements[0].query)
        if lead is not None and lead.group(1).upper() in READ_ONLY_LEADS:
            return
    if len(kinds) != 1 or kinds[0] not in READ_ONLY_STATEMENTS:
        got = " + ".join(kinds) or "nothing"
        raise UsageError(
            f"only one read-only query (SELECT, EXPLAIN) runs here, got {got}; "
            "for DuckDB's full power on your own data use `tracecore sql --unsafe`"
        )


def _first_line(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def view_listing() -> list[tuple[str, str]]:
    """(name, one-line purpose) of every view, for `tracecore query --list`."""
    return [(name, views.view_purpose(name)) for name in views.view_names()]


def write_result(table: pa.Table, fmt: str, out: Path | None, limit_rows: int | None = None) -> str | None:
    """Write `table` to `out` in `fmt`, or return the text to print when `out` is None.

    `table` output is for people (Rich, `limit_rows` rows at most, with a note on what was left
    out); csv/json/parquet are complete. Parquet is binary, so it needs `out`.
    """
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}; formats: {', '.join(FORMATS)}")
    if fmt == "parquet":
        if out is None:
            raise UsageError("parquet output is binary: give --out FILE.parquet")
        import pyarrow.parquet as pq

        pq.write_table(table, out)
        return None
    if fmt == "table":
        text = _as_table(table, limit_rows)
    else:
        text = _as_csv(table) if fmt == "csv" else _as_json(table)
    if out is None:
        return text
    out.write_text(text, encoding="utf-8")
    return None


def _as_csv(table: pa.Table) -> str:
    import pyarrow.csv as pacsv

    buf = io.BytesIO()
    pacsv.write_csv(table, buf, pacsv.WriteOptions(quoting_style="needed"))
    return buf.getvalue().decode("utf-8")


def _as_json(table: pa.Table) -> str:
    """A JSON array of row objects: NaN/inf become null, 128-bit sums and decimals become numbers."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, Decimal):
            return int(value) if value == value.to_integral_value() else float(value)
        return value

    rows = [{k: clean(v) for k, v in row.items()} for row in table.to_pylist()]
    return json.dumps(rows, default=str, ensure_ascii=False, allow_nan=False) + "\n"


def _as_table(table: pa.Table, limit_rows: int | None) -> str:
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table

    shown = table if limit_rows is None else table.slice(0, limit_rows)
    rows = [[_cell(v) for v in row.values()] for row in shown.to_pylist()]
    widths = [max([len(field.name), *(len(r[i]) for r in rows)]) for i, field in enumerate(table.schema)]
    grid = Table(box=SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for field in table.schema:
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        grid.add_column(field.name, justify="right" if numeric else "left", no_wrap=True)
    for row in rows:
        grid.add_row(*row)
    buf = io.StringIO()
    # wide enough that no column is cut: this output is read whole or piped, not squeezed into a tty
    Console(file=buf, width=sum(widths) + 3 * len(widths) + 2, force_terminal=False, color_system=None).print(
        grid
    )
    text = buf.getvalue()
    if shown.num_rows < table.num_rows:
        left = table.num_rows - shown.num_rows
        text += f"… {left} more rows of {table.num_rows}; use --limit, --format csv or --out for all\n"
    else:
        text += f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}\n"
    return text


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
