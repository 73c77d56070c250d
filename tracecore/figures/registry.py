"""Which views each figure reads, with which bins and windows: the glue between queries/ and the builders.

Choices made here (documented in each chart's title or the report): the link figure uses 10 ms
bins, widened for long runs so a line has at most ~2 000 points (fewer per run when many runs
are drawn, at least 300); temporal flows use ~60 bins
per run (the paper's fixed 10 s bins would be one bin for a short run); the batch-size figure
shows each run's busiest link in a 250 ms window around its median logged step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from tracecore.figures import collectives, confidence, gpu, timeseries, traffic, training
from tracecore.figures._views import run_view
from tracecore.figures.holds import has_collectives, has_congestion_counters, has_counters, has_rdma
from tracecore.figures.options import FigureOptions, uses
from tracecore.figures.style import short_runs
from tracecore.query import run_sql
from tracecore.views import view_params

if TYPE_CHECKING:
    import altair as alt
    import duckdb


@dataclass(frozen=True)
class Figure:
    """A named figure: what it shows, which part of the paper, and how to build it."""

    name: str
    ref: str  # where in the paper, or "" for tracecore's own
    purpose: str
    build: Callable[[duckdb.DuckDBPyConnection, list[str] | None], alt.TopLevelMixin]
    # the report draws it only when this says the runs hold what it shows (None: always)
    shown_when: Callable[[duckdb.DuckDBPyConnection, list[str] | None], bool] | None = None


Runs = list[str] | None
FigureFn = Callable[["duckdb.DuckDBPyConnection", Runs], "alt.TopLevelMixin"]
MS = 1_000_000


def nice_bin_ns(span_ns: int, bins: int, floor_ns: int) -> int:
    """The smallest 1-2-5 × 10^k ns width ≥ floor_ns that cuts span_ns into at most `bins` bins."""
    target = max(floor_ns, -(-span_ns // bins))
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale >= target:
                return step * scale
        scale *= 10


def _of_view(view: str, builder: Callable[[pa.Table], alt.TopLevelMixin]) -> FigureFn:
    """A figure that is one view's result drawn by one builder, with the run selection passed on and
    the options the view has parameters for (bin or window width, time window, CI method)."""
    declared = [p.name for p in view_params(view)]
    takes = [
        option
        for option, needs in (("bin", ("bin_ns", "window_ns")), ("window", ("from_ns",)), ("ci", ("method",)))
        if any(n in declared for n in needs)
    ]

    @uses(*takes)
    def figure(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
        return builder(run_view(con, view, runs=runs, params=options.view_params(declared)))

    figure.__name__ = view
    return figure


def longest_span_ns(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions | None = None) -> int:
    """The longest span a figure draws: a run's, or the window's part of it."""
    params = options.view_params(["from_ns", "to_ns"]) if options else {}
    bounds = run_view(con, "run_bounds", runs=runs, params=params)
    if bounds.num_rows == 0:
        return 0
    return max(
        hi - lo for lo, hi in zip(bounds["lo_ns"].to_pylist(), bounds["hi_ns"].to_pylist(), strict=True)
    )


@uses("bin", "window", "links", "clock")
def link_util(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    n_runs = run_view(con, "run_bounds", runs=runs).num_rows
    points = max(300, 2000 // max(1, n_runs))  # the page stays light with many runs
    span = longest_span_ns(con, runs, options)
    bin_ns = options.bin_ns or nice_bin_ns(span, points, 10 * MS)
    table = run_view(
        con, "link_util", runs=runs, params={**options.view_params(["from_ns", "to_ns"]), "bin_ns": bin_ns}
    )
    return timeseries.link_util_chart(
        table,
        links=options.links,
        top=options.top,
        layout=options.layout,
        clock=options.clock,
        trim=options.from_ns is None,
    )


@uses("bin")
def nic_util(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    """The counters' throughput at a width the sampling allows: the coarsest interval or more, about
    300 bins over the longest run."""
    selected = "WHERE $runs IS NULL OR list_contains($runs, run)"
    ((span, interval),) = con.execute(
        f"SELECT (SELECT coalesce(max(hi - lo), 0) FROM (SELECT max(ts_ns) AS hi, min(ts_ns) AS lo"
        f" FROM counters {selected} GROUP BY run)),"
        f" (SELECT coalesce(max(interval_ns), 0) FROM counter_sources {selected})",
        {"runs": runs},
    ).fetchall()  # whole: a result left open blocks the connection's next query
    bin_ns = options.bin_ns or nice_bin_ns(span, 300, max(10 * MS, interval))
    return timeseries.nic_util_chart(run_view(con, "nic_util", runs=runs, params={"bin_ns": bin_ns}))


@uses("window")
def flow_matrix(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    """Fig. 4 from each run's matrix: runs are averaged only with runs of as many workers."""
    table = run_view(con, "flow_matrix", runs=runs, params=options.view_params(["from_ns", "to_ns"]))
    summary = run_view(con, "run_summary", runs=runs)
    workers = dict(zip(summary.column("run").to_pylist(), summary.column("workers").to_pylist(), strict=True))
    return traffic.flow_matrix_chart(table, workers)


