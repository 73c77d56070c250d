"""A job of many ranks end to end: the ingest's time and memory, and the views a user asks first.

    python -m bench.job_scale JOB [JOB ...] [--data DIR] [--reuse] [--reps 3] [--out NAME]

Each JOB is a folder of `bench.make_job_traces` (its manifest.json says the ranks, steps, bytes,
events and the planted stragglers). It is ingested with `tracecore ingest` as one whole process (wall
time, the peak RSS of its process tree sampled every 50 ms: the ingest's parser processes count, GNU
time's largest single process beside it); then each view below runs `--reps` times in a process of its
own (`tracecore query VIEW --format csv`, whole processes: start-up included), with the query plan of
the slowest (`EXPLAIN ANALYZE`) kept. The stragglers are checked against the plan: the ranks
`collective_verdicts` judges `straggler` (its `late_ranks`) and the last ranks of
`collective_stragglers`' wide spreads must be the planted ones. Results go to
bench/results/<NAME>.md and .json (default `job-scale`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.hta_side_by_side import GIB, measure

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
TRACECORE = [sys.executable, "-m", "tracecore"]
VIEWS = ("step_breakdown", "collective_stragglers", "collective_coverage", "collective_verdicts")
LIMIT = 16 * GIB  # a process tree past this is killed (the machine has no swap)


def _manifest(job: Path) -> dict:
    return json.loads((job / "manifest.json").read_text())


def ingest(job: Path, data: Path) -> dict:
    """`tracecore ingest JOB --data DATA` as one process tree, measured."""
    shutil.rmtree(data, ignore_errors=True)
    m = measure([*TRACECORE, "ingest", str(job), "--data", str(data), "-q"], limit=LIMIT, timeout=7200)
    if m.rc != 0:
        raise SystemExit(f"ingest of {job} failed ({m.rc}): {m.stderr_tail}")
    man = _manifest(job)
    json_bytes = sum(r["json_bytes"] if "json_bytes" in r else r["bytes"] for r in man["per_rank"])
    return {
        "wall_s": m.wall_s,
        "peak_rss_mib": round(m.peak_rss / 2**20),
        "max_rss_one_mib": round((m.max_rss_one or 0) / 2**20),
        "processes": m.processes,
        "json_mb": round(json_bytes / 1e6, 1),
        "disk_mb": round(sum(r["bytes"] for r in man["per_rank"]) / 1e6, 1),
        "events": sum(r["events"] for r in man["per_rank"]),
        "mb_per_s": round(json_bytes / 1e6 / m.wall_s, 1),
        "events_per_s": round(sum(r["events"] for r in man["per_rank"]) / m.wall_s),
    }


def time_view(data: Path, view: str, reps: int) -> dict:
    """Whole-process timings of `tracecore query VIEW` (the median and best of `reps`), and its rows."""
    walls, peaks, rows = [], [], None
    with tempfile.TemporaryDirectory(prefix="job-scale-") as tmp:
        out = Path(tmp) / "out.csv"
        for _ in range(reps):
            cmd = [*TRACECORE, "query", view, "--data", str(data), "--format", "csv", "--out", str(out)]
            m = measure(cmd, limit=LIMIT, timeout=1800)
            if m.rc != 0:
                raise SystemExit(f"{view} failed ({m.rc}): {m.stderr_tail}")
            walls.append(m.wall_s)
            peaks.append(m.peak_rss)
            rows = max(0, len(out.read_text().splitlines()) - 1)
    return {
        "median_s": round(statistics.median(walls), 2),
        "best_s": round(min(walls), 2),
        "peak_rss_mib": round(max(peaks) / 2**20),
        "rows": rows,
    }


def plan(data: Path, view: str) -> str:
    """EXPLAIN ANALYZE of the view as tracecore's connection runs it."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data)
    try:
        return "\n".join(r[1] for r in con.execute(f"EXPLAIN ANALYZE SELECT * FROM {view}").fetchall())
    finally:
        con.close()


