"""RDMA view speed: `rdma_flows` and `congestion` next to their frame-counting peers, on RoCE and TCP runs.

    python -m bench.rdma_views [--size 100M] [--data DIR] [--reps 5] [--results DIR] [--smoke]

Inputs are real frames: the RoCE run is the three NCCL ring captures of ../shared/corpus-rdma, each
repeated to `--size` with rewritten timestamps (bench.make_rdma_capture), as the three workers of one
run; the TCP run is the embedded DDP sample's four captures repeated the same way. Both are ingested
into one dataset. Each view runs `--reps` times after a warm run; the best and median wall seconds
are reported with each view's ratio to its peer in the same run (`rdma_flows` to `flow_matrix`, both
a group-by over every packet; `congestion` to `link_util`, whose bins it extends), as JSON and
Markdown under `--results` (`rdma-views-latest.{json,md}`). Views missing from the checkout that runs
it (an older tracecore) are skipped, so the same command times before and after a change.

`--smoke`: 1 MB per capture, one repetition: seconds, for the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import time
from pathlib import Path

from bench.make_rdma_capture import RDMA_CORPUS, _size, make

REPO = Path(__file__).resolve().parent.parent
ROCE_RUN = "nccl_ring-allreduce-none-0-nccl-normal-ring"
TCP_RUN = "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
# timing name: (view, its call with {run}, the timing it is compared with, or None)
VIEWS = {
    "flow_matrix": ("flow_matrix", "flow_matrix(runs := ['{run}'])", None),
    "rdma_flows": ("rdma_flows", "rdma_flows(runs := ['{run}'])", "flow_matrix"),
    "link_util_10ms": ("link_util", "link_util(bin_ns := 10000000, runs := ['{run}'])", None),
    "congestion_10ms": ("congestion", "congestion(bin_ns := 10000000, runs := ['{run}'])", "link_util_10ms"),
    "flow_counts": ("flow_counts", "flow_counts(runs := ['{run}'])", None),
    "topology_check": ("topology_check", "topology_check(runs := ['{run}'])", None),
}


def build_runs(root: Path, size: int) -> Path:
    """runs/ROCE_RUN (3 NCCL captures) and runs/TCP_RUN (the sample's 4), each capture repeated to `size`."""
    from tracecore.sample import sample_run

    runs = root / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    for i in range(3):
        (runs / ROCE_RUN).mkdir(parents=True, exist_ok=True)
        make(runs / ROCE_RUN / f"node{i}.pcap", size, [RDMA_CORPUS / f"linlinw5_nccl_ring2_node{i}.pcap"])
    (runs / TCP_RUN).mkdir(parents=True)
    for pcap in sorted(sample_run().glob("worker-*-tcpdump.pcap")):
        make(runs / TCP_RUN / pcap.name, size, [pcap])
    return runs


def time_sql(con, sql: str, reps: int) -> dict:
    con.sql(sql).to_arrow_table()  # warm the OS cache and DuckDB's metadata
    walls, rows = [], 0
    for _ in range(reps):
        start = time.perf_counter()
        rows = con.sql(sql).to_arrow_table().num_rows
        walls.append(time.perf_counter() - start)
    return {"rows": rows, "best_wall_s": min(walls), "median_wall_s": statistics.median(walls)}


def run(data: Path, size: int, reps: int) -> dict:
    from tracecore.ingest import ingest, open_catalog
    from tracecore.views import view_names

    runs = build_runs(data.parent / f"{data.name}-inputs", size)
    shutil.rmtree(data, ignore_errors=True)
    summary = ingest([runs], data, progress=False)
    con = open_catalog(data, read_only=True)
    try:
        packets = dict(con.sql("SELECT run, count(*) FROM packets GROUP BY run").fetchall())
        result = {
            "machine": f"{platform.node()} {os.cpu_count()} cores",
            "size_per_capture": size,
            "packets": packets,
            "ingest_failed": summary.failed,
            "runs": {},
        }
        for run_name in (ROCE_RUN, TCP_RUN):
            timings = {}
            for name, (view, call, _) in VIEWS.items():
                if view in view_names():
                    timings[name] = time_sql(con, "SELECT * FROM " + call.format(run=run_name), reps)
            for name, (_, _, peer) in VIEWS.items():
                if name in timings and peer in timings:
                    timings[name]["ratio_to_peer"] = (
                        timings[name]["best_wall_s"] / timings[peer]["best_wall_s"]
                    )
            result["runs"][run_name] = timings
    finally:
        con.close()
    return result


def write_results(result: dict, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for run_name, timings in result["runs"].items():
        lines += [
            f"{run_name}: {result['packets'][run_name]:,} packets ({result['machine']})",
            "",
            "| view | rows | best wall s | median wall s | best ÷ peer's |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, v in timings.items():
            ratio = f"{v['ratio_to_peer']:.2f} ({VIEWS[name][2]})" if "ratio_to_peer" in v else ""
            lines.append(
                f"| {name} | {v['rows']:,} | {v['best_wall_s']:.3f} | {v['median_wall_s']:.3f} | {ratio} |"
            )
        lines.append("")
    text = "\n".join(lines)
    (out / "rdma-views-latest.md").write_text(text, encoding="utf-8")
    (out / "rdma-views-latest.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rdma_views", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=_size, default=_size("100M"), help="bytes per capture [100M]")
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data" / "rdma-views")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="1 MB captures, one repetition (seconds)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.size, args.reps = 1 << 20, 1
    print(write_results(run(args.data, args.size, args.reps), args.results))


if __name__ == "__main__":
    main()
