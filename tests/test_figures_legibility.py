"""Figures a person can read: each one rendered (PNG offline, SVG in headless Chromium) and checked
for what makes a chart illegible: tick labels on top of each other, series without a legend, text
cut off at the image's edge. On the real sample, one run and both runs."""

from __future__ import annotations

import html
import json
import math
import re
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tests.test_figures import decode_png
from tests.test_report import chromium, console_messages
from tests.test_views_support import SAMPLE
from tracecore import figures
from tracecore.figures import render
from tracecore.figures.style import FONT

FONT_DIR = Path("/usr/share/fonts/truetype/liberation")  # Debian's fonts-liberation (make test installs it)
GAP = 1.0  # px two texts keep apart: Vega lays out with its own measure, a few px short on long labels
REPORT_CHART_WIDTH = 1150  # px a chart may take in the report at a 1280 px window (page and section padding)


@cache
def _advances(bold: bool) -> tuple[dict[int, float], float]:
    """Each character's advance width in em in Liberation Sans (what Vega and the report draw with), from
    the font's cmap (format 4) and hmtx tables; and the width of a character the font lacks."""
    path = FONT_DIR / f"LiberationSans-{'Bold' if bold else 'Regular'}.ttf"
    if not path.is_file():
        pytest.fail(f"{path} missing: install fonts-liberation (make test does)")
    data = path.read_bytes()

    def u16(at: int) -> int:
        return struct.unpack(">H", data[at : at + 2])[0]

    def s16(at: int) -> int:
        return struct.unpack(">h", data[at : at + 2])[0]

    tables = {
        data[12 + 16 * i : 16 + 16 * i].decode(): struct.unpack(">I", data[20 + 16 * i : 24 + 16 * i])[0]
        for i in range(u16(4))
    }
    units, n_metrics = u16(tables["head"] + 18), u16(tables["hhea"] + 34)
    widths = [u16(tables["hmtx"] + 4 * i) for i in range(n_metrics)]
    cmap = tables["cmap"]
    sub = next(
        cmap + struct.unpack(">I", data[cmap + 8 + 8 * i : cmap + 12 + 8 * i])[0]
        for i in range(u16(cmap + 2))
        if (u16(cmap + 4 + 8 * i), u16(cmap + 6 + 8 * i)) == (3, 1)  # Windows, Unicode BMP
    )
    assert u16(sub) == 4, "cmap subtable format"
    segments = u16(sub + 6) // 2
    ends, starts = sub + 14, sub + 16 + 2 * segments
    deltas, offsets = starts + 2 * segments, starts + 4 * segments
    em = {}
    for k in range(segments):
        first, delta, offset = u16(starts + 2 * k), s16(deltas + 2 * k), u16(offsets + 2 * k)
        for code in range(first, min(u16(ends + 2 * k), 0xFFFE) + 1):
            if offset == 0:
                glyph = (code + delta) & 0xFFFF
            else:
                glyph = u16(offsets + 2 * k + offset + 2 * (code - first))
                glyph = (glyph + delta) & 0xFFFF if glyph else 0
            em[code] = widths[min(glyph, n_metrics - 1)] / units
    return em, widths[0] / units


def text_width(text: str, size: float, bold: bool = False) -> float:
    """The drawn width of `text` at `size` px (advance widths; no kerning, which only narrows)."""
    em, missing = _advances(bold)
    return size * sum(em.get(ord(ch), missing) for ch in text)


def text_box(item: dict, x0: float, y0: float) -> tuple[tuple[float, float, float, float], bool]:
    """The box (x1, y1, x2, y2) a scenegraph text item covers in the picture, placed as Vega places it
    (vega-scenegraph's text bounds: anchor, dx/dy, align, baseline, rotation about the anchor), and
    whether its text is longer than its `limit` (Vega cuts it with an ellipsis)."""
    size = item.get("fontSize", 11)
    bold = str(item.get("fontWeight", "normal")) in ("bold", "600", "700", "800", "900")
    text = item["text"]
    lines = [str(t) for t in text] if isinstance(text, list) else [str(text)]
    line_height = item.get("lineHeight") or size
    width = max(text_width(t, size, bold) for t in lines)
    limit = item.get("limit") or 0
    cut = bool(limit) and width > limit + 0.5
    width = min(width, limit) if limit else width
    height = size + line_height * (len(lines) - 1)
    x, y = x0 + item.get("x", 0), y0 + item.get("y", 0)
    offset = {
        "top": 0.79 * size,
        "middle": 0.30 * size,
        "bottom": -0.21 * size,
        "line-top": 0.29 * size + 0.5 * line_height,
        "line-bottom": 0.29 * size - 0.5 * line_height,
    }.get(item.get("baseline", "alphabetic"), 0)
    dx = (item.get("dx") or 0) - {"center": width / 2, "right": width}.get(item.get("align", "left"), 0)
    dy = (item.get("dy") or 0) + round(offset) - round(0.8 * size)
    corners = [(x + dx + u, y + dy + v) for u in (0, width) for v in (0, height)]
    if item.get("angle"):
        cos, sin = math.cos(math.radians(item["angle"])), math.sin(math.radians(item["angle"]))
        corners = [(x + (u - x) * cos - (v - y) * sin, y + (u - x) * sin + (v - y) * cos) for u, v in corners]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return (min(xs), min(ys), max(xs), max(ys)), cut


