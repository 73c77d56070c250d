"""`tracecore query NAME`: run one named analysis view over the dataset; `--list` shows them all.

Thin: parse options, call `tracecore.query`, print. Options map onto the view's macro parameters:
`--run` → runs, `--bin` → bin_ns (or window_ns), `--from`/`--to` → from_ns/to_ns, `--param k=v`
→ any other parameter. duckdb and pyarrow are imported inside the command so `tracecore --help`
stays instant.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from tracecore.cli.common import DataDir, boundary, default_data_dir

from tracecore.errors import UsageError


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


TABLE_ROWS = 50  # rows `--format table` shows when no --limit is given


def register(app: typer.Typer) -> None:
    app.command("query")(query)


@boundary
def query(
    name: Annotated[str | None, typer.Argument(help="View name (see --list).", show_default=False)] = None,
    run: Annotated[
        list[str] | None, typer.Option("--run", "-r", help="Run to include (repeat); default: every run.")
    ] = None,
    bin_: Annotated[
        str | None, typer.Option("--bin", help="Bin or window width, e.g. 10ms, 100us, 1s (bare number: s).")
    ] = None,
    from_: Annotated[
        str | None, typer.Option("--from", help="Window start after the run's first packet, e.g. 90s.")
    ] = None,
    to: Annotated[
        str | None, typer.Option("--to", help="Window end after the run's first packet, e.g. 120s.")
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", "-p", help="Other view parameter as KEY=VALUE (repeat), e.g. src=W1."),
    ] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=0, help="At most N rows.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the views with their purpose.")] = False,
    data: DataDir = None,
) -> None:
    """Run a named analysis view (flow_matrix, link_util, …) with parameters."""
    from tracecore import query as q

    if list_:
        kind = None
        for row in q.view_listing():
            if row.kind != kind:
                kind = row.kind
                typer.echo(f"{kind}s:")
            typer.echo(f"  {row.name:<18} {row.purpose}  ({', '.join(row.params) or 'no parameters'})")
        return
    if name is None:
        raise UsageError("give a view name, or --list to see them")
    from tracecore import views

    views.view_sql(name)  # an unknown name fails before the dataset is opened
    params = _params(name, param or [], bin_, from_, to)
    from tracecore.ingest import open_catalog

    con = open_catalog(data if data is not None else default_data_dir(), read_only=True)
    try:
        table = q.run_view(con, name, runs=run or None, params=params)
    finally:
        con.close()
    emit(table, fmt.value, out, limit)


def _params(name: str, pairs: list[str], bin_: str | None, from_: str | None, to: str | None) -> dict:
    """KEY=VALUE pairs plus the shorthand options, as the view's parameter names."""
    from tracecore import query as q

    declared = {p.name for p in q.view_params(name)}
    params: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param takes KEY=VALUE, got {pair!r}")
        params[key.strip()] = value.strip()
    if bin_ is not None:
        width = next((k for k in ("bin_ns", "window_ns") if k in declared), None)
        if width is None:
            raise UsageError(f"view {name} has no bin width; its parameters: {_offered(name)}")
        params[width] = q.parse_duration_ns(bin_)
    for key, value in (("from_ns", from_), ("to_ns", to)):
        if value is not None:
            if key not in declared:
                raise UsageError(f"view {name} takes no time window; its parameters: {_offered(name)}")
            params[key] = q.parse_duration_ns(value)
    return params


def _offered(name: str) -> str:
    from tracecore import query as q

    return ", ".join(p.name for p in q.view_params(name) if p.name != "runs") or "none"


def emit(table, fmt: str, out: Path | None, limit: int | None) -> None:
    """Print or write a result; shared by `query` and `sql`."""
    from tracecore import query as q

    if limit is not None:
        table = table.slice(0, limit)
    shown = limit if limit is not None else TABLE_ROWS
    text = q.write_result(table, fmt, out, limit_rows=shown)
    if text is not None:
        typer.echo(text, nl=False)
    elif out is not None:
        typer.echo(f"wrote {table.num_rows} rows to {out}", err=True)
