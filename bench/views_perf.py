"""View speed on a ≥ 100 M-packet dataset: `link_util` at 10 ms, `flow_matrix`, `burstiness` down to 100 µs.

    python -m bench.views_perf [--source RUN_DIR] [--copies 8] [--data DIR] [--reps 3] [--reuse]
                               [--baseline REF] [--smoke]

The dataset is made of real captures: the 4 worker pcaps of `--source` (default: the snaplen-128
2 GB iperf3 ring, `python -m bench.make_captures --size 2GB --snaplen 128`, 14 M packets) are
hard-linked into `--copies` run folders and ingested with `tracecore ingest`, so the views run on
exactly what ingest writes (`--reuse`: the dataset already at `--data`). Each view runs in a process
of its own, `--reps` times after a warm run (a warm run of 10 s or more is the only one: it warmed
its own cache); best and median wall time, CPU seconds per DuckDB thread (the wall time on idle
cores) and the process's peak RSS are reported, with the row count, as JSON and Markdown under
bench/results/ (`views-latest.{json,md}`).

`--baseline REF` (e.g. main) also times each view as the git revision REF writes it, in the same
run on the same data: the view files of REF's queries/ that differ from this checkout's are
installed as TEMP macros and views (which DuckDB looks up before the catalog's) in that view's
process, so the before and after numbers differ only in the SQL; both must give the same table
(compared by a digest of the Arrow table, types included).

`--smoke` uses the embedded sample (17 k packets) in 2 copies: seconds, for the test suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO / "bench" / "data" / "iperf3-bulk_2GB_s128-none-0-tcp-normal-ring"
VIEWS = {
    "link_util_10ms": ("SELECT * FROM link_util(bin_ns := 10000000)", 1.0),
    "flow_matrix": ("SELECT * FROM flow_matrix", 1.0),
    "burstiness": ("SELECT * FROM burstiness()", 10.0),  # 100 µs, 1 ms, 10 ms and 100 ms from one pass
    "burstiness_100us": ("SELECT * FROM burstiness(bins_ns := [100000])", 10.0),
}
SELF_WARMING_S = 10.0  # a warm run this long is the only run: its own first seconds warmed the cache


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


def baseline_sql(ref: str) -> list[str]:
    """REF's view files that differ from this checkout's, as TEMP objects, in install order."""
    from tracecore.views import ViewFolder

    here = REPO / "queries"
    listing = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{ref}:queries"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        for name in listing.stdout.split():
            if name.endswith(".sql"):
                text = subprocess.run(
                    ["git", "show", f"{ref}:queries/{name}"],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                Path(tmp, name).write_text(text, encoding="utf-8")
        old = ViewFolder(Path(tmp))
        changed = [
            n
            for n in old.install_order
            if not (here / f"{n}.sql").is_file() or (here / f"{n}.sql").read_text() != old.sql(n)
        ]
        return [
            old.sql(n)
            .replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO")
            .replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW")
            for n in changed
        ]


def table_digest(table) -> str:
    """sha256 of the table's Arrow IPC stream: equal for equal rows, order and types."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]


