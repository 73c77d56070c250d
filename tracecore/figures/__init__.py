"""The paper's figures (Figs. 3–10, Tables I–II) and tracecore's own, as Altair charts built from the views.

Two layers, so a notebook user can take either: the builders in `traffic`, `timeseries`,
`training` and `tables` turn a view's result (a pyarrow Table) into a chart; `build(con, name,
runs)` runs the views a figure needs with sensible windows and bins and calls its builder.
`render` writes PNG/SVG/HTML/JSON offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import altair as alt
    import duckdb

    from tracecore.figures.registry import Figure


def _registry() -> dict[str, Figure]:
    from tracecore.figures import registry

    return {f.name: f for f in registry.FIGURES}


def figure_names() -> list[str]:
    return list(_registry())


def get(name: str) -> Figure:
    figures = _registry()
    if name not in figures:
        raise UsageError(f"unknown figure {name!r}; figures: {', '.join(figures)}")
    return figures[name]


def build(con: duckdb.DuckDBPyConnection, name: str, runs: list[str] | None = None) -> alt.TopLevelMixin:
    """The chart of figure `name` for `runs` (None = every run); unknown names or runs raise UsageError."""
    from tracecore.query import check_runs

    figure = get(name)
    return figure.build(con, check_runs(con, runs))
