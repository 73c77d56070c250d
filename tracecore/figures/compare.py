"""Run comparison: the same quantity of several runs side by side (flow-matrix difference, load over
time, loss over time), as Altair charts; the report shows them when it covers more than one run.

Why apart from the paper's figures: they answer "what changed between these runs", which a
researcher asks of every sweep, and they need at least two runs to say anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pyarrow as pa

from tracecore.figures._data import HEIGHT, WIDTH, byte_unit, empty_chart, inline, rows
from tracecore.figures._views import run_view
from tracecore.figures.holds import several_runs
from tracecore.figures.options import FigureOptions, uses
from tracecore.figures.registry import MS, Figure, Runs, longest_span_ns, nice_bin_ns
from tracecore.figures.style import CATEGORICAL, pair_axes, runs_caption, short_runs, worker_key
from tracecore.figures.timeseries import TIME_TITLE, trim_idle

if TYPE_CHECKING:
    import duckdb


def flow_matrix_diff_chart(
    flow_matrix: pa.Table, workers: dict[str, int] | None = None
) -> alt.FacetChart | alt.Chart:
    """Each run's volume per directed worker pair minus that of the first run with as many workers
    (`workers`: run → count, else the labels each run has), a diverging heatmap per run; runs of
    different worker counts are never compared."""
    title = "Flow matrix difference against the first run with as many workers"
    data = [
        r
        for r in rows(flow_matrix, ["run", "src_worker", "dst_worker", "bytes"])
        if r["src_worker"] and r["dst_worker"]
    ]
    volume: dict[tuple[str, str, str], int] = {}
    for r in data:
        key = (r["run"], r["src_worker"], r["dst_worker"])
        volume[key] = volume.get(key, 0) + r["bytes"]
    runs = list(dict.fromkeys(r["run"] for r in data))
    by_count: dict[int, list[str]] = {}
    for run in runs:
        count = (workers or {}).get(run) or len({w for k in volume if k[0] == run for w in k[1:]})
        by_count.setdefault(count, []).append(run)
    compared = [group for group in by_count.values() if len(group) > 1]
    if not compared:
        return empty_chart(
            title, "needs two runs with the same number of workers and worker-to-worker traffic"
        )
    labels = short_runs(runs)
    diffs = []
    for group in compared:
        base = group[0]
        pairs = {(s, d) for run, s, d in volume if run in group}
        for run in group[1:]:
            for s, d in sorted(pairs, key=lambda p: (worker_key(p[0]), worker_key(p[1]))):
                diffs.append((run, base, s, d, volume.get((run, s, d), 0) - volume.get((base, s, d), 0)))
    unit, scale = byte_unit(max(abs(x) for *_, x in diffs) or 1)
    extent = max(abs(x) for *_, x in diffs) / scale or 1
    cells = [
        {
            "run": run,
            "panel": f"{labels[run]} − {labels[base]}",
            "src_worker": s,
            "dst_worker": d,
            "diff": x / scale,
            "text": _signed(x / scale, extent),
            "base": volume.get((base, s, d), 0) / scale,
        }
        for run, base, s, d, x in diffs
    ]
    workers_seen = sorted({c[k] for c in cells for k in ("src_worker", "dst_worker")}, key=worker_key)
    chart = alt.Chart().encode(**pair_axes(workers_seen))
    heat = chart.mark_rect().encode(
        color=alt.Color(
            "diff:Q",
            title=["Difference", f"[{unit}]"],
            scale=alt.Scale(scheme="redblue", domain=[-extent, extent], reverse=True),
        ),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("src_worker:N"),
            alt.Tooltip("dst_worker:N"),
            alt.Tooltip("diff:Q", format="+.4g", title=f"difference [{unit}]"),
            alt.Tooltip("base:Q", format=".4g", title=f"first run [{unit}]"),
        ],
    )
    text = chart.mark_text(fontSize=10).encode(
        text=alt.Text("text:N"),
        color=alt.ColorValue(  # white on the darkest cells
            value="black", condition={"test": f"abs(datum.diff) > {extent / 2}", "value": "white"}
        ),
    )
    panels = list(dict.fromkeys(c["panel"] for c in cells))
    facet = alt.Facet("panel:N", title=None, sort=panels)
    bases = ", ".join(labels[group[0]] for group in compared)
    alone = [labels[group[0]] for group in by_count.values() if len(group) == 1]
    subtitle = [
        f"first run{'s' if len(compared) > 1 else ''}: {bases}"
        + (f" · not compared (no other run with as many workers): {', '.join(alone)}" if alone else ""),
        runs_caption(labels),
    ]
    faceted = (
        alt.layer(heat, text)
        .properties(width=alt.Step(55), height=alt.Step(55))
        .facet(facet=facet, columns=3, data=inline(cells), title=alt.Title(title, subtitle=subtitle))
    )
    return faceted.resolve_scale(x="independent", y="independent") if len(compared) > 1 else faceted


def _signed(value: float, extent: float) -> str:
    """A cell's difference as its label: two significant digits (no exponent: values under 0.5 % of the
    largest one read 0)."""
    return "0" if abs(value) < extent * 0.005 else f"{value:+.2g}".replace("-", "−")  # d3's minus sign


def throughput_overlay_chart(link_total: pa.Table) -> alt.Chart:
    """Every run's total throughput over time in one panel, a line per run."""
    title = "Throughput over time, runs overlaid"
    data = rows(link_total, ["run", "t_s", "gbps", "bin_ns"])
    if len({r["run"] for r in data}) < 2:
        return empty_chart(title, "needs two runs with traffic")
    bin_ms = data[0]["bin_ns"] / 1e6
    data = trim_idle(data)
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
        del r["bin_ns"]
    return (
        alt.Chart(inline(data))
        .mark_line(strokeWidth=1.1, interpolate="step-after")
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False, zero=False)),
            y=alt.Y("gbps:Q", title=f"Throughput [Gbit/s] ({bin_ms:g} ms bins)"),
            color=alt.Color("label:N", title="Run", scale=alt.Scale(scheme=CATEGORICAL)),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("t_s:Q", format=".2f"),
                alt.Tooltip("gbps:Q", format=".4f"),
            ],
        )
        .properties(
            width=WIDTH + 160, height=HEIGHT - 60, title=alt.Title(title, subtitle=runs_caption(labels))
        )
    )


