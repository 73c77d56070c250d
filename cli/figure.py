"""`tracecore figure NAME`: one of the paper's figures (or tracecore's own) as PNG, SVG, PDF, HTML or
JSON, and its data as CSV or Parquet.

Thin: parse the options into `tracecore.figures.options.FigureOptions`, build the chart over the
dataset (`tracecore.figures.build`), write it with `figures.render.save` (and `save_data`).
Rendering is offline (vl-convert); altair and duckdb are imported inside the command so
`tracecore --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.checks import check_file
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import Bin, Dataset, From, Runs, To
from tracecore.errors import UsageError

FIGURE_OWN = "the figure's own"


def register(app: typer.Typer) -> None:
    app.command("figure", cls=PlainUsage)(figure)


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v.strip() for item in values or [] for v in item.split(",") if v.strip())


@boundary
def figure(
    name: Annotated[str | None, typer.Argument(help="Figure name (see --list).", show_default=False)] = None,
    run: Runs = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Output file: .png, .svg, .pdf, .html or .json.", show_default="NAME.png"
        ),
    ] = None,
    data_out: Annotated[
        Path | None,
        typer.Option(
            "--data-out", help="Also write the figure's data: .csv or .parquet.", show_default="none"
        ),
    ] = None,
    bin_: Bin = None,
    from_: From = None,
    to: To = None,
    links: Annotated[
        list[str] | None,
        typer.Option(
            "--links", help="Links to draw, e.g. W1→W2,W2-W1 (link_util).", show_default="every link"
        ),
    ] = None,
    top: Annotated[
        int | None, typer.Option("--top", help="Only the K busiest links (link_util).", show_default="all")
    ] = None,
    layout: Annotated[
        str,
        typer.Option(
            "--layout", help="link_util: a panel per link (facet), per sender (by-source), or overlay."
        ),
    ] = "facet",
    clock: Annotated[
        str, typer.Option("--clock", help="Time axis: relative (s since first packet) or utc (wall clock).")
    ] = "relative",
    ci: Annotated[
        str, typer.Option("--ci", help="Confidence interval: t (Student's), normal (the paper's), bootstrap.")
    ] = "t",
    title: Annotated[
        str | None, typer.Option("--title", help="Title to use.", show_default=FIGURE_OWN)
    ] = None,
    paper_refs: Annotated[
        bool, typer.Option("--paper-refs", help="Add the paper's figure number to the title (Fig. 7).")
    ] = False,
    width: Annotated[
        int | None, typer.Option("--width", help="Panel width, px (≤ 10,000).", show_default=FIGURE_OWN)
    ] = None,
    height: Annotated[
        int | None, typer.Option("--height", help="Panel height, px (≤ 10,000).", show_default=FIGURE_OWN)
    ] = None,
    scale: Annotated[
        float | None,
        typer.Option(
            "--scale", help="A PNG's pixel scale (≤ 20; others: the chart's size).", show_default="2"
        ),
    ] = None,
    theme: Annotated[
        str | None,
        typer.Option(
            "--theme",
            help="tracecore, or a Vega theme: dark, ggplot2, fivethirtyeight, …",
            show_default="tracecore",
        ),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the figures with what they show.")] = False,
    data: Dataset = None,
) -> None:
    """Draw a figure of the paper (Figs. 3–10, Tables I–II) or of tracecore from the dataset.

    \b
    Examples:
      $ tracecore figure --list
      $ tracecore figure flow_matrix --out fig4.svg
      $ tracecore figure link_util --top 4 --from 3s --out links.pdf --data-out links.csv
      $ tracecore figure throughput_ci --ci bootstrap --paper-refs --out table1.png
    """
    from tracecore import figures

    if list_:
        for fig in (figures.get(n) for n in figures.figure_names()):
            typer.echo(f"{fig.name:<18} {fig.ref or '—':<9} {fig.purpose}")
        return
    if name is None:
        raise UsageError("give a figure name, or --list to see them")
    figures.get(name)  # an unknown name fails before the dataset is opened
    from tracecore.cli.destination import save_chart, writing
    from tracecore.figures.options import FigureOptions
    from tracecore.figures.render import DATA_FORMATS, check_scale_for, check_suffix, save_data
    from tracecore.query import parse_duration_ns, with_dataset

    options = FigureOptions(
        bin_ns=None if bin_ is None else parse_duration_ns(bin_),
        from_ns=None if from_ is None else parse_duration_ns(from_),
        to_ns=None if to is None else parse_duration_ns(to),
        links=_split(links),
        top=top,
        layout=layout,
        clock=clock,
        ci=ci,
        title=title,
        paper_refs=paper_refs,
        width=width,
        height=height,
        theme=theme,
    )
    target = check_suffix(out if out is not None else Path(f"{name}.png"))
    check_scale_for(target, scale)
    check_file(target)
    if data_out is not None:
        check_file(check_suffix(data_out, DATA_FORMATS))
    chart = with_dataset(data, lambda con: figures.build(con, name, run, options))
    typer.echo(f"wrote {save_chart(chart, target, scale=scale)}", err=True)
    if data_out is not None:
        with writing(data_out):
            typer.echo(f"wrote {save_data(chart, data_out)}", err=True)
