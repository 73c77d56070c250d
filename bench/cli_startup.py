"""Interactive commands against plain DuckDB from Python on the same catalog, as whole processes.

    python -m bench.cli_startup [--data DIR] [--source DIR] [--reps 3] [--baseline CHECKOUT] [--smoke]

Times, each as a fresh process after one untimed warm-up, median of `--reps` (issue 27, target 2):
* `tracecore sql --data D "SELECT count(*) FROM packets"` against `python -c` that connects DuckDB
  read-only to D/tracecore.duckdb, runs the same SQL and fetches the rows;
* `tracecore query link_util --run X --format csv --out F` against the same macro COPYed to CSV by
  plain DuckDB (`COPY (SELECT * FROM link_util(runs := ['X'])) TO F (FORMAT csv)`).
The two sides of a pair run one after the other in each repetition, so both meet the same load; the
ratio is of their medians. `--baseline CHECKOUT` adds the same commands run from another checkout's
`tracecore` (its source on the path, this interpreter), to compare two builds in one run.

Where tracecore's own time goes: `python -X importtime` of each command (cumulative import time of
each top-level package) and the cumulative times of the catalog-open steps, the query and the output
(cProfile of one in-process call). Plain DuckDB reads the dataset where it was written (its views
name the part files by absolute path, ARCHITECTURE.md), so D must not have been moved.

The dataset: `--data` (a tracecore dataset), else `--source` ingested into bench/data/cli_startup
(default: the DDP set of `python -m bench.make_captures --ddp-set`, else the embedded sample).
Results: bench/results/cli-startup.{md,json}. `--smoke`: the sample, one repetition, no warm-up,
results under --results (the test suite's check that the bench runs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DDP_SET = REPO / "bench" / "data" / "ddp_set"
COUNT_SQL = "SELECT count(*) FROM packets"
VIEW = "link_util"
TRACECORE = Path(sys.executable).parent / "tracecore"
# as a user's install runs: Python's bytecode cache on (PYTHONDONTWRITEBYTECODE would have every
# process compile tracecore, typer, numpy… from source again, both sides but mostly tracecore's)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# library functions whose cumulative time the breakdown reports, in the order a command calls them
STEPS = [
    ("the whole command (Typer's call)", "typer/main.py", "__call__"),
    ("open_catalog (all of it)", "ingest/catalog.py", "open_catalog"),
    ("  refuse_links (dataset's own entries)", "ingest/layout.py", "refuse_links"),
    ("  _meta_of (first attach, _meta)", "ingest/catalog.py", "_meta_of"),
    ("  views_fingerprint (queries/ hashed)", "ingest/catalog.py", "views_fingerprint"),
    ("  attach (the connection)", "ingest/catalog.py", "attach"),
    ("  _part_files (paths, links, existence)", "ingest/catalog.py", "_part_files"),
    ("  lock_down (settings)", "ingest/catalog.py", "lock_down"),
    ("check_runs / check_size (view guards)", "tracecore/query.py", "check_size"),
    ("_plain_rows (sql: query + fetch as rows)", "tracecore/query.py", "_plain_rows"),
    ("run_sql (query + fetch as Arrow)", "tracecore/query.py", "run_sql"),
    ("_csv_lines (query: CSV lines made by DuckDB)", "tracecore/query.py", "_csv_lines"),
    ("emit_rows (sql: the table from rows)", "cli/output.py", "emit_rows"),
    ("emit (table / CSV out)", "cli/output.py", "emit"),
    ("emit_csv_lines (CSV out from DuckDB's lines)", "cli/csv_out.py", "emit_csv_lines"),
]


def plain_count(catalog: Path) -> list[str]:
    code = (
        "import duckdb, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "con.execute(sys.argv[2]).fetchall()\n"
    )
    return [sys.executable, "-c", code, str(catalog), COUNT_SQL]


def plain_copy(catalog: Path, run: str, out: Path) -> list[str]:
    code = (
        "import duckdb, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "con.execute(\"SET VARIABLE bench_run = $r\", {'r': sys.argv[2]})\n"
        f"con.execute(\"COPY (SELECT * FROM {VIEW}(runs := [getvariable('bench_run')])) "
        'TO \'" + sys.argv[3].replace("\'", "\'\'") + "\' (FORMAT csv)")\n'
    )
    return [sys.executable, "-c", code, str(catalog), run, str(out)]


def tracecore_argv(checkout: Path | None) -> list[str]:
    """The installed console script, or `checkout`'s CLI run by this interpreter (its source first)."""
    if checkout is None:
        return [str(TRACECORE)]
    code = f"import sys; sys.path.insert(0, {str(checkout)!r}); from tracecore.cli.app import main; main()"
    return [sys.executable, "-c", code]


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=ENV)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} …: exit {done.returncode}\n{done.stderr[-2000:]}")
    return took


