"""`tracecore figure NAME`: one of the paper's figures (or tracecore's own) as PNG, SVG, HTML or JSON.

Thin: open the dataset, call `tracecore.figures.build`, write with `tracecore.figures.render`.
Rendering is offline (vl-convert); altair and duckdb are imported inside the command so
`tracecore --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from tracecore.cli.common import DataDir, boundary, default_data_dir

from tracecore.errors import UsageError


def register(app: typer.Typer) -> None:
    app.command("figure")(figure)


@boundary
def figure(
    name: Annotated[str | None, typer.Argument(help="Figure name (see --list).", show_default=False)] = None,
    run: Annotated[
        list[str] | None, typer.Option("--run", "-r", help="Run to include (repeat); default: every run.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output file: .png, .svg, .html or .json [default: NAME.png]."),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the figures with what they show.")] = False,
    data: DataDir = None,
) -> None:
    """Draw a figure of the paper (Figs. 3–10, Tables I–II) or of tracecore from the dataset."""
    from tracecore import figures

    if list_:
        for fig in (figures.get(n) for n in figures.figure_names()):
            typer.echo(f"{fig.name:<18} {fig.ref or '—':<9} {fig.purpose}")
        return
    if name is None:
        raise UsageError("give a figure name, or --list to see them")
    figures.get(name)  # an unknown name fails before the dataset is opened
    target = out if out is not None else Path(f"{name}.png")
    from tracecore.figures import render

    if target.suffix.lower().lstrip(".") not in render.FORMATS:
        raise UsageError(f"cannot write {target.name}: use one of .{', .'.join(render.FORMATS)}")
    from tracecore.ingest import open_catalog

    con = open_catalog(data if data is not None else default_data_dir(), read_only=True)
    try:
        chart = figures.build(con, name, run or None)
    finally:
        con.close()
    render.save(chart, target)
    typer.echo(f"wrote {target}", err=True)
