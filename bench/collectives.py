"""What the collectives' event sources cost: parse speed, memory against trace size, ingest and views.

    python -m bench.collectives [--reps 3] [--copies 100]

On ../shared/corpus-gpu: (1) each source's files parsed `--reps` times (median CPU seconds per file,
summed per source); (2) a PyTorch trace made `--copies` times as long (the cnn3m rank-0 trace's events
repeated, times shifted so each copy follows the last) and a tenth of that, parsed in fresh processes
for their peak RSS; (3) ingest of the two corpus folders with and without the three new parsers, in
fresh processes, alternating; (4) the collectives' views on that dataset (median CPU of 5). Results go
to bench/results/collectives.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPU = REPO.parent / "shared" / "corpus-gpu"
FOLDERS = [GPU / "gpu-nccl-profilers", GPU / "gpu-nccl-4rank"]
TRACE = GPU / "gpu-nccl-profilers" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring" / "kineto-rank0.json"
NEW_PARSERS = ("nccl_profiler", "pytorch_profiler", "nccl_inspector")
VIEWS = (
    "collective_calls",
    "collective_links",
    "collective_wire",
    "collective_coverage",
    "collective_clock_check",
    "collective_stragglers",
    "step_breakdown",
)

PARSE_ONE = """
import json, resource, sys, time
from pathlib import Path
import pyarrow as pa
pa.array([1])  # pyarrow's first array imports pandas: not the parser's cost
from tracecore.logs import pytorch_profiler
start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
cpu = time.process_time()
parsed = pytorch_profiler.parse(Path(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"cpu_s": time.process_time() - cpu, "rss_mib": peak / 1024, "base_mib": start / 1024,
                  "kernels": parsed.more["profiler_kernels"].num_rows, "bad": parsed.bad_lines}))
"""

INGEST_ONE = """
import json, resource, sys, tempfile, time
from pathlib import Path
import tracecore.logs as logs
if sys.argv[1] == "without":
    logs.PARSER_MODULES = tuple(m for m in logs.PARSER_MODULES if m not in json.loads(sys.argv[2]))
