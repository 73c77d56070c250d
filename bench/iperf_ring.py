"""Bulk TCP traffic in a ring (W1→W2→…→Wn→W1) with iperf3, captured per worker.

Each worker i runs an iperf3 server on its own address and a client that sends `bytes_per_stream`
to worker i+1, all at once. tcpdump on every worker records `src <own ip>` (or `host <own ip>`
with `both_directions`), so a worker's pcap holds its outgoing data stream plus the ACKs of the
stream it receives. `run_iperf_ring` writes a run directory in the paper's naming convention

    iperf3-bulk_<size>-none-0-tcp-<loss>-ring/
        worker-<i>-tcpdump.pcap, iperf3-<i>.json (the client's own report), run.toml

assembled under `<name>.partial` and renamed when complete.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tracecore.ingest.runname import format_loss, format_run_name
from tracecore.runners.rundir import staged_run_dir, write_run_toml
from tracecore.runners.testbed import CaptureStats, Testbed, TestbedError


def human_size(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            v = n / div
            return f"{v:g}{unit}" if v == int(v) else f"{v:.1f}{unit}"
    return f"{int(n)}B"


@dataclass(frozen=True)
class RingConfig:
    bytes_per_stream: int
    n_workers: int = 4
    snaplen: int = 262144  # tcpdump's default: full frames
    both_directions: bool = False
    loss_pct: float = 0.0
    rate: str = "0"  # iperf3 -b per stream ("0" = unlimited)
    label: str | None = None  # size label in the run name; default from bytes_per_stream

    @property
    def model(self) -> str:
        """The run name's model field: bulk transfer size, snaplen and capture direction."""
        label = self.label or human_size(self.bytes_per_stream * self.n_workers)
        snap = "" if self.snaplen >= 65535 else f"_s{self.snaplen}"
        both = "_both" if self.both_directions else ""
        return f"bulk_{label}{snap}{both}"

    @property
    def run_name(self) -> str:
        return format_run_name("iperf3", self.model, "none", 0, "tcp", self.loss_pct, "ring")


def _wait_listening(tb: Testbed, i: int, port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if f"{tb.ip(i)}:{port}" in tb.exec(i, ["ss", "-ltnH"]).stdout:
            return
        time.sleep(0.05)
    raise TestbedError(f"iperf3 server on worker {i} did not listen within {timeout_s}s")


def run_iperf_ring(
    cfg: RingConfig,
    out_root: str | Path,
    *,
    min_rate_bps: float = 20e6,
    overwrite: bool = True,
) -> Path:
    """Run the ring once; returns the finished run directory.

    The clients are given at most `bytes_per_stream / min_rate_bps` seconds (+30 s) to finish.
    """
    if shutil.which("iperf3") is None:
        raise TestbedError("iperf3 not found: run scripts/install-system-deps.sh")
    with staged_run_dir(out_root, cfg.run_name, overwrite=overwrite) as partial:
        with Testbed(n_workers=cfg.n_workers, loss_pct=cfg.loss_pct) as tb:
            facts = _ring(tb, cfg, partial, min_rate_bps)
        write_run_toml(partial, facts)
    return Path(out_root).resolve() / cfg.run_name


def _ring(tb: Testbed, cfg: RingConfig, run_dir: Path, min_rate_bps: float) -> dict:
    n = cfg.n_workers
    port = 5201
    for i in range(n):
        tb.popen(i, ["iperf3", "-s", "-1", "-B", tb.ip(i), "-p", str(port)],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    for i in range(n):
        _wait_listening(tb, i, port)
    caps = [
        tb.start_capture(
            i,
            run_dir / f"worker-{i}-tcpdump.pcap",
            snaplen=cfg.snaplen,
            sender_only=not cfg.both_directions,
            buffer_kib=131072,
        )
        for i in range(n)
    ]
    t0 = time.time()
    timeout = cfg.bytes_per_stream * 8 / min_rate_bps + 30
    clients = []
    with contextlib.ExitStack() as stack:
        for i in range(n):
            dst = (i + 1) % n
            fh = stack.enter_context((run_dir / f"iperf3-{i}.json").open("w"))
            argv = ["iperf3", "-c", tb.ip(dst), "-B", tb.ip(i), "-p", str(port),
                    "-n", str(cfg.bytes_per_stream), "-b", cfg.rate, "-J",
                    "--connect-timeout", "5000"]  # fmt: skip
            clients.append(tb.popen(i, argv, stdout=fh, stderr=subprocess.PIPE, text=True))
        deadline = time.monotonic() + timeout
        while any(c.poll() is None for c in clients):
            if time.monotonic() > deadline:
                raise TestbedError(f"iperf3 ring did not finish within {timeout:.0f}s")
            bad = [i for i, c in enumerate(clients) if c.poll() not in (None, 0)]
            if bad:
                err = clients[bad[0]].stderr.read() if clients[bad[0]].stderr else ""
                raise TestbedError(f"iperf3 client on worker {bad[0]} failed: {err.strip()}")
            time.sleep(0.1)
    t1 = time.time()
    bad = [i for i, c in enumerate(clients) if c.returncode != 0]
    if bad:
        raise TestbedError(f"iperf3 client on worker {bad[0]} exited {clients[bad[0]].returncode}")
    time.sleep(0.2)
    stats: list[CaptureStats] = [tb.stop_capture(c) for c in caps]
    reports = []
    for i in range(n):
        rep = json.loads((run_dir / f"iperf3-{i}.json").read_text())
        end = rep.get("end", {})
        sent = end.get("sum_sent", {})
        reports.append(
            {
                "index": i,
                "ip": tb.ip(i),
                "dst_ip": tb.ip((i + 1) % n),
                "file": stats[i].path.name,
                "packets": stats[i].captured or 0,
                "bytes": stats[i].size_bytes,
                "dropped_by_kernel": stats[i].dropped_by_kernel or 0,
                "iperf3_bytes_sent": int(sent.get("bytes", 0)),
                "iperf3_bits_per_second": float(sent.get("bits_per_second", 0.0)),
                "iperf3_retransmits": int(sent.get("retransmits", 0)),
            }
        )
    return {
        "run": {
            "name": cfg.run_name,
            "framework": "iperf3",
            "model": cfg.model,
            "optimizer": "none",
            "batch_size": 0,
            "backend": "tcp",
            "loss_pct": float(cfg.loss_pct),
            "loss": format_loss(cfg.loss_pct),
            "topology": "ring",
            "n_workers": n,
            "generator": "bench.iperf_ring (python -m bench.make_captures)",
            "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
        "traffic": {
            "pattern": "worker i sends to worker i+1 (mod N), all streams at once",
            "bytes_per_stream": cfg.bytes_per_stream,
            "rate_per_stream": cfg.rate,
            "start_unix": t0,
            "end_unix": t1,
        },
        "network": tb.network_facts(),
        "capture": {
            "tool": "tcpdump",
            "snaplen": cfg.snaplen,
            "sender_only": not cfg.both_directions,
            "filter": "host <own ip>" if cfg.both_directions else "src <own ip>",
            "total_bytes": sum(s.size_bytes for s in stats),
            "worker": reports,
        },
    }
