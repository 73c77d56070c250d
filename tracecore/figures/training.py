"""Traffic joined with the training log: Figs. 8 and 10 and bytes per step, as Altair charts."""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import HEIGHT, WIDTH, byte_unit, empty_chart, inline, rows


def accuracy_vs_data_chart(accuracy_vs_data: pa.Table) -> alt.Chart:
    """Fig. 8: accuracy at each logged step against the data transmitted until then."""
    title = "Accuracy vs. data transmitted (Fig. 8)"
    data = rows(accuracy_vs_data, ["run", "step", "epoch", "cum_bytes", "accuracy", "loss"])
    if not data:
        return empty_chart(title, "no training log for the selected runs")
    unit, scale = byte_unit(max(r["cum_bytes"] for r in data))
    for r in data:
        r["volume"] = r["cum_bytes"] / scale
    return (
        alt.Chart(inline(data))
        .mark_line(point=alt.OverlayMarkDef(size=14))
        .encode(
            x=alt.X("volume:Q", title=f"Data transmitted [{unit}]"),
            y=alt.Y("accuracy:Q", title="Accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color(
                "run:N", title="Run", legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)
            ),
            tooltip=[
                "run:N",
                "step:Q",
                "epoch:Q",
                alt.Tooltip("volume:Q", format=".4g"),
                "accuracy:Q",
                "loss:Q",
            ],
        )
        .properties(width=WIDTH, height=HEIGHT, title=title)
    )


def train_duration_chart(train_duration: pa.Table) -> alt.LayerChart | alt.Chart:
    """Fig. 10: training duration normalized to the 0%-loss run of the same configuration."""
    title = "Training duration under packet loss (Fig. 10)"
    data = rows(train_duration, ["run", "loss_pct", "duration_s", "baseline_s", "normalized"])
    data = [r for r in data if r["normalized"] is not None]
    if not data:
        return empty_chart(title, "no run has a 0%-loss run of the same configuration to compare with")
    for r in data:
        r["label"] = f"{r['loss_pct'] or 0:g} % · {r['run']}"
    order = [r["label"] for r in sorted(data, key=lambda r: (r["loss_pct"] or 0, r["run"]))]
    base = alt.Chart(inline(data)).encode(
        y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=420)),
        x=alt.X("normalized:Q", title="Normalized training duration"),
    )
    bars = base.mark_bar(color="midnightblue").encode(
        tooltip=[
            "run:N",
            "loss_pct:Q",
            alt.Tooltip("duration_s:Q", format=".2f"),
            alt.Tooltip("normalized:Q", format=".3f"),
        ]
    )
    labels = base.mark_text(align="left", dx=4).encode(text=alt.Text("normalized:Q", format=".2f"))
    rule = alt.Chart(inline([{"x": 1}])).mark_rule(strokeDash=[4, 3], color="gray").encode(x="x:Q")
    return (bars + labels + rule).properties(width=WIDTH - 120, height=max(60, 26 * len(data)), title=title)


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
    for r in data:
        for key in ("rank_payload_per_step", "rank_payload_min", "rank_payload_max", "expected_rank_bytes"):
            r[key] = None if r[key] is None else r[key] / scale
    base = alt.Chart(inline(data)).encode(y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=420)))
    bars = base.mark_bar(color="steelblue").encode(
        x=alt.X("rank_payload_per_step:Q", title=f"Payload per rank per step [{unit}]"),
        tooltip=[
            "run:N",
            alt.Tooltip("rank_payload_per_step:Q", format=".4g"),
            alt.Tooltip("expected_rank_bytes:Q", format=".4g"),
        ],
    )
    spread = base.mark_rule(color="black").encode(x="rank_payload_min:Q", x2="rank_payload_max:Q")
    layers = [bars, spread]
    if any(r["expected_rank_bytes"] is not None for r in data):  # a layer with no data warns in Vega
        layers.append(
            base.transform_filter("datum.expected_rank_bytes != null")
            .mark_tick(color="firebrick", thickness=3, size=22)
            .encode(x="expected_rank_bytes:Q")
        )
    subtitle = "bar: mean over ranks · line: min–max over ranks · red tick: 2(N−1)/N × gradient bytes"
    return alt.layer(*layers).properties(
        width=WIDTH - 120, height=max(60, 30 * len(data)), title=alt.Title(title, subtitle=subtitle)
    )
