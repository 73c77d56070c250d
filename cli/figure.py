"""`tracecore figure NAME`: one of the paper's figures (or tracecore's own) as PNG, SVG, HTML or JSON.

Thin: build the chart over the dataset (`tracecore.figures.build`), write it with `figures.render.save`.
Rendering is offline (vl-convert); altair and duckdb are imported inside the command so
`tracecore --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.checks import check_file
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import Dataset, Runs
from tracecore.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("figure", cls=PlainUsage)(figure)


@boundary
def figure(
    name: Annotated[str | None, typer.Argument(help="Figure name (see --list).", show_default=False)] = None,
    run: Runs = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file: .png, .svg, .html or .json.", show_default="NAME.png"),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the figures with what they show.")] = False,
    data: Dataset = None,
) -> None:
    """Draw a figure of the paper (Figs. 3–10, Tables I–II) or of tracecore from the dataset.

    \b
    Examples:
      $ tracecore figure --list
      $ tracecore figure flow_matrix --out fig4.svg
    """
    from tracecore import figures

    if list_:
        for fig in (figures.get(n) for n in figures.figure_names()):
            typer.echo(f"{fig.name:<18} {fig.ref or '—':<9} {fig.purpose}")
        return
    if name is None:
        raise UsageError("give a figure name, or --list to see them")
    figures.get(name)  # an unknown name fails before the dataset is opened
    from tracecore.cli.destination import save_chart
    from tracecore.figures.render import check_suffix
    from tracecore.query import with_dataset

    target = check_suffix(out if out is not None else Path(f"{name}.png"))
    check_file(target)
    chart = with_dataset(data, lambda con: figures.build(con, name, run))
    typer.echo(f"wrote {save_chart(chart, target)}", err=True)