def scene_texts(scene: dict) -> list[dict]:
    """Every text drawn in a vl-convert scenegraph: {"role", "text", "box", "cut"}, boxes in the
    picture's pixels (group offsets added up from the view's origin); hidden ones left out."""
    found: list[dict] = []

    def walk(mark: dict, x0: float, y0: float) -> None:
        for item in mark.get("items", []):
            if mark.get("marktype") == "group":
                for child in item.get("items", []):
                    walk(child, x0 + item.get("x", 0), y0 + item.get("y", 0))
            elif mark.get("marktype") == "text" and item.get("text") not in (None, "", []):
                if item.get("opacity", 1) == 0 or item.get("fillOpacity", 1) == 0:
                    continue  # labelOverlap hid it
                box, cut = text_box(item, x0, y0)
                found.append({"role": mark.get("role"), "text": item["text"], "box": box, "cut": cut})

    walk(scene["scenegraph"], *scene["origin"])
    return found


def scene_findings(scene: dict) -> list[str]:
    """What makes a drawn figure illegible: texts closer than GAP px (axis titles on labels, labels on
    labels, value labels on each other), texts past the picture's edge, texts Vega cut at their limit
    (a clipped run name reads like another)."""
    texts, bad = scene_texts(scene), []
    width, height = scene["width"], scene["height"]
    for t in texts:
        x1, y1, x2, y2 = t["box"]
        if t["cut"]:
            bad.append(f"cut at its limit: {t['role']} {t['text']!r}")
        if x1 < -1 or y1 < -1 or x2 > width + 1 or y2 > height + 1:
            bad.append(f"past the edge: {t['role']} {t['text']!r}")
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            (ax1, ay1, ax2, ay2), (bx1, by1, bx2, by2) = a["box"], b["box"]
            if ax1 < bx2 + GAP and bx1 < ax2 + GAP and ay1 < by2 + GAP and by1 < ay2 + GAP:
                bad.append(f"overlap: {a['role']} {a['text']!r} / {b['role']} {b['text']!r}")
    return bad


def scene(spec: dict) -> dict:
    """The scenegraph vl-convert lays `spec` out into (the one its PNG, SVG and PDF are drawn from)."""
    import vl_convert as vlc

    return vlc.vegalite_to_scenegraph(spec, vl_version=render.vl_version(spec))


# every figure but rdma_ops (no RoCE here) for one run and for both runs; comparisons need both
KEYS = [
    f"{name}/{tag}"
    for tag in ("one", "both")
    for name in figures.figure_names()
    if name != "rdma_ops" and not (tag == "one" and name.startswith("runs_"))
]


@pytest.fixture(scope="module")
def charts(con) -> dict[str, object]:
    runs = {"one": [SAMPLE], "both": None}
    return {key: figures.build(con, key.split("/")[0], runs[key.split("/")[1]]) for key in KEYS}


def test_every_figure_asks_vega_to_drop_overlapping_tick_labels(charts) -> None:
    for key, chart in charts.items():
        config = render.spec(chart)["config"]
        assert config["axis"]["labelOverlap"] == "greedy", key
        assert config["font"] == FONT, key


@pytest.mark.parametrize("key", KEYS)
def test_rendered_figure_is_legible(charts, key) -> None:
    """Drawn offline: ink, no text on another or past the edge or cut, a legend for several series,
    and narrow enough for the report's page."""
    chart = charts[key]
    spec = render.spec(chart)
    png = decode_png(render.to_png(chart, scale=1))
    rgb = png[..., :3].astype(float)
    assert rgb.var() > 100, f"{key}: blank image"
    assert (np.abs(rgb - 255).sum(axis=2) > 60).mean() > 0.01, f"{key}: almost no ink"
    drawn = scene(spec)
    assert scene_findings(drawn) == [], key
    assert drawn["width"] <= REPORT_CHART_WIDTH, key
    series = _series(spec)
    legend_labels = sum(1 for t in scene_texts(drawn) if t["role"] == "legend-label")
    if series > 1:
        assert legend_labels >= min(series, 2), f"{key}: {series} series without a legend"


def _series(spec: dict) -> int:
    """How many values the chart's colour channel tells apart (0 when colour is a quantity or absent)."""
    text = json.dumps(spec)
    fields = set(re.findall(r'"color": \{[^{}]*"field": "(\w+)"[^{}]*"type": "nominal"', text))
    fields |= set(re.findall(r'"color": \{[^{}]*"type": "nominal"[^{}]*"field": "(\w+)"', text))
    rows = render.data_rows(spec)
    return max((len({r.get(f) for r in rows if f in r}) for f in fields), default=0)


