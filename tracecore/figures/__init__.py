"""The paper's figures (Figs. 3–10, Tables I–II) and tracecore's own, as Altair charts built from the views.

Two layers, so a notebook user can take either: the builders in `traffic`, `timeseries`,
`training` and `tables` turn a view's result (a pyarrow Table) into a chart; `build(con, name,
runs)` runs the views a figure needs with sensible windows and bins and calls its builder.
`options.FigureOptions` carries what a user asks beyond the runs (bins, window, links, title, size,
theme); `render` writes PNG/SVG/PDF/HTML/JSON offline and the drawn data as CSV/Parquet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import altair as alt
    import duckdb

    from tracecore.figures.options import FigureOptions
    from tracecore.figures.registry import Figure


def _registry() -> dict[str, Figure]:
    from tracecore.figures import compare, registry

    return {f.name: f for f in [*registry.FIGURES, *compare.FIGURES]}


def figure_names() -> list[str]:
    return list(_registry())


def get(name: str) -> Figure:
    figures = _registry()
    if name not in figures:
        raise UsageError(f"unknown figure {name!r}; figures: {', '.join(figures)}")
    return figures[name]


def build(
    con: duckdb.DuckDBPyConnection,
    name: str,
    runs: list[str] | None = None,
    options: FigureOptions | None = None,
) -> alt.TopLevelMixin:
    """The chart of figure `name` for `runs` (None = every run) as `options` ask (None: the defaults).

    Unknown names or runs, and a data option the figure does not take, raise UsageError.
    """
    from tracecore.figures.options import FigureOptions, check_asked, present
    from tracecore.query import check_runs

    figure = get(name)
    options = options or FigureOptions()
    accepted = getattr(figure.build, "options", None)  # set by options.uses: it takes FigureOptions
    check_asked(name, accepted or frozenset(), options)
    runs = check_runs(con, runs)
    chart = figure.build(con, runs) if accepted is None else figure.build(con, runs, options)
    return present(chart, figure.ref, options)
