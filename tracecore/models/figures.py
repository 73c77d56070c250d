"""Writing Altair charts to files, offline.

Charts render through vl-convert (bundled Vega), so saving a PNG or SVG needs no browser and no
network. The format comes from the file suffix; anything else is a usage error, not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracecore.errors import UsageError

FIGURE_SUFFIXES = (".png", ".svg", ".html", ".json")


def save_chart(chart: Any, path: Path) -> Path:
    """Write `chart` to `path` as PNG, SVG, HTML or the Vega-Lite JSON spec, by suffix."""
    suffix = path.suffix.lower()
    if suffix not in FIGURE_SUFFIXES:
        raise UsageError(f"{path}: figure format must be one of {', '.join(FIGURE_SUFFIXES)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".json":
        path.write_text(chart.to_json())
        return path
    import vl_convert as vlc

    spec = chart.to_json()
    if suffix == ".png":
        path.write_bytes(vlc.vegalite_to_png(spec, scale=2))
    elif suffix == ".svg":
        path.write_text(vlc.vegalite_to_svg(spec))
    else:
        path.write_text(vlc.vegalite_to_html(spec, bundle=True))
    return path
