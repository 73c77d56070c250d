"""`tracecore query NAME`: run one named analysis view over the dataset; `--list` shows them all.

Thin: parse options, call `tracecore.query`, print through `cli.output`. `--run` selects runs; `--bin`,
`--from`, `--to` and `--param k=v` become the view's macro parameters (`tracecore.query.request_params`).
"""

from __future__ import annotations

from typing import Annotated

import typer
from tracecore.cli.common import boundary
from tracecore.cli.options import Dataset, FormatOpt, Limit, Out, Runs
from tracecore.cli.output import Format, emit

from tracecore.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("query")(query)


@boundary
def query(
    name: Annotated[str | None, typer.Argument(help="View name (see --list).", show_default=False)] = None,
    run: Runs = None,
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
    fmt: FormatOpt = Format.table,
    out: Out = None,
    limit: Limit = None,
    list_: Annotated[bool, typer.Option("--list", help="List the views with their purpose.")] = False,
    data: Dataset = None,
) -> None:
    """Run a named analysis view (flow_matrix, link_util, …) with parameters."""
    from tracecore.query import query_dataset, request_params, view_listing

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
    params = request_params(name, param or [], bin_, from_, to)  # an unknown view fails before the dataset
    emit(query_dataset(data, name, runs=run, params=params), fmt, out, limit)