def time_pairs(commands: dict[str, list[str]], reps: int, warm: bool) -> dict[str, dict]:
    """Median and all wall times of each command, run in turn in each repetition."""
    if warm:
        for argv in commands.values():
            wall(argv)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(reps):
        for name, argv in commands.items():
            times[name].append(wall(argv))
    return {name: {"median_s": statistics.median(t), "walls_s": t} for name, t in times.items()}


def import_breakdown(argv: list[str], top: int = 12) -> list[tuple[str, float]]:
    """Import ms of each top-level package a command loads (`python -X importtime`: the self time of
    each of its modules, so numpy counts as numpy even when pyarrow imports it)."""
    script = argv[1:] if argv[0] == sys.executable else argv  # the console script is Python too
    python_argv = [sys.executable, "-X", "importtime", *script]
    done = subprocess.run(python_argv, capture_output=True, text=True, check=False, env=ENV)
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = line[len("import time:") :].split("|")
        if not own.strip().isdigit():
            continue  # the header line
        package = name.strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(own) / 1000
    return sorted(totals.items(), key=lambda kv: -kv[1])[:top]


def step_breakdown(args: list[str], checkout: Path | None) -> list[tuple[str, float]]:
    """Cumulative ms of the STEPS in one in-process call of the CLI under cProfile."""
    code = (
        "import cProfile, pstats, sys, json, io\n"
        + (f"sys.path.insert(0, {str(checkout)!r})\n" if checkout else "")
        + "from tracecore.cli.app import app\n"
        "prof = cProfile.Profile()\n"
        "out = io.StringIO(); real = sys.stdout; sys.stdout = out\n"
        "prof.enable()\n"
        "try:\n    app(sys.argv[2:], standalone_mode=False)\n"
        "finally:\n    prof.disable(); sys.stdout = real\n"
        "steps = json.loads(sys.argv[1])\n"
        "stats = pstats.Stats(prof).stats\n"
        "found = {}\n"
        "for (file, _, func), (_, _, _, cum, _) in stats.items():\n"
        "    for label, suffix, name in steps:\n"
        "        if func == name and file.endswith(suffix):\n"
        "            found[label] = found.get(label, 0) + cum * 1000\n"
        "print(json.dumps([[label, found[label]] for label, _, _ in steps if label in found]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(STEPS), *args],
        capture_output=True,
        text=True,
        check=False,
        env=ENV,
    )
    if done.returncode != 0:
        raise SystemExit(f"profile of tracecore {' '.join(args[:2])}: {done.stderr[-2000:]}")
    return [tuple(row) for row in json.loads(done.stdout.splitlines()[-1])]


def dataset(data: Path | None, source: Path | None, smoke: bool) -> tuple[Path, str]:
    """The dataset to query (ingested from `source` when not given) and what it is."""
    if data is not None and (data / "tracecore.duckdb").is_file():
        return data, f"given: {data}"
    if source is None:
        from tracecore.sample import sample_run

        source = DDP_SET if DDP_SET.is_dir() and not smoke else sample_run()
    if data is None:  # the bench's own folder, made anew; a --data folder is ingest's to judge
        data = REPO / "bench" / "data" / "cli_startup"
        shutil.rmtree(data, ignore_errors=True)
    subprocess.run([str(TRACECORE), "ingest", str(source), "--out", str(data), "--quiet"], check=True)
    return data, f"ingested from {source}"


