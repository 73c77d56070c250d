"""Every result the CLI prints or writes: one `Format`, one terminal table, CSV/JSON/Parquet writers.

Why one module: every command prints the same kinds of table, so they share one renderer and one
NaN/decimal rule (`tracecore.json_values`); pyarrow and rich load only when used."""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import typer

from tracecore.cli.checks import check_destination, check_file
from tracecore.cli.destination import save_chart, sink, writing
from tracecore.cli.fit import fit, terminal_width
from tracecore.json_values import json_rows

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.models.tasks import ModelResult

TABLE_ROWS = 50  # rows `--format table` shows when no --limit is given


Format = StrEnum("Format", ["table", "csv", "json", "parquet"])  # values are the names: --format csv


def emit(table: pa.Table, fmt: Format, out: Path | None, limit: int | None = None) -> None:
    """Print or write one result (`query`, `sql`); `table` shows TABLE_ROWS rows unless `limit` says."""
    check_destination(fmt, out, limit)
    table = table if limit is None else table.slice(0, limit)
    if fmt is Format.table:
        with sink(out) as text:
            text.write(render(table, limit if limit is not None else TABLE_ROWS, terminal_width(out)))
    else:
        write_batches(table.schema, table.to_batches(), fmt, out)
    if out is not None:
        typer.echo(f"wrote {table.num_rows} rows to {out}", err=True)


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
    if fmt is Format.parquet:
        import pyarrow.parquet as pq

        with writing(out):
            writer = pq.ParquetWriter(out, schema)
        with writing(out), writer:
            for batch in batches:
                writer.write_batch(batch)
        return
    write_text = {Format.csv: _write_csv, Format.json: _write_json}[fmt]  # `table` is each command's own
    with sink(out) as text:
        write_text(schema, batches, text)


def _write_csv(schema: pa.Schema, batches: Iterable[pa.RecordBatch], sink: TextIO) -> None:
    """CSV batch by batch (tracecore.json_values.csv_ready), the header even when there are no rows."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from tracecore.json_values import csv_ready, csv_schema

    plain = csv_schema(schema)
    tables = (csv_ready(batch, plain) for batch in batches)
    first = next(tables, None)  # none: the header alone (`plain.empty_table()` would import pandas)
    first = pa.Table.from_batches([], schema=plain) if first is None else first
    for i, table in enumerate(itertools.chain([first], tables)):
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=i == 0))
        sink.write(buf.getvalue().decode("utf-8"))


def _write_json(schema: pa.Schema, batches: Iterable[pa.RecordBatch], sink: TextIO) -> None:
    """A JSON array of row objects, written batch by batch."""
    sep = "["
    for batch in batches:
        for row in json_rows(batch.to_pylist()):
            sink.write(sep + json.dumps(row, default=str, ensure_ascii=False, allow_nan=False))
            sep = ", "
    sink.write("[]\n" if sep == "[" else "]\n")


def render(table: pa.Table, limit_rows: int | None, width: int | None = None) -> str:
    """A table for people: Rich grid, `limit_rows` rows at most with a note on what was left out;
    with a terminal `width`, fitted to it (`cli/fit.py`), else whole."""
    import pyarrow as pa
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tracecore.terminal import safe

    shown = table if limit_rows is None else table.slice(0, limit_rows)
    rows = [[safe(_cell(v)) for v in row.values()] for row in shown.to_pylist()]
    names = [safe(name) for name in table.schema.names]
    widths = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(names)]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    plan = fit(names, widths, [not n for n in numeric], width)  # width None: whole, for pipes and files
    grid = Table(box=SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for k, i in enumerate(plan.shown):
        grid.add_column(Text(names[i]), justify="right" if numeric[i] else "left", **plan.column(k))
    for row in rows:  # Text, safe: values are data (run names, SQL strings), never markup or control codes
        grid.add_row(*(Text(row[i]) for i in plan.shown))
    buf = io.StringIO()
    Console(file=buf, width=plan.console_width(), force_terminal=False, color_system=None).print(grid)
    text = buf.getvalue() + plan.note()
    if shown.num_rows < table.num_rows:
        left = f"{table.num_rows - shown.num_rows} more rows of {table.num_rows}"
        text += f"… {left}; use --limit, --format csv or --out for all\n"
    else:
        text += f"{table.num_rows} row{'s' if table.num_rows != 1 else ''}\n"
    return text


def _cell(value: object) -> str:
    """Floats to 6 decimals as papers print them (0.054068, 111.5), tiny or huge ones to 6 digits."""
    if not isinstance(value, float):
        return "NULL" if value is None else str(value)
    return f"{value:.6f}".rstrip("0").rstrip(".") if 1e-3 <= abs(value) < 1e12 else f"{value:.6g}"
