"""Load over time: Figs. 6, 7, 9 and the burstiness of each link, as Altair charts.

Builders take view results (pyarrow Tables) and return Altair charts; throughput is in Gbit/s on
a time axis in seconds after the run's first packet, as in the paper.
"""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import HEIGHT, WIDTH, as_arrow, empty_chart, inline, pair_label, rows


def link_util_chart(link_util: pa.Table, title: str | None = None) -> alt.Chart | alt.FacetChart:
    """Fig. 7: per-link throughput lines in Gbit/s over time (one line per directed worker pair)."""
    title = title or "Link utilization per directed worker pair (Fig. 7)"
    data = rows(link_util, ["run", "src_worker", "dst_worker", "t_s", "gbps"])
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    for r in data:
        r["link"] = pair_label(r.pop("src_worker"), r.pop("dst_worker"))
    bin_ms = as_arrow(link_util).column("bin_ns")[0].as_py() / 1e6
    chart = (
        alt.Chart()
        .mark_line(strokeWidth=1.2, interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title="Time since first packet [s]", scale=alt.Scale(nice=False)),
            y=alt.Y("gbps:Q", title=f"Throughput [Gbit/s] ({bin_ms:g} ms bins)"),
            color=alt.Color("link:N", title="Link", scale=alt.Scale(scheme="tableau20")),
            tooltip=[
                "run:N",
                "link:N",
                alt.Tooltip("t_s:Q", format=".3f"),
                alt.Tooltip("gbps:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH + 160, height=HEIGHT - 60)
    )
    return _by_run(chart, data, title)


def batch_size_effect_chart(windows: pa.Table) -> alt.Chart | alt.FacetChart:
    """Fig. 9: one link's 10 ms throughput in a short window, one panel per run (batch size).

    `windows` is link_util rows of one link per run plus `label` (e.g. "batch 16 · run") and
    `order` (panel order, e.g. the batch size) columns.
    """
    title = "Batch size effect: busiest link in a 250 ms window (Fig. 9)"
    data = rows(windows, ["label", "order", "src_worker", "dst_worker", "t_s", "gbps"])
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    for r in data:
        r["link"] = pair_label(r.pop("src_worker"), r.pop("dst_worker"))
    chart = (
        alt.Chart()
        .mark_line(
            point=alt.OverlayMarkDef(size=18, color="midnightblue"), strokeWidth=1.5, color="midnightblue"
        )
        .encode(
            x=alt.X("t_s:Q", title="Time since first packet [s]", scale=alt.Scale(zero=False)),
            y=alt.Y("gbps:Q", title="Throughput [Gbit/s]"),
            tooltip=[
                "label:N",
                "link:N",
                alt.Tooltip("t_s:Q", format=".3f"),
                alt.Tooltip("gbps:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH, height=110)
    )
    header = alt.Header(
        labelAngle=0, labelAlign="left", labelAnchor="start", labelOrient="top", labelFontWeight="bold"
    )
    row = alt.Row("label:N", title=None, sort=alt.SortField("order"), header=header)
    return chart.facet(data=inline(data), row=row, title=title).resolve_scale(x="independent")


def temporal_flows_chart(temporal_flows: pa.Table) -> alt.Chart | alt.FacetChart:
    """Fig. 6: each flow (directed TCP 4-tuple) as a row of time bins coloured by normalized load."""
    title = "Temporal flow load (Fig. 6)"
    data = rows(
        temporal_flows,
        [
            "run",
            "flow_id",
            "src_worker",
            "dst_worker",
            "src_ip",
            "dst_ip",
            "src_port",
            "dst_port",
            "t_s",
            "bin_ns",
            "bytes",
            "load",
        ],
    )
    if not data:
        return empty_chart(title, "no TCP flows in the selected runs")
    for r in data:
        r["t_end"] = r["t_s"] + r.pop("bin_ns") / 1e9
        r["flow"] = f"{r['src_ip']}:{r['src_port']} → {r['dst_ip']}:{r['dst_port']}"
    n_flows = max(r["flow_id"] for r in data)
    chart = (
        alt.Chart()
        .mark_rect(stroke="#ddd", strokeWidth=0.3)
        .encode(
            x=alt.X("t_s:Q", title="Time since first packet [s]", scale=alt.Scale(nice=False)),
            x2="t_end:Q",
            y=alt.Y("flow_id:O", title="Flows", axis=alt.Axis(labels=n_flows <= 40)),
            color=alt.Color(
                "load:Q", title="Normalized load", scale=alt.Scale(scheme="blues", domain=[0, 1])
            ),
            tooltip=[
                "run:N",
                "flow:N",
                "src_worker:N",
                "dst_worker:N",
                alt.Tooltip("t_s:Q", format=".2f"),
                "bytes:Q",
            ],
        )
        .properties(width=WIDTH + 100, height=min(12 * n_flows + 20, 600))
    )
    return _by_run(chart, data, title, independent_y=True)


def burstiness_chart(burstiness: pa.Table) -> alt.Chart | alt.FacetChart:
    """Peak-to-mean ratio of each link against bin width: microbursts vanish in wide bins."""
    title = "Burstiness: peak-to-mean link load vs. bin width"
    data = rows(
        burstiness, ["run", "src_worker", "dst_worker", "bin_ns", "mean_gbps", "peak_gbps", "peak_to_mean"]
    )
    if not data:
        return empty_chart(title, "no worker-to-worker traffic in the selected runs")
    for r in data:
        r["link"] = pair_label(r.pop("src_worker"), r.pop("dst_worker"))
        r["bin_ms"] = r.pop("bin_ns") / 1e6
    chart = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("bin_ms:Q", title="Bin width [ms]", scale=alt.Scale(type="log")),
            y=alt.Y("peak_to_mean:Q", title="Peak / mean load", scale=alt.Scale(type="log")),
            color=alt.Color("link:N", title="Link", scale=alt.Scale(scheme="tableau20")),
            tooltip=[
                "run:N",
                "link:N",
                "bin_ms:Q",
                alt.Tooltip("peak_gbps:Q", format=".4f"),
                alt.Tooltip("mean_gbps:Q", format=".4f"),
            ],
        )
        .properties(width=WIDTH - 120, height=HEIGHT - 40)
    )
    return _by_run(chart, data, title)


def _by_run(
    chart: alt.Chart, data: list[dict], title: str, independent_y: bool = False
) -> alt.Chart | alt.FacetChart:
    """One panel per run when there are several (labelled above it); a single run stays a plain chart."""
    if len({r["run"] for r in data}) == 1:
        return chart.properties(data=inline(data), title=f"{title}: {data[0]['run']}")
    header = alt.Header(
        labelAngle=0, labelAlign="left", labelAnchor="start", labelOrient="top", labelFontWeight="bold"
    )
    faceted = chart.facet(data=inline(data), row=alt.Row("run:N", title=None, header=header), title=title)
    return faceted.resolve_scale(y="independent") if independent_y else faceted
