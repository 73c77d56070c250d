"""Figures a person can read: each one rendered (PNG offline, SVG in headless Chromium) and checked
for what makes a chart illegible: tick labels on top of each other, series without a legend, text
cut off at the image's edge. On the real sample, one run and both runs."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.test_figures import decode_png
from tests.test_report import chromium, console_messages
from tests.test_views_support import SAMPLE
from tracecore import figures
from tracecore.figures import render
from tracecore.figures.style import FONT

# advance widths of Liberation Sans (= Arial) in em, a little rounded up: digits and most lower case
# 0.556, narrow marks 0.278, capitals 0.667, the rest 0.6; the Chromium test below measures for real
NARROW, WIDE = set(".,:;!|'ilIjtf ()[]"), set("mwMW")


def text_width(text: str, size: float) -> float:
    em = 0.0
    for ch in text:
        if ch in NARROW:
            em += 0.278
        elif ch in WIDE:
            em += 0.833
        elif ch.isdigit() or ch.islower():
            em += 0.556
        elif ch.isupper():
            em += 0.667
        else:
            em += 0.6
    return em * size


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


def _walk(node, found: list, role: str | None = None) -> None:
    """(axis group, its label items) and every legend's label items, from a Vega scenegraph."""
    if isinstance(node, dict):
        if node.get("role") == "axis-label" and node.get("marktype") == "text":
            found.append(("axis", node.get("items", [])))
        elif node.get("role") == "legend-label":
            found.append(("legend", node.get("items", [])))
        for value in node.values():
            if isinstance(value, dict | list):
                _walk(value, found, role)
    elif isinstance(node, list):
        for value in node:
            _walk(value, found, role)


def _extent(item: dict) -> tuple[float, float, float, float]:
    """The box an unrotated or rotated label covers, from its anchor, size and alignment."""
    size = item.get("fontSize", 11)
    width, height = text_width(item["text"], size), size
    x, y = item.get("x", 0), item.get("y", 0)
    left = {"left": x, "center": x - width / 2, "right": x - width}[item.get("align", "center")]
    top = {"top": y, "middle": y - height / 2, "bottom": y - height, "alphabetic": y - height}[
        item.get("baseline", "alphabetic")
    ]
    if item.get("angle", 0) % 180:  # rotated labels: overlap along the other axis
        return top, left, top + height, left + width
    return left, top, left + width, top + height


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def test_every_figure_asks_vega_to_drop_overlapping_tick_labels(charts) -> None:
    for key, chart in charts.items():
        config = render.spec(chart)["config"]
        assert config["axis"]["labelOverlap"] == "greedy", key
        assert config["font"] == FONT, key


@pytest.mark.parametrize("key", KEYS)
def test_rendered_figure_is_legible(charts, key) -> None:
    import vl_convert as vlc

    chart = charts[key]
    spec = render.spec(chart)
    png = decode_png(render.to_png(chart, scale=1))
    rgb = png[..., :3].astype(float)
    assert rgb.var() > 100, f"{key}: blank image"
    assert (np.abs(rgb - 255).sum(axis=2) > 60).mean() > 0.01, f"{key}: almost no ink"
    found: list = []
    _walk(vlc.vegalite_to_scenegraph(spec, vl_version=render.vl_version(spec)), found)
    for kind, items in found:
        if kind != "axis":
            continue
        shown = [i for i in items if i.get("opacity", 1) != 0 and i.get("text") not in (None, "")]
        boxes = [_extent(i) for i in shown]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                assert not _overlap(boxes[i], boxes[j]), (
                    f"{key}: {shown[i]['text']!r} on {shown[j]['text']!r}"
                )
    series = _series(spec)
    legend_labels = sum(len(items) for kind, items in found if kind == "legend")
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
    sans-serif was in Chromium here) is seen cut at its edge, as the issue's "mmunication pattern"."""
    svg = render.to_svg(figures.build(con, "flow_matrix", [SAMPLE]))
    wider = re.sub(r'font-family="[^"]*"', 'font-family="DejaVu Sans"', svg)
    assert 'font-family="Liberation Sans' in svg
    found = svg_findings({"measured": svg, "wider": wider}, tmp_path)
    assert found["measured"] == []
    assert "cut: Communication pattern: volume per directed worker pair" in found["wider"]


def test_the_overlap_check_can_fail() -> None:
    """Two labels drawn at the same place are caught; side by side they are not."""
    a = {"text": "0.025", "x": 10, "y": 0, "fontSize": 11, "align": "center", "baseline": "top"}
    assert _overlap(_extent(a), _extent({**a, "x": 14}))
    assert not _overlap(_extent(a), _extent({**a, "x": 60}))
