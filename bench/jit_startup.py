"""numba's JIT start-up as `tracecore ingest` pays it, as whole processes: the first run (empty cache),
later runs (the cache it left), the ahead-of-time kernels; and what importing pandas costs an ingest.

    python -m bench.jit_startup [--data RUN_DIR] [--cold 2] [--reps 7] [--out bench/results/jit-startup.md]

Why: the JIT path compiles or loads the reader's kernels before the first packet, a cost only a new
process pays. Every run is the installed console script, `tracecore ingest RUN_DIR --out NEW --json
--quiet`, into a new dataset, in `bench.ab_commits`' environment (cached bytecode, a private cache
folder); one untimed ingest first writes the bytecode and the catalog template. Rows:
- `jit, empty cache`: `TRACECORE_JIT=1`, `NUMBA_CACHE_DIR` a new empty folder (numba compiles every
  kernel and writes its cache), `--cold` times;
- `jit, cached`: `TRACECORE_JIT=1` with the folder the last of those left;
- `aot`: the ahead-of-time kernels (`make kernels`);
- `aot, pandas blocked` and `aot, pandas importable`: `python -c` running the same `main()`, the first
  with a finder that makes `import pandas` fail (what a pandas-free install sees), so their
  difference is what the pandas import costs an ingest (pyarrow imports pandas, when installed, on
  its first conversion). The last four alternate their order each round.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.ab_commits import REPO, TIME, _cpu_model, _git, _side_env, compile_sources, save, timed_run

DEFAULT_DATA = REPO.parent / "shared" / "corpus-gpu" / "h100-nccl-socket-2rank"
TRACECORE = Path(sys.executable).parent / "tracecore"
NO_PANDAS = (  # a finder ahead of the others: `import pandas` fails as in an install without it
    "import importlib.abc, sys\n"
    "class NoPandas(importlib.abc.MetaPathFinder):\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.partition('.')[0] == 'pandas':\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, NoPandas())\n"
)
MAIN = "import sys\nfrom tracecore.cli.app import main\nsys.argv = ['tracecore', *sys.argv[1:]]\nmain()\n"
ROWS = ("jit, cached", "aot", "aot, pandas blocked", "aot, pandas importable")


def _argv(row: str, data: Path, out: Path) -> list[str]:
    args = ["ingest", str(data), "--out", str(out), "--json", "--quiet"]
    if row.startswith("aot, pandas"):
        code = (NO_PANDAS if row == "aot, pandas blocked" else "") + MAIN
        return [sys.executable, "-c", code, *args]
    return [str(TRACECORE), *args]


def _timed(row: str, data: Path, tmp: Path, env: dict[str, str], timeout: float) -> dict:
    out = tmp / "dataset"
    shutil.rmtree(out, ignore_errors=True)
    run_env = env | {"TRACECORE_JIT": "1" if row.startswith("jit") else "0"}
    r = timed_run(_argv(row, data, out), REPO, run_env, timeout)
    if '"ok": true' not in r.pop("stdout"):
        raise SystemExit(f"{row}: the ingest did not succeed")
    print(f"  {row}: {r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU", flush=True)
    return r


def run_bench(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tc-jit-startup-"))
    try:
        env = _side_env(REPO, tmp / "cache")
        compile_sources(REPO, env)
        _timed("aot, pandas importable", args.data, tmp, env, args.timeout)  # bytecode, template
        cold = []
        for i in range(args.cold):
            env["NUMBA_CACHE_DIR"] = str(tmp / f"numba-{i}")
            cold.append(_timed("jit, empty cache", args.data, tmp, env, args.timeout))
        results: dict[str, list[dict]] = {row: [] for row in ROWS}
        for rnd in range(args.reps):
            for row in ROWS[:: -1 if rnd % 2 else 1]:
                results[row].append(_timed(row, args.data, tmp, env, args.timeout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    loads = [x for rs in [cold, *results.values()] for r in rs for x in (r["load_start"], r["load_end"])]
    return {
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.jit_startup " + shlex.join(args.argv),
        "commit": _git("rev-parse", "HEAD"),
        "data": str(args.data),
        "machine": {"cpu": _cpu_model(), "cpus": os.cpu_count()},
        "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "cold": cold,
        "results": results,
    }


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def markdown(report: dict) -> str:
    res, mach, load = report["results"], report["machine"], report["load_1min"]
    rows = {"jit, empty cache": report["cold"], **res}
    lines = [
        "# numba's JIT start-up in `tracecore ingest`, whole processes",
        "",
        f"Created {report['created_utc']} at {report['commit'][:10]} with `{report['command']}` on "
        f"{mach['cpus']} × {mach['cpu']}; load average (1 min) {load['min']:.1f} to {load['max']:.1f} "
        "(a machine shared with other work: CPU seconds are the steadier number).",
        f"Input: `{report['data']}`, ingested into a new dataset by each run.",
        "",
        "| run | wall s (each) | median wall s | median CPU s | median peak RSS MiB |",
        "|---|---|---:|---:|---:|",
    ]
    for row, runs in rows.items():
        walls = " ".join(f"{r['wall_s']:.2f}" for r in runs)
        lines.append(
            f"| {row} | {walls} | {_median(runs, 'wall_s'):.2f} | {_median(runs, 'cpu_s'):.2f} | "
            f"{_median(runs, 'peak_rss_mib'):.0f} |"
        )
    diff = {
        name: tuple(_median(res[a], key) - _median(res[b], key) for key in ("wall_s", "cpu_s"))
        for name, a, b in (
            ("JIT with its cache over the ahead-of-time kernels", "jit, cached", "aot"),
            ("importing pandas", "aot, pandas importable", "aot, pandas blocked"),
        )
    }  # fmt: skip
    cold = (_median(report["cold"], "wall_s") - _median(res["aot"], "wall_s"),
            _median(report["cold"], "cpu_s") - _median(res["aot"], "cpu_s"))  # fmt: skip
    lines += [
        "",
        f"- The JIT's first run over the ahead-of-time kernels: {cold[0]:+.2f} s wall, {cold[1]:+.2f} CPU-s.",
    ]
    lines += [f"- {name}: {w:+.2f} s wall, {c:+.2f} CPU-s (medians)." for name, (w, c) in diff.items()]
    return "\n".join([*lines, "", *NOTES, ""])


NOTES = [
    "Where numba keeps the JIT cache (`cache=True` on every kernel): `$NUMBA_CACHE_DIR` when set, else",
    "`tracecore/reader/__pycache__` when that folder is writable (a checkout, a venv), else",
    "`$XDG_CACHE_HOME/numba` (`~/.cache/numba`) for a read-only install; a later process loads from it.",
    "The entries are keyed by kernel.py's content, so a new kernel.py compiles once more.",
    "",
    "pandas is no dependency of tracecore (a dev extra); where it is installed, pyarrow imports it on",
    "its first conversion, which ingest's warm-up thread makes while the captures are planned. The",
    "`pandas` rows are what hiding it from ingest saved (cli/app.py did, with `sys.modules['pandas'] =",
    "None`, until that failed the JIT path: tests/test_cli_jit.py).",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.jit_startup", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a run folder [corpus-gpu's 2-rank run]")
    ap.add_argument("--cold", type=int, default=2, help="runs with an empty JIT cache [2]")
    ap.add_argument("--reps", type=int, default=7, help="rounds of the other rows [7]")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run [600]")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "jit-startup.md")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not Path(TIME).is_file():
        raise SystemExit(f"{TIME} (GNU time) is missing: run `make system-deps`")
    report = run_bench(args)
    save(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
