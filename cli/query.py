"""`tracecore query NAME`: run one named analysis view over the dataset; `--list` shows them all.

Thin: parse options, call `tracecore.query`, print through `cli.output`. `--run` selects runs; `--bin`,
`--from`, `--to` and `--param k=v` become the view's macro parameters (`tracecore.query.request_params`);
`--scheduler` runs a view split by run on a Dask cluster (`tracecore.query.query_dataset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tracecore.cli.checks import check_destination
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.csv_out import emit_csv_lines
from tracecore.cli.fit import terminal_width
from tracecore.cli.options import (
    TIMEOUT,
    Bin,
    Columns,
    Dataset,
    FormatOpt,
    From,
    Limit,
    Out,
    Runs,
    Scheduler,
    Timeout,
    To,
    Wide,
)
from tracecore.cli.output import Format, emit
from tracecore.cli.view_text import description, listing, say_why_empty
from tracecore.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Iterator

VIEWS = "the view's own (see --describe)"


def register(app: typer.Typer) -> None:
    app.command("query", cls=PlainUsage)(query)


@boundary
def query(
    name: Annotated[str | None, typer.Argument(help="View name (see --list).", show_default=False)] = None,
    run: Runs = None,
    bin_: Bin = None,
    from_: From = None,
    to: To = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="Other view parameter as KEY=VALUE (repeat), e.g. src=W1; --describe gives each range.",
            show_default=VIEWS,
        ),
    ] = None,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    limit: Limit = None,
    columns: Columns = None,
    wide: Wide = False,
    list_: Annotated[bool, typer.Option("--list", help="List the views with their purpose.")] = False,
    describe: Annotated[
        bool, typer.Option("--describe", help="Show the view's parameters and columns.")
    ] = False,
    data: Dataset = None,
    scheduler: Scheduler = None,
    timeout: Timeout = TIMEOUT,
) -> None:
    """Run a named analysis view (flow_matrix, link_util, …) with parameters.

    \b
    Examples:
      $ tracecore query --list
      $ tracecore query link_util --describe
      $ tracecore query link_util --bin 100ms --from 1s --to 2s --limit 5
      $ tracecore query tcp_health --columns run,src_worker,dst_worker,retransmissions
      $ tracecore query link_util_ci -p src=W1 -p dst=W4 --format csv
      $ tracecore query flow_matrix --format json --out flows.json

    A table shows the answer first, in ms, MB and UTC time (csv, json, parquet: raw units); an empty
    one says on stderr what the runs lack. With --scheduler, a view split by run (--describe says so)
    runs per run on the Dask cluster's workers, which must see the dataset at the same path.
    """
    from tracecore.columns import STARTS_BUSY, skip_idle_start, view_layout
    from tracecore.query import (
        describe_view,
        query_dataset,
        query_dataset_csv,
        request_params,
        timeout_seconds,
        view_listing,
    )

    if list_:
        typer.echo(listing(view_listing(), terminal_width()), nl=False)
        return
    if name is None:
        raise UsageError("give a view name, or --list to see them")
    if describe:
        typer.echo(description(describe_view(name)))
        return
    check_destination(fmt, out, limit)
    seconds = timeout_seconds(timeout)
    params = request_params(name, param or [], bin_, from_, to)  # an unknown view fails before the dataset
    picked = [c.strip() for c in columns.split(",")] if columns is not None else None
    if fmt is Format.csv and scheduler is None and picked is None:  # lines DuckDB formatted, if it can
        lines: list[int] = []

        def write(names: list[str], chunks: Iterator[list[str]]) -> None:
            emit_csv_lines(names, (lines.append(len(c)) or c for c in chunks), out=out, limit=limit)

        table = query_dataset_csv(data, name, write, runs=run, params=params, timeout_s=seconds)
        if table is None:
            if not any(lines):
                say_why_empty(data, name, run)
            return
    else:
        table = query_dataset(data, name, runs=run, params=params, scheduler=scheduler, timeout_s=seconds)
    if fmt is Format.table and name in STARTS_BUSY and from_ is None and "from_ns" not in params:
        table, skipped = skip_idle_start(table)
        if skipped:
            typer.echo(
                f"{skipped} empty bins before each link's first busy one left out (--from 0s shows them)",
                err=True,
            )
    emit(table, fmt, out, limit, layout=view_layout(name), columns=picked, wide=wide, what=name)
    if table.num_rows == 0:
        say_why_empty(data, name, run)
