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

import contextlib
import math
import re
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from tracecore import param_ranges, views
from tracecore.csv_text import INTEGER_TYPES
from tracecore.errors import DatasetError, UsageError
from tracecore.views import ViewParam, view_params

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import duckdb
    import pyarrow as pa

    from tracecore.partition import PartTask

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


def timeout_seconds(text: str) -> float | None:
    """A time limit such as '10min' or '30' (seconds) in seconds; None for 0 (no limit)."""
    seconds = parse_duration_ns(text, bare_unit="s") / 1e9
    return seconds or None


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
    converted = _scalar(param.name, value)
    if isinstance(converted, str) and _NUMBER.fullmatch(param.default):
        raise UsageError(f"parameter {param.name} takes a number (default {param.default}), got {value!r}")
    return converted


_NUMBER = re.compile(r"-?\d+(\.\d*)?([eE][-+]?\d+)?")  # a default written as a number: the value must be one


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
    for key, value in values.items():
        param_ranges.check_value(name, key, value)
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
    return run_sql(con, *checked_call(con, name, runs, params))


def checked_call(
    con: duckdb.DuckDBPyConnection, name: str, runs: list[str] | None, params: dict[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """`build_call` for view `name` after its name, runs and grid size are checked (UsageError)."""
    views.view_sql(name)  # unknown names: a message listing the views
    sql, values = build_call(name, check_runs(con, runs), params or {})
    check_size(con, name, values)
    return sql, values


MAX_NS = 2**63 - 1


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool)]


