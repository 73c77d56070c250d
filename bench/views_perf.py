"""View speed on a ≥ 100 M-packet dataset: `link_util` at 10 ms and `flow_matrix`.

    python -m bench.views_perf [--source RUN_DIR] [--copies 8] [--data DIR] [--reps 3] [--smoke]

The dataset is made of real captures: the 4 worker pcaps of `--source` (default: the snaplen-128
2 GB iperf3 ring, `python -m bench.make_captures --size 2GB --snaplen 128`, 14 M packets) are
hard-linked into `--copies` run folders and ingested with `tracecore ingest`, so the views run on
exactly what ingest writes. Each view runs `--reps` times on a warm cache; best and median wall
time and CPU seconds per DuckDB thread (the wall time on idle cores) are reported, with the row
count, as JSON and Markdown under bench/results/ (`views-latest.{json,md}`).

`--smoke` uses the embedded sample (17 k packets) in 2 copies: seconds, for the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO / "bench" / "data" / "iperf3-bulk_2GB_s128-none-0-tcp-normal-ring"
VIEWS = {
    "link_util_10ms": ("SELECT * FROM link_util(bin_ns := 10000000)", 2.0),
    "flow_matrix": ("SELECT * FROM flow_matrix", 1.0),
}


def build_runs(source: Path, copies: int, root: Path) -> Path:
    """`copies` run folders of hard links to the source's captures (no extra disk)."""
    pcaps = sorted(p for p in source.iterdir() if ".pcap" in p.name)
    if not pcaps:
        raise SystemExit(f"no captures in {source}; make them with python -m bench.make_captures")
    runs = root / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    for k in range(copies):
        run = runs / f"{source.name}-copy{k}"
        run.mkdir(parents=True)
        for pcap in pcaps:
            try:
                os.link(pcap, run / pcap.name)
            except OSError:
                shutil.copy2(pcap, run / pcap.name)
    return runs


def time_view(data: Path, sql: str, reps: int) -> dict:
    """Best/median wall and CPU-per-thread seconds of one query over the catalog."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data, read_only=True)
    try:
        threads = int(con.sql("SELECT current_setting('threads')").fetchall()[0][0])
        walls, cpus, rows = [], [], 0
        con.sql(sql).to_arrow_table()  # warm the OS cache and DuckDB's metadata
        for _ in range(reps):
            r0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            rows = con.sql(sql).to_arrow_table().num_rows
            walls.append(time.perf_counter() - start)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / threads)
        return {
            "rows": rows,
            "threads": threads,
            "best_wall_s": min(walls),
            "median_wall_s": statistics.median(walls),
            "best_cpu_per_thread_s": min(cpus),
        }
    finally:
        con.close()


def run(source: Path, copies: int, data: Path, reps: int) -> dict:
    from tracecore.ingest import ingest, open_catalog

    runs = build_runs(source, copies, data.parent / f"{data.name}-inputs")
    start = time.perf_counter()
    summary = ingest([runs], data, progress=False)
    ingest_s = time.perf_counter() - start
    con = open_catalog(data, read_only=True)
    packets = con.sql("SELECT count(*) FROM packets").fetchall()[0][0]
    con.close()
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "source": str(source),
        "copies": copies,
        "packets": packets,
        "ingest_s": round(ingest_s, 2),
        "ingest_failed": summary.failed,
        "views": {},
    }
    for name, (sql, target) in VIEWS.items():
        result["views"][name] = {**time_view(data, sql, reps), "target_s": target}
    return result


def write_results(result: dict, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"Views on {result['packets']:,} packets ({result['copies']} copies of "
        f"{Path(result['source']).name}; {result['machine']})",
        "",
        "| view | rows | best wall s | median wall s | CPU-s per thread | target s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, v in result["views"].items():
        lines.append(
            f"| {name} | {v['rows']:,} | {v['best_wall_s']:.2f} | {v['median_wall_s']:.2f} | "
            f"{v['best_cpu_per_thread_s']:.2f} | {v['target_s']:.1f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "views-latest.md").write_text(text, encoding="utf-8")
    (out / "views-latest.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--data", type=Path, default=REPO / "bench" / "data" / "views100m")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="embedded sample, 2 copies (seconds)")
    args = parser.parse_args(argv)
    if args.smoke:
        from tracecore.sample import sample_run

        args.source, args.copies, args.reps = sample_run(), 2, 1
    result = run(args.source, args.copies, args.data, args.reps)
    print(write_results(result, args.results))


if __name__ == "__main__":
    main()