from tracecore.ingest import ingest
out = Path(tempfile.mkdtemp()) / "data"
wall, cpu = time.perf_counter(), time.process_time()
ingest([Path(p) for p in json.loads(sys.argv[3])], out, jobs=1)
print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "out": str(out)}))
"""


def parse_corpus(reps: int) -> dict[str, dict]:
    import pyarrow as pa

    pa.array([1])
    from tracecore.logs import detect_parser

    found: dict[str, dict] = {}
    for path in sorted(p for folder in FOLDERS for p in folder.rglob("*") if p.is_file()):
        nested = path.parent.name == "nccl-inspector"
        parser = detect_parser(path, nested=nested)
        if parser is None or parser.table != "collectives":
            continue
        times = []
        for _ in range(reps):
            cpu = time.process_time()
            parsed = parser.parse(path)
            times.append(time.process_time() - cpu)
        kind = parser.parse.__module__.rsplit(".", 1)[-1]
        row = found.setdefault(kind, {"files": 0, "mb": 0.0, "cpu_s": 0.0, "collectives": 0})
        row["files"] += 1
        row["mb"] += path.stat().st_size / 1e6
        row["cpu_s"] += statistics.median(times)
        row["collectives"] += parsed.table.num_rows
    return found


def big_trace(copies: int, path: Path) -> None:
    """TRACE's events `copies` times over, each copy's times, step numbers and ids moved past the last."""
    src = json.loads(TRACE.read_text())
    head = {k: v for k, v in src.items() if k != "traceEvents"}
    with path.open("w") as fh:
        fh.write(
            "{\n"
            + ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in head.items())
            + ',\n  "traceEvents": [\n'
        )
        sep = ""
        for c in range(copies):
            for event in src["traceEvents"]:
                e = dict(event)
                if isinstance(e.get("ts"), int | float):
                    e["ts"] += c * 120_000.0
                if str(e.get("name", "")).startswith("ProfilerStep#"):
                    e["name"] = f"ProfilerStep#{int(e['name'][13:]) + 3 * c}"
                if isinstance(e.get("args"), dict) and "External id" in e["args"]:
                    e["args"] = {**e["args"], "External id": e["args"]["External id"] + c * 100_000}
                fh.write(sep + "  " + json.dumps(e))
                sep = ",\n"
        fh.write("\n  ]\n}\n")


def run_json(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=REPO
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def view_times(data: Path) -> dict[str, tuple[int, float]]:
    from tracecore.ingest import open_catalog

    con = open_catalog(data)
    found = {}
    for view in VIEWS:
        cpu_times, rows = [], 0
        for _ in range(5):
            cpu = time.process_time()
            rows = con.sql(f"SELECT count(*) FROM {view}").fetchall()[0][0]
            cpu_times.append(time.process_time() - cpu)
        found[view] = (rows, statistics.median(cpu_times))
    con.close()
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--copies", type=int, default=100)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    lines = [
        "# Collectives' event sources: parse, memory, ingest, views",
        "",
        f"`python -m bench.collectives --reps {args.reps} --copies {args.copies}` on "
        f"{time.strftime('%Y-%m-%d')}, 2-core development machine shared with other work (load average "
        f"{load:.1f} at the end: compare CPU seconds, not wall time).",
        "",
        "Chrome traces are read record by record: memory grows with the rows kept (collectives, steps, "
        "and five integers per GPU kernel), not with the file. The views are timed on the ingested "
        "corpus (115,541 packets in 4 runs); collective_coverage and collective_clock_check run "
        "collective_wire inside.",
        "",
    ]
    lines += [
        "| source | files | MB | CPU s (median) | MB per CPU s | collectives |",
        "|---|---|---|---|---|---|",
    ]
    for kind, r in parse_corpus(args.reps).items():
        speed = r["mb"] / r["cpu_s"]
        lines.append(
            f"| {kind} | {r['files']} | {r['mb']:.2f} | {r['cpu_s']:.3f} | {speed:.1f} | {r['collectives']} |"
        )
    tmp = Path(tempfile.mkdtemp())
    lines += [
        "",
        "| PyTorch trace | MB | CPU s | peak RSS MiB | over imports MiB | kernels kept |",
        "|---|---|---|---|---|---|",
    ]
    for copies in (max(1, args.copies // 10), args.copies):
        path = tmp / f"trace-{copies}.json"
        big_trace(copies, path)
        r = run_json(PARSE_ONE, str(path))
        mb = path.stat().st_size / 1e6
        lines.append(
            f"| {copies}× cnn3m rank 0 | {mb:.0f} | {r['cpu_s']:.2f} | {r['rss_mib']:.0f} | "
            f"{r['rss_mib'] - r['base_mib']:.0f} | {r['kernels']:,} |"
        )
        path.unlink()
    folders = json.dumps([str(f) for f in FOLDERS])
    runs: dict[str, list[dict]] = {"without": [], "with": []}
    for _ in range(args.reps):
        for mode in runs:
            r = run_json(INGEST_ONE, mode, json.dumps(NEW_PARSERS), folders)
            runs[mode].append(r)
    lines += [
        "",
        "| ingest of both corpus folders | wall s (median) | CPU s (median) | peak RSS MiB |",
        "|---|---|---|---|",
    ]
    for mode, rs in runs.items():
        lines.append(
            f"| {mode} the new parsers | {statistics.median(r['wall_s'] for r in rs):.2f} | "
            f"{statistics.median(r['cpu_s'] for r in rs):.2f} | {max(r['rss_mib'] for r in rs):.0f} |"
        )
    data = Path(runs["with"][-1]["out"])
    lines += ["", "| view on that dataset | rows | CPU s (median of 5) |", "|---|---|---|"]
    for view, (rows, cpu) in view_times(data).items():
        lines.append(f"| {view} | {rows} | {cpu:.3f} |")
    for mode in runs.values():
        for r in mode:
            shutil.rmtree(Path(r["out"]).parent, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    out = REPO / "bench" / "results" / "collectives.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(out.read_text())


if __name__ == "__main__":
    main()
