"""`tracecore sql "SELECT …"`: ad hoc SQL over the dataset's catalog, with every view available.

The catalog is opened read-only and the connection locked down (one SELECT or EXPLAIN, only the
dataset's part files readable), so a query cannot change the dataset; `--unsafe` lifts that.
Output formats are those of `tracecore query`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from tracecore.cli.common import DataDir, boundary, default_data_dir
from tracecore.cli.query import Format, emit


def register(app: typer.Typer) -> None:
    app.command("sql")(sql)


@boundary
def sql(
    statement: Annotated[
        str, typer.Argument(help="SQL over packets, runs, workers, train_log and the views.")
    ],
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=0, help="At most N rows.")] = None,
    data: DataDir = None,
    unsafe: Annotated[
        bool,
        typer.Option(
            "--unsafe",
            help="DuckDB's full power (COPY, ATTACH, SET, other files, extensions): for your own data only.",
        ),
    ] = False,
) -> None:
    """Run SQL over the catalog, e.g. "SELECT * FROM link_util(bin_ns := 1000000) LIMIT 5"."""
    from tracecore import query as q
    from tracecore.ingest import open_catalog

    con = open_catalog(data if data is not None else default_data_dir(), read_only=True, unsafe=unsafe)
    try:
        table = q.run_sql(con, statement, unsafe=unsafe)
    finally:
        con.close()
    emit(table, fmt.value, out, limit)
