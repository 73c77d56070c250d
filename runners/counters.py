"""The NIC counter sampler a run starts on every host, beside tcpdump or instead of it.

Why: RDMA traffic bypasses the kernel, so tcpdump on the host sees none of it, but every host's
interface and RDMA port keep byte, packet, drop and congestion counters. This process reads them at a
fixed interval (10 ms by default) on the host's UTC clock, the clock tcpdump stamps packets with, and
writes one line per sample to a text file that `tracecore ingest` recognises by its first line
(`tracecore/logs/nic_counters.py` reads it; the format is written down there).

    python -m tracecore.runners.counters --interface eth1 --out worker-0-counters.tsv [--rdma auto]

Sources, each read with one `pread` per file per sample on files opened once:
- the interface's line of /proc/net/dev (the process's own network namespace: a namespace testbed's
  veth counts what its worker sent and received);
- where the interface has an RDMA device (`/sys/class/net/IF/device/infiniband/*`, or `--rdma DEV[:PORT]`),
  every file of that port's `counters/` and `hw_counters/` folders;
- `ethtool -S IF` every `--ethtool-every` samples where the tool exists (PFC pause counters per priority).
Each sample is stamped at the middle of its reads (read again when they took over 200 µs). It stops on
SIGTERM, SIGINT or SIGUSR2, writing a last line with its sample count, the ticks it missed, how late
its samples were (its jitter) and how long their reads took, then exits 0.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

MAGIC = "# tracecore counters 1"
# /proc/net/dev's fields after "IF:", in order (linux net/core/net-procfs.c, dev_seq_printf_stats)
NETDEV_FIELDS = (
    "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo_errors", "rx_frame_errors",
    "rx_compressed", "multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped",
    "tx_fifo_errors", "collisions", "tx_carrier_errors", "tx_compressed",
)  # fmt: skip
_ETHTOOL_LINE = re.compile(r"^\s+([^:]+):\s+(-?\d+)\s*$")
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
# a sample is stamped at the middle of its reads; reads that took longer than this (the process was
# preempted) are done again, at most READ_TRIES times, so a sample's time is known to ± 100 µs or so
MAX_READ_NS = 200_000
READ_TRIES = 3
# the file is written once a second (a write per sample cost a third of the sampler's CPU): a killed
# sampler loses at most that; a stopped one loses nothing
FLUSH_NS = 1_000_000_000
MIN_INTERVAL_NS = 1_000_000  # below 1 ms the reads themselves are a large part of the interval


class SamplerError(Exception):
    """A counter source the sampler was asked for and cannot read: one line, exit code 2."""


def parse_interval(text: str) -> int:
    """'10ms' → 10_000_000 ns; 1 ms at least."""
    m = _DURATION.match(text.strip())
    if m is None:
        raise SamplerError(f"interval {text!r} is not a duration such as 10ms, 500us or 1s")
    ns = round(float(m.group(1)) * _UNIT_NS[m.group(2)])
    if ns < MIN_INTERVAL_NS:
        raise SamplerError(f"interval {text!r} is below the sampler's 1 ms")
    return ns


def rdma_ports(sys_root: Path, interface: str, rdma: str) -> list[tuple[str, str]]:
    """(device, port) pairs to sample: `rdma` 'none', 'auto' (the interface's RDMA device, every port
    whose GID table names the interface, else every port), or 'DEV' / 'DEV:PORT'."""
    ib = sys_root / "sys/class/infiniband"
    if rdma == "none":
        return []
    if rdma == "auto":
        devices = sorted(
            p.name for p in (sys_root / f"sys/class/net/{interface}/device/infiniband").glob("*")
        )
    else:
        dev, _, port = rdma.partition(":")
        if not (ib / dev / "ports").is_dir():
            raise SamplerError(f"no RDMA device {dev} (no {ib / dev / 'ports'})")
        if port:
            if not (ib / dev / "ports" / port).is_dir():
                raise SamplerError(f"RDMA device {dev} has no port {port}")
            return [(dev, port)]
        devices = [dev]
    found: list[tuple[str, str]] = []
    for dev in devices:
        ports = sorted((p.name for p in (ib / dev / "ports").glob("*")), key=lambda n: (len(n), n))
        named = [p for p in ports if _port_names(ib / dev / "ports" / p, interface)]
        found += [(dev, p) for p in (named or ports)]
    return found


def _port_names(port: Path, interface: str) -> bool:
    """Whether a RoCE port's GID table lists the interface (gid_attrs/ndevs/N)."""
    for f in (port / "gid_attrs/ndevs").glob("*"):
        try:
            if f.read_text().strip() == interface:
                return True
        except OSError:
            continue  # an unused GID entry reads as EINVAL
    return False


