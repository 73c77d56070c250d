"""Tables I and II as charts: mean Gbit/s with its 95% confidence interval per run or link."""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import WIDTH, empty_chart, inline, pair_label, rows


def throughput_ci_chart(throughput_ci: pa.Table) -> alt.LayerChart | alt.Chart:
    """Table I: each run's mean throughput over the window, with mean ± 1.96·s/√n."""
    title = "Throughput with 95% confidence interval (Table I)"
    data = rows(throughput_ci, ["run", "from_s", "to_s", "n", "mean_gbps", "ci_low_gbps", "ci_high_gbps"])
    if not data:
        return empty_chart(title, "no complete sample bins in the window")
    return _ci_chart(data, "run", title)


def link_util_ci_chart(link_util_ci: pa.Table) -> alt.LayerChart | alt.Chart:
    """Table II: each link's mean Gbit/s over consecutive windows, with mean ± 1.96·s/√n."""
    title = "Link throughput with 95% confidence interval (Table II)"
    data = rows(
        link_util_ci,
        ["run", "src_worker", "dst_worker", "windows", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    )
    if not data:
        return empty_chart(title, "no complete windows in the selected span")
    for r in data:
        r["link"] = f"{r['run']} · {pair_label(r['src_worker'], r['dst_worker'])}"
    return _ci_chart(data, "link", title)


def _ci_chart(data: list[dict], label: str, title: str) -> alt.LayerChart:
    base = alt.Chart(inline(data)).encode(y=alt.Y(f"{label}:N", title=None, axis=alt.Axis(labelLimit=460)))
    bars = base.mark_rule(strokeWidth=2, color="midnightblue").encode(
        x=alt.X("ci_low_gbps:Q", title="Throughput [Gbit/s]"), x2="ci_high_gbps:Q"
    )
    points = base.mark_point(filled=True, size=50, color="midnightblue").encode(
        x="mean_gbps:Q",
        tooltip=[
            f"{label}:N",
            alt.Tooltip("mean_gbps:Q", format=".4f"),
            alt.Tooltip("ci_low_gbps:Q", format=".4f"),
            alt.Tooltip("ci_high_gbps:Q", format=".4f"),
        ],
    )
    return (bars + points).properties(width=WIDTH - 100, height=max(60, 22 * len(data)), title=title)
