"""Who sends how much to whom: Figs. 3, 4, 5, the topology check and RDMA queue-pair flows, as Altair charts.

Each builder takes the result of its view (a pyarrow Table, as `tracecore.query.run_view` returns
it) and returns an Altair chart, so a notebook can call them on any selection of runs.
"""

from __future__ import annotations

import math

import altair as alt
import pyarrow as pa

from tracecore.figures._data import WIDTH, as_arrow, byte_unit, empty_chart, inline, rows
from tracecore.figures.style import (
    CATEGORICAL,
    d3_format,
    pair_axes,
    runs_caption,
    short_runs,
    worker_colors,
    worker_key,
)


def bytes_sent_chart(bytes_sent: pa.Table) -> alt.LayerChart | alt.Chart:
    """Fig. 3: total volume each run transmitted, stacked by sending worker, its total at the bar's end."""
    title = "Data transmitted per run"
    data = rows(bytes_sent, ["run", "worker", "bytes"])
    if not data:
        return empty_chart(title, "no worker sent any packet in the selected runs")
    totals: dict[str, int] = {}
    for r in data:
        totals[r["run"]] = totals.get(r["run"], 0) + r["bytes"]
    unit, scale = byte_unit(max(totals.values()))
    labels = short_runs(totals)
    for r in data:
        r["volume"] = r["bytes"] / scale
        r["label"] = labels[r["run"]]
    ends = [{"run": run, "label": labels[run], "total": b / scale} for run, b in totals.items()]
    fmt = d3_format(max(e["total"] for e in ends))
    workers = sorted({r["worker"] for r in data}, key=worker_key)
    y = alt.Y("label:N", title=None, sort=list(labels.values()), axis=_run_axis(labels))
    x = alt.X("volume:Q", title=f"Transmitted volume [{unit}]", stack="zero")
    bars = (
        alt.Chart(inline(data))
        .mark_bar()
        .encode(
            y=y,
            x=x,
            color=alt.Color("worker:N", title="Sender", sort=workers, scale=worker_colors(workers)),
            order=alt.Order("worker:O"),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("worker:N"),
                alt.Tooltip("volume:Q", format=fmt, title=unit),
            ],
        )
    )
    text = (
        alt.Chart(inline(ends))
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=y, x=alt.X("total:Q"), text=alt.Text("total:Q", format=fmt))
    )
    return (bars + text).properties(
        width=WIDTH, height=alt.Step(34), title=alt.Title(title, subtitle=runs_caption(labels))
    )


def flow_matrix_chart(
    flow_matrix: pa.Table, workers: dict[str, int] | None = None
) -> alt.LayerChart | alt.FacetChart | alt.Chart:
    """Fig. 4: volume per directed worker pair, log-scale Blues heatmap, one per worker count.

    `flow_matrix` is the view's result (bytes per run and address pair); runs with the same number of
    workers (`workers`: run → count, as run_summary gives it; else the labels each run has) are
    averaged as the paper did (a pair a run never used counts as 0), runs of different counts never:
    W3→W4 of a 4-worker run is not spread over 2-worker runs. A `flow_matrix_mean` result (no run
    column) is drawn as the one matrix it is.
    """
    title = "Communication pattern: volume per directed worker pair"
    groups = _worker_count_groups(flow_matrix, workers)
    labels = short_runs(run for group in groups for run in group["runs"])
    data, headings = [], []  # the rows of all matrices; each matrix's (rows, heading)
    for group in groups:
        runs = group["runs"]
        if len(runs) == 1:
            heading = [f"{group['workers']} workers", labels[runs[0]]]
        elif runs:
            heading = [f"{group['workers']} workers", f"mean of {len(runs)} runs"]
        else:  # a flow_matrix_mean result: who was averaged is not known
            heading = [f"mean over {group['n_runs']} runs"] if group["n_runs"] > 1 else []
        cells = [
            {
                "src_worker": src,
                "dst_worker": dst,
                "mean_bytes": total / group["n_runs"],
                "n_runs": group["n_runs"],
                **({"workers": group["workers"], "runs": ", ".join(runs)} if runs else {}),
            }
            for (src, dst), total in group["bytes"].items()
            if total > 0
        ]
        if cells:
            data.extend(cells)
            headings.append((cells, heading))
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    unit, scale = byte_unit(max(r["mean_bytes"] for r in data))
    for r in data:
        r["volume"] = r["mean_bytes"] / scale
    heat = (
        alt.Chart()
        .mark_rect()
        .encode(
            color=alt.Color(
                "volume:Q",
                title=["Tx. volume", f"[{unit}]"],
                scale=alt.Scale(type="log", scheme="blues"),
            ),
            tooltip=[
                alt.Tooltip("src_worker:N", title="Source"),
                alt.Tooltip("dst_worker:N", title="Destination"),
                alt.Tooltip("volume:Q", format=".4g", title=unit),
                alt.Tooltip("n_runs:Q", title="Runs averaged"),
                *([alt.Tooltip("runs:N", title="Runs")] if labels else []),
            ],
        )
    )
    text = (
        alt.Chart()
        .mark_text(fontSize=11)
        .encode(
            text=alt.Text("volume:Q", format=".3g"),
            color=alt.ColorValue(  # white on the darkest cells
                value="black",
                condition={"test": f"datum.volume > {max(r['volume'] for r in data) / 8}", "value": "white"},
            ),
        )
    )
    panels = []
    for cells, heading in headings:
        workers_seen = sorted(
            {r["src_worker"] for r in cells} | {r["dst_worker"] for r in cells}, key=worker_key
        )
        axes = pair_axes(workers_seen)
        side = max(70 * len(workers_seen), 8 * max((len(line) for line in heading), default=0))
        panel = alt.layer(heat.encode(**axes), text.encode(**axes), data=inline(cells))
        panels.append(
            panel.properties(
                width=side,
                height=70 * len(workers_seen),
                title=alt.Title(heading, fontSize=12) if heading else "",
            )
        )
    subtitle = [runs_caption(labels)] if labels else []
    if len(groups) > 1:
        subtitle.insert(0, "one matrix per worker count: runs with as many workers averaged, others never")
    if len(panels) == 1:  # what its heading says goes under the title
        group = groups[0]
        if group["runs"]:
            many = f", mean of {group['n_runs']} runs" if group["n_runs"] > 1 else ""
            subtitle.insert(0, f"{group['workers']} workers{many}")
        elif group["n_runs"] > 1:
            subtitle.insert(0, f"mean over {group['n_runs']} runs")
        return panels[0].properties(title=alt.Title(title, subtitle=subtitle))
    return alt.hconcat(*panels, spacing=30, title=alt.Title(title, subtitle=subtitle)).resolve_scale(
        color="shared"
    )