def first_run(catalog: Path) -> str:
    import duckdb

    con = duckdb.connect(str(catalog), read_only=True)
    try:
        return con.execute("SELECT run FROM runs ORDER BY run LIMIT 1").fetchall()[0][0]
    finally:
        con.close()


def run(data: Path, reps: int, warm: bool, baseline: Path | None) -> dict:
    catalog = data / "tracecore.duckdb"
    run_name = first_run(catalog)
    packets = subprocess.run(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; print(duckdb.connect(sys.argv[1], read_only=True)"
            f".execute({COUNT_SQL!r}).fetchall()[0][0])",
            str(catalog),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tmp = Path(tempfile.mkdtemp(prefix="cli-startup-"))
    sql_args = ["sql", "--data", str(data), COUNT_SQL]
    query_args = ["query", VIEW, "--data", str(data), "--run", run_name, "--format", "csv", "--out"]
    builds = {"tracecore": None} | ({"baseline": baseline} if baseline else {})
    result: dict = {
        "dataset": str(data),
        "packets": int(packets),
        "run": run_name,
        "load_before": os.getloadavg(),
        "pairs": {},
    }
    try:
        for pair, plain, ours in (
            ("sql count", plain_count(catalog), lambda b: [*tracecore_argv(b), *sql_args]),
            (
                f"query {VIEW} csv",
                plain_copy(catalog, run_name, tmp / "plain.csv"),
                lambda b: [*tracecore_argv(b), *query_args, str(tmp / "ours.csv")],
            ),
        ):
            commands = {"plain DuckDB": plain} | {name: ours(b) for name, b in builds.items()}
            times = time_pairs(commands, reps, warm)
            yard = times["plain DuckDB"]["median_s"]
            for t in times.values():
                t["ratio"] = t["median_s"] / yard
            args = sql_args if pair == "sql count" else [*query_args, str(tmp / "profiled.csv")]
            result["pairs"][pair] = {
                "times": times,
                "imports_ms": import_breakdown(ours(None)),
                "steps_ms": step_breakdown(args, None),
            }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    return result


def markdown(result: dict) -> str:
    lines = [
        "# Interactive commands against plain DuckDB (`python -m bench.cli_startup`)",
        "",
        f"Dataset {result['dataset']} ({result['packets']:,} packets, {result['source']}); run "
        f"`{result['run']}`; {result['reps']} repetitions after {'a' if result['warm'] else 'no'} warm-up; "
        f"load average {result['load_before'][0]:.2f} before, {result['load_after'][0]:.2f} after; "
        f"{result['machine']}. Whole processes, medians; ratio = median / plain DuckDB's median.",
        "",
    ]
    for pair, data in result["pairs"].items():
        lines += [f"## {pair}", "", "| command | median s | ratio | walls s |", "|---|---:|---:|---|"]
        for name, t in data["times"].items():
            walls = ", ".join(f"{w:.3f}" for w in t["walls_s"])
            lines.append(f"| {name} | {t['median_s']:.3f} | {t['ratio']:.2f} | {walls} |")
        lines += ["", "Imports (`-X importtime`: self ms of every module, summed per top-level package):", ""]
        lines.append(", ".join(f"{name} {ms:.0f}" for name, ms in data["imports_ms"]))
        lines += ["", "Steps (cProfile of one in-process call, cumulative ms):", ""]
        lines += [f"    {label:<44} {ms:8.1f}" for label, ms in data["steps_ms"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a tracecore dataset (else --source is ingested)")
    parser.add_argument(
        "--source", type=Path, help="captures to ingest (default: the DDP set, else the sample)"
    )
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout whose CLI runs beside this one")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--smoke", action="store_true", help="the sample, 1 repetition, no warm-up")
    args = parser.parse_args(argv)
    reps, warm = (1, False) if args.smoke else (args.reps, True)
    data, source = dataset(args.data, args.source, args.smoke)
    result = run(data, reps, warm, args.baseline)
    result |= {
        "source": source,
        "reps": reps,
        "warm": warm,
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs",
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "cli-startup.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (args.results / "cli-startup.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
