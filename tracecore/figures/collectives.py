"""Collectives on the wire: one training step's collectives per rank above each link's load.

The builder takes rows already placed on the step's time axis (ms since the step began): spans (a
rank's collective on the GPU, or the frames of one collective on one link, first to last) and link
load bins. The two panels share the x axis, so a collective's bar sits above the bytes it sent.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from tracecore.figures._data import WIDTH, empty_chart, inline
from tracecore.figures.style import runs_caption

TITLE = "Collectives on the wire: one step's collectives per rank above each link's load"


def timeline_chart(blocks: list[dict[str, Any]]) -> alt.TopLevelMixin:
    """`blocks`: one per run, each {"run", "title", "span_ms", "spans": [...], "load": [...], "bin_ms"}.

    spans: {"lane", "kind" ('collective' | 'wire'), "t0_ms", "t1_ms", "what", "op", "tip"};
    load: {"link", "t_ms", "gbps"}."""
    if not blocks:
        return empty_chart(
            TITLE, "no collectives recorded for the selected runs (profiler traces, NCCL plugins)"
        )
    charts = []
    for block in blocks:
        x = alt.X(
            "t0_ms:Q",
            title=None,
            scale=alt.Scale(domain=[0, block["span_ms"]], nice=False),
        )
        lanes = sorted({s["lane"] for s in block["spans"]}, key=lambda s: (s.endswith("wire"), s))
        spans = (
            alt.Chart(inline(block["spans"]))
            .mark_bar(height={"band": 0.7}, cornerRadius=2)
            .encode(
                x=x,
                x2=alt.X2("t1_ms:Q"),
                y=alt.Y("lane:N", title=None, sort=lanes),
                color=alt.Color("what:N", title="Collective", scale=alt.Scale(scheme="tableau20")),
                opacity=alt.Opacity(
                    "kind:N",
                    sort=["collective", "wire"],  # a sorted field: Vega-Lite warns of an unsorted one
                    scale=alt.Scale(domain=["collective", "wire"], range=[1.0, 0.55]),
                    legend=None,
                ),
                tooltip=[alt.Tooltip("lane:N"), alt.Tooltip("what:N"), alt.Tooltip("tip:N")],
            )
            .properties(width=WIDTH + 160, height=max(60, 22 * len(lanes)), title=block["title"])
        )
        load = (
            alt.Chart(inline(block["load"]))
            .mark_line(strokeWidth=1.2, interpolate="step-after")
            .encode(
                x=alt.X(
                    "t_ms:Q",
                    title="Time since the step began [ms]",
                    scale=alt.Scale(domain=[0, block["span_ms"]], nice=False),
                ),
                y=alt.Y("gbps:Q", title=f"Link load [Gbit/s] ({block['bin_ms']:g} ms bins)"),
                color=alt.Color("link:N", title="Link", scale=alt.Scale(scheme="tableau10")),
                tooltip=[
                    alt.Tooltip("link:N"),
                    alt.Tooltip("t_ms:Q", format=".2f"),
                    alt.Tooltip("gbps:Q", format=".2f"),
                ],
            )
            .properties(width=WIDTH + 160, height=140)
        )
        charts.append(alt.vconcat(spans, load).resolve_scale(x="shared", color="independent"))
    heading = alt.Title(TITLE, subtitle=runs_caption(b["run"] for b in blocks if "run" in b))
    return alt.vconcat(*charts, title=heading).resolve_scale(color="independent")