def time_view_here(data: Path, sql: str, reps: int, before: list[str]) -> dict:
    """Best/median wall and CPU-per-thread seconds of one query over the catalog, in this process."""
    import resource
    import statistics

    from tracecore.ingest import open_catalog

    con = open_catalog(data, read_only=True)
    try:
        for text in before:
            con.execute(text)
        threads = int(con.sql("SELECT current_setting('threads')").fetchall()[0][0])
        walls, cpus = [], []
        for i in range(reps + 1):
            r0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            table = con.sql(sql).to_arrow_table()
            wall = time.perf_counter() - start
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            if i > 0 or wall >= SELF_WARMING_S:  # run 0 warms the OS cache and DuckDB's metadata
                walls.append(wall)
                cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / threads)
            if wall >= SELF_WARMING_S:
                break
        return {
            "rows": table.num_rows,
            "digest": table_digest(table),
            "threads": threads,
            "runs": len(walls),
            "best_wall_s": min(walls),
            "median_wall_s": statistics.median(walls),
            "best_cpu_per_thread_s": min(cpus),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
    finally:
        con.close()


def time_view(data: Path, sql: str, reps: int, before: list[str] | None = None) -> dict:
    """`time_view_here` in a fresh process, so its peak RSS is this query's alone."""
    job = json.dumps({"data": str(data), "sql": sql, "reps": reps, "before": before or []})
    code = "import json, sys; from bench.views_perf import _child; _child(sys.stdin.read())"
    res = subprocess.run(
        [sys.executable, "-c", code], input=job, capture_output=True, text=True, cwd=REPO, check=False
    )
    if res.returncode != 0:
        raise SystemExit(f"view process failed ({sql}): {res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _child(job: str) -> None:
    args = json.loads(job)
    print(json.dumps(time_view_here(Path(args["data"]), args["sql"], args["reps"], args["before"])))


def run(
    source: Path, copies: int, data: Path, reps: int, reuse: bool = False, baseline: str | None = None
) -> dict:
    from tracecore.ingest import ingest, open_catalog

    ingest_s, failed = None, None
    if not reuse:
        runs = build_runs(source, copies, data.parent / f"{data.name}-inputs")
        start = time.perf_counter()
        failed = ingest([runs], data, progress=False).failed
        ingest_s = round(time.perf_counter() - start, 2)
    con = open_catalog(data, read_only=True)
    packets = con.sql("SELECT count(*) FROM packets").fetchall()[0][0]
    n_runs = con.sql("SELECT count(DISTINCT run) FROM runs").fetchall()[0][0]
    con.close()
    before = baseline_sql(baseline) if baseline else None
    result = {
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "load_before": [round(x, 2) for x in os.getloadavg()],  # shared machine: the 1, 5 and 15 min load
        "source": str(source),
        "copies": n_runs,
        "packets": packets,
        "ingest_s": ingest_s,
        "ingest_failed": failed,
        "baseline": baseline,
        "views": {},
    }
    for name, (sql, target) in VIEWS.items():
        after = time_view(data, sql, reps)
        entry = {**after, "target_s": target}
        if before is not None:
            old = time_view(data, sql, reps, before)
            entry["before"] = old
            entry["same_table"] = old["digest"] == after["digest"]
            entry["speedup"] = round(old["best_wall_s"] / after["best_wall_s"], 2)
        result["views"][name] = entry
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def write_results(result: dict, out: Path) -> str:
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        f"Views on {result['packets']:,} packets ({result['copies']} copies of "
        f"{Path(result['source']).name}; {result['machine']}; load average {result['load_before']} before, "
        f"{result['load_after']} after)",
        "",
        "| view | rows | best wall s | median wall s | CPU-s per thread | peak RSS MiB | target s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, v in result["views"].items():
        lines.append(
            f"| {name} | {v['rows']:,} | {v['best_wall_s']:.2f} | {v['median_wall_s']:.2f} | "
            f"{v['best_cpu_per_thread_s']:.2f} | {v['peak_rss_mib']:.0f} | {v['target_s']:.1f} |"
        )
    if result.get("baseline"):
        lines += [
            "",
            f"Before: the same views as `{result['baseline']}` writes them, same run, same data.",
            "",
            "| view | best wall s before | after | speedup | CPU-s per thread before | after "
            "| peak RSS MiB before | after | same table |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for name, v in result["views"].items():
            b = v["before"]
            lines.append(
                f"| {name} | {b['best_wall_s']:.2f} | {v['best_wall_s']:.2f} | {v['speedup']:.2f}× | "
                f"{b['best_cpu_per_thread_s']:.2f} | {v['best_cpu_per_thread_s']:.2f} | "
                f"{b['peak_rss_mib']:.0f} | {v['peak_rss_mib']:.0f} | {'yes' if v['same_table'] else 'NO'} |"
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
    parser.add_argument("--reuse", action="store_true", help="time the dataset already at --data")
    parser.add_argument(
        "--baseline", metavar="REF", help="also time the views as git revision REF writes them"
    )
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="embedded sample, 2 copies (seconds)")
    args = parser.parse_args(argv)
    if args.smoke:
        from tracecore.sample import sample_run

        args.source, args.copies, args.reps = sample_run(), 2, 1
    result = run(args.source, args.copies, args.data, args.reps, args.reuse, args.baseline)
    print(write_results(result, args.results))


if __name__ == "__main__":
    main()
