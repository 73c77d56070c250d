"""What a user may ask of a figure beyond its runs: data choices (bin, window, links, clock, CI method)
and presentation (title, paper reference, size, theme), one `FigureOptions` for the CLI, notebooks
and the report.

Why two kinds: data choices change the views a figure runs, so only a figure that declares one
(`uses`) takes it, and asking another figure for it is refused; presentation applies to every
chart after it is built (`present`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracecore.errors import UsageError
from tracecore.figures.style import theme_config

if TYPE_CHECKING:
    import altair as alt

LAYOUTS = ("facet", "by-source", "overlay")  # link figures: a panel per link, per sender, or one panel
CLOCKS = ("relative", "utc")  # seconds since the run's first packet, or UTC wall-clock time
CI_METHODS = ("t", "normal", "bootstrap")

# data option → the FigureOptions fields it covers and the CLI flag that sets it
DATA_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "bin": (("bin_ns",), "--bin"),
    "window": (("from_ns", "to_ns"), "--from/--to"),
    "links": (("links", "top", "layout"), "--links/--top/--layout"),
    "clock": (("clock",), "--clock"),
    "ci": (("ci",), "--ci"),
}

MAX_PANEL_PX = 10_000  # a panel's --width/--height: a 10,000 px panel already outgrows any page


@dataclass(frozen=True)
class FigureOptions:
    """Options of one figure; the defaults draw what the report draws."""

    bin_ns: int | None = None  # bin (or CI window) width, ns; None: the figure's own choice
    from_ns: int | None = None  # window start, ns after each run's first packet
    to_ns: int | None = None  # window end (exclusive), ns after each run's first packet
    links: tuple[str, ...] = ()  # directed links to draw, as "W1→W2" (also W1->W2, W1-W2)
    top: int | None = None  # only the k busiest links
    layout: str = "facet"  # one of LAYOUTS
    clock: str = "relative"  # one of CLOCKS
    ci: str = "t"  # confidence interval method, one of CI_METHODS
    title: str | None = None  # replaces the figure's title
    paper_refs: bool = False  # add the paper's figure or table number to the title
    width: int | None = None  # px of one panel, at most MAX_PANEL_PX (facets: each panel)
    height: int | None = None
    theme: str | None = None  # "tracecore" (default) or one of vl-convert's Vega themes

    def __post_init__(self) -> None:
        for value, allowed, flag in (
            (self.layout, LAYOUTS, "--layout"),
            (self.clock, CLOCKS, "--clock"),
            (self.ci, CI_METHODS, "--ci"),
        ):
            if value not in allowed:
                raise UsageError(f"{flag} takes one of {', '.join(allowed)}, not {value!r}")
        for name in ("width", "height", "top", "bin_ns"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"{name} must be positive, not {value}")
        for name in ("width", "height"):
            value = getattr(self, name)
            if value is not None and value > MAX_PANEL_PX:
                raise UsageError(f"--{name} is a panel's size in px, at most {MAX_PANEL_PX}, not {value}")
        theme_config(self.theme)  # an unknown theme is refused before any work

    def asked(self) -> set[str]:
        """The data options set to something other than their default."""
        default = FigureOptions()
        return {
            option
            for option, (fields, _) in DATA_OPTIONS.items()
            if any(getattr(self, f) != getattr(default, f) for f in fields)
        }

    def view_params(self, declared: list[str] | tuple[str, ...]) -> dict[str, Any]:
        """The view parameters these options set, among those a view `declared`."""
        params: dict[str, Any] = {}
        width = next((k for k in ("bin_ns", "window_ns") if k in declared), None)
        if self.bin_ns is not None and width is not None:
            params[width] = self.bin_ns
        for key in ("from_ns", "to_ns"):
            if getattr(self, key) is not None and key in declared:
                params[key] = getattr(self, key)
        if "method" in declared:
            params["method"] = self.ci
        return params


def uses(*options: str) -> Callable[[Callable], Callable]:
    """Mark a figure's build function as taking `FigureOptions` as third argument, honouring `options`."""
    unknown = set(options) - set(DATA_OPTIONS)
    if unknown:
        raise ValueError(f"unknown figure options {sorted(unknown)}")

    def mark(fn: Callable) -> Callable:
        fn.options = frozenset(options)  # type: ignore[attr-defined]
        return fn

    return mark


def check_asked(name: str, accepted: frozenset[str], options: FigureOptions) -> None:
    """Refuse a data option the figure does not take, naming the ones it does."""
    extra = sorted(options.asked() - accepted)
    if extra:
        flags = ", ".join(DATA_OPTIONS[o][1] for o in extra)
        takes = ", ".join(DATA_OPTIONS[o][1] for o in sorted(accepted)) or "none of them"
        raise UsageError(f"figure {name} takes no {flags}; its data options: {takes}")


def present(chart: alt.TopLevelMixin, ref: str, options: FigureOptions) -> alt.TopLevelMixin:
    """The chart with the title, paper reference, panel size and theme that `options` ask for."""
    chart = chart.copy(deep=False)
    title = chart.title
    if not _undefined(title):
        text = title if isinstance(title, str) else title.text
        if options.title is not None:
            text = options.title
        elif options.paper_refs and ref:
            text = f"{text} ({ref})"
        if isinstance(title, str):
            chart.title = text
        else:
            title = title.copy(deep=False)
            title.text = text
            chart.title = title
    if options.width is not None or options.height is not None:
        _resize(chart, options.width, options.height)
    chart.config = theme_config(options.theme)
    return chart


def _undefined(value: Any) -> bool:
    from altair.utils.schemapi import Undefined

    return value is Undefined


def _resize(chart: Any, width: int | None, height: int | None) -> None:
    """Set the size of every unit panel: a facet's inner chart, each part of a concatenation."""
    for key in ("vconcat", "hconcat", "concat"):
        parts = getattr(chart, key, None)
        if isinstance(parts, list):
            for part in parts:
                _resize(part, width, height)
            return
    import altair as alt

    if isinstance(chart, alt.FacetChart):
        _resize(chart.spec, width, height)
        return
    if width is not None:
        chart.width = width
    if height is not None:
        chart.height = height