@uses("bin", "window")
def temporal_flows(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    bin_ns = options.bin_ns or nice_bin_ns(longest_span_ns(con, runs, options), 60, 100 * MS)
    params = {**options.view_params(["from_ns", "to_ns"]), "bin_ns": bin_ns}
    return timeseries.temporal_flows_chart(run_view(con, "temporal_flows", runs=runs, params=params))


@uses("window")
def burstiness(con: duckdb.DuckDBPyConnection, runs: Runs, options: FigureOptions) -> alt.TopLevelMixin:
    params = options.view_params(["from_ns", "to_ns"])
    return timeseries.burstiness_chart(run_view(con, "burstiness", runs=runs, params=params))


def batch_size_effect(con: duckdb.DuckDBPyConnection, runs: Runs) -> alt.TopLevelMixin:
    """Each run's busiest worker link, 10 ms bins, 250 ms around its median logged step."""
    window_ns = 250 * MS
    meta = {r["run"]: r for r in run_view(con, "run_summary", runs=runs).to_pylist()}
    busiest: dict[str, dict] = {}
    for r in run_view(con, "flow_matrix", runs=runs).to_pylist():
        if r["src_worker"] and r["dst_worker"] and r["bytes"] > busiest.get(r["run"], {}).get("bytes", -1):
            busiest[r["run"]] = r
    steps = {}
    for r in run_view(con, "accuracy_vs_data", runs=runs).to_pylist():
        steps.setdefault(r["run"], []).append(r["t_s"])
    parts = []
    ordered = sorted(busiest.items(), key=lambda kv: (meta[kv[0]]["batch_size"] or 0, kv[0]))
    names = short_runs(run for run, _ in ordered)
    for order, (run, link) in enumerate(ordered):
        ts = sorted(steps.get(run) or [meta[run]["duration_s"] / 2])
        mid_ns = int(ts[len(ts) // 2] * 1e9)
        util = run_view(
            con,
            "link_util",
            runs=[run],
            params={
                "bin_ns": 10 * MS,
                "from_ns": max(0, mid_ns - window_ns // 2),
                "to_ns": mid_ns + window_ns // 2,
            },
        )
        # the link's rows as dicts: a mask and Table.filter, or new Arrow columns, would load pandas
        # (seconds of a report)
        label = f"batch {meta[run]['batch_size']}"
        if len(names) > 1 and names[run] != label:  # the runs' label, unless it says just that
            label += f" · {names[run]}"
        parts.extend(
            {**r, "label": label, "order": order}
            for r in util.to_pylist()
            if (r["src_worker"], r["dst_worker"]) == (link["src_worker"], link["dst_worker"])
        )
    return timeseries.batch_size_effect_chart(parts)


# which source draws a run's collectives when several recorded them: NCCL's own first
SOURCE_ORDER = ("nccl_profiler", "nccl_inspector", "pytorch_profiler", "horovod_timeline")
STEP_SPANS = """
SELECT run, step, min(coalesce(gpu_start_ns, start_ns)) AS t0, max(coalesce(gpu_end_ns, end_ns)) AS t1
FROM profiler_steps WHERE $runs IS NULL OR list_contains($runs, run) GROUP BY run, step
UNION ALL
SELECT run, step, start_ns, end_ns FROM train_steps
WHERE ($runs IS NULL OR list_contains($runs, run)) AND run NOT IN (SELECT run FROM profiler_steps)
    AND run IN (SELECT run FROM collectives WHERE start_ns IS NOT NULL)
ORDER BY run, step
"""


def collective_timeline(con: duckdb.DuckDBPyConnection, runs: Runs) -> alt.TopLevelMixin:
    """Each run's middle step (profiled, else logged): its collectives per rank from one source
    (SOURCE_ORDER), the frames each put on each link, and the links' load in ~150 bins."""
    spans = run_sql(con, STEP_SPANS, {"runs": runs}).to_pylist()
    by_run: dict[str, list[dict]] = {}
    for span in spans:
        by_run.setdefault(span["run"], []).append(span)
    blocks, labels = [], short_runs(by_run)
    # each view once for every run (a report shares them), each run's rows picked here
    calls, wire = (
        {} if not by_run else _by_run(run_view(con, v, runs=runs))
        for v in ("collective_calls", "collective_wire")
    )
    starts = {r["run"]: r["start_ns"] for r in run_view(con, "run_bounds", runs=runs).to_pylist()}
    for run, steps in by_run.items():
        step = steps[len(steps) // 2]
        start = starts.get(run, steps[0]["t0"])  # no packet captured: time from the first step
        block = _timeline_block(con, run, step, labels[run], calls.get(run, []), wire.get(run, []), start)
        if block is not None:
            blocks.append(block)
    return collectives.timeline_chart(blocks)


def _by_run(table: pa.Table) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in table.to_pylist():
        out.setdefault(r["run"], []).append(r)
    return out


def _call_order(call: dict) -> tuple:
    """A collective_calls row's place in a timeline's data. Why: the view has no order, and its rows
    came in its threads' order, so the report's spec differed from run to run."""
    numbers = ("start_ns", "end_ns", "rank", "seq", "call_start_ns", "call_end_ns", "bytes")
    texts = ("comm", "file", "op", "worker", "time_source")
    return (*((call[k] is not None, call[k] or 0) for k in numbers), *(call[k] or "" for k in texts))


def _timeline_block(
    con: duckdb.DuckDBPyConnection,
    run: str,
    step: dict,
    label: str,
    calls: list[dict],
    wire: list[dict],
    start: int,
) -> dict | None:
    """One run's step: `calls` and `wire` are the run's collective_calls and collective_wire rows,
    `start` its first packet (UTC ns)."""
    t0, t1 = step["t0"], step["t1"]
    calls = [c for c in calls if c["start_ns"] is not None and c["start_ns"] < t1 and c["end_ns"] > t0]
    source = next((s for s in SOURCE_ORDER if any(c["source"] == s for c in calls)), None)
    if source is None:
        return None
    calls = sorted((c for c in calls if c["source"] == source), key=_call_order)
    seqs = {(c["comm"], c["seq"]) for c in calls}

    def ms(t: int) -> float:
        return round((min(max(t, t0), t1) - t0) / 1e6, 4)

    def what(op: str, seq: int, size: int | None) -> str:
        return f"{op} #{seq}" + (f" ({size / 1e6:.2f} MB)" if size else "")

    rows = [
        {
            "lane": f"rank {c['rank']} ({c['worker'] or '?'})",
            "kind": "collective",
            "t0_ms": ms(c["start_ns"]),
            "t1_ms": ms(c["end_ns"]),
            "op": c["op"],
            "what": what(c["op"], c["seq"], c["bytes"]),
            "tip": f"{c['time_source']}: {(c['end_ns'] - c['start_ns']) / 1e6:.3f} ms",
        }
        for c in calls
    ]
    for w in wire:
        if w["source"] == source and (w["comm"], w["seq"]) in seqs and w["frames"]:
            rows.append(
                {
                    "lane": f"{w['src_worker']}→{w['dst_worker']} wire",
                    "kind": "wire",
                    "t0_ms": ms(w["first_byte_ns"]),
                    "t1_ms": ms(w["last_byte_ns"]),
                    "op": w["op"],
                    "what": what(w["op"], w["seq"], w["message_bytes"]),
                    "tip": f"{w['bytes']:,} B in {w['frames']} frames, {w['gbps'] or 0:.2f} Gbit/s busy",
                }
            )
    bin_ns = nice_bin_ns(t1 - t0, 150, 100_000)
    util = run_view(
        con,
        "link_util",
        runs=[run],
        params={"bin_ns": bin_ns, "from_ns": max(0, t0 - start), "to_ns": t1 - start},
    )
    load = [
        {
            "link": f"{u['src_worker']}→{u['dst_worker']}",
            "t_ms": round((u["bin_start_ns"] - t0) / 1e6, 4),
            "gbps": u["gbps"],
        }
        for u in util.to_pylist()
    ]
    title = f"{label} · step {step['step']} · {source}"
    return {
        "run": run,
        "title": title,
        "span_ms": (t1 - t0) / 1e6,
        "spans": rows,
        "load": load,
        "bin_ms": bin_ns / 1e6,
    }


FIGURES = [
    Figure(
        "bytes_sent",
        "Fig. 3",
        "Data transmitted per run, stacked by sending worker",
        _of_view("bytes_sent", traffic.bytes_sent_chart),
    ),
    Figure(
        "flow_matrix",
        "Fig. 4",
        "Volume per directed worker pair, one log-scale heatmap per worker count",
        flow_matrix,
    ),
    Figure(
        "flow_counts",
        "Fig. 5",
        "Flows per run under five flow definitions (TCP 4-tuple … RDMA queue pair)",
        _of_view("flow_counts", traffic.flow_counts_chart),
    ),
    Figure(
        "temporal_flows",
        "Fig. 6",
        "Per-flow load over time: each run's busiest TCP flows by bytes, one row each",
        temporal_flows,
    ),
    # the bin width depends on the run's length: the chart's subtitle names it, not this heading
    Figure("link_util", "Fig. 7", "Per-link throughput in Gbit/s over time", link_util),
    Figure(
        "accuracy_vs_data",
        "Fig. 8",
        "Accuracy against cumulative data transmitted",
        _of_view("accuracy_vs_data", training.accuracy_vs_data_chart),
    ),
    Figure(
        "batch_size_effect", "Fig. 9", "Busiest link's 10 ms throughput in 250 ms, per run", batch_size_effect
    ),
    Figure(
        "train_duration",
        "Fig. 10",
        "Training duration normalized to the 0%-loss run",
        _of_view("train_duration", training.train_duration_chart),
    ),
    Figure(
        "throughput_ci",
        "Table I",
        "Mean throughput per run with 95% confidence interval",
        _of_view("throughput_ci", confidence.throughput_ci_chart),
    ),
    Figure(
        "link_util_ci",
        "Table II",
        "Mean throughput per link with 95% confidence interval",
        _of_view("link_util_ci", confidence.link_util_ci_chart),
    ),
    Figure(
        "topology_check",
        "",
        "Measured vs predicted traffic matrix of the collective",
        _of_view("topology_check", traffic.topology_check_chart),
    ),
    Figure("burstiness", "", "Peak-to-mean link load at 100 µs … 100 ms", burstiness),
    Figure(
        "data_per_step",
        "",
        "Payload per rank per step vs 2(N−1)/N × gradient bytes",
        _of_view("data_per_step", training.data_per_step_chart),
    ),
    Figure(
        "step_breakdown",
        "",
        "Where each step's time went on the GPU, per worker: compute, communication, idle (profiler traces)",
        _of_view("step_breakdown", gpu.step_breakdown_chart),
        shown_when=has_collectives,
    ),
    Figure(
        "collective_timeline",
        "",
        "One step's collectives per rank above each link's load (profiler traces, NCCL plugins)",
        collective_timeline,
        shown_when=has_collectives,
    ),
    Figure(
        "nic_util",
        "",
        "NIC throughput per worker from the interface and RDMA counters (runs sampled with them)",
        nic_util,
        shown_when=has_counters,
    ),
    Figure(
        "roce_congestion",
        "",
        "RoCE congestion signals per step and worker: CNPs, ECN marks, PFC pauses (runs sampled with them)",
        _of_view("roce_congestion", timeseries.congestion_chart),
        shown_when=has_congestion_counters,
    ),
    Figure(
        "rdma_ops",
        "",
        "RDMA operation mix per queue-pair flow (RoCE runs)",
        _of_view("rdma_flows", traffic.rdma_ops_chart),
        shown_when=has_rdma,
    ),
]