def _worker_count_groups(flow_matrix: pa.Table, workers: dict[str, int] | None) -> list[dict]:
    """Runs grouped by worker count, fewest first: {"workers", "runs", "n_runs", "bytes": {(src, dst): Σ}}."""
    table = as_arrow(flow_matrix)
    if "run" not in table.column_names:  # flow_matrix_mean: one matrix of means
        means = rows(table, ["src_worker", "dst_worker", "n_runs", "mean_bytes"])
        if not means:
            return []
        n_runs = max(r["n_runs"] for r in means)
        totals = {(r["src_worker"], r["dst_worker"]): r["mean_bytes"] * n_runs for r in means}
        return [{"workers": None, "runs": [], "n_runs": n_runs, "bytes": totals}]
    per_run: dict[str, dict[tuple[str, str], int]] = {}
    for r in rows(table, ["run", "src_worker", "dst_worker", "bytes"]):
        if r["src_worker"] and r["dst_worker"]:
            pairs = per_run.setdefault(r["run"], {})
            key = (r["src_worker"], r["dst_worker"])
            pairs[key] = pairs.get(key, 0) + r["bytes"]
    by_count: dict[int, list[str]] = {}
    for run, pairs in per_run.items():
        count = (workers or {}).get(run) or len({w for pair in pairs for w in pair})
        by_count.setdefault(count, []).append(run)
    groups = []
    for count in sorted(by_count):
        totals: dict[tuple[str, str], int] = {}
        for run in by_count[count]:
            for key, value in per_run[run].items():
                totals[key] = totals.get(key, 0) + value
        groups.append(
            {"workers": count, "runs": by_count[count], "n_runs": len(by_count[count]), "bytes": totals}
        )
    return groups


FLOW_DEFINITIONS = ["4tuple", "5tuple", "connection", "hostpair", "qp"]


def flow_counts_chart(flow_counts: pa.Table) -> alt.LayerChart | alt.Chart:
    """Fig. 5: flows per run under the five definitions (the paper counted directed 4-tuples; `qp`
    counts RDMA queue-pair flows), each bar with its count."""
    title = "Number of flows per run"
    data = rows(flow_counts, ["run", "definition", "flows"])
    if not data:
        return empty_chart(title, "no runs selected")
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
    y = alt.Y("label:N", title=None, sort=list(labels.values()), axis=_run_axis(labels))
    y_offset = alt.YOffset("definition:N", sort=FLOW_DEFINITIONS)
    base = alt.Chart(inline(data)).encode(y=y, yOffset=y_offset)
    bars = base.mark_bar().encode(
        x=alt.X("flows:Q", title="Number of flows"),
        color=alt.Color(
            "definition:N",
            title="Flow definition",
            sort=FLOW_DEFINITIONS,
            scale=alt.Scale(scheme=CATEGORICAL),
        ),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("definition:N"), alt.Tooltip("flows:Q", format=",")],
    )
    text = base.mark_text(align="left", dx=3, fontSize=10).encode(
        x=alt.X("flows:Q"), text=alt.Text("flows:Q", format=",")
    )
    return (bars + text).properties(
        width=WIDTH - 80,
        height=alt.Step(14 if len(labels) > 1 else 18),
        title=alt.Title(title, subtitle=runs_caption(labels)),
    )


