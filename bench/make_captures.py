"""Generate real captures in a network-namespace testbed: iperf3 rings and PyTorch DDP runs.

    python -m bench.make_captures                      # default set: --size 2GB --ddp --loss 1
    python -m bench.make_captures --size 2GB --size 8GB [--snaplen 128] [--both-directions]
    python -m bench.make_captures --ddp [--loss 1]     # paper-like DDP run(s), gloo ring, 4 workers
    python -m bench.make_captures --matrix small       # 6 short DDP runs (~13 s each) → OUT/matrix_small/
    python -m bench.make_captures --ddp-set            # 3 DDP runs, ~500 MB at snaplen 100 → OUT/ddp_set/
    python -m bench.make_captures --smoke              # seconds: tiny iperf3 ring + tiny DDP run
    python -m bench.make_captures --sample             # regenerate tracecore/sample/

Every run directory follows the paper's `framework-model-optimizer-batchsize-backend-loss-topology`
naming and holds `worker-<i>-tcpdump.pcap` (i = 0..3) and `run.toml` (+ `train_history.log` for
DDP). Namespaces, processes and partial outputs are removed on failure and on Ctrl-C/SIGTERM.
Output defaults to bench/data/ (git-ignored).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time
from pathlib import Path

from bench._deps import ensure_torch
from bench.iperf_ring import RingConfig, human_size, run_iperf_ring
from tracecore.runners.testbed import TestbedError, cleanup_stale
from tracecore.runners.torch_ddp import DDPConfig, run_ddp

REPO = Path(__file__).resolve().parent.parent
FULL_SNAPLEN = 262144

# The paper-like DDP run: CIFAR ResNet-20 (0.27 M parameters, 1.1 MB of gradients per step).
DDP_MAIN = DDPConfig(depth=20, width=16, batch_size=32, epochs=2, steps_per_epoch=20)

# Short configurations spanning gradient size (5 k … 69 k parameters), batch size and loss, for
# regression models of step time / bytes per step: the fewest runs that identify the model's
# terms with a residual left (tests/test_models_bench.py). Names are all distinct.
MATRIX_SMALL = [
    DDPConfig(depth=8, width=8, batch_size=16, epochs=2, steps_per_epoch=8),
    DDPConfig(depth=8, width=8, batch_size=32, epochs=2, steps_per_epoch=8),
    DDPConfig(depth=8, width=8, batch_size=8, epochs=2, steps_per_epoch=8),
    DDPConfig(depth=8, width=4, batch_size=16, epochs=2, steps_per_epoch=8),
    DDPConfig(depth=20, width=8, batch_size=16, epochs=2, steps_per_epoch=8),
    DDPConfig(depth=8, width=8, batch_size=16, epochs=2, steps_per_epoch=8, loss_pct=1.0),
]

# The fixed-cost benchmark's set (bench/fixed_costs.py): three 4-worker runs of a few hundred MB in all,
# the size of a typical measurement, captured like the paper's (sender side, snaplen 100). A wider
# ResNet-20 at a small batch puts more gradient bytes on the wire per CPU second of training.
DDP_SET = [
    DDPConfig(depth=20, width=32, batch_size=4, epochs=2, steps_per_epoch=30),
    DDPConfig(depth=20, width=32, batch_size=8, epochs=2, steps_per_epoch=30),
    DDPConfig(depth=20, width=32, batch_size=4, epochs=2, steps_per_epoch=30, loss_pct=1.0),
]
DDP_SET_SNAPLEN = 100

SMOKE_DDP = DDPConfig(depth=8, width=4, batch_size=4, epochs=1, steps_per_epoch=3)
SMOKE_RING_BYTES = 200_000

# tracecore/sample: sender-only run + a both-direction run (see tracecore/sample/__init__.py).
SAMPLE_DDP = DDPConfig(depth=8, width=8, batch_size=16, epochs=2, steps_per_epoch=15)
SAMPLE_BOTH = DDPConfig(depth=8, width=8, batch_size=8, epochs=1, steps_per_epoch=4)


def parse_size(text: str) -> int:
    """'2GB' → 2e9, '512MiB' → 512·2^20, '1.5G' → 1.5e9, plain integers are bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 2GB, 512MiB)")
    value, unit, binary = float(m.group(1)), m.group(2).upper(), bool(m.group(3))
    exp = " KMGT".index(unit) if unit else 0
    return int(value * (1024 if binary else 1000) ** exp)


