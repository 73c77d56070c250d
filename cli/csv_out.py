"""CSV output: Arrow's CSV writer for any result, or lines DuckDB already formatted as it would.

Why apart from `output.py`: both CSV paths must give the same bytes (tests/test_csv_text.py), so they
sit together; the lines' path is what lets `tracecore query --format csv` skip pyarrow and numpy."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tracecore.cli.destination import sink, tell_written

if TYPE_CHECKING:
    import pyarrow as pa


def write_csv(schema: pa.Schema, batches: Iterable[pa.RecordBatch], text: TextIO) -> None:
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
        text.write(buf.getvalue().decode("utf-8"))


def emit_csv_lines(
    names: list[str], chunks: Iterator[list[str]], out: Path | None, limit: int | None
) -> None:
    """`emit` as CSV of a result DuckDB already wrote as lines (tracecore.query.query_dataset_csv)."""
    from tracecore.csv_text import header

    rows = 0
    with sink(out, escaped=True) as text:
        text.write(header(names))
        for chunk in chunks:
            lines = chunk if limit is None else chunk[: limit - rows]
            if lines:
                text.write("\n".join(lines) + "\n")
            rows += len(lines)
            if limit is not None and rows >= limit:
                break
    tell_written(rows, out)