def check_size(con: duckdb.DuckDBPyConnection, name: str, values: dict[str, Any]) -> None:
    """Refuse a binned view whose grid (bins × worker pairs over the runs' spans) exceeds the limit.

    Why before running: DuckDB materialises the zero-filled grid, so `--bin 10us` on a 6.6 s run
    took 2.4 GB and 1 ns would take 64 GiB. The estimate and the limit are the views' own
    (`grid_rows`, `grid_check`), which refuse in SQL too; here the message also names the smallest
    bin that fits.
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
    window = {
        "width": width,
        "runs": values.get("runs"),
        "lo": values.get("from_ns"),
        "hi": values.get("to_ns"),
    }
    ((rows, seconds, weighted, fixed, limit),) = con.execute(
        "SELECT rows, seconds, weighted, fixed, (SELECT max_rows FROM grid_check) FROM grid_rows("
        "bin_ns := $width, runs := $runs, from_ns := $lo, to_ns := $hi)",
        window,
    ).fetchall()
    if rows <= limit:
        return
    fits = -(-weighted // max(limit - fixed, 1))
    raise UsageError(
        f"{name} with bin_ns = {_duration(width)} would produce about {rows:,} rows "
        f"({seconds:.1f} s of traffic; at most {limit:,}); narrow it with --run, --from/--to, "
        f"or a larger --bin (at least {_duration(fits)} here)"
    )


def _duration(ns: int) -> str:
    for unit, size in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= size:
            return f"{ns / size:.4g}{unit}"
    return f"{ns}ns"


def run_sql(
    con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, Any] | None = None, *, unsafe: bool = False
) -> pa.Table:
    """Any SQL over the catalog as an Arrow table; DuckDB's errors become one-line UsageErrors.

    Only one SELECT (or an EXPLAIN of one) runs unless `unsafe`: why: DuckDB's settings cannot stop a
    COPY over a file the query may read (a part file), and a string may hold several statements.
    """
    import duckdb
    import pyarrow as pa

    try:
        statements = duckdb.extract_statements(sql)
        if not unsafe:
            _check_read_only(statements)
        select = [st.type.name for st in statements] == ["SELECT"]
        # one SELECT without its closing semicolon: a projection of it holds its text
        rel = con.sql(statement_text(sql) if select else sql, params=values or None)
        varying = False
        if rel is not None and select:
            columns = bounded_columns(rel)
            varying = columns is not None
            # a projection of the bound relation, not the checked text bound anew: why: binding a view
            # as large as `findings` costs as much as running it, and DuckDB 2 binds a projection's
            # step alone (bench/results/report-gpu-corpus.md)
            rel = rel.project(", ".join(columns)) if columns is not None else rel
    except duckdb.Error as err:
        raise _query_error(con, err) from err
    if rel is None:
        return pa.table({})
    try:
        return whole_numbers_as_int64(_bounded_table(con, rel, varying))
    except duckdb.Error as err:
        raise _query_error(con, err) from err


# The most the text, blob and nested values of one result row may hold: a row over it is refused inside
# DuckDB (`bounded_sql`), before it reaches Python; and rows per Arrow batch when rows vary in size, so
# a batch holds at most _VARYING_BATCH_ROWS × ROW_MAX_BYTES
ROW_MAX_BYTES = 1 << 20
_VARYING_BATCH_ROWS = 2048
_FIXED_BATCH_ROWS = 65536
# type names (up to a parenthesis) whose values have a fixed size; any other value's size is measured
_FIXED_WIDTH = re.compile(
    r"(BOOLEAN|U?(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT)|FLOAT|DOUBLE|DECIMAL|DATE|TIME|TIMESTAMP|"
    r"INTERVAL|UUID|ENUM)\b[^\[]*"
)


def bounded_sql(sql: str, rel: duckdb.DuckDBPyRelation) -> tuple[str, bool]:
    """`sql` (one SELECT, bound as `rel`) as a query that refuses a row whose text, blob and nested
    values hold more than ROW_MAX_BYTES, and whether its rows vary in size (False: `sql` unchanged).

    Why inside DuckDB: a received view returning 100 rows of 100 MB (one constant, cheap for DuckDB)
    drove `tracecore sql` to 23.8 GB, as every row was copied out of it; the check refuses the first
    such row before any leaves DuckDB. Columns are referred to by position, so repeated names work."""
    columns = bounded_columns(rel)
    if columns is None:
        return sql, False
    return f"SELECT {', '.join(columns)} FROM (\n{statement_text(sql)}\n)", True


def bounded_columns(rel: duckdb.DuckDBPyRelation) -> list[str] | None:
    """The select list of `bounded_sql` over the bound `rel` (its columns by position, the first one
    refusing a row over ROW_MAX_BYTES), or None when its rows do not vary in size."""
    sizes = [_size_sql(f"#{i}", str(t)) for i, t in enumerate(rel.types, 1)]
    sizes = [f"coalesce({size}, 0)" for size in sizes if size is not None]
    if not sizes:
        return None
    too_big = (
        f"tracecore: a result row holds more than {ROW_MAX_BYTES >> 20} MiB of text (ROW_MAX_BYTES); "
        "select less of its long columns (left(column, 1000)), or fewer rows"
    )
    names = [_quoted(name) for name in rel.columns]
    first = f"CASE WHEN {' + '.join(sizes)} > {ROW_MAX_BYTES} THEN error({_lit(too_big)}) ELSE #1 END"
    return [f"{first} AS {names[0]}", *(f"#{i} AS {name}" for i, name in enumerate(names[1:], 2))]


def _size_sql(ref: str, kind: str) -> str | None:
    """SQL for the bytes a value of DuckDB type `kind` holds, None when the type's size is fixed."""
    if _FIXED_WIDTH.fullmatch(kind):
        return None
    if kind == "BLOB":
        return f"octet_length({ref})"
    if kind in ("VARCHAR", "JSON"):
        return f"strlen({ref})"
    return f"strlen(CAST({ref} AS VARCHAR))"  # nested values and anything else: as text


