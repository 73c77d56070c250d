"""Altair chart → JSON spec, PNG, SVG, PDF or self-contained HTML, all offline (vl-convert, no
network), and the chart's data as CSV or Parquet.

Why vl-convert: it bundles Vega, Vega-Lite and a renderer, so PNG/SVG/PDF come out without a browser
or a CDN, and its JavaScript bundle makes HTML that works from a file:// URL with the network off.
It measures text with the Liberation Sans it bundles, so the figures name that font first
(`style.FONT`): a browser drawing the SVG with it, or with metric-compatible Arial or Helvetica,
lays every title and label out as Vega measured it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecore.cache import cache_dir, store
from tracecore.errors import UsageError

if TYPE_CHECKING:  # charts arrive built; this module needs no altair to check a file name
    import altair as alt

FORMATS = ("png", "svg", "pdf", "html", "json")
DATA_FORMATS = ("csv", "parquet")
_VL_VERSION = re.compile(r"/v(\d+)\.(\d+)")


def spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The Vega-Lite spec, data inline, checked against Vega-Lite's schema with each dataset cut to one row.

    Why cut: the schema takes any rows, and Altair's check of every row cost seconds per report.
    """
    import jsonschema
    from altair.utils.schemapi import SchemaValidationError

    full = chart.to_dict(validate=False)
    try:
        type(chart).validate(_first_rows(full))
    except jsonschema.ValidationError as err:
        raise SchemaValidationError(chart, err) from None  # the message Altair's own check gives
    return full


def _first_rows(node: Any) -> Any:
    """`node` with every inline dataset (`values`) cut to its first row."""
    if isinstance(node, dict):
        return {
            k: v[:1] if k == "values" and isinstance(v, list) else _first_rows(v) for k, v in node.items()
        }
    if isinstance(node, list):
        return [_first_rows(v) for v in node]
    return node


def vl_version(vl_spec: dict[str, Any]) -> str | None:
    """'6.4' from the spec's $schema, so vl-convert compiles it with the Vega-Lite it was written for."""
    match = _VL_VERSION.search(vl_spec.get("$schema", ""))
    return f"{match.group(1)}.{match.group(2)}" if match else None


def to_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    s = spec(chart)
    return vlc.vegalite_to_png(s, vl_version=vl_version(s), scale=scale)


def to_svg(chart: alt.TopLevelMixin) -> str:
    import vl_convert as vlc

    s = spec(chart)
    return vlc.vegalite_to_svg(s, vl_version=vl_version(s))


def to_pdf(chart: alt.TopLevelMixin, scale: float = 1.0) -> bytes:
    """A vector PDF with its fonts embedded (vl-convert draws it from the same scene as the SVG)."""
    import vl_convert as vlc

    s = spec(chart)
    return vlc.vegalite_to_pdf(s, vl_version=vl_version(s), scale=scale)


def to_html(chart: alt.TopLevelMixin) -> str:
    """One chart as a standalone page with Vega, Vega-Lite and vega-embed inlined."""
    import vl_convert as vlc

    s = spec(chart)
    return vlc.vegalite_to_html(s, vl_version=vl_version(s), bundle=True)


def data_rows(vl_spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a chart draws: its main inline dataset, the one with the most rows, with those of the
    same columns in other panels appended (`data_paths`), exactly as the chart holds them."""
    rows: list[dict[str, Any]] = []
    for path in data_paths(vl_spec):
        node: Any = vl_spec
        for key in path:
            node = node[key]
        rows.extend(node)
    return rows


def data_paths(vl_spec: dict[str, Any]) -> list[list[str | int]]:
    """Where in the spec the rows of `data_rows` are: key paths to inline `values` lists (the report's
    CSV download reads the same lists in the browser, so the page holds the data once)."""
    found: list[tuple[list[str | int], list[dict[str, Any]]]] = []
    _datasets(vl_spec, [], found)
    groups: dict[tuple[str, ...], list[tuple[list[str | int], int]]] = {}
    for path, values in found:
        key = tuple(sorted({k for row in values for k in row}))
        groups.setdefault(key, []).append((path, len(values)))
    if not groups:
        return []
    biggest = max(groups.values(), key=lambda paths: sum(n for _, n in paths))
    return [path for path, _ in biggest]


def _datasets(node: Any, path: list[str | int], found: list) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "values" and isinstance(value, list) and value and isinstance(value[0], dict):
                found.append(([*path, key], value))
            elif key == "datasets" and isinstance(value, dict):
                found.extend(
                    ([*path, key, name], v) for name, v in value.items() if isinstance(v, list) and v
                )
            else:
                _datasets(value, [*path, key], found)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _datasets(value, [*path, i], found)


def data_table(chart: alt.TopLevelMixin) -> Any:
    """`data_rows` of the chart as a pyarrow Table, columns in the order they first appear."""
    import pyarrow as pa

    values = data_rows(spec(chart))
    columns = list(dict.fromkeys(k for row in values for k in row))
    return pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in values])


def vega_bundle() -> str:
    """vl-convert's Vega, Vega-Lite and vega-embed JavaScript, kept in the user's cache (`tracecore.cache`).

    Why kept: vl-convert builds the bundle anew in every process (about a second); the cached copy
    carries its SHA-256 on its first line and is used only while that still matches.
    """
    from importlib.metadata import version

    folder = cache_dir()
    path = folder / f"vega-bundle-{version('vl-convert-python')}.js" if folder else None
    if path is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError, ValueError):
            head, bundle = path.read_text(encoding="utf-8").split("\n", 1)
            if head == _bundle_head(bundle):
                return bundle
    import vl_convert as vlc

    bundle = vlc.javascript_bundle()
    if path is not None:
        store(path, lambda partial: partial.write_text(f"{_bundle_head(bundle)}\n{bundle}", encoding="utf-8"))
    return bundle


def _bundle_head(bundle: str) -> str:
    return f"// sha256 {hashlib.sha256(bundle.encode()).hexdigest()}"


def check_suffix(path: Path, formats: tuple[str, ...] = FORMATS) -> Path:
    """`path` when its suffix names a format `save` writes; refused before any work is done otherwise."""
    if path.suffix.lower().lstrip(".") not in formats:
        raise UsageError(f"cannot write {path.name}: use one of .{', .'.join(formats)}")
    return path


def save(chart: alt.TopLevelMixin, path: Path, scale: float | None = None) -> Path:
    """Write the chart in the format its suffix names (.png, .svg, .pdf, .html, .json), creating its
    folder; `scale` multiplies the pixels of a PNG (default 2) or the size of a PDF (default 1)."""
    kind = check_suffix(path).suffix.lower().lstrip(".")
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "png":
        path.write_bytes(to_png(chart, scale=2.0 if scale is None else scale))
    elif kind == "pdf":
        path.write_bytes(to_pdf(chart, scale=1.0 if scale is None else scale))
    elif kind == "svg":
        path.write_text(to_svg(chart), encoding="utf-8")
    elif kind == "html":
        path.write_text(to_html(chart), encoding="utf-8")
    else:
        path.write_text(json.dumps(spec(chart), indent=1) + "\n", encoding="utf-8")
    return path


def save_data(chart: alt.TopLevelMixin, path: Path) -> Path:
    """Write the rows the chart draws (`data_rows`) as .csv or .parquet, creating the folder."""
    kind = check_suffix(path, DATA_FORMATS).suffix.lower().lstrip(".")
    path.parent.mkdir(parents=True, exist_ok=True)
    table = data_table(chart)
    if kind == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    return path