def svg_findings(svgs: dict[str, str], tmp_path: Path) -> dict[str, list[str]]:
    """Each SVG drawn by Chromium: the texts that run past the picture's edge ("cut: …") and the
    shown tick labels of an axis that overlap ("overlap: …"), measured with the browser's fonts."""
    parts = [f'<div data-key="{key}">{svg}</div>' for key, svg in svgs.items()]
    probe = """<script>
      const out = {};
      for (const box of document.querySelectorAll("div[data-key]")) {
        const svg = box.querySelector("svg"), frame = svg.getBoundingClientRect(), bad = [];
        for (const t of svg.querySelectorAll("text")) {
          const r = t.getBoundingClientRect();
          const out = r.left < frame.left - 1 || r.right > frame.right + 1 ||
            r.top < frame.top - 1 || r.bottom > frame.bottom + 1;
          if (r.width && out) bad.push("cut: " + t.textContent);
        }
        for (const g of svg.querySelectorAll("g.role-axis-label")) {
          const rs = [...g.querySelectorAll("text")]
            .filter((t) => t.getAttribute("opacity") !== "0" && t.textContent.trim() !== "")
            .map((t) => [t.textContent, t.getBoundingClientRect()]);
          for (let i = 0; i < rs.length; i++) for (let j = i + 1; j < rs.length; j++) {
            const [a, ra] = rs[i], [b, rb] = rs[j];
            const across = ra.left < rb.right - 1 && rb.left < ra.right - 1;
            const down = ra.top < rb.bottom - 1 && rb.top < ra.bottom - 1;
            if (across && down) bad.push("overlap: " + a + " / " + b);
          }
        }
        out[box.dataset.key] = bad;
      }
      document.body.dataset.result = JSON.stringify(out);
    </script>"""
    page = tmp_path / "svgs.html"
    # the charset said: without it Chromium guesses the file's encoding and once read `·` as `Â·`
    head = '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
    page.write_text(f"{head}<body>{''.join(parts)}{probe}</body></html>", encoding="utf-8")
    dom = chromium(page, tmp_path, "--window-size=2400,1200", "--dump-dom")
    assert console_messages(dom.stderr) == []
    return json.loads(html.unescape(re.search(r'data-result="([^"]*)"', dom.stdout).group(1)))


@pytest.mark.slow
def test_svgs_are_not_clipped_in_chromium(charts, tmp_path) -> None:
    """Every exported SVG: each text inside the picture, no overlapping tick labels, in Chromium."""
    result = svg_findings({key: render.to_svg(chart) for key, chart in charts.items()}, tmp_path)
    assert set(result) == set(charts)
    assert {k: v for k, v in result.items() if v} == {}


def test_the_clip_check_can_fail(con, tmp_path) -> None:
    """The same SVG with its text set in a wider font than Vega measured (DejaVu Sans, what a generic
    sans-serif was in Chromium here) is seen cut at its edge, as the issue's "mmunication pattern" was
    (here the legend's title, the rightmost text)."""
    svg = render.to_svg(figures.build(con, "flow_matrix", [SAMPLE]))
    wider = re.sub(r'font-family="[^"]*"', 'font-family="DejaVu Sans"', svg)
    assert 'font-family="Liberation Sans' in svg
    found = svg_findings({"measured": svg, "wider": wider}, tmp_path)
    assert found["measured"] == []
    assert "cut: Tx. volume[MB]" in found["wider"]  # its two lines, as the SVG's text content


def test_the_overlap_check_can_fail() -> None:
    """Issue 34's Fig. 10: a y-axis title beside labels longer than Vega measured ran into them; the
    scenegraph check sees it (and, with the title left out as Fig. 10 now does, sees nothing), as it
    sees two value labels on one spot, a label cut at its limit and one past the picture's edge."""
    import altair as alt

    from tracecore.figures.options import FigureOptions, present

    label = "0 % · torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
    # Liberation Sans has Arial's advances: 1139 of 2048 units a digit, 569 a space, 1706 an "M"
    assert [text_width(ch, 2048) for ch in "0 M"] == [1139, 569, 1706]
    bars = alt.Chart(alt.Data(values=[{"label": label, "x": 1.0}])).mark_bar()

    def findings(chart) -> list[str]:
        return scene_findings(scene(render.spec(present(chart, "", FigureOptions()))))

    def bar(title) -> alt.Chart:
        return bars.encode(y=alt.Y("label:N", title=title, axis=alt.Axis(labelLimit=320)), x=alt.X("x:Q"))

    assert findings(bar("Packet loss · run")) == [
        f"overlap: axis-label {label!r} / axis-title 'Packet loss · run'"
    ]
    assert findings(bar(None)) == []
    two = alt.Chart(alt.Data(values=[{"t": "1.00", "x": 1}, {"t": "2.00", "x": 1.01}])).mark_text()
    assert findings(two.encode(x=alt.X("x:Q"), text=alt.Text("t:N"))) == [
        "overlap: mark '1.00' / mark '2.00'"
    ]
    cut = bars.encode(y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=100)), x=alt.X("x:Q"))
    assert findings(cut) == [f"cut at its limit: axis-label {label!r}"]
    unpadded = bar(None).properties(width=100, autosize=alt.AutoSizeParams(type="none"))  # no room for labels
    assert f"past the edge: axis-label {label!r}" in findings(unpadded)