def loss_over_time_chart(accuracy_vs_data: pa.Table) -> alt.Chart:
    """Training loss at each logged step against the time since the run's first packet, a line per run."""
    title = "Training loss over time, runs overlaid"
    data = [r for r in rows(accuracy_vs_data, ["run", "step", "t_s", "loss"]) if r["loss"] is not None]
    if len({r["run"] for r in data}) < 2:
        return empty_chart(title, "needs two runs with a training log")
    labels = short_runs(r["run"] for r in data)
    for r in data:
        r["label"] = labels[r["run"]]
    return (
        alt.Chart(inline(data))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(zero=False)),
            y=alt.Y("loss:Q", title="Training loss", scale=alt.Scale(zero=False)),
            color=alt.Color("label:N", title="Run", scale=alt.Scale(scheme=CATEGORICAL)),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("step:Q"),
                alt.Tooltip("t_s:Q", format=".2f"),
                alt.Tooltip("loss:Q", format=".4f"),
            ],
        )
        .properties(
            width=WIDTH + 160, height=HEIGHT - 60, title=alt.Title(title, subtitle=runs_caption(labels))
        )
    )


@uses("window")
def flow_matrix_diff(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    params = options.view_params(["from_ns", "to_ns"])
    summary = run_view(con, "run_summary", runs=runs)
    workers = dict(zip(summary.column("run").to_pylist(), summary.column("workers").to_pylist(), strict=True))
    return flow_matrix_diff_chart(run_view(con, "flow_matrix", runs=runs, params=params), workers)


@uses("bin", "window")
def throughput_overlay(
    con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions
) -> alt.TopLevelMixin:
    bin_ns = options.bin_ns or nice_bin_ns(longest_span_ns(con, runs, options), 1000, 10 * MS)
    params = {**options.view_params(["from_ns", "to_ns"]), "bin_ns": bin_ns}
    return throughput_overlay_chart(run_view(con, "link_total", runs=runs, params=params))


def loss_over_time(con: duckdb.DuckDBPyConnection, runs: Runs) -> alt.TopLevelMixin:
    return loss_over_time_chart(run_view(con, "accuracy_vs_data", runs=runs))


FIGURES = [
    Figure(
        "runs_flow_diff",
        "",
        "Run comparison: volume per worker pair minus that of the first run with as many workers",
        flow_matrix_diff,
        shown_when=several_runs,
    ),
    Figure(
        "runs_throughput",
        "",
        "Run comparison: total throughput over time, runs overlaid",
        throughput_overlay,
        shown_when=several_runs,
    ),
    Figure(
        "runs_loss",
        "",
        "Run comparison: training loss over time, runs overlaid",
        loss_over_time,
        shown_when=several_runs,
    ),
]
