"""Every result the CLI prints or writes: one `Format`, one terminal table, CSV/JSON/Parquet writers.

Why one module: every command prints the same kinds of table, so they share one renderer and one
NaN/decimal rule (`tracecore.json_values`); pyarrow and rich load only when used."""

from __future__ import annotations

import json
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from tracecore.cli.checks import check_destination, check_file
from tracecore.cli.csv_out import write_csv
from tracecore.cli.destination import save_chart, sink, tell_written, writing
from tracecore.cli.fit import terminal_width
from tracecore.cli.table import render, render_rows
from tracecore.errors import UsageError
from tracecore.json_values import json_rows

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.columns import Layout
    from tracecore.models.tasks import ModelResult
    from tracecore.query import Rows

TABLE_ROWS = 50  # rows `--format table` shows when no --limit is given


Format = StrEnum("Format", ["table", "csv", "json", "parquet"])  # values are the names: --format csv


def emit(
    table: pa.Table,
    fmt: Format,
    out: Path | None,
    limit: int | None = None,
    *,
    layout: Layout | None = None,
    columns: list[str] | None = None,
    wide: bool = False,
    what: str = "the result",
) -> None:
    """Print or write one result (`query`, `sql`); `table` shows TABLE_ROWS rows unless `limit` says.

    `layout`: the view's (`tracecore.columns.view_layout`), how its table reads; `columns`: only these,
    in this order, in every format (an unknown name is a UsageError naming `what`'s columns); `wide`:
    the table whole, not fitted to the terminal."""
    check_destination(fmt, out, limit)
    table = table if limit is None else table.slice(0, limit)
    if columns:
        from tracecore.columns import pick

        positions = pick(table.schema.names, columns, what)
        if fmt is not Format.table:  # the table picks them itself, after the run labels are made
            table = table.select(positions)
    if fmt is Format.table:
        width = None if wide else terminal_width(out)
        shown = limit if limit is not None else TABLE_ROWS
        with sink(out) as text:
            text.write(render(table, shown, width, layout, columns))
    else:
        write_batches(table.schema, table.to_batches(), fmt, out)
    tell_written(table.num_rows, out)


def emit_rows(rows: Rows, out: Path | None, *, wide: bool = False) -> None:
    """`emit` of a small result already fetched as rows (`tracecore sql`): the same table, no Arrow."""
    width = None if wide else terminal_width(out)
    with sink(out) as text:
        text.write(render_rows(rows.names, rows.numeric, rows.rows, rows.total, None, width))
    tell_written(rows.total, out)


def emit_model(result: ModelResult, fmt: Format, out: Path | None, figure: Path | None) -> None:
    """A model's titled tables (all as tables, or JSON by title; CSV/Parquet the first), note and chart."""
    check_destination(fmt, out)
    check_file(figure)
    tables = [(title, frame.to_arrow()) for title, frame in result.tables]
    if fmt is Format.table:
        width = terminal_width(out)
        with sink(out) as text:
            text.write("".join(f"{title}\n{render(table, None, width)}\n" for title, table in tables))
            text.write(f"{result.note}\n" if result.note else "")
    elif fmt is Format.json:
        payload = {title: json_rows(table.to_pylist()) for title, table in tables}
        with sink(out) as text:
            text.write(json.dumps(payload, indent=1, default=str, ensure_ascii=False, allow_nan=False) + "\n")
    else:
        write_batches(tables[0][1].schema, tables[0][1].to_batches(), fmt, out)
    if figure is not None:
        typer.echo(f"figure written to {save_chart(result.chart(), figure)}", err=True)


def write_batches(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch], fmt: Format, out: Path | None
) -> None:
    """Stream batches as CSV or JSON (to `out` or stdout) or Parquet (to `out`), complete, in flat memory."""
    check_destination(fmt, out)
    check_columns(schema, fmt)
    if fmt is Format.parquet:
        import pyarrow.parquet as pq

        with writing(out):
            writer = pq.ParquetWriter(out, schema)
        with writing(out), writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    write_text = {Format.csv: write_csv, Format.json: _write_json}[fmt]  # `table` is each command's own
    with sink(out, escaped=fmt is Format.csv) as text:  # JSON escapes control characters itself
        write_text(schema, batches, text)


def check_columns(schema: pa.Schema, fmt: Format) -> None:
    """Refuse, before anything is written, columns the format cannot hold: JSON rows need distinct
    names, and Parquet has no interval type (Arrow's month-day-nano)."""
    import pyarrow as pa

    names = schema.names
    twice = next((name for name in names if names.count(name) > 1), None)
    if fmt is Format.json and twice is not None:
        raise UsageError(
            f"the result has {names.count(twice)} columns named {twice!r}; JSON rows need distinct names:"
            " name them apart (… AS other_name) or use --format csv"
        )
    interval = next((f.name for f in schema if pa.types.is_interval(f.type)), None)
    if fmt is Format.parquet and interval is not None:
        raise UsageError(
            f"column {interval!r} is an INTERVAL, which Parquet cannot store: cast it to VARCHAR (or a"
            " number of microseconds) in the query, or use --format csv"
        )


def _write_json(schema: pa.Schema, batches: Iterable[pa.RecordBatch], sink: TextIO) -> None:
    """A JSON array of row objects, written batch by batch."""
    sep = "["
    for batch in batches:
        for row in json_rows(batch.to_pylist()):
            sink.write(sep + json.dumps(row, default=str, ensure_ascii=False, allow_nan=False))
            sep = ", "
    sink.write("[]\n" if sep == "[" else "]\n")