def parse_snaplen(text: str) -> int:
    if text.lower() in ("full", "0", "max"):
        return FULL_SNAPLEN
    n = int(text)
    if not 14 <= n <= FULL_SNAPLEN:
        raise argparse.ArgumentTypeError(f"snaplen must be 14..{FULL_SNAPLEN} or 'full'")
    return n


DROP_RETRY_RATES = ["800M", "400M", "200M", "100M"]


def iperf_to_size(target: int, out: Path, snaplen: int, both: bool, rate: str, loss_pct: float = 0.0) -> Path:
    """`_iperf_to_size`, retried at lower per-stream rates while tcpdump drops packets.

    On this VM, unlimited streams can outrun tcpdump's disk writes once the page cache fills
    up; a capture with kernel drops is never kept.
    """
    rates = [rate] + [r for r in DROP_RETRY_RATES if rate == "0" or parse_size(r) < parse_size(rate)]
    for i, r in enumerate(rates):
        try:
            return _iperf_to_size(target, out, snaplen, both, r, loss_pct)
        except TestbedError as exc:
            if "dropped" not in str(exc) or i == len(rates) - 1:
                raise
            print(f"  {exc}\n  retrying at -b {rates[i + 1]} per stream", flush=True)
    raise AssertionError("unreachable")


def _iperf_to_size(
    target: int, out: Path, snaplen: int, both: bool, rate: str, loss_pct: float = 0.0
) -> Path:
    """Calibrate pcap bytes per payload byte on a short ring, then run the ring sized to `target`."""
    calib_bytes = 20_000_000
    calib_dir = out / ".calibration"
    cfg = RingConfig(calib_bytes, snaplen=snaplen, both_directions=both, rate=rate, loss_pct=loss_pct)
    try:
        d = run_iperf_ring(cfg, calib_dir)
        pcap_bytes = sum(p.stat().st_size for p in d.glob("worker-*.pcap"))
    finally:
        shutil.rmtree(calib_dir, ignore_errors=True)
    ratio = pcap_bytes / (4 * calib_bytes)
    per_stream = int(target / (4 * ratio))
    print(f"  calibration: {ratio:.4f} pcap bytes per payload byte → {human_size(per_stream)} per stream")
    for attempt in range(2):
        cfg = RingConfig(
            per_stream,
            snaplen=snaplen,
            both_directions=both,
            rate=rate,
            loss_pct=loss_pct,
            label=human_size(target),
        )
        d = run_iperf_ring(cfg, out)
        got = sum(p.stat().st_size for p in d.glob("worker-*.pcap"))
        if abs(got / target - 1) <= 0.05 or attempt == 1:
            return d
        # ACK share and coalescing differ between the short calibration and a long run
        # (noticeable at small snaplens): correct once with the ratio of the real run.
        per_stream = int(per_stream * target / got)
        print(f"  got {human_size(got)}; rerunning with {human_size(per_stream)} per stream")
    return d


