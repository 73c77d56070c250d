"""A/B of `tracecore report` between two builds, as whole processes, on one dataset.

    python -m bench.report_ab [--base COMMIT] [--head COMMIT] [--data DATASET | --gpu-corpus] [--reps 9]
                              [--out bench/results/report-ab.md]
    python -m bench.report_ab --smoke --base HEAD --out DIR/report.md   # 1 round

Why: the report's time is mostly fixed costs (imports, Altair's checks, vl-convert's JavaScript
bundle), which only a whole process shows. `--base` (and `--head` when given; else the checkout as
it is) is exported and byte-compiled as in `bench.ab_commits`, each side with a cache folder of its
own. The dataset (default: the embedded sample's two runs; `--gpu-corpus`: ../shared/corpus-gpu's
runs of two and four workers with profiler traces; each ingested once by this checkout) is the same
for both. Each side's first run, with its cache still empty, is reported on its own, as a new
user's first report. Then `--reps` rounds follow, alternating which side goes first, with the cache
as the first run left it, as every later report finds it. The two sides' pages are compared with
the generation time blanked out.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench.ab_commits import (
    REPO,
    TIME,
    _cpu_model,
    _git,
    _pct,
    _side_env,
    compile_sources,
    export_commit,
    paired,
    save,
    timed_run,
)

GPU_CORPUS = REPO.parent / "shared" / "corpus-gpu"
GPU_RUNS = ("gpu-nccl-profilers", "gpu-nccl-4rank")  # runs of two and four workers with profiler traces
DEFAULT_BASE = "d96d293"  # main before the report's checks and Vega bundle were made cheaper
STAMP = re.compile(rb"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _page(path: Path) -> bytes:
    return STAMP.sub(b"generated -", path.read_bytes())


def run_ab(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="tc-report-ab-"))
    try:
        base_root = tmp / "base"
        sides = {
            "base": (
                base_root,
                _side_env(base_root, tmp / "cache-base"),
                export_commit(args.base, base_root),
            ),
            "head": (REPO, _side_env(REPO, tmp / "cache-head"), _git("rev-parse", "HEAD")),
        }
        if args.head is not None:  # a commit, not the checkout (whose files others may be editing)
            head_root = tmp / "head"
            sides["head"] = (
                head_root,
                _side_env(head_root, tmp / "cache-head"),
                export_commit(args.head, head_root),
            )
        for root, env, _ in sides.values():
            compile_sources(root, env)
        data = args.data
        if data is None:
            from tracecore.ingest import ingest
            from tracecore.sample import sample_root

            data = tmp / "dataset"
            folders = [GPU_CORPUS / name for name in GPU_RUNS] if args.gpu_corpus else [sample_root()]
            missing = [str(f) for f in folders if not f.is_dir()]
            if missing:
                raise SystemExit(f"no such folder: {', '.join(missing)}")
            summary = ingest(folders, data, jobs=1)
            if summary.failed:
                raise SystemExit(f"ingest failed: {summary.failed}")
        first: dict[str, dict] = {}
        results: dict[str, list[dict]] = {side: [] for side in sides}
        order = []
        for rnd in range(-1, args.reps):  # round -1: each side's first report, its cache empty
            for side, (root, env, _) in list(sides.items())[:: -1 if rnd % 2 else 1]:
                out = tmp / f"report-{side}"
                argv = [sys.executable, "-m", "tracecore", "report", str(out), "--data", str(data)]
                r = timed_run(argv, root, env, args.timeout)
                r.pop("stdout")
                if rnd < 0:
                    first[side] = r
                else:
                    results[side].append(r)
                    order.append(side)
                print(f"  {'first' if rnd < 0 else f'round {rnd + 1}'} {side}: {r['wall_s']:.2f} s wall, "
                      f"{r['cpu_s']:.2f} s CPU, {r['peak_rss_mib']:.0f} MiB", flush=True)  # fmt: skip
        same_page = _page(tmp / "report-base" / "index.html") == _page(tmp / "report-head" / "index.html")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    loads = [x for rs in results.values() for r in rs for x in (r["load_start"], r["load_end"])]
    return {
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.report_ab " + shlex.join(args.argv),
        "base": {"ref": args.base, "commit": sides["base"][2]},
        "head": {"ref": args.head or "this checkout", "commit": sides["head"][2]},
        "data": str(
            args.data
            or (
                f"the GPU corpus' three runs ({', '.join(GPU_RUNS)}), ingested here"
                if args.gpu_corpus
                else "the embedded sample's two runs"
            )
        ),
        "reps": args.reps,
        "order": order,
        "machine": {"cpu": _cpu_model(), "cpus": os.cpu_count()},
        "load_1min": {"min": min(loads), "median": statistics.median(loads), "max": max(loads)},
        "same_page": same_page,
        "first": first,
        "results": results,
    }


def markdown(report: dict) -> str:
    b, h, mach, res = report["base"], report["head"], report["machine"], report["results"]
    med = {s: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "cpu_s", "peak_rss_mib")}
           for s, rs in res.items()}  # fmt: skip
    lines = [
        f"# `tracecore report` A/B: `{b['ref']}` ({b['commit'][:10]}) vs "
        + (
            f"`{h['ref']}` ({h['commit'][:10]})"
            if h["ref"] != "this checkout"
            else f"this checkout ({h['commit'][:10]})"
        ),
        "",
        f"Created {report['created_utc']} with `{report['command']}` on {mach['cpus']} × {mach['cpu']}; "
        f"load average (1 min) {report['load_1min']['min']:.1f} to {report['load_1min']['max']:.1f}.",
        f"Dataset: {report['data']}. The two pages are "
        f"{'the same' if report['same_page'] else 'DIFFERENT'} (generation time blanked out).",
        "",
        "| side | first run, empty cache: wall s / CPU s / MiB | wall s (rounds) | median wall s | "
        "median CPU s | median peak RSS MiB |",
        "|---|---|---|---:|---:|---:|",
    ]
    for side, rs in res.items():
        f, m = report["first"][side], med[side]
        walls = " ".join(f"{r['wall_s']:.2f}" for r in rs)
        lines.append(
            f"| {side} | {f['wall_s']:.2f} / {f['cpu_s']:.2f} / {f['peak_rss_mib']:.0f} | {walls} | "
            f"{m['wall_s']:.2f} | {m['cpu_s']:.2f} | {m['peak_rss_mib']:.0f} |"
        )
    o, n = med["base"], med["head"]
    ratio = {key: paired(res["base"], res["head"], key) for key in ("wall_s", "cpu_s")}
    fo, fn = report["first"]["base"], report["first"]["head"]
    lines += [
        f"| head vs base | {_pct(fn['wall_s'], fo['wall_s'])} / {_pct(fn['cpu_s'], fo['cpu_s'])} / "
        f"{_pct(fn['peak_rss_mib'], fo['peak_rss_mib'])} | | **{_pct(n['wall_s'], o['wall_s'])}** | "
        f"**{_pct(n['cpu_s'], o['cpu_s'])}** | {_pct(n['peak_rss_mib'], o['peak_rss_mib'])} |",
        "",
        f"- Median of the rounds' head/base ratios: wall {ratio['wall_s'] - 1:+.1%}, "
        f"CPU {ratio['cpu_s'] - 1:+.1%}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report_ab", description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help=f"commit to compare against [{DEFAULT_BASE}]")
    ap.add_argument("--head", help="commit to measure, exported as the base is [this checkout]")
    ap.add_argument("--data", type=Path, help="dataset [the embedded sample, ingested here]")
    ap.add_argument(
        "--gpu-corpus",
        action="store_true",
        help=f"ingest {', '.join(GPU_RUNS)} of {GPU_CORPUS} as the dataset",
    )
    ap.add_argument("--reps", type=int, default=9, help="timed rounds after each side's first run [9]")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per run [600]")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "report-ab.md")
    ap.add_argument("--smoke", action="store_true", help="1 round")
    args = ap.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        args.reps = 1
    if not Path(TIME).is_file():
        raise SystemExit(f"{TIME} (GNU time) is missing: run `make system-deps`")
    report = run_ab(args)
    save(args.out, report, markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