def _run_axis(labels: dict[str, str]) -> alt.Axis:
    """The run axis of a bar chart: short labels, none for one run (its name is in the subtitle)."""
    return alt.Axis(labels=len(labels) > 1, ticks=len(labels) > 1, labelLimit=320)


def topology_check_chart(topology_check: pa.Table) -> alt.FacetChart | alt.VConcatChart | alt.Chart:
    """Measured share of payload per directed pair next to the share the collective predicts; runs
    of different workers each on their own axes."""
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
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
    workers = sorted({r["src_worker"] for r in data}, key=worker_key)
    base = alt.Chart().encode(**pair_axes(workers))
    heat = base.mark_rect().encode(
        color=alt.Color(
            "share:Q", title="Share", scale=alt.Scale(scheme="blues", domain=[0, 0.5], clamp=True)
        ),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("matrix:N"),
            alt.Tooltip("src_worker:N"),
            alt.Tooltip("dst_worker:N"),
            alt.Tooltip("share:Q", format=".3f"),
        ],
    )
    text = base.mark_text(fontSize=10).encode(text=alt.Text("share:Q", format=".2f"))
    heading = alt.Title(title, subtitle=runs_caption(labels))
    own = {run: {r["src_worker"] for r in data if r["run"] == run} for run in labels}
    if len({frozenset(w) for w in own.values()}) > 1:  # runs of different workers: each its own axes
        panels = []
        for run, seen in own.items():
            mine = sorted(seen, key=worker_key)
            axes = pair_axes(mine)
            panel = alt.layer(
                heat.encode(**axes), text.encode(**axes), data=inline([r for r in data if r["run"] == run])
            )
            panels.append(
                panel.properties(width=55 * len(mine), height=55 * len(mine))
                .facet(column=alt.Column("matrix:N", title=None))
                .properties(title=alt.Title(labels[run], fontSize=12))
            )
        return alt.vconcat(*panels, title=heading)
    side = 55 * len(workers)
    return (
        alt.layer(heat, text, data=inline(data))
        .properties(width=side, height=side)
        .facet(
            column=alt.Column("matrix:N", title=None),
            row=alt.Row("label:N", title=None, header=alt.Header(labels=len(labels) > 1)),
        )
        .properties(title=heading)
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
                alt.Tooltip("run:N"),
                alt.Tooltip("flow:N"),
                alt.Tooltip("op:N"),
                alt.Tooltip("packets:Q"),
                alt.Tooltip("transport:N"),
                alt.Tooltip("src_qp:N", title="source QP"),
                alt.Tooltip("message_bytes:Q", title="message bytes (flow)", format=","),
                alt.Tooltip("psn_gaps:Q", title="PSN gaps (flow)"),
                alt.Tooltip("psn_repeats:Q", title="PSN repeats (flow)"),
                alt.Tooltip("ecn_ce:Q", title="ECN-CE (flow)"),
            ],
        )
    )
    totals = (
        alt.Chart()
        .mark_text(align="left", dx=4, fontSize=11, color="#333")
        .encode(y=y, x=x, text=alt.Text("label:N"))
    )
    panels = []
    for run in by_run:  # one panel per run, each with its own flows (vconcat: facets would union them)
        ops = [r for r in data if r["run"] == run and r["op"] is not None]
        ends = [r for r in data if r["run"] == run and r["op"] is None]
        panel = alt.layer(bars.properties(data=inline(ops)), totals.properties(data=inline(ends)))
        panels.append(panel.properties(width=WIDTH, height=alt.Step(20), title=run))
    if len(panels) == 1:
        return panels[0].properties(title=alt.Title(title, subtitle=runs_caption(by_run)))
    return alt.vconcat(*panels, title=title).resolve_scale(x="shared", y="independent")


def _end(flow: dict, side: str) -> str:
    """A flow end as the chart names it: the worker label, else the address, else 'no IP' (RoCE v1)."""
    return flow[f"{side}_worker"] or flow[f"{side}_ip"] or "no IP"


__all__ = [
    "bytes_sent_chart",
    "flow_counts_chart",
    "flow_matrix_chart",
    "rdma_ops_chart",
    "topology_check_chart",
]