def _dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.make_captures", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="output root (default bench/data, bench/data/smoke for --smoke)")
    ap.add_argument("--size", type=parse_size, action="append", default=[], help="iperf3 ring pcap total")
    ap.add_argument("--ddp", action="store_true", help="paper-like DDP run (ResNet-20, batch 32, 40 steps)")
    ap.add_argument("--loss", type=float, action="append", default=[], help="DDP run with this loss %%")
    ap.add_argument("--matrix", choices=["small"], help="several short DDP configurations")
    ap.add_argument("--ddp-set", action="store_true", help="3 DDP runs, ~500 MB, snaplen 100")
    ap.add_argument("--smoke", action="store_true", help="tiny iperf3 ring + tiny DDP run (seconds)")
    ap.add_argument("--sample", action="store_true", help="regenerate tracecore/sample/")
    ap.add_argument("--snaplen", type=parse_snaplen, help="default: 128 for DDP, full for iperf3")
    ap.add_argument(
        "--both-directions", action="store_true", help="capture `host <ip>` instead of `src <ip>`"
    )
    ap.add_argument("--rate", default="0", help="iperf3 -b per stream (0 = unlimited), e.g. 800M")
    ap.add_argument("--timeout", type=float, default=600.0, help="per DDP run, seconds")
    args = ap.parse_args(argv)

    if not (args.size or args.ddp or args.loss or args.matrix or args.ddp_set or args.smoke or args.sample):
        args.size, args.ddp, args.loss = [parse_size("2GB")], True, [1.0]
    out = args.out or (REPO / "bench" / "data" / ("smoke" if args.smoke else ""))
    out = out.resolve()
    ddp_snap = args.snaplen or 128
    ring_snap = args.snaplen or FULL_SNAPLEN
    both = args.both_directions

    jobs: list[tuple[str, object]] = []
    if args.smoke:
        jobs.append(("ring", RingConfig(SMOKE_RING_BYTES, snaplen=args.snaplen or 128, both_directions=both)))
        jobs.append(("ddp", SMOKE_DDP))
    for size in args.size:
        jobs.append(("ring-size", size))
    if args.ddp:
        jobs.append(("ddp", DDP_MAIN))
    jobs.extend(("ddp", DDPConfig(**{**DDP_MAIN.__dict__, "loss_pct": pct})) for pct in args.loss)
    if args.matrix == "small":
        jobs.extend(("matrix", c) for c in MATRIX_SMALL)
    if args.ddp_set:
        jobs.extend(("ddp-set", c) for c in DDP_SET)
    if args.sample:
        jobs.append(("sample", None))

    if any(kind in ("ddp", "matrix", "ddp-set", "sample") for kind, _ in jobs):
        ensure_torch()
    stale = cleanup_stale()
    if stale:
        print(f"removed stale testbed namespaces: {' '.join(stale)}", file=sys.stderr)

    results = []
    t_all = time.monotonic()
    try:
        for kind, job in jobs:
            t0 = time.monotonic()
            if kind == "ring":
                assert isinstance(job, RingConfig)
                print(f"iperf3 ring {human_size(job.bytes_per_stream)} per stream …", flush=True)
                dirs = [run_iperf_ring(job, out)]
            elif kind == "ring-size":
                assert isinstance(job, int)
                print(f"iperf3 ring to {human_size(job)} of pcap (snaplen {ring_snap}) …", flush=True)
                dirs = [iperf_to_size(job, out, ring_snap, both, args.rate)]
            elif kind in ("ddp", "matrix", "ddp-set"):
                assert isinstance(job, DDPConfig)
                print(f"DDP {job.run_name}: {job.steps} steps …", flush=True)
                root = {"matrix": out / "matrix_small", "ddp-set": out / "ddp_set"}.get(kind, out)
                snap = (args.snaplen or DDP_SET_SNAPLEN) if kind == "ddp-set" else ddp_snap
                dirs = [run_ddp(job, root, snaplen=snap, sender_only=not both, timeout_s=args.timeout)]
            else:
                sample = REPO / "tracecore" / "sample"
                print(f"sample → {sample} …", flush=True)
                dirs = [
                    run_ddp(SAMPLE_DDP, sample, snaplen=128, sender_only=True, timeout_s=args.timeout),
                    run_ddp(SAMPLE_BOTH, sample / "both_directions", snaplen=128, sender_only=False,
                            timeout_s=args.timeout),
                ]  # fmt: skip
            for d in dirs:
                results.append((d, _dir_bytes(d), time.monotonic() - t0))
                print(f"  {d}  {human_size(_dir_bytes(d))}  {time.monotonic() - t0:.1f}s", flush=True)
    except TestbedError as exc:
        print(f"make_captures: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("make_captures: interrupted; testbed and partial outputs removed", file=sys.stderr)
        return 130
    print(f"done: {len(results)} run(s), {human_size(sum(b for _, b, _ in results))}, "
          f"{time.monotonic() - t_all:.1f}s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
