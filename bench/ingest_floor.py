"""How fast could any ingest built on tracecore's reader and Arrow's Parquet writer be on this machine?

    python -m bench.ingest_floor --data RUN_OR_RUNS_DIR [--reps 5] [--dpkt-s SECONDS] [--out F.md]

Why: issue 27 asks `tracecore ingest` for >= 100x a plain dpkt loop and <= 5x `cat`, as whole
processes. This measures, in one run and as whole processes, the parts no such ingest can skip:
the interpreter with the imports it needs (numpy, pyarrow, pyarrow.parquet), decoding every capture
with tracecore's reader (two threads, batches discarded), and encoding the same rows with the
writer's Parquet settings (`tracecore.ingest.writer._open_writer`, two threads, from rows loaded
before the clock starts). The floor is start-up + (decode CPU + encode CPU) / cores: perfect
overlap on every core, no catalog, no link bins, no fsync, no Python between the two. Beside it:
`cat FILES > /dev/null`, `tracecore ingest`, and the dpkt loop's time (`--dpkt-s`, from a
`bench.peers` run on the same files: it takes minutes, so it is not rerun here).
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.peers import REPO, _run_timed, find_captures

IMPORTS = "import numpy, pyarrow, pyarrow.parquet"


def _cpu() -> float:
    """CPU seconds of this process, every thread, user and system (ns resolution: os.times counts
    10 ms ticks, which read 0 for the sample's encode)."""
    return time.process_time()


def child_decode(files: list[str], cores: int) -> dict:
    """Decode every capture with the reader on `cores` threads; batches are dropped. The kernels are
    loaded (on the embedded sample) before the clock starts: the floor leaves every one-off out."""
    from tracecore.reader import read_batches, read_capture
    from tracecore.sample import sample_run

    read_capture(sample_run() / "worker-0-tcpdump.pcap")

    def one(path: str) -> int:
        return sum(batch.num_rows for batch in read_batches(path))

    wall0, cpu0 = time.perf_counter(), _cpu()
    with ThreadPoolExecutor(cores) as pool:
        packets = sum(pool.map(one, files))
    return {"packets": packets, "wall_s": time.perf_counter() - wall0, "cpu_s": _cpu() - cpu0}


def child_encode(dataset: str, cores: int) -> dict:
    """Encode the rows of an ingested dataset's part files again, one file per part, on `cores`
    threads, with the writer's settings; loading them is not timed."""
    import pyarrow.parquet as pq

    from tracecore.ingest.writer import ROW_GROUP_ROWS, _open_writer

    parts = sorted(p for p in Path(dataset, "packets").rglob("*.parquet"))
    tables = [pq.read_table(p) for p in parts]
    out = Path(tempfile.mkdtemp(prefix="tc-floor-enc-"))

    def one(i: int) -> int:
        writer = _open_writer(out / f"{i}.parquet", tables[i].schema)
        for batch in tables[i].to_batches(max_chunksize=ROW_GROUP_ROWS):
            writer.write_batch(batch, row_group_size=batch.num_rows)
        writer.close()
        return tables[i].num_rows

    try:
        wall0, cpu0 = time.perf_counter(), _cpu()
        with ThreadPoolExecutor(cores) as pool:
            rows = sum(pool.map(one, range(len(tables))))
        return {"packets": rows, "wall_s": time.perf_counter() - wall0, "cpu_s": _cpu() - cpu0}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _child(kind: str, args: list[str], cores: int) -> dict:
    argv = [sys.executable, "-m", "bench.ingest_floor", "--child", kind, "--cores", str(cores), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(proc.stdout)


def _wall(argv: list[str], env: dict | None = None) -> float:
    wall, _rss, rc, _out, err = _run_timed(argv, env, 3600)
    if rc != 0:
        raise SystemExit(f"bench.ingest_floor: {argv[0]} failed ({rc}): {err.strip()[-300:]}")
    return wall


def measure(data: Path, reps: int, cores: int) -> dict:
    files = [str(f) for f in find_captures(data)]
    if not files:
        raise SystemExit(f"bench.ingest_floor: no capture files under {data}")
    tmp = Path(tempfile.mkdtemp(prefix="tc-floor-"))
    dataset = tmp / "ds"
    ingest = [sys.executable, "-m", "tracecore", "ingest", str(data), "--out", str(dataset), "--quiet"]
    rows: dict[str, list] = {k: [] for k in ("cat", "start", "imports", "ingest", "decode", "encode")}
    try:
        _wall(["cat", *files])  # the page cache warm, and every path once untimed
        _wall(ingest)
        for _ in range(reps):
            rows["cat"].append(_wall(["sh", "-c", 'cat "$@" > /dev/null', "sh", *files]))
            rows["start"].append(_wall([sys.executable, "-c", "pass"]))
            rows["imports"].append(_wall([sys.executable, "-c", IMPORTS]))
            shutil.rmtree(dataset, ignore_errors=True)
            rows["ingest"].append(_wall(ingest))
            rows["decode"].append(_child("decode", files, cores))
            rows["encode"].append(_child("encode", [str(dataset)], cores))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    decoded, encoded = rows["decode"][0]["packets"], rows["encode"][0]["packets"]
    if decoded != encoded:  # e.g. run folders nested deeper than ingest reads: not the same work
        raise SystemExit(
            f"bench.ingest_floor: {data}: the reader decoded {decoded:,} packets but the ingest stored "
            f"{encoded:,}; pass a run folder or a folder of run folders"
        )
    med = {k: statistics.median(v) for k, v in rows.items() if k not in ("decode", "encode")}
    for k in ("decode", "encode"):
        med[f"{k}_wall_s"] = statistics.median(r["wall_s"] for r in rows[k])
        med[f"{k}_cpu_s"] = statistics.median(r["cpu_s"] for r in rows[k])
    med["floor"] = med["imports"] + (med["decode_cpu_s"] + med["encode_cpu_s"]) / cores
    return {
        "data": str(data),
        "files": len(files),
        "bytes": sum(os.path.getsize(f) for f in files),
        "packets": decoded,
        "encoded_rows": encoded,
        "reps": reps,
        "cores": cores,
        "runs": rows,
        "median": med,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Linux {platform.release()}, Python {platform.python_version()}",
        "load": os.getloadavg(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def markdown(r: dict, dpkt_s: float | None, command: str) -> str:
    m = r["median"]
    lines = [
        f"# Ingest floor — {r['created']}",
        "",
        f"`{command}`",
        "",
        f"Input: `{r['data']}`: {r['files']} files, {r['bytes'] / 1e9:.3f} GB, {r['packets']:,} packets "
        f"({r['encoded_rows']:,} rows re-encoded). {r['reps']} rounds, medians, {r['cores']} cores. "
        f"Machine: {r['machine']}; load at the end {tuple(round(x, 2) for x in r['load'])}.",
        "",
        "| part | wall s | CPU s |",
        "|---|---:|---:|",
        f"| `cat FILES > /dev/null` | {m['cat']:.3f} | |",
        f"| `python -c pass` | {m['start']:.3f} | |",
        f'| `python -c "{IMPORTS}"` (start-up + imports) | {m["imports"]:.3f} | |',
        f"| decode, reader on {r['cores']} threads (in-process) | {m['decode_wall_s']:.3f} "
        f"| {m['decode_cpu_s']:.3f} |",
        f"| encode, writer settings on {r['cores']} threads (in-process) | {m['encode_wall_s']:.3f} "
        f"| {m['encode_cpu_s']:.3f} |",
        f"| **floor** = imports + (decode + encode CPU) / {r['cores']} | **{m['floor']:.3f}** | |",
        f"| `tracecore ingest` (whole process) | {m['ingest']:.3f} | |",
        "",
        f"- `tracecore ingest` / `cat`: {m['ingest'] / m['cat']:.2f}x; floor / `cat`: "
        f"{m['floor'] / m['cat']:.2f}x (target <= 5x: {5 * m['cat']:.3f} s).",
        f"- `tracecore ingest` / floor: {m['ingest'] / m['floor']:.2f}x.",
    ]
    if dpkt_s:
        lines.append(
            f"- dpkt loop {dpkt_s:.1f} s (given): tracecore {dpkt_s / m['ingest']:.1f}x, the floor "
            f"{dpkt_s / m['floor']:.1f}x (target >= 100x: {dpkt_s / 100:.3f} s)."
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest_floor", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="a run folder or a folder of run folders (required)")
    ap.add_argument("--reps", type=int, default=5, help="timed rounds, after one untimed (default 5)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="threads and cores (default: all)")
    ap.add_argument("--dpkt-s", type=float, help="the dpkt loop's wall seconds on the same files")
    ap.add_argument("--out", type=Path, help="write the Markdown here and the JSON beside it")
    ap.add_argument("--child", choices=["decode", "encode"], help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child == "decode":
        print(json.dumps(child_decode(a.args, a.cores)))
        return 0
    if a.child == "encode":
        print(json.dumps(child_encode(a.args[0], a.cores)))
        return 0
    if a.data is None:
        ap.error("--data is required")
    report = measure(a.data, a.reps, a.cores)
    command = "python -m bench.ingest_floor " + " ".join(sys.argv[1:] if argv is None else argv)
    text = markdown(report, a.dpkt_s, command)
    print(text)
    if a.out:
        a.out.write_text(text)
        a.out.with_suffix(".json").write_text(json.dumps({**report, "dpkt_s": a.dpkt_s}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
