"""Who sends how much to whom: Figs. 3, 4, 5, the topology check and RDMA queue-pair flows, as Altair charts.

Each builder takes the result of its view (a pyarrow Table, as `tracecore.query.run_view` returns
it) and returns an Altair chart, so a notebook can call them on any selection of runs.
"""

from __future__ import annotations

import math

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


# rdma_flows' operation-mix columns (packets) and how the chart names them, in stacking order
RDMA_OPS = (
    ("writes", "RDMA WRITE"),
    ("sends", "SEND"),
    ("read_requests", "READ request"),
    ("read_responses", "READ response"),
    ("atomics", "atomic"),
    ("acks", "ACK"),
    ("atomic_acks", "atomic ACK"),
    ("cnps", "CNP"),
    ("other_ops", "other"),
)
_RDMA_COLORS = (
    "#08519c",
    "#4292c6",
    "#74c476",
    "#238b45",
    "#9e9ac8",
    "#bdbdbd",
    "#969696",
    "#d62728",
    "#fdae6b",
)
RDMA_FLOWS_SHOWN = 30  # per run: the busiest flows by packets, so a page stays readable on a cluster


def rdma_ops_chart(rdma_flows: pa.Table) -> alt.VConcatChart | alt.LayerChart | alt.Chart:
    """Operation mix (packets per BTH operation) of each directed RDMA flow (src → dst, destination QP),
    its message bytes written at the end of its bar; one panel per run."""
    title = "RDMA operation mix per queue-pair flow (packets; message bytes at the end of each bar)"
    flows = rows(rdma_flows)
    if not flows:
        return empty_chart(title, "no RDMA (RoCE) traffic in the selected runs")
    by_run: dict[str, list[dict]] = {}
    for f in flows:
        by_run.setdefault(f["run"], []).append(f)
    data, cut = [], []
    for run, items in by_run.items():
        busiest = sorted(range(len(items)), key=lambda i: -items[i]["packets"])[:RDMA_FLOWS_SHOWN]
        if len(busiest) < len(items):
            cut.append(f"{run}: the {len(busiest)} busiest of {len(items)} flows")
        for order, i in enumerate(sorted(busiest)):  # in the view's order: by worker pair, then QP
            f = items[i]
            flow = {
                "run": run,
                "flow": f"{_end(f, 'src')}→{_end(f, 'dst')} QP 0x{f['dest_qp']:06x}",
                "order": order,
            }
            data.append({**flow, "op": None, "packets": f["packets"], "label": f"{f['message_bytes']:,} B"})
            for op_index, (column, op) in enumerate(RDMA_OPS):
                if f[column]:
                    data.append(
                        {
                            **flow,
                            "op": op,
                            "op_index": op_index,
                            "packets": f[column],
                            "src_qp": None if f["src_qp"] is None else f"0x{f['src_qp']:06x}",
                            "transport": f["transport"],
                            "message_bytes": f["message_bytes"],
                            "psn_gaps": f["psn_gaps"],
                            "psn_repeats": f["psn_repeats"],
                            "ecn_ce": f["ecn_ce"],
                        }
                    )
    if cut:
        title += " (" + "; ".join(cut) + ")"
    y = alt.Y("flow:N", title=None, sort=alt.EncodingSortField(field="order", op="min"))
    longest = max(r["packets"] for r in data if r["op"] is None)
    x = alt.X("packets:Q", title="Packets", scale=alt.Scale(domain=[0, math.ceil(longest * 1.3)], nice=False))
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            y=y,
            x=x.stack("zero"),
            color=alt.Color(
                "op:N",
                title="Operation",
                scale=alt.Scale(domain=[op for _, op in RDMA_OPS], range=list(_RDMA_COLORS)),
            ),
            order=alt.Order("op_index:Q"),
            tooltip=[
                "run:N",
                "flow:N",
                "op:N",
                "packets:Q",
                "transport:N",
                alt.Tooltip("src_qp:N", title="source QP"),
                alt.Tooltip("message_bytes:Q", title="message bytes (flow)", format=","),
                alt.Tooltip("psn_gaps:Q", title="PSN gaps (flow)"),
                alt.Tooltip("psn_repeats:Q", title="PSN repeats (flow)"),
                alt.Tooltip("ecn_ce:Q", title="ECN-CE (flow)"),
            ],
        )
    )
    totals = (
        alt.Chart().mark_text(align="left", dx=4, fontSize=11, color="#333").encode(y=y, x=x, text="label:N")
    )
    panels = []
    for run in by_run:  # one panel per run, each with its own flows (vconcat: facets would union them)
        ops = [r for r in data if r["run"] == run and r["op"] is not None]
        ends = [r for r in data if r["run"] == run and r["op"] is None]
        panel = alt.layer(bars.properties(data=inline(ops)), totals.properties(data=inline(ends)))
        panels.append(panel.properties(width=WIDTH, height=alt.Step(20), title=run))
    if len(panels) == 1:
        return panels[0].properties(title=f"{title}: {next(iter(by_run))}")
    return alt.vconcat(*panels, title=title).resolve_scale(x="shared", y="independent")


def _end(flow: dict, side: str) -> str:
    """A flow end as the chart names it: the worker label, else the address, else 'no IP' (RoCE v1)."""
    return flow[f"{side}_worker"] or flow[f"{side}_ip"] or "no IP"


def _worker_key(label: str) -> tuple[int, str]:
    digits = label[1:] if label and label[0] == "W" else ""
    return (int(digits), label) if digits.isdigit() else (1 << 30, label)


__all__ = [
    "bytes_sent_chart",
    "flow_counts_chart",
    "flow_matrix_chart",
    "rdma_ops_chart",
    "topology_check_chart",
]
