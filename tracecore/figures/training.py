"""Traffic joined with the training log: Figs. 8 and 10 and bytes per step, as Altair charts."""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import HEIGHT, WIDTH, byte_unit, empty_chart, inline, rows
from tracecore.figures.style import CATEGORICAL, runs_caption, short_runs


def accuracy_vs_data_chart(accuracy_vs_data: pa.Table) -> alt.Chart:
    """Fig. 8: accuracy at each logged step against the data transmitted until then; the accuracy
    axis spans the data (padded), not a fixed 0–1."""
    title = "Accuracy vs. data transmitted"
    data = rows(accuracy_vs_data, ["run", "step", "epoch", "cum_bytes", "accuracy", "loss"])
    data = [r for r in data if r["accuracy"] is not None]
    if not data:
        return empty_chart(title, "no training log for the selected runs")
    unit, scale = byte_unit(max(r["cum_bytes"] for r in data))
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["volume"] = r["cum_bytes"] / scale
        r["label"] = labels[r["run"]]
    lo, hi = min(r["accuracy"] for r in data), max(r["accuracy"] for r in data)
    pad = max((hi - lo) * 0.08, 0.005)
    domain = [max(0.0, lo - pad), min(1.0, hi + pad)]
    several = len(labels) > 1
    return (
        alt.Chart(inline(data))
        .mark_line(point=alt.OverlayMarkDef(size=14))
        .encode(
            x=alt.X("volume:Q", title=f"Data transmitted [{unit}]"),
            y=alt.Y("accuracy:Q", title="Accuracy", scale=alt.Scale(domain=domain, nice=False)),
            color=alt.Color(
                "label:N",
                title="Run",
                scale=alt.Scale(scheme=CATEGORICAL),
                legend=alt.Legend(orient="right", labelLimit=320) if several else None,
            ),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("step:Q"),
                alt.Tooltip("epoch:Q"),
                alt.Tooltip("volume:Q", format=".4g", title=unit),
                alt.Tooltip("accuracy:Q", format=".4f"),
                alt.Tooltip("loss:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH, height=HEIGHT, title=alt.Title(title, subtitle=runs_caption(labels)))
    )


def train_duration_chart(train_duration: pa.Table) -> alt.LayerChart | alt.Chart:
    """Fig. 10: training duration normalized to the 0%-loss run of the same configuration."""
    title = "Training duration under packet loss"
    data = rows(train_duration, ["run", "loss_pct", "duration_s", "baseline_s", "normalized"])
    data = [r for r in data if r["normalized"] is not None]
    if not data:
        return empty_chart(title, "no run has a 0%-loss run of the same configuration to compare with")
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = f"{r['loss_pct'] or 0:g} % loss · {labels[r['run']]}"
    order = [r["label"] for r in sorted(data, key=lambda r: (r["loss_pct"] or 0, r["run"]))]
    base = alt.Chart(inline(data)).encode(
        # no axis title: the labels say what they are, and a title beside long labels ran into them
        y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=320)),
        x=alt.X("normalized:Q", title="Training duration / duration at 0 % loss"),
    )
    bars = base.mark_bar(color="midnightblue").encode(
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("loss_pct:Q"),
            alt.Tooltip("duration_s:Q", format=".2f"),
            alt.Tooltip("baseline_s:Q", format=".2f"),
            alt.Tooltip("normalized:Q", format=".3f"),
        ]
    )
    labels_ = base.mark_text(align="left", dx=4).encode(text=alt.Text("normalized:Q", format=".2f"))
    rule = alt.Chart(inline([{"x": 1}])).mark_rule(strokeDash=[4, 3], color="gray").encode(x=alt.X("x:Q"))
    return (bars + labels_ + rule).properties(
        width=WIDTH - 120,
        height=max(60, 26 * len(data)),
        title=alt.Title(title, subtitle=runs_caption(labels)),
    )


def data_per_step_chart(data_per_step: pa.Table) -> alt.LayerChart | alt.Chart:
    """Payload each rank sends per step, with the all-reduce's 2(N−1)/N × gradient bytes where known."""
    title = "Payload per rank per training step"
    data = rows(
        data_per_step,
        ["run", "rank_payload_per_step", "rank_payload_min", "rank_payload_max", "expected_rank_bytes"],
    )
    if not data:
        return empty_chart(title, "no run has a training log with two or more steps")
    unit, scale = byte_unit(max(r["rank_payload_max"] or 0 for r in data))
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
        for key in ("rank_payload_per_step", "rank_payload_min", "rank_payload_max", "expected_rank_bytes"):
            r[key] = None if r[key] is None else r[key] / scale
    axis = alt.Axis(labels=len(labels) > 1, ticks=len(labels) > 1, labelLimit=320)
    base = alt.Chart(inline(data)).encode(y=alt.Y("label:N", title=None, axis=axis))
    bars = base.mark_bar(color="steelblue").encode(
        x=alt.X("rank_payload_per_step:Q", title=f"Payload per rank per step [{unit}]"),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("rank_payload_per_step:Q", format=".4g"),
            alt.Tooltip("expected_rank_bytes:Q", format=".4g"),
        ],
    )
    spread = base.mark_rule(color="black").encode(
        x=alt.X("rank_payload_min:Q"), x2=alt.X2("rank_payload_max:Q")
    )
    layers = [bars, spread]
    if any(r["expected_rank_bytes"] is not None for r in data):  # a layer with no data warns in Vega
        layers.append(
            base.transform_filter("datum.expected_rank_bytes != null")
            .mark_tick(color="firebrick", thickness=3, size=22)
            .encode(x=alt.X("expected_rank_bytes:Q"))
        )
    subtitle = [
        "bar: mean over ranks · line: min–max over ranks · red tick: 2(N−1)/N × gradient bytes",
        runs_caption(labels),
    ]
    return alt.layer(*layers).properties(
        width=WIDTH - 120, height=max(60, 30 * len(data)), title=alt.Title(title, subtitle=subtitle)
    )
