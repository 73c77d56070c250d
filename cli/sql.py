"""`tracecore sql "SELECT …"`: ad hoc SQL over the dataset's catalog, with every view available.

The catalog is opened read-only and the connection locked down (one SELECT or an EXPLAIN of one,
only the dataset's part files readable), so a query cannot change the dataset; `--unsafe` lifts that.
Output formats are those of `tracecore query`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tracecore.cli.checks import check_destination
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import TIMEOUT, Dataset, FormatOpt, Limit, Out, Timeout, Wide
from tracecore.cli.output import TABLE_ROWS, Format, emit, emit_rows


def register(app: typer.Typer) -> None:
    app.command("sql", cls=PlainUsage)(sql)


@boundary
def sql(
    statement: Annotated[
        str, typer.Argument(help="SQL over packets, runs, workers, train_log and the views.")
    ],
    fmt: FormatOpt = Format.table,
    out: Out = None,
    limit: Limit = None,
    data: Dataset = None,
    timeout: Timeout = TIMEOUT,
    wide: Wide = False,
    unsafe: Annotated[
        bool,
        typer.Option(
            "--unsafe",
            help="DuckDB's full power (COPY, ATTACH, SET, other files, extensions): for your own data only.",
        ),
    ] = False,
) -> None:
    """Run SQL over the catalog, e.g. "SELECT * FROM link_util(bin_ns := 1000000) LIMIT 5".

    \b
    Examples:
      $ tracecore sql "SELECT run, count(*) AS packets FROM packets GROUP BY run"
      $ tracecore sql "SELECT * FROM link_util(bin_ns := 1000000) LIMIT 5" --format csv
    """
    from tracecore.query import Rows, sql_dataset, sql_rows_or_table, timeout_seconds

    check_destination(fmt, out, limit)
    seconds = timeout_seconds(timeout)
    if fmt is not Format.table:
        emit(sql_dataset(data, statement, unsafe=unsafe, timeout_s=seconds), fmt, out, limit)
        return
    # a table shows TABLE_ROWS rows and counts the rest, or --limit rows: small results need no Arrow
    most, first = (TABLE_ROWS, False) if limit is None else (limit, True)
    result = sql_rows_or_table(data, statement, most, first=first, unsafe=unsafe, timeout_s=seconds)
    if isinstance(result, Rows):
        emit_rows(result, out, wide=wide)
    else:
        emit(result, fmt, out, limit, wide=wide)
