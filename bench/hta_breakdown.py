"""Meta's Holistic Trace Analysis (HTA) on a run's PyTorch profiler traces, as JSON: the reference that
step_breakdown's GPU idle, compute, non-compute and overlap are checked against (tests/test_views_hta.py).

Runs in HTA's own venv, never tracecore's (holistictraceanalysis 0.5.0 needs pandas < 3; `make .venv-hta`):

    .venv-hta/bin/python bench/hta_breakdown.py RUN_DIR [RUN_DIR ...] > hta.json

For each run folder (its `kineto-rank*.json`; HTA reads each rank from the trace), twice: `default` as
HTA runs out of the box (each event rounded inwards to whole µs) and `exact` with HTA_DISABLE_NS_ROUNDING=1
(the traces' ns kept), and each rank:
  trace        HTA's own get_temporal_breakdown and get_comm_comp_overlap, as a user calls them: over
               the trace's GPU events launched before the last ProfilerStep (HTA's default), between the
               first and the last of them
  iterations   the same two analyzers on each iteration's GPU events alone (HTA's `iteration` column: a
               kernel, memcpy or memset belongs to the ProfilerStep#N its launch ran in), all steps
Times in µs as HTA gives them; overlap as HTA's ratio of communication time that overlaps computation
(HTA rounds it to 0.01 %).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import warnings
from pathlib import Path


class _IterationView:
    """What HTA's breakdown and overlap analyzers read of a Trace (its frames and symbol table), for one
    iteration's events."""

    def __init__(self, trace: object, frames: dict) -> None:
        self.traces = frames
        self.symbol_table = trace.symbol_table


def _breakdown(trace: object) -> dict[int, dict]:
    """HTA's temporal breakdown and comm/comp overlap per rank of `trace` (a Trace or an _IterationView)."""
    from hta.analyzers.breakdown_analysis import BreakdownAnalysis
    from hta.analyzers.communication_analysis import CommunicationAnalysis
    from hta.utils.utils import is_comm_kernel

    sym = trace.symbol_table.get_sym_table()
    table = BreakdownAnalysis.get_temporal_breakdown(trace, visualize=False)
    out = {
        int(r["rank"]): {
            "idle_us": float(r["idle_time(us)"]),
            "compute_us": float(r["compute_time(us)"]),
            "non_compute_us": float(r["non_compute_time(us)"]),
            "kernel_us": float(r["kernel_time(us)"]),
            "overlap_ratio": None,
        }
        for r in table.to_dict("records")
    }
    with_comm = {
        rank: df
        for rank, df in trace.traces.items()
        if df[df["stream"].ne(-1)]["name"].map(lambda i: is_comm_kernel(sym[i])).any()
    }
    if with_comm:
        overlap = CommunicationAnalysis.get_comm_comp_overlap(
            _IterationView(trace, with_comm), visualize=False
        )
        for r in overlap.to_dict("records"):
            out[int(r["rank"])]["overlap_ratio"] = float(r["comp_comm_overlap_pctg"]) / 100
    return out


ROUNDING_OFF = "HTA_DISABLE_NS_ROUNDING"  # HTA reads it each time it parses a trace


def analyse(run: Path) -> dict:
    """HTA's breakdown of one run folder, with and without its µs rounding."""
    files = sorted(str(p.resolve()) for p in run.glob("kineto-rank*.json"))
    if not files:
        raise SystemExit(f"{run}: no kineto-rank*.json")
    out = {}
    for mode, flag in (("default", None), ("exact", "1")):
        os.environ.pop(ROUNDING_OFF, None)
        if flag:
            os.environ[ROUNDING_OFF] = flag
        out[mode] = _analyse(run, files)
    os.environ.pop(ROUNDING_OFF, None)
    return out


def _analyse(run: Path, files: list[str]) -> dict:
    """HTA's breakdown of one run's traces: over the whole trace and per iteration, per rank."""
    from hta.trace_analysis import TraceAnalysis

    whole = TraceAnalysis(trace_files=files, trace_dir=str(run))
    every = TraceAnalysis(trace_files=files, trace_dir=str(run), include_last_profiler_step=True)
    iterations = []
    steps = sorted({int(i) for df in every.t.traces.values() for i in df["iteration"].unique() if i >= 0})
    for step in steps:
        frames = {
            rank: df[df["iteration"].eq(step) & df["stream"].ne(-1)] for rank, df in every.t.traces.items()
        }
        frames = {rank: df for rank, df in frames.items() if len(df)}
        for rank, row in sorted(_breakdown(_IterationView(every.t, frames)).items()):
            iterations.append({"rank": rank, "step": step, **row})
    trace = [{"rank": rank, **row} for rank, row in sorted(_breakdown(whole.t).items())]
    return {"trace": trace, "iterations": iterations}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders with kineto-rank*.json")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # HTA logs each file it parses
    warnings.simplefilter("ignore", FutureWarning)  # pandas 2 on HTA's replace()
    result = {run.name: analyse(run) for run in args.runs}
    json.dump({"hta": "0.5.0", "runs": result}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
