"""`tracecore query NAME`: run one named analysis view over the dataset; `--list` shows them all.

Thin: parse options, call `tracecore.query`, print through `cli.output`. `--run` selects runs; `--bin`,
`--from`, `--to` and `--param k=v` become the view's macro parameters (`tracecore.query.request_params`);
`--scheduler` runs a view split by run on a Dask cluster (`tracecore.query.query_dataset`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated

import typer

from tracecore.cli.checks import check_destination
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.csv_out import emit_csv_lines
from tracecore.cli.options import Bin, Dataset, FormatOpt, From, Limit, Out, Runs, Scheduler, To
from tracecore.cli.output import Format, emit
from tracecore.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

VIEWS = "the view's own (see --describe)"
STARTS_BUSY = ("link_util", "congestion")  # zero-filled per-link bins: the table starts at the first busy one


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
            help="Other view parameter as KEY=VALUE (repeat), e.g. src=W1.",
            show_default=VIEWS,
        ),
    ] = None,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    limit: Limit = None,
    list_: Annotated[bool, typer.Option("--list", help="List the views with their purpose.")] = False,
    describe: Annotated[
        bool, typer.Option("--describe", help="Show the view's parameters and columns.")
    ] = False,
    data: Dataset = None,
    scheduler: Scheduler = None,
) -> None:
    """Run a named analysis view (flow_matrix, link_util, …) with parameters.

    \b
    Examples:
      $ tracecore query --list
      $ tracecore query link_util --describe
      $ tracecore query link_util --bin 100ms --from 1s --to 2s --limit 5
      $ tracecore query link_util_ci -p src=W1 -p dst=W4 --format csv
      $ tracecore query flow_matrix --format json --out flows.json

    With --scheduler, a view split by run (--describe says so) runs per run on the Dask cluster's
    workers, which must see the dataset at the same path; the others run here.
    """
    from tracecore.query import describe_view, query_dataset, query_dataset_csv, request_params, view_listing

    if list_:
        kind = None
        for row in view_listing():
            if row.kind != kind:
                kind = row.kind
                typer.echo(f"{kind}s:")
            typer.echo(f"  {row.name:<18} {row.purpose}  ({', '.join(row.params) or 'no parameters'})")
        return
    if name is None:
        raise UsageError("give a view name, or --list to see them")
    if describe:
        view = describe_view(name)
        defaults = ", ".join(f"{p.name} := {p.default}" for p in view.params) or "none"
        typer.echo(f"{view.name} ({view.kind}): {view.purpose}")
        typer.echo(f"On a Dask cluster (--scheduler): {view.on_cluster}")
        typer.echo(
            "\n".join(
                [f"Parameters ({defaults}):", *view.parameters] if view.params else ["Parameters: none"]
            )
        )
        typer.echo("\n".join(["Columns:", *view.columns]))
        return
    check_destination(fmt, out, limit)
    params = request_params(name, param or [], bin_, from_, to)  # an unknown view fails before the dataset
    if fmt is Format.csv and scheduler is None:  # lines formatted by DuckDB where the columns allow
        write = functools.partial(emit_csv_lines, out=out, limit=limit)
        table = query_dataset_csv(data, name, write, runs=run, params=params)
        if table is None:
            return
    else:
        table = query_dataset(data, name, runs=run, params=params, scheduler=scheduler)
    if fmt is Format.table and name in STARTS_BUSY and from_ is None and "from_ns" not in params:
        table, skipped = skip_idle_start(table)
        if skipped:
            typer.echo(
                f"{skipped} empty bins before each link's first busy one left out (--from 0s shows them)",
                err=True,
            )
    emit(table, fmt, out, limit)


def skip_idle_start(table: pa.Table) -> tuple[pa.Table, int]:
    """`table` (rows ordered by run and link, then time) without each link's bins before its first
    with bytes: the set-up seconds would fill the screen with zeros. Returns the rows left out."""
    import numpy as np
    import pyarrow as pa

    if table.num_rows == 0:
        return table, 0
    keys = [c for c in ("run", "src_worker", "dst_worker") if c in table.column_names]
    series = list(zip(*(table.column(k).to_pylist() for k in keys), strict=True))
    busy = np.asarray(table.column("bytes").to_numpy(zero_copy_only=False)) > 0
    parts, start = [], 0
    for i in range(1, table.num_rows + 1):
        if i == table.num_rows or series[i] != series[start]:
            first = np.flatnonzero(busy[start:i])
            if first.size:
                parts.append(table.slice(start + first[0], i - start - first[0]))
            start = i
    kept = pa.concat_tables(parts) if parts else table.slice(0, 0)  # slices: no pyarrow.compute import
    return kept, table.num_rows - kept.num_rows
