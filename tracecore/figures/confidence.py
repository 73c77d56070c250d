"""Tables I and II as charts: mean Gbit/s with its 95% confidence interval per run or link, the
interval's method (Student's t, normal, bootstrap) named under the title."""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import WIDTH, empty_chart, inline, pair_label, rows
from tracecore.figures.style import runs_caption, short_runs

METHODS = {
    "t": "Student's t interval, mean ± t(0.975, n−1)·s/√n",
    "normal": "normal interval, mean ± 1.96·s/√n (the paper's)",
    "bootstrap": "bootstrap interval, 2.5–97.5 % of 1 000 resampled means",
}


def method_text(method: str | None) -> str:
    """How the interval of `ci_method` was computed, in words (the chart's and the report's caption)."""
    return METHODS.get(method or "", method or "")


def throughput_ci_chart(throughput_ci: pa.Table) -> alt.LayerChart | alt.Chart:
    """Table I: each run's mean throughput over the window, with its 95% confidence interval."""
    title = "Throughput with 95% confidence interval"
    data = rows(throughput_ci, ["run", "from_s", "to_s", "n", "mean_gbps", "ci_low_gbps", "ci_high_gbps"])
    data = [r for r in data if r["ci_low_gbps"] is not None]
    if not data:
        return empty_chart(title, "no complete sample bins in the window")
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
    return _ci_chart(data, title, _method(throughput_ci), labels)


def link_util_ci_chart(link_util_ci: pa.Table) -> alt.LayerChart | alt.Chart:
    """Table II: each link's mean Gbit/s over consecutive windows, with its 95% confidence interval."""
    title = "Link throughput with 95% confidence interval"
    data = rows(
        link_util_ci,
        ["run", "src_worker", "dst_worker", "windows", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    )
    data = [r for r in data if r["ci_low_gbps"] is not None]
    if not data:
        return empty_chart(title, "no complete windows in the selected span")
    labels = short_runs(r["run"] for r in data)
    for r in data:
        link = pair_label(r["src_worker"], r["dst_worker"])
        r["label"] = link if len(labels) == 1 else f"{labels[r['run']]} · {link}"
    return _ci_chart(data, title, _method(link_util_ci), labels)


def _method(table: pa.Table) -> str | None:
    names = table.column_names
    if "ci_method" not in names or table.num_rows == 0:
        return None
    return table.column("ci_method")[0].as_py()


def _ci_chart(data: list[dict], title: str, method: str | None, labels: dict[str, str]) -> alt.LayerChart:
    order = list(dict.fromkeys(r["label"] for r in data))
    base = alt.Chart(inline(data)).encode(
        y=alt.Y("label:N", title=None, sort=order, axis=alt.Axis(labelLimit=320))
    )
    x_axis = alt.X("ci_low_gbps:Q", title="Throughput [Gbit/s]", scale=alt.Scale(zero=True))
    bars = base.mark_rule(strokeWidth=2, color="midnightblue").encode(x=x_axis, x2=alt.X2("ci_high_gbps:Q"))
    points = base.mark_point(filled=True, size=50, color="midnightblue").encode(
        x=alt.X("mean_gbps:Q"),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("label:N"),
            alt.Tooltip("mean_gbps:Q", format=".4f", title="mean [Gbit/s]"),
            alt.Tooltip("ci_low_gbps:Q", format=".4f", title="low [Gbit/s]"),
            alt.Tooltip("ci_high_gbps:Q", format=".4f", title="high [Gbit/s]"),
        ],
    )
    subtitle = [f"95% {method_text(method)}; lower bounds clipped at 0", runs_caption(labels)]
    return (bars + points).properties(
        width=WIDTH - 100, height=max(60, 22 * len(data)), title=alt.Title(title, subtitle=subtitle)
    )
