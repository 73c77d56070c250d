"""Ingest on this machine's threads vs on a 2-worker Dask cluster: wall time and overhead per task.

    python -m bench.dask_ingest                       # 8 runs x 4 captures x 128 MB (4 GB), 3 repeats
    python -m bench.dask_ingest --runs 8 --capture-mb 32 --repeats 2 --tiny 32
    python -m bench.dask_ingest --commit-files 1000,10000,100000   # only the commit's cost per file

Why two workloads: the large one (real sample records repeated later in time, as the tests'
`repeat_pcap` does) says whether the cluster keeps the local throughput; the tiny one (`--tiny` runs
of one small capture each) says what a task costs the cluster beyond the work itself:
(cluster wall - local wall) / tasks. The cluster is a `LocalCluster` of 2 worker processes with one
thread each, started once (its start-up is reported apart). Modes alternate within each repeat so
that load from other jobs on the machine falls on both. Inputs are hard links of one set of 4
captures (one per worker), so the page cache holds them for both modes alike. Writes a Markdown
table to --results (default bench/results/dask-ingest.md). `--commit-files` instead times the one
step a cluster cannot spread, the driver's catalog commit, for datasets of that many part files (symbolic
links of one real part, so only the catalog's size grows).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from tests.test_ingest_support import repeat_pcap
from tracecore.ingest import ingest
from tracecore.sample import sample_run

REPO = Path(__file__).resolve().parent.parent
TINY_CAPTURE = "dpkt__http.pcap"


def make_runs(root: Path, runs: int, capture_mb: int) -> list[Path]:
    """`runs` run folders of the sample's 4 captures, each grown to `capture_mb` MB (hard links;
    no run.toml: its pinned name would make the runs one)."""
    grown = root / "grown"
    grown.mkdir(parents=True)
    for src in sorted(sample_run().glob("worker-*-tcpdump.pcap")):
        repeat_pcap(src, grown / src.name, capture_mb << 20)
    folders = []
    for i in range(runs):
        run = root / "big" / f"torch_ddp-resnet8w8-sgd-{16 + i}-gloo-normal-ring"
        run.mkdir(parents=True)
        for cap in grown.iterdir():
            os.link(cap, run / cap.name)
        folders.append(run)
    return folders


def make_tiny(root: Path, count: int) -> list[Path]:
    """`count` one-capture runs of a small real capture (the corpus's TINY_CAPTURE)."""
    src = REPO.parent / "shared" / "corpus" / TINY_CAPTURE
    files = []
    for i in range(count):
        run = root / "tiny" / f"tiny{i:03d}"
        run.mkdir(parents=True)
        os.link(src, run / "worker-0-tcpdump.pcap")
        files.append(run)
    return files


def timed(paths: list[Path], out: Path, scheduler: str | None) -> tuple[float, int]:
    """(wall seconds, packets) of one fresh ingest; the dataset is removed afterwards."""
    start = time.perf_counter()
    summary = ingest(paths, out, jobs=2, scheduler=scheduler)
    wall = time.perf_counter() - start
    assert not summary.failed, summary.failed
    shutil.rmtree(out)
    return wall, summary.packets


def commit_costs(counts: list[int]) -> list[str]:
    """Markdown rows: seconds of a catalog commit (draft prepared beforehand) per number of part files."""
    import pyarrow as pa

    from tracecore.ingest import layout
    from tracecore.ingest.catalog import CatalogDraft, load_state

    rows = []
    for count in counts:
        root = Path(tempfile.mkdtemp(prefix="tracecore-commit-bench-"))
        try:
            out = root / "data"
            ingest([sample_run()], out, jobs=2)
            state = load_state(out)
            first = state.rows("_files")[0]
            folder = (out / first["path"]).parent
            files = []
            for i in range(count):
                rel = f"{folder.relative_to(out).as_posix()}/part-{1_000_000 + i}.parquet"
                os.symlink(out / first["path"], out / rel)  # ext4 allows 65,000 hard links
                files.append({**first, "path": rel})
            state.tables["_files"] = pa.Table.from_pylist(files, schema=state.tables["_files"].schema)
            draft = CatalogDraft(out).prepare()
            start = time.perf_counter()
            draft.commit(state)
            seconds = time.perf_counter() - start
            size = (out / layout.CATALOG_NAME).stat().st_size
            rows.append(f"| {count:,} | {seconds:.2f} | {seconds / count * 1e6:.0f} | {size / 1e6:.1f} |")
            print(rows[-1], flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--capture-mb", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", type=int, default=32, help="one-capture runs for the per-task cost")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results" / "dask-ingest.md")
    parser.add_argument("--commit-files", help="comma-separated part-file counts: time only the commit")
    args = parser.parse_args()
    if args.commit_files:
        rows = commit_costs([int(n) for n in args.commit_files.split(",")])
        when = f"{time.strftime('%Y-%m-%d %H:%M %Z')}, load {os.getloadavg()[0]:.1f}"
        command = f"python -m bench.dask_ingest --commit-files {args.commit_files}"
        head = ["", "## Catalog commit vs part files", "", f"`{command}`; {when}."]
        head += ["", "| part files | commit s | µs per file | catalog MB |", "|---|---|---|---|"]
        text = "\n".join(head + rows) + "\n"
        print(text)
        with open(args.results, "a", encoding="utf-8") as fh:
            fh.write(text)
        return
    from distributed import LocalCluster

    root = Path(tempfile.mkdtemp(prefix="tracecore-dask-bench-"))
    try:
        big, tiny = make_runs(root, args.runs, args.capture_mb), make_tiny(root, args.tiny)
        input_gb = sum(p.stat().st_size for r in big for p in r.glob("*.pcap")) / 1e9
        start = time.perf_counter()
        with LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", local_directory=root
        ) as cluster:
            up_s = time.perf_counter() - start
            walls: dict[tuple[str, str], list[float]] = {}
            packets = {}
            for _ in range(args.repeats):
                for load, paths in (("big", big), ("tiny", tiny)):
                    for mode, scheduler in (("threads", None), ("cluster", cluster.scheduler_address)):
                        wall, packets[load] = timed(paths, root / "out", scheduler)
                        walls.setdefault((load, mode), []).append(wall)
        report(args, walls, packets, input_gb, up_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(args: argparse.Namespace, walls: dict, packets: dict, input_gb: float, up_s: float) -> None:
    """Print and write the Markdown results."""
    med = {k: statistics.median(v) for k, v in walls.items()}
    lines = [
        "# Ingest: threads of one process vs a 2-worker Dask LocalCluster",
        "",
        f"`python -m bench.dask_ingest --runs {args.runs} --capture-mb {args.capture_mb} "
        f"--repeats {args.repeats} --tiny {args.tiny}`; {os.cpu_count()} cores (shared; load average "
        f"{os.getloadavg()[0]:.1f} at the end), {time.strftime('%Y-%m-%d %H:%M %Z')}.",
        f"Cluster start-up (not in the times below): {up_s:.1f} s.",
        "",
        "| workload | tasks | input | mode | wall s (median) | all runs | Mpkt/s |",
        "|---|---|---|---|---|---|---|",
    ]
    sizes = {
        "big": (args.runs * 4, f"{input_gb:.2f} GB"),
        "tiny": (args.tiny, f"{args.tiny} x {TINY_CAPTURE}"),
    }
    for (load, mode), values in sorted(walls.items()):
        tasks, size = sizes[load]
        rate = packets[load] / med[(load, mode)] / 1e6
        runs = ", ".join(f"{v:.2f}" for v in values)
        median = med[(load, mode)]
        lines.append(f"| {load} | {tasks} | {size} | {mode} | {median:.2f} | {runs} | {rate:.2f} |")
    per_task = (med[("tiny", "cluster")] - med[("tiny", "threads")]) / args.tiny
    lines += [
        "",
        f"Overhead per task on the cluster (tiny workload, medians): {per_task * 1e3:.1f} ms.",
        f"Large workload, cluster / threads: {med[('big', 'cluster')] / med[('big', 'threads')]:.2f}x.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(text)


if __name__ == "__main__":
    main()
