"""A/B of two builds of tracecore on the same TCP captures: `tracecore ingest` and the reader, as processes.

    python -m bench.ab_commits [--base COMMIT] [--data RUN_DIR] [--copies 4] [--reps 5]
                               [--paths ingest read] [--jobs N] [--out bench/results/ab-latest.md]
    python -m bench.ab_commits --smoke --base HEAD --out DIR/ab.md   # the embedded sample, 2 rounds

Why: "did this change slow the TCP path?" is a ratio of two builds measured in one session on one
machine, and on a shared machine only interleaved runs see the same neighbours. `--base` (default:
main just before the RDMA merge, 351e2ab^1) is exported with `git archive` into a temporary folder
and gets ahead-of-time kernels of its own (copied from this checkout when its kernel sources are the
same, else built); the other side is this checkout's working tree. Each side runs as its own
processes with PYTHONPATH set to its folder and a catalog-template cache of its own; both are
checked to import their own tracecore and to run ahead-of-time kernels before anything is timed.

The captures of RUN_DIR (default: the snaplen-128 iperf3 ring of `python -m bench.make_captures
--size 2GB --snaplen 128`) are hard-linked into `--copies` run folders, read once to warm the page
cache, and every path runs once per side untimed, then `--reps` rounds of base and head, alternating
which goes first (A/B, B/A, …); besides each side's medians the report gives the median of the
rounds' head/base ratios.
Each run is timed with GNU `/usr/bin/time -v`: wall, user + sys CPU seconds of the process tree
(what the neighbours' load disturbs least), peak RSS. The 1-minute load average and the CPU
seconds other processes used during each run (/proc/stat busy time minus the run's own) say how
loaded the machine was. Both sides must produce the same packet count. Markdown and JSON go to
`--out` and `--out` with `.json`.

`--instructions N` then runs each path once more per side under valgrind (cachegrind, no cache
simulation) on the first N packets of the first capture: instructions executed by the whole process,
which the neighbours' load does not change at all (`make system-deps` installs valgrind).

Both sides run from byte-compiled modules (`compile_sources`), as an installed tracecore does.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "351e2ab^1"  # main just before `Merge branch 'rdma'` (issue 14)
DEFAULT_DATA = REPO / "bench" / "data" / "iperf3-bulk_2GB_s128-none-0-tcp-normal-ring"
TIME = "/usr/bin/time"
VALGRIND = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
TICK = os.sysconf("SC_CLK_TCK")
WHAT = {
    "ingest": "`python -m tracecore ingest RUNS --out TMP --json --quiet` (dataset removed before each run)",
    "read": "`python -m bench.tc_read FILES` (read_batches over every capture)",
}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()


def export_commit(commit: str, dest: Path) -> str:
    """`git archive` of `commit` into dest; returns its full hash."""
    full = _git("rev-parse", "--verify", f"{commit}^{{commit}}")
    dest.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", full], cwd=REPO, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {full} failed")
    return full


# Dropped from each side's environment: PYTHONDONTWRITEBYTECODE too, so both run from cached bytecode
# (`compile_sources`) as an installed package does.
_UNSET = ("TRACECORE_JIT", "TRACECORE_DATA", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")


def _side_env(root: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    return {**env, "PYTHONPATH": str(root), "TRACECORE_CACHE_DIR": str(cache)}


def compile_sources(root: Path, env: dict[str, str]) -> None:
    """Byte-compile a side's packages before anything is timed. Why: without cached bytecode (a fresh
    export, or PYTHONDONTWRITEBYTECODE in the caller's environment) every process compiles every
    module it imports, which measures the length of the sources (bench/results/rdma-reader.md), not
    what an installed tracecore, whose wheel is byte-compiled when installed, does."""
    folders = [name for name in ("tracecore", "cli", "runners", "bench") if (root / name).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], cwd=root, env=env, check=True)


def _kernel_source(root: Path, env: dict[str, str]) -> tuple[str, str]:
    """(tracecore's folder, "aot" or "jit") as a process of that side sees them."""
    code = (
        "import tracecore; from tracecore.reader import compiled; "
        "print(tracecore.__file__); print(compiled.kernels().source)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    path, source = out.stdout.split()
    return str(Path(path).resolve().parent.parent), source


def prepare_kernels(root: Path, env: dict[str, str]) -> str:
    """Make `root` run ahead-of-time kernels: this checkout's when the kernel sources match, else a build."""
    from tracecore.reader import aot

    reader = root / "tracecore" / "reader"
    if root != REPO and aot.fingerprint(reader) == aot.fingerprint() and aot.is_current():
        built = aot.current_module().__file__
        shutil.copy2(built, reader / Path(built).name)
    if _kernel_source(root, env)[1] != "aot":
        subprocess.run([sys.executable, "-m", "tracecore.reader.aot"], cwd=root, env=env, check=True)
    where, source = _kernel_source(root, env)
    if where != str(root.resolve()) or source != "aot":
        raise SystemExit(f"{root}: a process imports tracecore from {where} with {source} kernels")
    return source


def build_runs(source: Path, copies: int, root: Path) -> tuple[Path, list[Path]]:
    """`copies` run folders of hard links to the source's captures (no extra disk, one page cache)."""
    pcaps = sorted(p for p in source.iterdir() if ".pcap" in p.name)
    if not pcaps:
        raise SystemExit(f"no captures in {source}; make them with python -m bench.make_captures")
    runs = root / "runs"
    files = []
    for k in range(copies):
        run = runs / f"{source.name}-copy{k}"
        run.mkdir(parents=True)
        for pcap in pcaps:
            try:
                os.link(pcap, run / pcap.name)
            except OSError:
                shutil.copy2(pcap, run / pcap.name)
            files.append(run / pcap.name)
    return runs, files


def _busy_ticks() -> int:
    """Busy CPU ticks of the whole machine so far (all but idle and iowait)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split()[1:9]
    )
    return user + nice + system + irq + softirq + steal


def timed_run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict:
    """One run under GNU time -v: wall, CPU, peak RSS, stdout, the load around it."""
    with tempfile.TemporaryDirectory(prefix="tc-ab-") as td:
        tv = Path(td, "time")
        load0, busy0 = os.getloadavg()[0], _busy_ticks()
        t0 = time.perf_counter()
        proc = subprocess.run([TIME, "-v", "-o", str(tv), *argv], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        wall = time.perf_counter() - t0
        busy, load1 = (_busy_ticks() - busy0) / TICK, os.getloadavg()[0]
        fields = dict(line.strip().rsplit(": ", 1) for line in tv.read_text().splitlines() if ": " in line)
    if proc.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}")
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "user_s": float(fields["User time (seconds)"]),
        "sys_s": float(fields["System time (seconds)"]),
        "peak_rss_mib": int(fields["Maximum resident set size (kbytes)"]) / 1024,
        "others_cpu_s": max(busy - cpu, 0.0),
        "load_start": load0,
        "load_end": load1,
        "stdout": proc.stdout,
    }


def run_ab(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tc-ab-commits-"))
    try:
        base_root = tmp / "base"
        base_hash = export_commit(args.base, base_root)
        head_hash = _git("rev-parse", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
        sides = {
            "base": (base_root, _side_env(base_root, tmp / "cache-base"), base_hash),
            "head": (
                REPO,
                _side_env(REPO, tmp / "cache-head"),
                head_hash + ("+working tree" if dirty else ""),
            ),
        }
        for root, env, _ in sides.values():
            prepare_kernels(root, env)
            compile_sources(root, env)
        runs, files = build_runs(args.data, args.copies, tmp)
        input_bytes = sum(f.stat().st_size for f in files)
        subprocess.run(["sh", "-c", 'cat "$@" > /dev/null', "sh", *map(str, files)], check=True)
        jobs = ["--jobs", str(args.jobs)] if args.jobs else []
        results: dict[str, dict[str, list[dict]]] = {p: {s: [] for s in sides} for p in args.paths}
        order = []
        for rnd in range(-1, args.reps):  # round -1: the untimed warm-up of every path and side
            for path in args.paths:
                # base first in rounds 1, 3, …, head first in 2, 4, …: a machine that drifts faster
                # or slower during a round favours neither side over the rounds
                turn = list(sides.items())[:: -1 if rnd % 2 else 1]
                for side, (root, env, _) in turn:
                    ds = tmp / f"dataset-{side}"
                    shutil.rmtree(ds, ignore_errors=True)
                    r = timed_run(_argv(path, runs, files, jobs, ds), root, env, args.timeout)
                    out = r.pop("stdout")
                    r["packets"] = json.loads(out)["packets"] if path == "ingest" else int(out.split()[0])
                    if path == "ingest":
                        r["inner_s"] = json.loads(out)["seconds"]
                    if rnd >= 0:
                        results[path][side].append(r)
                        order.append(f"{path}:{side}")
                    print(f"  {'warm-up' if rnd < 0 else f'round {rnd + 1}'} {path:6} {side}: "
                          f"{r['wall_s']:.2f} s wall, {r['cpu_s']:.2f} s CPU, load {r['load_start']:.1f}",
                          flush=True)  # fmt: skip
        for path, by_side in results.items():
            counts = {s: {r["packets"] for r in rs} for s, rs in by_side.items()}
            if len({c for cs in counts.values() for c in cs}) != 1:
                raise SystemExit(f"{path}: the sides disagree on the packet count: {counts}")
        instructions = {}
        if args.instructions:
            run = tmp / "prefix" / args.data.name
            run.mkdir(parents=True)
            prefix = run / files[0].name
            packets = write_prefix(files[0], prefix, args.instructions)
            for path in args.paths:
                instructions[path] = {"packets": packets}
                for side, (root, env, _) in sides.items():
                    ds = tmp / f"dataset-{side}"
                    shutil.rmtree(ds, ignore_errors=True)
                    argv = _argv(path, run.parent, [prefix], jobs, ds)
                    instructions[path][side] = count_instructions(argv, root, env)
                    print(f"  instructions {path:6} {side}: {instructions[path][side]:,}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    loads = [
        x
        for rs in results.values()
        for side in rs.values()
        for r in side
        for x in (r["load_start"], r["load_end"])
    ]
    return {
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.ab_commits " + shlex.join(args.argv),
        "base": {"ref": args.base, "commit": sides["base"][2]},
        "head": {"ref": "this checkout", "commit": sides["head"][2]},
        "data": str(args.data),
        "copies": args.copies,
        "files": len(files),
        "input_bytes": input_bytes,
        "packets": {p: by["head"][0]["packets"] for p, by in results.items()},
        "reps": args.reps,
        "order": order,
        "machine": {
            "cpu": _cpu_model(),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
        },
        "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "results": results,
        "instructions": instructions,
    }


def _argv(path: str, runs: Path, files: list[Path], jobs: list[str], dataset: Path) -> list[str]:
    """The command of one path: an ingest of the run folders into `dataset`, or a read of the files."""
    if path == "ingest":
        return [
            sys.executable,
            "-m",
            "tracecore",
            "ingest",
            str(runs),
            "--out",
            str(dataset),
            "--json",
            "--quiet",
            *jobs,
        ]
    return [sys.executable, "-m", "bench.tc_read", *map(str, files)]


def write_prefix(src: Path, dest: Path, packets: int) -> int:
    """The first `packets` records of a classic pcap file (header kept); returns how many there were."""
    import struct

    data = src.read_bytes()
    order = {
        b"\xd4\xc3\xb2\xa1": "<",
        b"\x4d\x3c\xb2\xa1": "<",
        b"\xa1\xb2\xc3\xd4": ">",
        b"\xa1\xb2\x3c\x4d": ">",
    }
    if data[:4] not in order:
        raise SystemExit(f"{src}: --instructions needs a classic pcap file")
    pos, count = 24, 0
    while count < packets and pos + 16 <= len(data):
        pos += 16 + struct.unpack_from(order[data[:4]] + "I", data, pos + 8)[0]
        count += 1
    dest.write_bytes(data[: min(pos, len(data))])
    return count


def count_instructions(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Instructions the whole process executed (valgrind's `I refs`)."""
    proc = subprocess.run([*VALGRIND, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    refs = [line for line in proc.stderr.splitlines() if "I refs:" in line or "I   refs:" in line]
    if proc.returncode != 0 or not refs:
        raise SystemExit(
            f"valgrind {shlex.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-800:]}"
        )
    return int(refs[-1].rsplit(":", 1)[1].strip().replace(",", ""))


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def summary(runs: list[dict], packets: int, input_bytes: int) -> dict:
    med = {
        k: statistics.median(r[k] for r in runs) for k in ("wall_s", "cpu_s", "peak_rss_mib", "others_cpu_s")
    }
    return {
        **med,
        "min_wall_s": min(r["wall_s"] for r in runs),
        "min_cpu_s": min(r["cpu_s"] for r in runs),
        "pkts_per_s": packets / med["wall_s"],
        "gb_per_s": input_bytes / med["wall_s"] / 1e9,
        "pkts_per_cpu_s": packets / med["cpu_s"],
    }


def paired(base: list[dict], head: list[dict], key: str) -> float:
    """Median over rounds of head/base for `key`, each round's two runs taken back to back.

    Why beside the medians: this VM's speed drifts by a fifth within minutes (neighbours on the host);
    the median of each side's runs then depends on which side drew the slow minutes, while a ratio of
    two runs a few seconds apart mostly cancels the drift."""
    return statistics.median(h[key] / b[key] for b, h in zip(base, head, strict=True))


def _pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def markdown(report: dict, limit_pct: float) -> str:
    b, h, mach = report["base"], report["head"], report["machine"]
    lines = [
        f"# A/B: `{b['ref']}` ({b['commit'][:10]}) vs this checkout ({h['commit'][:10]})",
        "",
        f"Created {report['created_utc']} with `{report['command']}`.",
        "",
        f"Machine: {mach['cpus']} × {mach['cpu']}, Linux {mach['kernel']}, Python {mach['python']}.",
        f"Load average (1 min) during the runs: "
        f"{report['load_1min']['min']:.1f} to {report['load_1min']['max']:.1f} "
        f"(median {report['load_1min']['median']:.1f}).",
        "",
        f"Input: {report['files']} captures ({report['copies']} hard-linked copies of `{report['data']}`), "
        f"{report['input_bytes'] / 1e9:.3g} GB, page cache warm. Order: one untimed warm-up per path "
        f"and side, then {report['reps']} rounds, base then head in odd rounds, head then base in even ones.",
        "",
    ]
    for path, by in report["results"].items():
        packets = report["packets"][path]
        s = {side: summary(runs, packets, report["input_bytes"]) for side, runs in by.items()}
        lines += [
            f"## {path}: {WHAT[path]}, {packets:,} packets",
            "",
            "| side | wall s (runs) | median wall s | Mpkt/s | GB/s | CPU s user+sys (runs) | median CPU s | "
            "Mpkt per CPU s | peak RSS MiB | others' CPU s per run |",
            "|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        for side, runs in by.items():
            m = s[side]
            walls = " ".join(f"{r['wall_s']:.2f}" for r in runs)
            cpus = " ".join(f"{r['cpu_s']:.2f}" for r in runs)
            cells = [
                side,
                walls,
                f"{m['wall_s']:.3f}",
                f"{m['pkts_per_s'] / 1e6:.2f}",
                f"{m['gb_per_s']:.2f}",
            ]
            cells += [
                cpus,
                f"{m['cpu_s']:.3f}",
                f"{m['pkts_per_cpu_s'] / 1e6:.2f}",
                f"{m['peak_rss_mib']:.0f}",
            ]
            lines.append("| " + " | ".join([*cells, f"{m['others_cpu_s']:.1f}"]) + " |")
        o, n = s["base"], s["head"]
        cells = [
            "head vs base",
            f"min {_pct(n['min_wall_s'], o['min_wall_s'])}",
            f"**{_pct(n['wall_s'], o['wall_s'])}**",
        ]
        cells += [
            "",
            "",
            f"min {_pct(n['min_cpu_s'], o['min_cpu_s'])}",
            f"**{_pct(n['cpu_s'], o['cpu_s'])}**",
            "",
        ]
        lines += ["| " + " | ".join([*cells, _pct(n["peak_rss_mib"], o["peak_rss_mib"]), ""]) + " |", ""]
        changes = [
            (label, (n[key] / o[key] - 1) * 100)
            for label, key in (("median wall time", "wall_s"), ("median CPU time", "cpu_s"))
        ]
        for what, key in (("wall time", "wall_s"), ("CPU time", "cpu_s")):
            ratio = paired(by["base"], by["head"], key)
            changes.append((f"{what}, median of the rounds' head/base ratios", (ratio - 1) * 100))
        counted = report.get("instructions", {}).get(path)
        if counted:
            o_ir, n_ir = counted["base"], counted["head"]
            label = f"instructions ({counted['packets']:,} packets, valgrind: {o_ir:,} vs {n_ir:,})"
            changes.append((label, (counted["head"] / counted["base"] - 1) * 100))
        for label, change in changes:
            verdict = "within" if change <= limit_pct else "OVER"
            lines.append(f"- {label}: {change:+.1f} %, {verdict} the {limit_pct:g} % limit.")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ab_commits", description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help=f"commit to compare against [{DEFAULT_BASE}]")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="run folder of TCP captures")
    ap.add_argument("--copies", type=int, default=4, help="hard-linked copies of the run folder [4]")
    ap.add_argument("--reps", type=int, default=5, help="timed rounds [5]")
    ap.add_argument("--paths", nargs="+", choices=tuple(WHAT), default=list(WHAT))
    ap.add_argument("--jobs", type=int, help="ingest --jobs [all cores]")
    ap.add_argument("--limit", type=float, default=3.0, help="allowed slowdown, percent [3]")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run [600]")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ab-latest.md")
    ap.add_argument("--instructions", type=int, metavar="N", help="also count instructions on N packets")
    ap.add_argument("--smoke", action="store_true", help="the embedded sample, 1 copy, 2 rounds")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        from tracecore.sample import sample_run

        args.data, args.copies, args.reps = sample_run(), 1, 2  # one round of each order
    if not Path(TIME).is_file():
        raise SystemExit(f"{TIME} (GNU time) is missing: run `make system-deps`")
    report = run_ab(args)
    save(args.out, report, markdown(report, args.limit))
    return 0


def save(out: Path, report: dict, text: str) -> None:
    """The Markdown at `out`, the report as JSON beside it (`.json`), the Markdown printed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
