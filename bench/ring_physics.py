"""Check a DDP run's captures against the ring all-reduce cost model.

    python -m bench.ring_physics RUN_DIR [RUN_DIR …]

For every directed worker pair it sums TCP payload and frame bytes of the packets sent while
training ran (`[training] train_start_unix..train_end_unix` in run.toml), divides by the step
count and compares the heaviest pair per sender with 2(N−1)/N × gradient bytes (the payload a
rank sends per ring all-reduce). Independent of tracecore's reader: plain dpkt.
"""

from __future__ import annotations

import collections
import socket
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import dpkt


@dataclass
class PairBytes:
    payload: int = 0
    frames: int = 0
    packets: int = 0


def pair_bytes(
    run_dir: Path, t0: float | None = None, t1: float | None = None
) -> dict[tuple[str, str], PairBytes]:
    """TCP payload / frame bytes per (src ip, dst ip) over every worker pcap, optionally time-windowed."""
    out: dict[tuple[str, str], PairBytes] = collections.defaultdict(PairBytes)
    for pcap in sorted(run_dir.glob("worker-*-tcpdump.pcap")):
        with pcap.open("rb") as fh:
            reader = dpkt.pcap.Reader(fh)
            for ts, buf in reader:
                if (t0 is not None and ts < t0) or (t1 is not None and ts > t1):
                    continue
                eth = dpkt.ethernet.Ethernet(buf)
                ip = eth.data
                if not isinstance(ip, dpkt.ip.IP) or ip.p != dpkt.ip.IP_PROTO_TCP:
                    continue
                tcp_hdr = ip.data
                if isinstance(tcp_hdr, dpkt.tcp.TCP):
                    off = tcp_hdr.off * 4
                else:  # truncated by the snaplen: read the data offset from the raw bytes
                    raw = bytes(tcp_hdr)
                    off = (raw[12] >> 4) * 4 if len(raw) > 12 else 20
                rec = out[(socket.inet_ntoa(ip.src), socket.inet_ntoa(ip.dst))]
                rec.payload += ip.len - ip.hl * 4 - off
                rec.frames += ip.len + 14
                rec.packets += 1
    return dict(out)


@dataclass
class RingReport:
    run: str
    n_workers: int
    steps: int
    gradient_bytes: int
    expected_payload_per_rank_step: float
    ring_pairs: list[tuple[str, str]]  # heaviest destination of each sender
    payload_per_step: dict[str, float]  # "src->dst" → payload bytes per step (ring pairs)
    frames_per_step: dict[str, float]
    direction: str  # "i -> i-1", "i -> i+1" or "mixed"

    @property
    def ratio(self) -> float:
        """Mean measured ring payload per rank-step over the model's 2(N−1)/N·S."""
        vals = list(self.payload_per_step.values())
        return sum(vals) / len(vals) / self.expected_payload_per_rank_step

    def lines(self) -> list[str]:
        out = [
            f"{self.run}: N={self.n_workers}, steps={self.steps}, gradient bytes S={self.gradient_bytes}",
            f"  model 2(N-1)/N*S = {self.expected_payload_per_rank_step:,.0f} B payload per rank per step",
            f"  ring direction: {self.direction}",
        ]
        for k, v in self.payload_per_step.items():
            out.append(f"  {k}: payload {v:,.0f} B/step, frames {self.frames_per_step[k]:,.0f} B/step")
        out.append(f"  measured / model = {self.ratio:.4f}")
        return out


def check_ring(run_dir: str | Path) -> RingReport:
    run_dir = Path(run_dir)
    meta = tomllib.loads((run_dir / "run.toml").read_text())
    tr = meta["training"]
    n = meta["run"]["n_workers"]
    steps = tr["steps"]
    grad = meta["model"]["gradient_bytes"]
    ips = meta["network"]["ips"]
    pairs = pair_bytes(run_dir, tr["train_start_unix"], tr["train_end_unix"])
    ring = []
    for src in ips:
        dests = {d: b.payload for (s, d), b in pairs.items() if s == src}
        ring.append((src, max(dests, key=dests.__getitem__)))
    idx = {ip: i for i, ip in enumerate(ips)}
    if all(idx[d] == (idx[s] - 1) % n for s, d in ring):
        direction = "i -> i-1"
    elif all(idx[d] == (idx[s] + 1) % n for s, d in ring):
        direction = "i -> i+1"
    else:
        direction = "mixed"
    return RingReport(
        run=run_dir.name,
        n_workers=n,
        steps=steps,
        gradient_bytes=grad,
        expected_payload_per_rank_step=2 * (n - 1) / n * grad,
        ring_pairs=ring,
        payload_per_step={f"{s}->{d}": pairs[(s, d)].payload / steps for s, d in ring},
        frames_per_step={f"{s}->{d}": pairs[(s, d)].frames / steps for s, d in ring},
        direction=direction,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for d in args:
        print("\n".join(check_ring(d).lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
