"""How every figure looks: font, palettes, the default theme, short run labels and number formats.

Why one module: a figure goes into someone's paper, so its font must be one whose metrics match what
Vega measured when it laid the figure out (else a browser clips titles of an exported SVG), its
categories need a categorical palette, and run names must be short enough to read, the same in
every chart and table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

# vl-convert measures and draws text with the Liberation Sans it bundles; Arial, Helvetica and Arimo
# share its metrics, so a browser that draws an exported SVG with any of them lays it out the same way
FONT = "Liberation Sans, Arimo, Arial, Helvetica, sans-serif"

# categorical: ten hues that stay apart (no light/dark pairs); quantities keep sequential schemes
CATEGORICAL = "tableau10"
CATEGORY_COLORS = (
    "#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b",
    "#eeca3b", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac",
)  # fmt: skip
DASHES = ([1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3])  # a second channel when hues run out

THEME: dict[str, Any] = {
    "font": FONT,
    "title": {"fontSize": 14, "anchor": "start", "subtitleFontSize": 11, "subtitleColor": "#4a4a4a"},
    "axis": {
        "labelFontSize": 11,
        "titleFontSize": 12,
        "titleFontWeight": "normal",
        "labelOverlap": "greedy",  # Vega drops a tick label that would overlap its neighbour
        "gridColor": "#e6e6e6",
    },
    "legend": {"labelFontSize": 11, "titleFontSize": 12, "titleFontWeight": "normal", "labelLimit": 260},
    "header": {"labelFontSize": 12, "titleFontSize": 12},
    "view": {"continuousWidth": 300, "continuousHeight": 300, "stroke": "#bbb"},
}
THEMES = ("tracecore",)  # vl-convert's Vega themes (dark, ggplot2, …) are offered beside it


def theme_config(name: str | None) -> dict[str, Any]:
    """The Vega-Lite config of theme `name` (None: tracecore's), always with the measured font."""
    from tracecore.errors import UsageError

    if name in (None, "tracecore"):
        return THEME
    import vl_convert as vlc

    themes = vlc.get_themes()
    if name not in themes:
        raise UsageError(f"unknown theme {name!r}; themes: {', '.join([*THEMES, *sorted(themes)])}")
    return {**themes[name], "font": FONT}


CONVENTION_FIELDS = 7  # framework-model-optimizer-batchsize-backend-loss-topology
BATCH_FIELD = 3  # a bare number there reads as "batch N"


def short_runs(runs: Iterable[str]) -> dict[str, str]:
    """Each run's label: the `-`-separated parts of its name that differ between `runs`.

    Names of the naming convention (seven fields, then anything a run adds, such as `-w4`) keep the
    fields that differ, the added parts as one more field (`cnn3m`, `mlp25m`, `cnn3m-w4`); other
    names drop the parts they all start and end with. One run keeps its full name, and labels that
    would be empty or collide fall back to the full names.
    """
    names = list(dict.fromkeys(runs))
    if len(names) < 2:
        return {n: n for n in names}
    parts = [n.split("-") for n in names]
    for labels in (_differing_fields(names, parts), _trimmed(names, parts)):
        if labels and all(labels.values()) and len(set(labels.values())) == len(names):
            return labels
    return {n: n for n in names}


def _differing_fields(names: list[str], parts: list[list[str]]) -> dict[str, str] | None:
    """Labels of the fields that differ, when the names line up field by field (None otherwise)."""
    convention = all(len(p) >= CONVENTION_FIELDS for p in parts)  # perhaps with parts added
    if convention:
        fields = [[*p[:CONVENTION_FIELDS], "-".join(p[CONVENTION_FIELDS:])] for p in parts]
    elif len({len(p) for p in parts}) == 1:
        fields = parts
    else:
        return None
    keep = [i for i in range(len(fields[0])) if len({f[i] for f in fields}) > 1]
    if convention and any(not any(f[i] for i in keep) for f in fields):  # only added parts differ
        keep = [CONVENTION_FIELDS - 1, *keep]  # `ring`, `ring-w4`

    def field(i: int, text: str) -> str:
        return f"batch {text}" if convention and i == BATCH_FIELD and text.isdigit() else text

    return {n: "-".join(field(i, f[i]) for i in keep if f[i]) for n, f in zip(names, fields, strict=True)}


def _trimmed(names: list[str], parts: list[list[str]]) -> dict[str, str]:
    """Labels without the parts every name starts and ends with."""
    head = _common(parts)
    tail = _common([p[::-1] for p in parts])
    return {
        n: "-".join(p[head : len(p) - tail] if len(p) > head + tail else p)
        for n, p in zip(names, parts, strict=True)
    }


def _common(parts: list[list[str]]) -> int:
    count = 0
    for column in zip(*parts, strict=False):
        if len(set(column)) > 1:
            break
        count += 1
    return count


def runs_caption(runs: Iterable[str], limit: int = 3) -> str:
    """'run: NAME' or 'runs: A, B, C' (or 'N runs') for a subtitle: full names where they fit."""
    names = list(dict.fromkeys(runs))
    if len(names) == 1:
        return f"run: {names[0]}"
    if len(names) <= limit:
        return "runs: " + ", ".join(names)
    return f"{len(names)} runs (full names in the tooltips)"


def number(value: Any) -> str:
    """One format for every number a person reads: thousands separators, no exponents.

    Integers and values of 10 000 or more: whole with separators (1,234,567); others to 4 significant
    digits in plain decimals (0.05407, 1.228, 0.00006031); None as an em dash.
    """
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 1e4:
        return f"{value:,.0f}"
    decimals = max(0, min(12, 3 - math.floor(math.log10(abs(value)))))
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def d3_format(max_abs: float) -> str:
    """The d3 format string that writes numbers up to `max_abs` as `number` would (axis and labels)."""
    if max_abs >= 1e4:
        return ",.0f"
    if max_abs <= 0:
        return ".4~g"
    return f",.{max(0, min(12, 3 - math.floor(math.log10(max_abs))))}~f"


def worker_colors(workers: list[str]) -> dict[str, Any]:
    """A Vega-Lite scale giving each worker its own hue, the same in every figure (W1 blue, W2 orange, …)."""
    return {
        "domain": workers,
        "range": [CATEGORY_COLORS[i % len(CATEGORY_COLORS)] for i in range(len(workers))],
    }


def pair_axes(workers: list[str]) -> dict[str, Any]:
    """A worker-pair heatmap's axes: destination across, source down, workers in numeric order."""
    import altair as alt

    return {
        "x": alt.X("dst_worker:N", title="Destination", sort=workers, axis=alt.Axis(labelAngle=0)),
        "y": alt.Y("src_worker:N", title="Source", sort=workers),
    }


_WORKER = re.compile(r"^W(\d+)$")


def worker_key(label: str | None) -> tuple[int, str]:
    """W2 before W10: worker labels in numeric order, other names after them."""
    match = _WORKER.match(label or "")
    return (int(match.group(1)), "") if match else (1 << 30, label or "")
