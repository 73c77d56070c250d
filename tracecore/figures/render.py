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
import math
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
    A spec that passed before is not checked again (`checked_specs`).
    """
    import jsonschema
    from altair.utils.schemapi import SchemaValidationError

    from tracecore.figures import checked_specs

    full = chart.to_dict(validate=False)
    cut = _first_rows(full)
    key = checked_specs.key(type(chart), cut)
    if not checked_specs.checked(key):
        try:
            type(chart).validate(cut)
        except jsonschema.ValidationError as err:
            raise SchemaValidationError(chart, err) from None  # the message Altair's own check gives
        checked_specs.remember(key)
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


# vl-convert aborts the process (a Rust panic) on a C0 control character in any text it draws; JSON
# writes each as \u00XX, so the rendered text gets the character's picture instead (U+241B for ESC).
_CONTROL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u00(0[0-8bcef]|1[0-9a-f])", re.IGNORECASE)
# V8 (inside vl-convert) reserves a 64 GiB address-space cage at start and aborts when it cannot.
_V8_CAGE_BYTES = 65 << 30
MAX_PIXELS = 200_000_000  # a PNG's width × height × scale² at most (about 800 MB of pixels)
MAX_SCALE = 20.0


def _render_text(chart: alt.TopLevelMixin) -> tuple[str, str | None]:
    """The spec as JSON text vl-convert can draw whatever the data holds, and its Vega-Lite version."""
    s = spec(chart)
    text = json.dumps(s, separators=(",", ":"))
    text = _CONTROL_ESCAPE.sub(lambda m: f"{m.group(1)}\\u24{m.group(2)}", text)
    return text, vl_version(s)


def check_renderer_room(work: str = "drawing PNG, SVG or PDF", instead: str = "write .html or .json") -> None:
    """Refuse in one line where the address-space limit (`ulimit -v`) leaves V8 no room: it would abort."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return
    in_use = _address_space_in_use()
    if soft < in_use + _V8_CAGE_BYTES:
        raise UsageError(
            f"{work} needs {(in_use + _V8_CAGE_BYTES) / 2**30:.0f} GiB of address space "
            f"(the renderer's V8 reserves 64 GiB, most never used) and the limit (ulimit -v) is "
            f"{soft / 2**30:.1f} GiB: raise it, or {instead}"
        )


def _address_space_in_use() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 4 << 30  # no /proc: a generous guess for a Python process with DuckDB loaded


def to_svg(chart: alt.TopLevelMixin) -> str:
    import vl_convert as vlc

    check_renderer_room()
    text, version = _render_text(chart)
    return vlc.vegalite_to_svg(text, vl_version=version)


def to_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """The chart drawn as its SVG, then rasterised at `scale` when the pixels fit `MAX_PIXELS`."""
    import vl_convert as vlc

    check_scale(scale)
    svg = to_svg(chart)
    width, height = svg_size(svg)
    pixels = width * height * scale * scale
    if pixels > MAX_PIXELS:
        raise UsageError(
            f"a PNG of {width:.0f}×{height:.0f} px at scale {scale:g} would hold {pixels / 1e6:.0f} "
            f"million pixels (at most {MAX_PIXELS / 1e6:.0f} million): lower --scale, --width or "
            "--height, or write .svg or .pdf"
        )
    return vlc.svg_to_png(svg, scale=scale)


def check_scale_for(path: Path, scale: float | None) -> None:
    """`scale` only for a PNG (a PDF or SVG is drawn at the chart's size), and within `check_scale`."""
    kind = path.suffix.lower().lstrip(".")
    if scale is not None and kind != "png":
        raise UsageError(
            f"--scale sets a PNG's pixels; a {kind.upper()} is drawn at the chart's size (--width, --height)"
        )
    if scale is not None:
        check_scale(scale)


def check_scale(scale: float) -> None:
    """A PNG's pixel scale: finite, positive, at most `MAX_SCALE`."""
    if not (math.isfinite(scale) and 0 < scale <= MAX_SCALE):
        raise UsageError(f"--scale must be a number above 0 and at most {MAX_SCALE:g}, not {scale:g}")


_SVG_SIZE = re.compile(rb'<svg[^>]*?\bwidth="([\d.]+)"[^>]*?\bheight="([\d.]+)"')


def svg_size(svg: str) -> tuple[float, float]:
    """The width and height, px, on an SVG's root element."""
    match = _SVG_SIZE.search(svg[:2000].encode())
    if not match:
        raise UsageError("the renderer's SVG has no width and height")
    return float(match.group(1)), float(match.group(2))


def to_pdf(chart: alt.TopLevelMixin) -> bytes:
    """A vector PDF with its fonts embedded (vl-convert draws it from the same scene as the SVG)."""
    import vl_convert as vlc

    check_renderer_room()
    text, version = _render_text(chart)
    return vlc.vegalite_to_pdf(text, vl_version=version)


def to_html(chart: alt.TopLevelMixin, title: str | None = None) -> str:
    """One chart as a standalone page with Vega, Vega-Lite and vega-embed inlined (`vega_bundle`), its
    spec written so no text in it can end the script (as the report writes its charts)."""
    import html

    s = spec(chart)
    name = title or _title_text(s.get("title")) or "tracecore figure"
    return (
        '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="UTF-8">\n'
        f"<title>{html.escape(name)}</title>\n"
        f"<script>{script_safe(vega_bundle())}</script>\n</head>\n<body>\n"
        '<div id="vega-chart"></div>\n'
        f"<script>\nvegaEmbed('#vega-chart', {script_json(s)}, {{renderer: 'svg'}})\n"
        "  .then(() => { document.body.dataset.chartDrawn = 'true'; })\n"
        "  .catch((err) => { document.body.dataset.chartFailed = String(err); console.error(err); });\n"
        "</script>\n</body>\n</html>\n"
    )


def _title_text(title: Any) -> str:
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return title if isinstance(title, str) else ""


def script_safe(text: str) -> str:
    """Text that cannot end the <script> element it is placed in."""
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def script_json(value: Any) -> str:
    """`value` as JSON that can sit inside a <script> element: no `</` or `<!--` in it survives."""
    return (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--")
    )


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

    check_renderer_room("making the JavaScript of an HTML page (once, then kept)", "write .json")
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
    folder; `scale` multiplies the pixels of a PNG (default 2), and is refused for other formats."""
    kind = check_suffix(path).suffix.lower().lstrip(".")
    path.parent.mkdir(parents=True, exist_ok=True)
    check_scale_for(path, scale)
    if kind == "png":
        path.write_bytes(to_png(chart, scale=2.0 if scale is None else scale))
    elif kind == "pdf":
        path.write_bytes(to_pdf(chart))
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
