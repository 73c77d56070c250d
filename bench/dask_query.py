"""Views split by run: DuckDB in this process vs parts on a 2-worker Dask LocalCluster.

    python -m bench.dask_query                        # 8 runs x 4 captures x 128 MB, 3 repeats
    python -m bench.dask_query --runs 8 --capture-mb 32 --repeats 2 --tiny 32

Why two workloads, as in bench/dask_ingest.py: the large one (the sample's records repeated later in
time, `--runs` runs of 4 captures, one run per part) says whether parts on the cluster keep the local
speed; the tiny one (`--tiny` runs of one small capture, one run per part: `part_packets=0`) says what
a part costs beyond its work: (cluster wall - local wall) / parts. Each mode is one
`query_dataset` call, as `tracecore query` makes it: local = open the catalog + run the view;
cluster = open the catalog to plan + connect + every part opening the catalog on a worker + the join.
The cluster (2 worker processes, 1 thread each) starts once (reported apart); modes alternate within
each repeat, so load from other jobs falls on both. Writes Markdown to --results
(default bench/results/dask-query.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.dask_ingest import TINY_CAPTURE, make_runs, make_tiny
from tracecore.ingest import ingest
from tracecore.query import query_dataset

REPO = Path(__file__).resolve().parent.parent
VIEWS = {  # view → parameters: the paper's answers, one of each shape (matrix, bins, windows, combine)
    "flow_matrix": {},
    "link_util": {"bin_ns": 100_000_000},
    "throughput_ci": {},
    "flow_counts": {},
    "flow_matrix_mean": {},
}


def timed(data: Path, view: str, scheduler: str | None, part_packets: int | None) -> tuple[float, int]:
    """(wall seconds, rows) of one query."""
    start = time.perf_counter()
    table = query_dataset(data, view, params=VIEWS[view], scheduler=scheduler, part_packets=part_packets)
    return time.perf_counter() - start, table.num_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--capture-mb", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", type=int, default=32, help="one-capture runs for the per-part cost")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results" / "dask-query.md")
    args = parser.parse_args()
    from distributed import LocalCluster

    root = Path(tempfile.mkdtemp(prefix="tracecore-dask-query-bench-"))
    try:
        data = {"big": root / "big-data", "tiny": root / "tiny-data"}
        packets = {
            "big": ingest(make_runs(root, args.runs, args.capture_mb), data["big"], jobs=2).packets,
            "tiny": ingest(make_tiny(root, args.tiny), data["tiny"], jobs=2).packets,
        }
        start = time.perf_counter()
        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", local_directory=root
        ) as cluster:
            up_s = time.perf_counter() - start
            walls: dict[tuple[str, str, str], list[float]] = {}
            rows: dict[tuple[str, str], int] = {}
            for _ in range(args.repeats):
                for load in ("big", "tiny"):
                    for view in VIEWS:
                        for mode, scheduler in (("local", None), ("cluster", cluster.scheduler_address)):
                            wall, rows[(load, view)] = timed(data[load], view, scheduler, 0)
                            walls.setdefault((load, view, mode), []).append(wall)
        report(args, walls, rows, packets, up_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, walls: dict, rows: dict, packets: dict, up_s: float) -> None:
    """Print and write the Markdown results."""
    med = {k: statistics.median(v) for k, v in walls.items()}
    parts = {"big": args.runs, "tiny": args.tiny}
    lines = [
        "# Views: DuckDB in one process vs split by run on a 2-worker Dask LocalCluster",
        "",
        f"`python -m bench.dask_query --runs {args.runs} --capture-mb {args.capture_mb} "
        f"--repeats {args.repeats} --tiny {args.tiny}`; {os.cpu_count()} cores (shared; load average "
        f"{os.getloadavg()[0]:.1f} at the end), {time.strftime('%Y-%m-%d %H:%M %Z')}.",
        f"Datasets: big = {args.runs} runs x 4 captures of {args.capture_mb} MB "
        f"({packets['big']:,} packets); tiny = {args.tiny} runs of {TINY_CAPTURE} "
        f"({packets['tiny']:,} packets). One run per part.",
        f"Cluster start-up (not in the times below): {up_s:.1f} s.",
        "",
        "| workload | view | parts | rows | local s | cluster s | cluster / local | all local | all cluster"
        " |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for load in ("big", "tiny"):
        for view in VIEWS:
            local, cluster = med[(load, view, "local")], med[(load, view, "cluster")]
            every = [", ".join(f"{v:.2f}" for v in walls[(load, view, m)]) for m in ("local", "cluster")]
            lines.append(
                f"| {load} | {view} | {parts[load]} | {rows[(load, view)]:,} | {local:.2f} | {cluster:.2f} "
                f"| {cluster / local:.2f}x | {every[0]} | {every[1]} |"
            )
    per_part = [(med[("tiny", v, "cluster")] - med[("tiny", v, "local")]) / args.tiny for v in VIEWS]
    each = ", ".join(f"{p * 1e3:.0f}" for p in per_part)
    lines += [
        "",
        f"Cost per part on the cluster (tiny workload, medians, per view): {each} ms; "
        f"median {statistics.median(per_part) * 1e3:.0f} ms.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)


if __name__ == "__main__":
    main()
