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
from tracecore.cli.options import Dataset, FormatOpt, Limit, Out
from tracecore.cli.output import Format, emit


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
    from tracecore.query import sql_dataset

    check_destination(fmt, out, limit)
    emit(sql_dataset(data, statement, unsafe=unsafe), fmt, out, limit)
