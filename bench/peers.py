"""Peer benchmark: tracecore against the tools people use on the same capture files.

    python -m bench.peers [--data bench/data/<run or root>] [--reps 3] [--smoke]
                          [--prefix-packets N] [--results bench/results]

Every path runs as its own subprocess on the same files, page cache warm (the files are read
once before timing and every path gets one untimed warm-up run), `--reps` timed repetitions,
median wall time reported. Peak RSS comes from the kernel's rusage of that subprocess tree
(GNU `/usr/bin/time -f %M`). Paths:

* `cat`             — reading the bytes, the floor;
* `tcpdump`         — `tcpdump -r FILE -nn -tt > /dev/null`, per file;
* `dpkt`            — bench/dpkt_loop.py: plain Python dpkt loop → Parquet (paper's fields);
* `tshark`          — `tshark -r FILE -T fields -e frame.time_epoch -e ip.src -e ip.dst
                       -e tcp.srcport -e tcp.dstport -e frame.len > /dev/null`, per file;
* `tracecore read`  — iterate `tracecore.reader.read_batches` (bench/tc_read.py);
* `tracecore ingest`— `tracecore ingest DIR --out TMP`;
* `query link_util`, `query flow_matrix` — `tracecore query NAME` on that dataset
  (`TRACECORE_DATA=TMP`).

Commands that do not exist (yet) are recorded as "unavailable" with the reason. Slow peers
(dpkt, tshark) may be measured on the first `--prefix-packets` packets of each file and
extrapolated linearly to the whole input; the table says so. Results go to
`<results>/peers-<UTC time>.{json,md}` and `peers-latest.{json,md}` and are printed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TSHARK_FIELDS = ["frame.time_epoch", "ip.src", "ip.dst", "tcp.srcport", "tcp.dstport", "frame.len"]
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcap.zst", ".pcap.xz")


@dataclass
class Measure:
    name: str
    what: str
    command: str
    status: str = "ok"  # ok | unavailable | failed
    reason: str = ""
    walls: list[float] = field(default_factory=list)
    wall_s: float | None = None  # median (extrapolated to the whole input when prefix)
    measured_wall_s: float | None = None  # median as measured
    peak_rss_mib: float | None = None
    packets: int | None = None  # packets the measured run covered
    input_bytes: int | None = None
    extrapolated: bool = False
    packets_per_s: float | None = None
    gb_per_s: float | None = None
    ratio_to_tracecore: float | None = None  # wall / tracecore-read wall (or ingest for queries)
    inner_walls: list[float] = field(default_factory=list)  # ingest: its own `seconds` (--json)
    inner_wall_s: float | None = None  # median: the ingest inside the process, start-up excluded


TIME = shutil.which("time", path="/usr/bin:/bin")


def _run_timed(
    argv: list[str], env: dict[str, str] | None, timeout: float
) -> tuple[float, float, int, str, str]:
    """Run argv; returns (wall s, peak RSS MiB, exit code, stdout, stderr tail).

    Peak RSS is GNU time's %M for the command's process tree (wait4 rusage of a small `time`
    process, so the benchmark's own memory, inherited across fork, does not leak into it).
    Without /usr/bin/time it falls back to this process's wait4 rusage (an upper bound).
    """
    with tempfile.TemporaryDirectory() as td:
        out_p, err_p, rss_p = Path(td, "out"), Path(td, "err"), Path(td, "rss")
        full = [TIME, "-f", "%M", "-o", str(rss_p), *argv] if TIME else argv
        with out_p.open("wb") as out, err_p.open("wb") as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen(full, stdout=out, stderr=err, env=env, cwd=REPO)
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = -9
            wall = time.perf_counter() - t0
        stdout = out_p.read_text(errors="replace")
        stderr = err_p.read_text(errors="replace")[-2000:]
        rss_mib = float("nan")
        if TIME and rss_p.exists():
            last = (rss_p.read_text().strip().splitlines() or [""])[-1]
            if last.isdigit():
                rss_mib = int(last) / 1024.0
        if rc != 0 and TIME and stderr.startswith("Command exited with non-zero status"):
            stderr = stderr.split("\n", 1)[-1]
    return wall, rss_mib, rc, stdout, stderr


def _sh(script: str, files: list[Path]) -> list[str]:
    """A /bin/sh loop over files (one tool process per file, all output to /dev/null)."""
    return ["sh", "-c", script, "sh", *map(str, files)]


def find_captures(data: Path) -> list[Path]:
    if data.is_file():
        return [data]
    files = sorted(p for p in data.rglob("*") if p.is_file() and p.name.endswith(CAPTURE_SUFFIXES))
    return [p for p in files if ".partial" not in str(p) and "/.calibration" not in str(p)]


def count_packets(files: list[Path]) -> int:
    """Packets in the files: capinfos (independent C tool) when present, else tracecore's reader."""
    if shutil.which("capinfos"):
        total = 0
        for f in files:
            argv = ["capinfos", "-c", "-M", "-T", "-r", str(f)]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                break
            total += int(proc.stdout.strip().split("\t")[-1])
        else:
            return total
    proc = subprocess.run([sys.executable, "-m", "bench.tc_read", *map(str, files)], capture_output=True,
                          text=True, cwd=REPO, check=True)  # fmt: skip
    return int(proc.stdout.strip())


def tracecore_has(cmd: str) -> tuple[bool, str]:
    exe = shutil.which("tracecore", path=str(Path(sys.executable).parent)) or shutil.which("tracecore")
    if exe is None:
        return False, "tracecore CLI not installed"
    proc = subprocess.run([exe, cmd, "--help"], capture_output=True, text=True, check=False, cwd=REPO)
    if proc.returncode != 0:
        return (
            False,
            f"`tracecore {cmd}` not available: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}",
        )
    return True, exe


def machine_info() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{mem_kib / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass

    def ver(argv: list[str]) -> str:
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return "missing"
        return ((p.stdout or p.stderr).strip().splitlines() or ["?"])[0]

    return {
        "host": platform.node(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "tcpdump": ver(["tcpdump", "--version"]),
        "tshark": ver(["tshark", "--version"]),
        "load_avg_at_start": os.getloadavg(),
    }


def run_bench(
    data: Path,
    reps: int = 3,
    prefix_packets: int | None = None,
    timeout: float = 3600.0,
    results: Path | None = None,
    only: list[str] | None = None,
    warmup: int = 1,
) -> dict:
    files = find_captures(data)
    if not files:
        raise SystemExit(f"bench.peers: no capture files under {data}")
    input_bytes = sum(f.stat().st_size for f in files)
    per_file = [count_packets([f]) for f in files]
    total_packets = sum(per_file)
    if prefix_packets is None:  # auto: slow peers see at most ~2 M packets
        prefix_packets = 0 if total_packets <= 2_000_000 else math.ceil(2_000_000 / len(files))
    py = sys.executable
    fields = " ".join(f"-e {f}" for f in TSHARK_FIELDS)
    tmp = Path(tempfile.mkdtemp(prefix="tc-peers-"))
    ingest_dir = data if data.is_dir() else data.parent
    dataset = tmp / "dataset"
    env_ds = {**os.environ, "TRACECORE_DATA": str(dataset)}
    tshark_c = f"-c {prefix_packets} " if prefix_packets else ""
    dpkt_max = ["--max-packets", str(prefix_packets)] if prefix_packets else []
    paths: list[tuple[Measure, list[str] | None, dict | None, bool]] = []

    def add(name: str, what: str, argv: list[str] | None, env=None, prefix=False, reason=""):
        m = Measure(name, what, shlex.join(argv) if argv else "", input_bytes=input_bytes)
        if argv is None:
            m.status, m.reason = "unavailable", reason
        paths.append((m, argv, env, prefix))

    add("cat", "read bytes (floor)", _sh('cat "$@" > /dev/null', files))
    if shutil.which("tcpdump"):
        add(
            "tcpdump -r",
            "decode + print, C",
            _sh('for f; do tcpdump -r "$f" -nn -tt; done > /dev/null 2>&1', files),
        )
    else:
        add("tcpdump -r", "decode + print, C", None, reason="tcpdump not installed")
    dpkt_argv = [py, "-m", "bench.dpkt_loop", "--out", str(tmp / "dpkt.parquet"), *dpkt_max, *map(str, files)]
    add("dpkt loop", "Python dpkt → Parquet", dpkt_argv, prefix=bool(prefix_packets))
    if shutil.which("tshark"):
        add("tshark fields", "tshark -T fields (paper's fields)",
            _sh(f'for f; do tshark -r "$f" {tshark_c}-T fields {fields}; done > /dev/null', files),
            prefix=bool(prefix_packets))  # fmt: skip
    else:
        add("tshark fields", "tshark -T fields", None, reason="tshark not installed")
    try:
        import tracecore.reader  # noqa: F401

        add("tracecore read", "read_batches → Arrow", [py, "-m", "bench.tc_read", *map(str, files)])
    except ImportError as exc:
        add("tracecore read", "read_batches → Arrow", None, reason=f"tracecore.reader: {exc}")
    ok, exe = tracecore_has("ingest")
    if ok:
        ingest_argv = [exe, "ingest", str(ingest_dir), "--out", str(dataset), "--json"]
        add("tracecore ingest", "pcap → Parquet + catalog", ingest_argv, env=env_ds)
    else:
        add("tracecore ingest", "pcap → Parquet + catalog", None, reason=exe)
    for view in ("link_util", "flow_matrix"):
        okq, exeq = tracecore_has("query")
        if ok and okq:
            add(f"query {view}", "SQL view on the dataset", [exeq, "query", view], env=env_ds)
        else:
            add(f"query {view}", "SQL view on the dataset", None, reason=exeq if not okq else "no ingest")

    if only:
        paths = [p for p in paths if p[0].name in only]
    # Warm the page cache.
    subprocess.run(_sh('cat "$@" > /dev/null', files), check=True)
    measures = []
    for m, argv, env, prefix in paths:
        measures.append(m)
        if argv is None:
            print(f"  {m.name:18s} unavailable: {m.reason}", flush=True)
            continue
        if m.name == "tracecore ingest":
            shutil.rmtree(dataset, ignore_errors=True)
        # untimed warm-up(s), then reps
        for rep in range(warmup + reps):
            if m.name == "tracecore ingest":
                shutil.rmtree(dataset, ignore_errors=True)
            wall, rss, rc, out, err = _run_timed(argv, env, timeout)
            if rc != 0:
                m.status, m.reason = "failed", f"exit {rc}: {err.strip()[-400:]}"
                break
            if rep >= warmup:
                m.walls.append(wall)
                m.peak_rss_mib = max(m.peak_rss_mib or 0.0, rss)
            if m.name in ("dpkt loop", "tracecore read") and out.strip().isdigit():
                m.packets = int(out.strip())
            if m.name == "tracecore ingest" and rep >= warmup:
                m.inner_walls.append(float(json.loads(out)["seconds"]))
        if m.status != "ok":
            print(f"  {m.name:18s} FAILED: {m.reason}", flush=True)
            continue
        m.measured_wall_s = statistics.median(m.walls)
        if m.inner_walls:
            m.inner_wall_s = statistics.median(m.inner_walls)
        if m.packets is None:
            m.packets = total_packets
            if prefix and m.name == "tshark fields":
                m.packets = sum(min(prefix_packets, c) for c in per_file)
        if prefix and m.packets and m.packets < total_packets:
            m.extrapolated = True
            m.wall_s = m.measured_wall_s * total_packets / m.packets
        else:
            m.wall_s = m.measured_wall_s
        m.packets_per_s = total_packets / m.wall_s if m.wall_s else None
        m.gb_per_s = input_bytes / m.wall_s / 1e9 if m.wall_s else None
        note = f" (extrapolated from {m.packets:,} packets)" if m.extrapolated else ""
        print(f"  {m.name:18s} {m.wall_s:9.3f} s  {m.peak_rss_mib:8.1f} MiB{note}", flush=True)

    by = {m.name: m for m in measures}
    ref = by.get("tracecore read")
    for m in measures:
        base = ref
        if m.name.startswith("query"):
            base = by.get("tracecore ingest")
        if m.wall_s and base is not None and base.wall_s:
            m.ratio_to_tracecore = m.wall_s / base.wall_s
    shutil.rmtree(tmp, ignore_errors=True)

    report = {
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "data": str(data),
        "files": [str(f) for f in files],
        "n_files": len(files),
        "input_bytes": input_bytes,
        "packets": total_packets,
        "reps": reps,
        "warmup_runs": warmup,
        "prefix_packets_per_file": prefix_packets,
        "machine": machine_info(),
        "results": [asdict(m) for m in measures],
    }
    if results is not None:
        write_report(report, results)
    return report


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def markdown(report: dict) -> str:
    mach = report["machine"]
    lines = [
        f"# Peer benchmark — {report['created_utc']}",
        "",
        f"Input: `{report['data']}` — {report['n_files']} files, {report['input_bytes'] / 1e9:.3f} GB, "
        f"{report['packets']:,} packets. Median of {report['reps']} warm-cache reps "
        f"after {report.get('warmup_runs', 1)} untimed warm-up run(s) per path.",
        f"Machine: {mach['cpu']} ({mach['cpus']} CPUs, {mach['memory']}), kernel {mach['kernel']}, "
        f"Python {mach['python']}; load average at start "
        f"{tuple(round(x, 2) for x in mach['load_avg_at_start'])}.",
        "",
        "| path | what | wall s | packets/s | GB/s | peak RSS MiB | × tracecore | note |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for m in report["results"]:
        if m["status"] != "ok":
            lines.append(f"| {m['name']} | {m['what']} | {m['status']} | | | | | {m['reason'][:120]} |")
            continue
        note = ""
        if m["extrapolated"]:
            note = f"extrapolated from first {m['packets']:,} packets (RSS as measured)"
        if m.get("inner_wall_s"):
            inner = m["inner_wall_s"]
            note = (
                f"in-process (without interpreter start-up): {inner:.3f} s, "
                f"{report['packets'] / inner / 1e6:.2f} Mpkt/s, "
                f"{report['input_bytes'] / inner / 1e9:.2f} GB/s"
            )
        ratio = m["ratio_to_tracecore"]
        base = "ingest" if m["name"].startswith("query") else "read"
        lines.append(
            f"| {m['name']} | {m['what']} | {_fmt(m['wall_s'], '.3f')} | "
            f"{_fmt(m['packets_per_s'], ',.0f')} | "
            f"{_fmt(m['gb_per_s'], '.3f')} | {_fmt(m['peak_rss_mib'], '.1f')} | "
            f"{_fmt(ratio, '.2f')}{'' if ratio is None else ' (vs ' + base + ')'} | {note} |"
        )
    lines += [
        "",
        "× tracecore = wall time / wall time of `tracecore read` (queries: / `tracecore ingest`); "
        "> 1 means slower than tracecore.",
    ]
    lines += _ingest_ratios(report["results"])
    return "\n".join(lines) + "\n"


def _ingest_ratios(results: list[dict]) -> list[str]:
    """The issue's acceptance ratios: peers' wall over `tracecore ingest`'s, whole processes both."""
    by = {m["name"]: m for m in results if m["status"] == "ok" and m["wall_s"]}
    ingest = by.get("tracecore ingest")
    if ingest is None:
        return []
    out = ["", "Ingest (whole CLI process) against peers in this run:"]
    for name in ("tshark fields", "dpkt loop", "tcpdump -r", "cat"):
        if name in by:
            out.append(f"- {by[name]['wall_s'] / ingest['wall_s']:.1f}× `{name}`")
    return out


def write_report(report: dict, results: Path) -> tuple[Path, Path]:
    results.mkdir(parents=True, exist_ok=True)
    stamp = report["created_utc"].replace(":", "").replace("+0000", "Z")
    js = json.dumps(report, indent=2)
    md = markdown(report)
    for name in (f"peers-{stamp}", "peers-latest"):
        (results / f"{name}.json").write_text(js)
        (results / f"{name}.md").write_text(md)
    return results / "peers-latest.json", results / "peers-latest.md"


def default_data() -> Path:
    data = REPO / "bench" / "data"
    if data.is_dir() and find_captures(data):
        return data
    from tracecore.sample import sample_root

    return sample_root()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, help="capture file, run dir or root of runs (default bench/data)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prefix-packets", type=int, help="per file, for dpkt/tshark (default: auto, 0 = all)")
    ap.add_argument("--results", type=Path, help="default bench/results (bench/results/smoke for --smoke)")
    ap.add_argument("--smoke", action="store_true", help="embedded sample, 1 rep (seconds)")
    ap.add_argument("--only", action="append", help="run only this path (repeatable)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per command, seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        from tracecore.sample import sample_run

        data = args.data or sample_run()
        reps = min(args.reps, 1) if args.reps == 3 else args.reps
        warmup = 0  # the sample is tiny; the files are still read once before timing
    else:
        data = args.data or default_data()
        reps = args.reps
        warmup = 1
    data = data.resolve()
    results = args.results or (REPO / "bench" / "results" / ("smoke" if args.smoke else ""))
    print(f"bench.peers: {data} ({reps} reps)", flush=True)
    report = run_bench(data, reps, args.prefix_packets, args.timeout, results, args.only, warmup)
    print()
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
