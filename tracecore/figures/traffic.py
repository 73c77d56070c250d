"""Who sends how much to whom: Figs. 3, 4, 5 and the topology check, as Altair charts.

Each builder takes the result of its view (a pyarrow Table, as `tracecore.query.run_view` returns
it) and returns an Altair chart, so a notebook can call them on any selection of runs.
"""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import HEIGHT, WIDTH, byte_unit, empty_chart, inline, rows


def bytes_sent_chart(bytes_sent: pa.Table) -> alt.Chart:
    """Fig. 3: total volume each run transmitted, stacked by sending worker."""
    title = "Data transmitted per run (Fig. 3)"
    data = rows(bytes_sent, ["run", "worker", "bytes"])
    if not data:
        return empty_chart(title, "no worker sent any packet in the selected runs")
    unit, scale = byte_unit(
        max(sum(r["bytes"] for r in data if r["run"] == run) for run in {r["run"] for r in data})
    )
    for r in data:
        r["volume"] = r["bytes"] / scale
    return (
        alt.Chart(inline(data))
        .mark_bar()
        .encode(
            x=alt.X("run:N", title="Run", axis=alt.Axis(labelAngle=-20, labelLimit=260)),
            y=alt.Y("volume:Q", title=f"Transmitted volume [{unit}]", stack="zero"),
            color=alt.Color("worker:N", title="Sender", scale=alt.Scale(scheme="blues")),
            order=alt.Order("worker:O"),
            tooltip=["run:N", "worker:N", alt.Tooltip("volume:Q", format=".4g", title=unit)],
        )
        .properties(width=WIDTH, height=HEIGHT, title=title)
    )


def flow_matrix_chart(flow_matrix_mean: pa.Table) -> alt.LayerChart | alt.Chart:
    """Fig. 4: mean volume per directed worker pair, log-scale Blues heatmap (source × destination)."""
    title = "Communication pattern: mean volume per run (Fig. 4)"
    data = rows(flow_matrix_mean, ["src_worker", "dst_worker", "n_runs", "mean_bytes"])
    data = [r for r in data if r["mean_bytes"] > 0]
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    unit, scale = byte_unit(max(r["mean_bytes"] for r in data))
    for r in data:
        r["volume"] = r["mean_bytes"] / scale
    workers = sorted({r["src_worker"] for r in data} | {r["dst_worker"] for r in data}, key=_worker_key)
    base = alt.Chart(inline(data)).encode(
        x=alt.X("dst_worker:N", title="Destination", sort=workers, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("src_worker:N", title="Source", sort=workers),
    )
    heat = base.mark_rect().encode(
        color=alt.Color(
            "volume:Q", title=f"Tx. volume [{unit}]", scale=alt.Scale(type="log", scheme="blues")
        ),
        tooltip=[
            "src_worker:N",
            "dst_worker:N",
            alt.Tooltip("volume:Q", format=".4g", title=unit),
            "n_runs:Q",
        ],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("volume:Q", format=".3g"),
        color=alt.condition(
            f"datum.volume > {max(r['volume'] for r in data) / 8}", alt.value("white"), alt.value("black")
        ),
    )
    side = 70 * len(workers)
    return (heat + text).properties(width=side, height=side, title=title)


def flow_counts_chart(flow_counts: pa.Table) -> alt.Chart:
    """Fig. 5: flows per run under the five definitions (the paper counted directed 4-tuples; `qp`
    counts RDMA queue-pair flows)."""
    title = "Number of flows per run (Fig. 5)"
    data = rows(flow_counts, ["run", "definition", "flows"])
    if not data:
        return empty_chart(title, "no runs selected")
    order = ["4tuple", "5tuple", "connection", "hostpair", "qp"]
    return (
        alt.Chart(inline(data))
        .mark_bar()
        .encode(
            x=alt.X("run:N", title="Run", axis=alt.Axis(labelAngle=-20, labelLimit=260)),
            xOffset=alt.XOffset("definition:N", sort=order),
            y=alt.Y("flows:Q", title="No. flows"),
            color=alt.Color(
                "definition:N", title="Flow definition", sort=order, scale=alt.Scale(scheme="blues")
            ),
            tooltip=["run:N", "definition:N", "flows:Q"],
        )
        .properties(width=WIDTH, height=HEIGHT, title=title)
    )


def topology_check_chart(topology_check: pa.Table) -> alt.FacetChart | alt.Chart:
    """Measured share of payload per directed pair next to the share the collective predicts."""
    title = "Measured vs predicted traffic matrix (share of worker-to-worker payload)"
    data = []
    for r in rows(
        topology_check, ["run", "pattern", "src_worker", "dst_worker", "measured_share", "predicted_share"]
    ):
        for kind in ("measured", "predicted"):
            share = r[f"{kind}_share"]
            if share is not None:
                data.append({**r, "matrix": f"{kind} ({r['pattern'] or 'no prediction'})", "share": share})
    if not data:
        return empty_chart(title, "no worker pairs in the selected runs")
    workers = sorted({r["src_worker"] for r in data}, key=_worker_key)
    base = alt.Chart().encode(
        x=alt.X("dst_worker:N", title="Destination", sort=workers, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("src_worker:N", title="Source", sort=workers),
    )
    heat = base.mark_rect().encode(
        color=alt.Color(
            "share:Q", title="Share", scale=alt.Scale(scheme="blues", domain=[0, 0.5], clamp=True)
        ),
        tooltip=["run:N", "matrix:N", "src_worker:N", "dst_worker:N", alt.Tooltip("share:Q", format=".3f")],
    )
    text = base.mark_text(fontSize=10).encode(text=alt.Text("share:Q", format=".2f"))
    side = 55 * len(workers)
    return (
        alt.layer(heat, text, data=inline(data))
        .properties(width=side, height=side)
        .facet(column=alt.Column("matrix:N", title=None), row=alt.Row("run:N", title=None))
        .properties(title=title)
    )


def _worker_key(label: str) -> tuple[int, str]:
    digits = label[1:] if label and label[0] == "W" else ""
    return (int(digits), label) if digits.isdigit() else (1 << 30, label)


__all__ = ["bytes_sent_chart", "flow_counts_chart", "flow_matrix_chart", "topology_check_chart"]
