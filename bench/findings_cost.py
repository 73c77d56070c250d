"""What `findings` (and so `tracecore explain` and the report's first section) costs, and where it goes.

Runs `findings` and the views it reads on one dataset, each `--reps` times in this process over one
connection, and prints the median CPU and wall time of each, with DuckDB's planner and optimizer time
from its profiler; `--pullup` also runs them with DuckDB 2's projection pull-up pass on (tracecore's
query connections turn it off: tracecore/ingest/catalog.py lock_down).

    python -m bench.findings_cost --data DATASET [--reps 3] [--pullup] [--out bench/results/F.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

VIEWS = (
    "findings",
    "collective_wire",
    "collective_verdicts",
    "collective_clock_check",
    "collective_coverage",
    "tcp_health",
    "step_breakdown",
    "contention",
    "nccl_topology",
    "train_duration",
)


def measure(data: Path, pullup: bool, reps: int) -> list[dict]:
    """Each view's median CPU, wall, planner and optimizer seconds over `reps` runs."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data, read_only=True, unsafe=True)  # unsafe: the profiler's settings
    if not pullup:
        con.execute("SET disabled_optimizers = 'projection_pullup'")
    profile = Path(tempfile.mkdtemp()) / "profile.json"
    rows = []
    for view in VIEWS:
        cpu, wall, plan, opt = [], [], [], []
        for _ in range(reps):
            con.execute("PRAGMA enable_profiling = 'json'")
            con.execute("SET profiling_output = $p", {"p": str(profile)})
            c0, t0 = time.process_time(), time.perf_counter()
            con.execute(f'SELECT count(*) FROM "{view}"').fetchall()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - t0)
            con.execute("PRAGMA disable_profiling")
            got = json.loads(profile.read_text())
            plan.append(got["planner"]["total_time"])
            opt.append(got["optimizer"].get("total_time", 0.0))
        rows.append(
            {
                "view": view,
                "cpu_s": statistics.median(cpu),
                "wall_s": statistics.median(wall),
                "planner_s": statistics.median(plan),
                "optimizer_s": statistics.median(opt),
            }
        )
    con.close()
    return rows


def table(rows: list[dict], title: str) -> str:
    head = "| view | CPU s | wall s | planner s | optimizer s |"
    lines = [f"### {title}", "", head, "|---|---|---|---|---|"]
    for r in rows:
        cells = (r["cpu_s"], r["wall_s"], r["planner_s"], r["optimizer_s"])
        lines.append(f"| {r['view']} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a tracecore dataset")
    parser.add_argument("--reps", type=int, default=3, help="runs of each view (median)")
    parser.add_argument("--pullup", action="store_true", help="also with DuckDB's projection pull-up on")
    parser.add_argument("--out", type=Path, help="append the tables to this Markdown file")
    args = parser.parse_args()
    import duckdb

    name = args.data.name
    text = table(measure(args.data, False, args.reps), f"{name}: projection pull-up off (tracecore's)")
    if args.pullup:
        text += "\n" + table(measure(args.data, True, args.reps), f"{name}: projection pull-up on")
    text += f"\nDuckDB {duckdb.__version__}, {args.reps} runs each, median.\n"
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