def stragglers(data: Path, planted: list[int]) -> dict:
    """Who tracecore names: the ranks judged stragglers, and the last ranks of wide spreads."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data)
    try:
        judged = con.execute(
            "SELECT DISTINCT unnest(late_ranks) FROM collective_verdicts"
            " WHERE verdict = 'straggler' ORDER BY 1"
        ).fetchall()
        instances = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE verdict = 'straggler') FROM collective_verdicts"
        ).fetchone()
        last = con.execute(
            "SELECT last_rank, count(*) FROM collective_stragglers WHERE spread_ns >= 1000000"
            " GROUP BY 1 ORDER BY 1"
        ).fetchall()
    finally:
        con.close()
    named = sorted(r for (r,) in judged if r is not None)
    return {
        "planted": sorted(planted),
        "judged_stragglers": named,
        "instances": instances[0],
        "straggler_instances": instances[1],
        "last_ranks_of_wide_spreads": {str(r): n for r, n in last},
        "only_planted": set(named) <= set(planted) and bool(named),
    }


def bench_job(job: Path, data: Path, reuse: bool, reps: int) -> dict:
    man = _manifest(job)
    load = os.getloadavg()[0]
    result: dict = {
        "job": job.name,
        "ranks": man["ranks"],
        "steps": man["steps"],
        "thin": man.get("thin", False),
        "load_before": round(load, 2),
    }
    if not reuse:
        result["ingest"] = ingest(job, data)
    result["views"] = {v: time_view(data, v, reps) for v in VIEWS}
    slowest = max(VIEWS, key=lambda v: result["views"][v]["median_s"])
    result["slowest"] = slowest
    result["plan"] = plan(data, slowest)
    result["stragglers"] = stragglers(data, man["stragglers"])
    result["load_after"] = round(os.getloadavg()[0], 2)
    return result


def render(results: list[dict]) -> str:
    lines = [
        "# A job of many ranks: ingest and the first views",
        "",
        f"`python -m bench.job_scale` on {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores; jobs made by",
        "`bench.make_job_traces` (one real rank of the 4-rank H200 run, re-ranked, skewed, two stragglers).",
        "Whole processes; peak RSS is the process tree's (the ingest's parser processes included).",
        "",
        "| job | ranks × steps | JSON MB | events | ingest s | MB/s | events/s | tree peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        i = r.get("ingest")
        if i:
            job = r["job"] + (" (thin)" if r["thin"] else "")
            cells = [
                job,
                f"{r['ranks']} × {r['steps']}",
                f"{i['json_mb']:,}",
                f"{i['events']:,}",
                i["wall_s"],
            ]
            cells += [i["mb_per_s"], f"{i['events_per_s']:,}", i["peak_rss_mib"]]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += ["", "| job | view | rows | median s | best s | peak RSS MiB |", "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for v, t in r["views"].items():
            cells = [r["job"], v, f"{t['rows']:,}", t["median_s"], t["best_s"], t["peak_rss_mib"]]
            lines.append("| " + " | ".join(map(str, cells)) + " |")
    for r in results:
        s = r["stragglers"]
        lines += [
            "",
            f"**{r['job']}**: planted stragglers {s['planted']}; `collective_verdicts` judges"
            f" {s['straggler_instances']} of {s['instances']} instances `straggler`, naming ranks"
            f" {s['judged_stragglers']} ({'only' if s['only_planted'] else 'NOT only'} planted ones);"
            f" last ranks of spreads ≥ 1 ms: {s['last_ranks_of_wide_spreads']}. Load average"
            f" {r['load_before']} before, {r['load_after']} after.",
            "",
            f"Plan of the slowest view (`{r['slowest']}`), EXPLAIN ANALYZE:",
            "",
            "```",
            r["plan"].strip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("jobs", nargs="+", type=Path, help="folders of bench.make_job_traces")
    ap.add_argument("--data", type=Path, help="where the datasets go (default: a temporary folder)")
    ap.add_argument(
        "--reuse", action="store_true", help="datasets at --data/<job> ingested before (ingest kept)"
    )
    ap.add_argument("--reps", type=int, default=3, help="runs of each view (default 3)")
    ap.add_argument("--out", default="job-scale", help="results file name under bench/results/")
    args = ap.parse_args(argv)
    root = args.data or Path(tempfile.mkdtemp(prefix="job-scale-"))
    results = [bench_job(job, root / job.name, args.reuse, args.reps) for job in args.jobs]
    if args.reuse:  # the ingest measured when the dataset was made, from the last results of the job
        earlier = RESULTS / f"{args.out}.json"
        before = {r["job"]: r for r in json.loads(earlier.read_text())} if earlier.is_file() else {}
        for r in results:
            if "ingest" in before.get(r["job"], {}):
                r["ingest"] = before[r["job"]]["ingest"] | {"measured_earlier": True}
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / f"{args.out}.md").write_text(render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