def statement_text(sql: str) -> str:
    """The text of the one statement `sql` holds, without its closing semicolon and what follows
    (a comment), so that it can stand inside parentheses; DuckDB's tokenizer says where it ends."""
    import duckdb

    for offset, kind in duckdb.tokenize(sql):
        if kind == duckdb.token_type.operator and sql.startswith(";", offset):
            return sql[:offset]
    return sql


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _bounded_table(con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation, varying: bool) -> pa.Table:
    """The relation's rows as one Arrow table, read a batch at a time and refused (UsageError) once they
    hold more than the connection's memory limit: why: the whole result is held before it is written,
    and a result larger than the memory DuckDB may use would only end in a MemoryError."""
    import pyarrow as pa

    most = _limit_bytes(con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0])
    reader = rel.to_arrow_reader(_VARYING_BATCH_ROWS if varying else _FIXED_BATCH_ROWS)
    batches, held = [], 0
    for batch in reader:
        held += batch.nbytes
        if most is not None and held > most:
            raise UsageError(
                f"the result is larger than the memory limit ({most >> 20} MiB, $TRACECORE_MEMORY_LIMIT); "
                "narrow it (WHERE, LIMIT, --run, --from/--to)"
            )
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=reader.schema)


_SIZE = re.compile(r"([0-9.]+)\s*(bytes|B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)", re.IGNORECASE)
_UNITS = {"b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS |= {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def _limit_bytes(text: str) -> int | None:
    """DuckDB's `memory_limit` as it shows it ('953.6 MiB') in bytes; None when it cannot be read."""
    match = _SIZE.fullmatch(text.strip())
    return None if match is None else int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def whole_numbers_as_int64(table: pa.Table) -> pa.Table:
    """Columns of whole decimals (DuckDB's HUGEINT, which `sum` of a BIGINT gives, or DECIMAL(p, 0))
    as int64 when every value fits; why: pandas would get Python Decimal objects and Polars a Decimal
    column for what is a count or a byte total. A value beyond int64 keeps its column as it is."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if pa.types.is_decimal(field.type) and field.type.scale == 0:
            try:
                column = table.column(i).cast(pa.int64())  # checked: a value out of range raises
            except pa.ArrowInvalid:
                continue
            table = table.set_column(i, field.with_type(pa.int64()), column)
    return table


# How DuckDB names a Parquet file it cannot find: locked down, it refuses to glob for it; unsafe, the
# glob finds nothing
_MISSING_FILE = re.compile(
    r'(?:Cannot access file|No files found that match the pattern) "([^"]+?\.parquet)(?:/\*\*/\*\.parquet)?"'
)


def _query_error(con: duckdb.DuckDBPyConnection, err: Exception) -> UsageError | DatasetError:
    """DuckDB's error in one line; a part file of the catalog gone under the query says why: an ingest
    committed twice since the connection opened the catalog (files are kept one commit for its readers)."""
    import duckdb

    missing = _MISSING_FILE.search(str(err))
    if missing is None or Path(missing.group(1)).exists():
        return UsageError(_first_line(err))
    parts = []
    for table in ("_files", "_trace_parts"):
        with contextlib.suppress(duckdb.Error):  # not a catalog's connection (or one before trace parts)
            parts += [path for (path,) in con.execute(f"SELECT path FROM {table}").fetchall()]
    if any(missing.group(1).endswith(f"/{part}") for part in parts):
        return DatasetError(
            f"{missing.group(1)}: this part file is gone: the dataset was ingested again twice since this "
            "connection opened it; open the dataset again and rerun the query"
        )
    return UsageError(_first_line(err))


_SKIP = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"  # blanks and comments
_LEAD = re.compile(rf"(?:{_SKIP}\(?)*([A-Za-z]+)", re.DOTALL)
# DuckDB parses a PIVOT into several statements (type MULTI): read-only when the text starts as a query
READ_ONLY_LEADS = ("PIVOT", "UNPIVOT", "SELECT", "WITH", "FROM", "VALUES")
# What EXPLAIN explains starts after EXPLAIN [ANALYZE] or after an option list: `EXPLAIN (ANALYZE,
# FORMAT json) …`, whose ANALYZE runs the statement too.
_EXPLAIN = re.compile(rf"{_SKIP}EXPLAIN\b{_SKIP}(?:ANALY[SZ]E\b)?", re.IGNORECASE | re.DOTALL)
_EXPLAIN_OPTIONS = re.compile(rf"{_SKIP}\(\s*\w+(?:\s+\w+)?(?:\s*,\s*\w+(?:\s+\w+)?)*\s*\)", re.DOTALL)


def _check_read_only(statements: list) -> None:
    if not _read_only(statements):
        got = " + ".join(st.type.name for st in statements) or "nothing"
        raise UsageError(
            f"only one read-only query (SELECT, EXPLAIN of one) runs here, got {got}; "
            "for DuckDB's full power on your own data use `tracecore sql --unsafe`"
        )


def _read_only(statements: list) -> bool:
    """One SELECT (a PIVOT's several statements included), or an EXPLAIN of one. Why EXPLAIN's inner
    statement is checked: EXPLAIN ANALYZE runs it, so `EXPLAIN ANALYZE COPY … TO '<a part file>'`
    overwrote a part file while its statement type said EXPLAIN. Text this cannot split refuses."""
    import duckdb

    kinds = [st.type.name for st in statements]
    if kinds == ["SELECT"]:
        return True
    if kinds == ["MULTI"]:
        lead = _LEAD.match(statements[0].query)
        return lead is not None and lead.group(1).upper() in READ_ONLY_LEADS
    if kinds != ["EXPLAIN"]:
        return False
    text = statements[0].query
    head = _EXPLAIN.match(text)
    if head is None:
        return False
    rest = text[head.end() :]
    options = _EXPLAIN_OPTIONS.match(rest)
    for inner in (rest, rest[options.end() :] if options else None):
        try:
            if inner is not None and _read_only(duckdb.extract_statements(inner)):
                return True
        except duckdb.Error:
            continue
    return False


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


class ViewDescription(NamedTuple):
    """What `tracecore query --describe NAME` shows, all of it read from the view's file."""

    name: str
    kind: str  # views.ANSWER or views.BUILDING_BLOCK
    purpose: str
    params: tuple[ViewParam, ...]  # the macro's parameters with their defaults as written
    parameters: tuple[str, ...]  # the header's `Parameters:` lines (meanings, units)
    columns: tuple[str, ...]  # the header's `Columns:` lines (meanings, units)
    on_cluster: str  # what `--scheduler` does with it, from the header's `Partition:` line
    rules: tuple[str, ...] = ()  # the header's `Rules:` lines (the rules a view says it follows), if any


def describe_view(name: str) -> ViewDescription:
    """Purpose, kind, parameters with defaults, columns with units and rules of view `name`."""
    return ViewDescription(
        name,
        views.view_kind(name),
        views.view_purpose(name),
        view_params(name),
        views.view_header_section(name, "Parameters"),
        views.view_header_section(name, "Columns"),
        _on_cluster_text(name),
        views.view_header_section(name, "Rules"),
    )


def _on_cluster_text(name: str) -> str:
    from tracecore import partition

    rule = partition.rules(name)
    if rule.combines is not None:
        return f"split by run: the workers compute {rule.combines} per run, combined here"
    if rule.by_run:
        return "split by run: parts of a few runs on the workers, joined here in run order"
    return "not split (it needs every run at once): runs here"


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
    data_dir: Path,
    name: str,
    runs: list[str] | None = None,
    params: dict[str, Any] | None = None,
    *,
    scheduler: str | None = None,
    part_packets: int | None = None,
    timeout_s: float | None = None,
) -> pa.Table:
    """Run view `name` over the dataset at `data_dir`, opened read-only for this one query.

    `scheduler` (a Dask scheduler's address, e.g. tcp://host:8786): a view split by run (its header
    says `Partition: run`) runs in parts of consecutive runs on that cluster's workers, each opening
    the dataset at the same path, and the parts are joined here into the local result; a view that
    needs every run at once (`Partition: none`) runs here. `part_packets`: a part takes runs until it
    holds that many packets (default `partition.PART_PACKETS`; 0: one run per part). `timeout_s`: see
    `with_dataset` (the parts on a cluster are not limited).
    """
    if scheduler is None:

        def work(con: duckdb.DuckDBPyConnection) -> pa.Table:
            return run_view(con, name, runs=runs, params=params)

        return with_dataset(data_dir, work, timeout_s=timeout_s)
    where = Path(data_dir).absolute()
    return _on_cluster(where, name, runs, params or {}, scheduler, part_packets, timeout_s)


def query_dataset_csv(
    data_dir: Path,
    name: str,
    write: Callable[[list[str], Iterator[list[str]]], None],
    runs: list[str] | None = None,
    params: dict[str, Any] | None = None,
    *,
    timeout_s: float | None = None,
) -> pa.Table | None:
    """`query_dataset` (here, not on a cluster) with its result given to `write` as CSV: the column
    names and chunks of lines formatted by DuckDB as Arrow's writer formats them (tracecore.csv_text),
    when every column's type allows; else its Arrow table, as query_dataset returns it.

    Why: such a CSV needs neither pyarrow nor numpy, whose import cost more than a small view's query.
    The lines are made into a temporary table first, so any error of the query comes before `write`
    is called and nothing half-written is left; the table keeps the view's order."""

    def work(con: duckdb.DuckDBPyConnection) -> pa.Table | None:
        sql, values = checked_call(con, name, runs, params)
        names = _csv_lines(con, sql, values)
        if names is None:
            return run_sql(con, sql, values)
        write(names, _fetch_lines(con))
        return None

    return with_dataset(data_dir, work, timeout_s=timeout_s)


def _csv_lines(con: duckdb.DuckDBPyConnection, sql: str, values: dict[str, Any]) -> list[str] | None:
    """The result of `sql` as CSV lines in the temporary table csv_lines, and its column names; None
    (nothing run) when a column's type is not one csv_text covers."""
    import duckdb

    from tracecore import csv_text

    try:
        rel = con.sql(sql, params=values or None)  # bound, not run: its names and types
        names, types = list(rel.columns), [str(t) for t in rel.types]
        line = csv_text.lines(types)
        if line is None:
            return None
        checked, _ = bounded_sql(sql, rel)  # rows over ROW_MAX_BYTES refused inside DuckDB
        columns = ", ".join(f"c{i}" for i in range(len(types)))  # by position: names may repeat
        con.execute(
            f"CREATE TEMP TABLE csv_lines AS SELECT {line} AS line FROM ({checked}) AS result({columns})",
            values or None,
        )
    except duckdb.Error as err:
        raise _query_error(con, err) from err
    return names


def _fetch_lines(con: duckdb.DuckDBPyConnection) -> Iterator[list[str]]:
    """csv_lines's lines in their order, a chunk at a time."""
    con.execute("SELECT line FROM csv_lines")
    while chunk := con.fetchmany(_VARYING_BATCH_ROWS):  # lines of up to about ROW_MAX_BYTES
        yield [row[0] for row in chunk]


def _on_cluster(
    data_dir: Path,
    name: str,
    runs: list[str] | None,
    params: dict[str, Any],
    scheduler: str,
    part_packets: int | None,
    timeout_s: float | None = None,
) -> pa.Table:
    """`query_dataset` with a scheduler: checked and planned here, parts on the cluster, joined here."""
    import pyarrow as pa

    from tracecore import partition

    views.view_sql(name)  # unknown names: a message listing the views
    rule = partition.rules(name)

    def plan(con: duckdb.DuckDBPyConnection) -> pa.Table | tuple[list[partition.PartTask], list[int]]:
        chosen = check_runs(con, runs) or known_runs(con)
        _, values = build_call(name, chosen, params)  # bad parameters fail before the cluster is asked
        check_size(con, name, values)
        if not rule.by_run or not chosen:  # needs every run at once (or there is none): here
            return run_view(con, name, runs=runs, params=params)
        rows = con.execute("SELECT run, sum(packets)::BIGINT FROM workers GROUP BY run").fetchall()
        packets = {run: n or 0 for run, n in rows}
        groups = partition.plan_parts(
            chosen, packets, partition.PART_PACKETS if part_packets is None else part_packets
        )
        view, state = rule.combines or name, catalog_state(con)
        tasks = [partition.PartTask(str(data_dir), view, tuple(g), params, state) for g in groups]
        return tasks, [sum(packets.get(r, 0) for r in g) for g in groups]

    planned = with_dataset(data_dir, plan, timeout_s=timeout_s)
    if isinstance(planned, pa.Table):
        return planned
    from tracecore.cluster import run_on_cluster  # imports `distributed`: only when asked

    tasks, sizes = planned
    parts = pa.concat_tables(run_on_cluster(scheduler, run_part, tasks, sizes))
    if rule.combines is None:
        return parts
    sql, values = build_call(name, runs and list(dict.fromkeys(runs)), params)
    con = partition.combining_connection(name, parts)
    try:
        return run_sql(con, sql, values)
    finally:
        con.close()


def run_part(task: PartTask) -> pa.Table:
    """One part of a query split by run, on a Dask worker: the same locked-down connection and the
    same call as a local query, over the part's runs. Refused when the dataset there is not the
    commit the query was planned on, so parts of two commits are never joined."""

    from tracecore.ingest import testpause

    def work(con: duckdb.DuckDBPyConnection) -> pa.Table:
        testpause.pause("query")
        if catalog_state(con) != task.state:
            raise DatasetError(
                f"{task.data_dir} is not the dataset the query was planned on (an ingest committed "
                "meanwhile, or the folder is not one shared by the driver and the workers); run it again"
            )
        return run_view(con, task.view, runs=list(task.runs), params=task.params)

    try:
        return with_dataset(Path(task.data_dir), work)
    except DatasetError as err:
        raise DatasetError(f"on Dask worker host {socket.gethostname()}: {err}") from err


def catalog_state(con: duckdb.DuckDBPyConnection) -> str | None:
    """The catalog's commit record (`_meta.state`: a generation and digests); None if it has none."""
    rows = con.execute("SELECT value FROM _meta WHERE key = 'state'").fetchall()
    return rows[0][0] if rows else None


def sql_dataset(
    data_dir: Path, sql: str, *, unsafe: bool = False, timeout_s: float | None = None
) -> pa.Table:
    """Run one query over the dataset at `data_dir`, locked down so it cannot change any file
    (`unsafe`: DuckDB's full power, for a user's own data); `timeout_s`: see `with_dataset`."""

    def work(con: duckdb.DuckDBPyConnection) -> pa.Table:
        return run_sql(con, sql, unsafe=unsafe)

    return with_dataset(data_dir, work, unsafe=unsafe, timeout_s=timeout_s)


# DuckDB types whose Python values (`fetchall`) are the ones Arrow's `to_pylist` gives for the same
# column (tests/test_cli_startup.py compares the printed tables), and which of them are numbers
PLAIN_TYPES = {"BOOLEAN": False, "VARCHAR": False, "FLOAT": True, "DOUBLE": True} | dict.fromkeys(
    INTEGER_TYPES, True
)


class Rows(NamedTuple):
    """A small result as DuckDB's Python rows: what `tracecore sql` prints as a table."""

    names: list[str]
    numeric: list[bool]  # the column holds numbers (right-aligned)
    rows: list[tuple]  # the first rows, at most the `most` asked for
    total: int  # rows of the whole result


def sql_rows_or_table(
    data_dir: Path,
    sql: str,
    most: int,
    *,
    first: bool = False,
    unsafe: bool = False,
    timeout_s: float | None = None,
) -> Rows | pa.Table:
    """`sql_dataset`'s result, as Rows when it is one SELECT whose columns are all PLAIN_TYPES (its
    first `most` rows and how many it has; `first`: only its first `most` rows are read); else its
    Arrow table, as `sql_dataset` gives it. Why: a table on the screen needs no Arrow, and importing
    it (with numpy) cost more than the rest of `tracecore sql` (bench/results/cli-startup.md)."""

    def work(con: duckdb.DuckDBPyConnection) -> Rows | pa.Table:
        rows = _plain_rows(con, sql, most, first)
        return rows if rows is not None else run_sql(con, sql, unsafe=unsafe)

    return with_dataset(data_dir, work, unsafe=unsafe, timeout_s=timeout_s)


def _plain_rows(con: duckdb.DuckDBPyConnection, sql: str, most: int, first: bool) -> Rows | None:
    """Rows of one SELECT when they qualify (see sql_rows_or_table), the statement run once; None when
    they do not (`run_sql` runs it then); DuckDB's errors as run_sql reports them."""
    import duckdb

    try:
        if [st.type.name for st in duckdb.extract_statements(sql)] != ["SELECT"]:
            return None
        rel = con.sql(sql)  # bound, not run: its names and types
        types, names = [str(t) for t in rel.types], list(rel.columns)
        if len(set(names)) < len(names) or any(t not in PLAIN_TYPES for t in types):
            return None
        checked, varying = bounded_sql(sql, rel)  # rows over ROW_MAX_BYTES refused inside DuckDB
        rows = (con.sql(checked) if varying else rel).limit(most).fetchall()
        total = len(rows)
        if not first and total == most:  # the rest only counted, by DuckDB: no row of it is fetched
            ((total,),) = con.sql(f"SELECT count(*) FROM (\n{statement_text(sql)}\n)").fetchall()
    except duckdb.Error as err:
        raise _query_error(con, err) from err
    return Rows(names, [PLAIN_TYPES[t] for t in types], rows, total)


def with_dataset(
    data_dir: Path,
    work: Callable[[duckdb.DuckDBPyConnection], T],
    *,
    unsafe: bool = False,
    timeout_s: float | None = None,
) -> T:
    """`work(con)` over the dataset at `data_dir`, opened read-only and closed whatever happens;
    stopped after `timeout_s` seconds (None or 0: never) with a UsageError (see `TimeLimit`)."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data_dir, read_only=True, unsafe=unsafe)
    limit = TimeLimit(con, timeout_s)
    try:
        return work(con)
    except Exception as err:
        if limit.fired:
            raise UsageError(
                f"the query ran longer than its time limit ({timeout_s:g} s) and was stopped; narrow it "
                "(WHERE, LIMIT, --run, --from/--to), or give --timeout more (0: no limit)"
            ) from err
        raise
    finally:
        limit.cancel()
        con.close()


class TimeLimit:
    """Interrupts DuckDB's work on `con` once `seconds` have passed, and again every 0.1 s until
    cancelled (an interrupt that lands between two statements would be lost). Why: a view of a
    received catalog (an unbounded `WITH RECURSIVE`) or a typed query can run forever; DuckDB stops
    at its next check and raises, which `with_dataset` turns into one line."""

    def __init__(self, con: duckdb.DuckDBPyConnection, seconds: float | None):
        import threading

        self.fired = False
        self._done = threading.Event()
        self._thread = None
        if seconds:
            self._thread = threading.Thread(target=self._run, args=(con, seconds), name="query-time-limit")
            self._thread.daemon = True
            self._thread.start()

    def _run(self, con: duckdb.DuckDBPyConnection, seconds: float) -> None:
        if self._done.wait(seconds):
            return
        self.fired = True
        while not self._done.is_set():
            con.interrupt()
            self._done.wait(0.1)

    def cancel(self) -> None:
        """Stop the timer (before the connection closes: no interrupt reaches a closed one)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