class Sampler:
    """Open counter files once; `sample` reads them all into one line."""

    def __init__(self, interface: str, ports: list[tuple[str, str]], proc_root: Path, sys_root: Path) -> None:
        self.interface = interface
        self._line = re.compile(rb"^ *" + re.escape(interface.encode()) + rb":(.*)$", re.MULTILINE)
        self.netdev = os.open(proc_root / "proc/net/dev", os.O_RDONLY)
        if self._netdev_values() is None:
            os.close(self.netdev)
            raise SamplerError(
                f"interface {interface} is not in {proc_root / 'proc/net/dev'} (this namespace)"
            )
        self.columns = [f"{interface}//{name}" for name in NETDEV_FIELDS]
        self.files: list[int] = []
        for dev, port in ports:
            base = sys_root / f"sys/class/infiniband/{dev}/ports/{port}"
            for folder in ("counters", "hw_counters"):
                for f in sorted((base / folder).glob("*")):
                    try:
                        fd = os.open(f, os.O_RDONLY)
                    except OSError:
                        continue  # a counter the driver lists but will not read: not a column
                    self.files.append(fd)
                    self.columns.append(f"{dev}/{port}/{f.name}")

    def _netdev_values(self) -> list[bytes] | None:
        found = self._line.search(os.pread(self.netdev, 1 << 16, 0))
        return found.group(1).split() if found else None

    def sample(self) -> bytes:
        """Every column's value as text ('' where a read failed), tab-separated."""
        values = self._netdev_values() or [b""] * len(NETDEV_FIELDS)
        for fd in self.files:
            try:
                values.append(os.pread(fd, 64, 0).strip())
            except OSError:
                values.append(b"")
        return b"\t".join(values)

    def close(self) -> None:
        for fd in (self.netdev, *self.files):
            os.close(fd)


def ethtool_stats(ethtool: str, interface: str) -> dict[str, str]:
    """`ethtool -S` of the interface as {name: value}; {} where it fails (a veth answers)."""
    try:
        out = subprocess.run([ethtool, "-S", interface], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {m.group(1).strip(): m.group(2) for m in map(_ETHTOOL_LINE.match, out.stdout.splitlines()) if m}


def _quantile(counts: Counter[int], q: float) -> int:
    """The q-quantile of the values counted (0 for none)."""
    total, seen = sum(counts.values()), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= q * total:
            return value
    return 0


def run(args: argparse.Namespace, clock: Callable[[], int] = time.time_ns) -> int:
    """Sample until signalled; the file is complete (its last line written) whenever this returns."""
    interval = parse_interval(args.interval)
    root = Path(args.root)
    sampler = Sampler(args.interface, rdma_ports(root, args.interface, args.rdma), root, root)
    ethtool = shutil.which("ethtool") if args.ethtool_every > 0 else None
    eth_names = sorted(ethtool_stats(ethtool, args.interface)) if ethtool else []
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
        signal.signal(sig, lambda *_: stop.append(True))
    samples = missed = 0
    late: Counter[int] = Counter()  # µs late → samples: bounded by the interval, not the run's length
    slow_reads: Counter[int] = Counter()  # µs a sample's reads took → samples
    with open(args.out, "wb") as out:
        head = f"{MAGIC}\n# host\t{socket.gethostname()}\n# interface\t{args.interface}\n"
        head += f"# interval_ns\t{interval}\n# columns\tts_ns\t" + "\t".join(sampler.columns) + "\n"
        if eth_names:
            head += f"# ethtool_columns\tts_ns\t{args.interface}\t" + "\t".join(eth_names) + "\n"
        out.write(head.encode())
        out.flush()
        sample, write, flush, sleep = sampler.sample, out.write, out.flush, time.sleep
        deadline = clock()
        flushed = 0
        while not stop and (args.samples <= 0 or samples < args.samples):
            for _ in range(READ_TRIES):  # a read the scheduler cut into is read again: its time is unknown
                before = clock()
                values = sample()
                now = clock()
                if now - before <= MAX_READ_NS:
                    break
            slow_reads[(now - before) // 1000] += 1
            now = (before + now) >> 1
            write(b"%d\t%b\n" % (now, values))
            if now >= flushed + FLUSH_NS:  # the first sample at once (a run waits for it), then each second
                flush()
                if not flushed:
                    print("sampling", flush=True)  # what a Slurm job's script waits for
                flushed = now
            late[(now - deadline) // 1000] += 1
            samples += 1
            if eth_names and samples % args.ethtool_every == 1:
                stats = ethtool_stats(ethtool, args.interface)  # type: ignore[arg-type]
                write(
                    f"e\t{clock()}\t".encode()
                    + "\t".join(stats.get(n, "") for n in eth_names).encode()
                    + b"\n"
                )
            deadline += interval
            after = clock()
            if after > deadline:  # a tick passed while this one was read or written: skip it
                skipped = (after - deadline) // interval + 1
                missed += skipped
                deadline += skipped * interval
            sleep((deadline - after) / 1e9)
        account = {"samples": samples, "missed": missed, "late_p50_us": _quantile(late, 0.5),
                   "late_p99_us": _quantile(late, 0.99), "late_max_us": max(late, default=0),
                   "read_p99_us": _quantile(slow_reads, 0.99),
                   "read_max_us": max(slow_reads, default=0)}  # fmt: skip
        write(("# end\t" + "\t".join(f"{k}\t{v}" for k, v in account.items()) + "\n").encode())
    sampler.close()
    print("stopped", flush=True)  # after its last line: what a Slurm run reads back
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tracecore.runners.counters", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--interface", required=True, help="the network interface (its /proc/net/dev line)")
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument("--interval", default="10ms", help="time between samples (default 10ms; ≥ 1ms)")
    parser.add_argument(
        "--rdma", default="auto", help="auto (the interface's RDMA device), none, DEV or DEV:PORT"
    )
    parser.add_argument(
        "--ethtool-every", type=int, default=100, help="ethtool -S every N samples (0: never)"
    )
    parser.add_argument("--samples", type=int, default=0, help="stop after N samples (0: at a signal)")
    parser.add_argument("--root", default="/", help="where /proc and /sys are (a fixture tree in tests)")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (SamplerError, OSError) as e:
        print(f"tracecore counters: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
