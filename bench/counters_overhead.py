"""The NIC counter sampler's own cost: CPU per second of sampling, as a whole process, at each interval.

    python -m bench.counters_overhead [--seconds 20] [--interface IF] [--out FILE.md]

Why: the sampler runs beside training on every host; the issue's budget is 1 % of one core at 10 ms.
Each row runs `python -m tracecore.runners.counters` for `--seconds`, stops it with SIGTERM (as a run
does) and reads its user + system CPU from `wait4` (start-up included, so the rate over a longer run
is lower). Sources: the interface's /proc/net/dev line alone, and with an RDMA port laid out as an
mlx5 port (tests/test_nic_counters.py's fixture tree: 8 `counters/` and 6 `hw_counters/` files),
which on this machine are tmpfs files, not sysfs attributes (a real port's reads go to the driver and
may cost more per read). The sampler's own account (samples, missed ticks, p99 lateness and read time)
comes from its last line.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.test_nic_counters import host_tree

REPO = Path(__file__).resolve().parent.parent
INTERVALS = ("10ms", "5ms", "1ms")


def _default_interface() -> str:
    """The first interface of /proc/net/dev that is not loopback (loopback where none is)."""
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    names = [line.split(":", 1)[0].strip() for line in lines]
    return next((n for n in names if n != "lo"), "lo")


def measure(interface: str, interval: str, seconds: float, root: Path | None, out: Path) -> dict:
    """One sampler process: its CPU seconds over `seconds` of sampling, and its own account."""
    argv = [sys.executable, "-m", "tracecore.runners.counters", "--interface", interface, "--interval",
            interval, "--out", str(out), "--ethtool-every", "0"]  # fmt: skip
    if root is not None:
        argv += ["--root", str(root), "--rdma", "mlx5_0:1"]
    started = time.monotonic()
    alone = subprocess.Popen([*argv, "--samples", "1"], cwd=REPO)  # start-up, one sample, exit
    _, status, first = os.wait4(alone.pid, 0)
    startup_wall, startup_cpu = time.monotonic() - started, first.ru_utime + first.ru_stime
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO)
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the sampler exited {os.waitstatus_to_exitcode(status)}")
    last = out.read_text().splitlines()[-1].split("\t")[1:]
    account = dict(zip(last[0::2], last[1::2], strict=True))
    cpu = usage.ru_utime + usage.ru_stime
    columns = next(line for line in out.read_text().splitlines() if line.startswith("# columns"))
    steady = 100 * (cpu - startup_cpu) / (wall - startup_wall)  # sampling alone, start-up taken off
    return {"interval": interval, "counters": len(columns.split("\t")) - 2, "wall_s": wall, "cpu_s": cpu,
            "core_pct": 100 * cpu / wall, "startup_cpu_s": startup_cpu, "steady_pct": steady,
            **account}  # fmt: skip


def timer_floor(interval: str, seconds: float) -> float:
    """% of one core a Python process spends only sleeping `interval` in a loop: what any sampler in
    Python pays to wake up that often on this machine (a VM's timer exits included), its floor."""
    from tracecore.runners.counters import parse_interval

    code = f"import time\nwhile True: time.sleep({parse_interval(interval) / 1e9})\n"
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", code])
    time.sleep(seconds)
    proc.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(proc.pid, 0)
    return 100 * (usage.ru_utime + usage.ru_stime) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interface", default=None)
    parser.add_argument("--out", default=str(REPO / "bench/results/counters-overhead.md"))
    args = parser.parse_args()
    interface = args.interface or _default_interface()
    rows = []
    floors: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tree = host_tree(Path(tmp) / "root")
        # the fixture's /proc/net/dev names eth1 only: the RDMA rows read it, the others the real one
        for interval in INTERVALS:
            plain = measure(interface, interval, args.seconds, None, Path(tmp) / "a.tsv")
            rows.append({"source": f"{interface} (/proc/net/dev)", **plain})
            rdma = measure("eth1", interval, args.seconds, tree, Path(tmp) / "b.tsv")
            rows.append({"source": "eth1 + mlx5_0 port 1 (fixture files)", **rdma})
            floors[interval] = timer_floor(interval, args.seconds)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# The counter sampler's own cost",
        "",
        f"`python -m bench.counters_overhead --seconds {args.seconds:g}` on {platform.node()}"
        f" ({os.cpu_count()} cores), {stamp}. One process per row, {args.seconds:g} s of sampling, stopped by"
        " SIGTERM; CPU = user + system from wait4, start-up (Python, imports) included; `start-up` is a"
        " run of one sample (`--samples 1`), and `sampling` the rest as a share of one core: what the"
        " sampler costs while training runs.",
        "",
        "| source | interval | counters | samples | missed | CPU s | start-up CPU s | % of one core |"
        " sampling, % of one core | late p99 µs | read p99 µs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['source']} | {r['interval']} | {r['counters']} | {r['samples']} | {r['missed']} |"
            f" {r['cpu_s']:.3f} | {r['startup_cpu_s']:.3f} | {r['core_pct']:.2f} | {r['steady_pct']:.2f} |"
            f" {r['late_p99_us']} | {r['read_p99_us']} |"
        )
    floor = ", ".join(f"{i} {v:.2f}" for i, v in floors.items())
    lines += ["", "The floor: a Python process that only sleeps the interval in a loop (start-up included),"
              f" % of one core: {floor}."]  # fmt: skip
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
