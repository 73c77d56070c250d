"""Where each training step's time went on the GPU: compute, communication it hid or not, other GPU
work and idle time, per worker and step (step_breakdown), as an Altair chart.

Why stacked to the iteration: the step's GPU span (ProfilerStep#N on the GPU) can be half of the
iteration's wall time; what the GPU did not run of the step is idle time too, so each bar is the
iteration and its parts say what the GPU did in it.
"""

from __future__ import annotations

import altair as alt
import pyarrow as pa

from tracecore.figures._data import WIDTH, empty_chart, inline, rows
from tracecore.figures.style import runs_caption, short_runs, worker_key

TITLE = "Step breakdown: where each step's time went on the GPU"
# (part, colour), stacked left to right; the parts of a step add up to its iteration's wall time
PARTS = (
    ("compute, communication hidden", "#2f6fa7"),
    ("compute", "#8fbbe0"),
    ("exposed communication", "#e4572e"),
    ("other GPU work (memcpy, memset)", "#b9a04b"),
    ("GPU idle", "#d9d9d9"),
    ("communication (compute not traced)", "#f3a683"),
    ("rest of the step (not traced)", "#ececec"),
)
STEP_COLUMNS = [
    "run",
    "worker",
    "rank",
    "step",
    "timed_by",
    "step_ns",
    "iteration_ns",
    "compute_ns",
    "communication_ns",
    "overlap_ns",
    "exposed_ns",
    "memory_ns",
    "gpu_idle_ns",
]


def step_parts(step: dict) -> list[tuple[str, float]]:
    """(part, ms) of one step_breakdown row, summing to its iteration (else its step) wall time.

    Traced steps: the GPU span split into compute (with the communication it hid), exposed
    communication, other GPU work and idle, plus the iteration's time outside the span as idle. A
    step timed by the training log: its collectives' time and the rest, compute not being known."""
    span = step["step_ns"] or 0
    whole = max(span, step.get("iteration_ns") or 0)
    ms = 1e6
    if step.get("compute_ns") is None or step.get("gpu_idle_ns") is None:
        comm = min(step["communication_ns"] or 0, whole)
        return [
            ("communication (compute not traced)", comm / ms),
            ("rest of the step (not traced)", (whole - comm) / ms),
        ]
    overlap, compute, exposed = step["overlap_ns"] or 0, step["compute_ns"], step["exposed_ns"] or 0
    idle = step["gpu_idle_ns"] + (whole - span)
    other = max(0, span - step["gpu_idle_ns"] - compute - exposed)
    return [
        ("compute, communication hidden", overlap / ms),
        ("compute", (compute - overlap) / ms),
        ("exposed communication", exposed / ms),
        ("other GPU work (memcpy, memset)", other / ms),
        ("GPU idle", idle / ms),
    ]


def step_breakdown_chart(step_breakdown: pa.Table) -> alt.VConcatChart | alt.Chart:
    """Each worker's steps as bars of milliseconds stacked by what the GPU did (`step_parts`), one
    panel per run; the tooltip gives the step's numbers as the view has them."""
    names = [c for c in STEP_COLUMNS if c in _columns(step_breakdown)]
    steps = rows(step_breakdown, names)
    if not steps:
        return empty_chart(
            TITLE,
            "no training steps in the selected runs (no profiler traces, nor a log with collectives)",
        )
    labels = short_runs(s["run"] for s in steps)
    order = [p for p, _ in PARTS]
    data = []
    for s in sorted(steps, key=lambda s: (s["run"], worker_key(s["worker"]), s["step"])):
        bar = f"{s['worker'] or 'rank ' + str(s['rank'])} · step {s['step']}"
        whole = max(s["step_ns"] or 0, s.get("iteration_ns") or 0) / 1e6
        for part, value in step_parts(s):
            if value > 0:
                data.append(
                    {
                        "run": s["run"],
                        "bar": bar,
                        "part": part,
                        "order": order.index(part),
                        "ms": round(value, 4),
                        "share": value / whole if whole else None,
                        "iteration_ms": round(whole, 4),
                        "gpu_span_ms": round((s["step_ns"] or 0) / 1e6, 4),
                    }
                )
    used = [p for p in order if any(r["part"] == p for r in data)]
    colors = dict(PARTS)
    bars = (
        alt.Chart()
        .mark_bar(height={"band": 0.75})
        .encode(
            y=alt.Y("bar:N", title=None, sort=None, axis=alt.Axis(labelLimit=200)),
            x=alt.X("ms:Q", title="Time in the iteration [ms]", stack="zero"),
            color=alt.Color(
                "part:N",
                title="GPU time",
                sort=used,
                scale=alt.Scale(domain=used, range=[colors[p] for p in used]),
                legend=alt.Legend(orient="bottom", columns=3, labelLimit=260),
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("bar:N", title="worker · step"),
                alt.Tooltip("part:N"),
                alt.Tooltip("ms:Q", format=".3f", title="ms"),
                alt.Tooltip("share:Q", format=".1%", title="share of the iteration"),
                alt.Tooltip("iteration_ms:Q", format=".3f", title="iteration [ms]"),
                alt.Tooltip("gpu_span_ms:Q", format=".3f", title="GPU span of the step [ms]"),
            ],
        )
    )
    subtitle = [
        "each bar one worker's step, as long as its iteration: the GPU span split as HTA does, the rest idle",
        runs_caption(labels),
    ]
    panels = []
    for run in labels:
        part = [r for r in data if r["run"] == run]
        n_bars = len({r["bar"] for r in part})
        panel = bars.properties(data=inline(part), width=WIDTH + 80, height=alt.Step(18) if n_bars else 40)
        panels.append(
            panel.properties(title=alt.Title(labels[run], fontSize=12)) if len(labels) > 1 else panel
        )
    if len(panels) == 1:
        return panels[0].properties(title=alt.Title(TITLE, subtitle=subtitle))
    return alt.vconcat(*panels, title=alt.Title(TITLE, subtitle=subtitle)).resolve_scale(
        x="shared", color="shared"
    )


def _columns(table: pa.Table | list[dict]) -> list[str]:
    if isinstance(table, list):
        return list(table[0]) if table else STEP_COLUMNS
    from tracecore.figures._data import as_arrow

    return as_arrow(table).column_names
