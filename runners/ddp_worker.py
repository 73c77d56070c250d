"""One rank of a PyTorch DistributedDataParallel training run: gloo on CPU, gloo or NCCL on CUDA.

Started once per host by `tracecore run` (and `tracecore.runners.torch_ddp`):

    python -m tracecore.runners.ddp_worker --rank R --world-size N --master-addr IP --master-port P
        --depth 8 --width 16 --batch-size 32 --epochs 2 --steps-per-epoch 10 --train-log train_history.log
        [--backend nccl --device cuda] [--profile-dir DIR --profile-schedule 3,1,3]

or, for several ranks per host, under torchrun (`python -m torch.distributed.run … -m
tracecore.runners.ddp_worker …` without --rank): the rank, world size, master and LOCAL_RANK then come
from torchrun's environment (torchrun's argparse takes any option that abbreviates one of its own, so
no option here may: tests/test_runners_gpu.py checks). On CUDA a rank uses GPU LOCAL_RANK of those the
host makes visible (`CUDA_VISIBLE_DEVICES`); several ranks may share one GPU where NCCL allows it (distinct
`NCCL_HOSTID`s). With --profile-dir every rank writes `kineto-rank<R>.json`, a PyTorch profiler trace
(Chrome JSON; CPU and, on CUDA, GPU activity) of the steps the schedule records.

The model is a CIFAR-style ResNet-(6n+2) (He et al. 2016, §4.2: three stages of n basic blocks,
widths w, 2w, 4w) on synthetic 32×32×3 images whose 10 labels are a fixed function of the
pixels, so the loss really falls. Each rank draws its own shard of the stream. Rank 0 writes the
paper's `train_history.log`: header `Type,ID,Timestamp,Loss,Accuracy`, one
`Batch,<idx in epoch>,<unix time>,<loss>,<acc>` row after every optimizer step and one
`Epoch,<e>,<unix time>,<loss>,<acc>` row after every epoch (Keras-style running means over the
epoch). Rank 0 also writes `--meta` (JSON: parameter count, gradient bytes, DDP buckets).

Imports torch: this module is never imported by tracecore itself.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F  # noqa: N812 - the conventional alias
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.short is None else self.short(x)))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32×32 inputs: depth 8 → n=1, 20 → n=3, 32 → n=5."""

    def __init__(self, depth: int = 8, width: int = 16, classes: int = 10):
        super().__init__()
        if (depth - 2) % 6 != 0 or depth < 8:
            raise ValueError(f"depth must be 6n+2 ≥ 8, got {depth}")
        n = (depth - 2) // 6
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers = []
        cin = width
        for stage, cout in enumerate((width, 2 * width, 4 * width)):
            for b in range(n):
                layers.append(BasicBlock(cin, cout, 2 if (stage > 0 and b == 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def synthetic_batch(
    gen: torch.Generator, proj: torch.Tensor, batch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random images; label = argmax of a fixed random projection of 4×4-pooled pixels (learnable)."""
    x = torch.randn(batch, 3, 32, 32, generator=gen)
    pooled = F.avg_pool2d(x, 8).flatten(1)  # 3×4×4 = 48 features
    y = (pooled @ proj).argmax(1)
    return x, y


def parser() -> argparse.ArgumentParser:
    """The worker's options (none may abbreviate one of torchrun's: see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, help="this rank (default: $RANK, set by torchrun)")
    ap.add_argument("--world-size", type=int, help="ranks in all (default: $WORLD_SIZE)")
    ap.add_argument("--master-addr", help="rank 0's address (default: $MASTER_ADDR)")
    ap.add_argument("--master-port", type=int, help="rank 0's port (default: $MASTER_PORT, else 29500)")
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps-per-epoch", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--train-log", required=True, help="train_history.log path (rank 0 writes it)")
    ap.add_argument("--meta", help="JSON file rank 0 writes with model facts")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--profile-dir", help="write a PyTorch profiler trace per rank here")
    ap.add_argument("--profile-schedule", default="3,1,3", help="steps skipped, warmed up, recorded")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    rank, world, local_rank = _placement(args)
    if args.backend == "nccl" and args.device != "cuda":
        ap.error("--backend nccl needs --device cuda")

    torch.set_num_threads(1)
    torch.manual_seed(1234)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA device on this host")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    master = args.master_addr or os.environ.get("MASTER_ADDR")
    port = args.master_port or int(os.environ.get("MASTER_PORT", "29500"))
    if master is None:
        ap.error("--master-addr (or $MASTER_ADDR) is needed")
    dist.init_process_group(
        args.backend,
        init_method=f"tcp://{master}:{port}" if args.rank is not None else "env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=args.timeout_s),
        **({"device_id": device} if args.backend == "nccl" else {}),
    )
    model = CifarResNet(args.depth, args.width).to(device)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ddp = DistributedDataParallel(
        model, device_ids=[device] if device.type == "cuda" else None, bucket_cap_mb=args.bucket_cap_mb
    )
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.Adam(ddp.parameters(), lr=args.lr * 0.02)
    proj = torch.randn(48, 10, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(1000 + rank)
    profiler = _profiler(args, rank, device)

    log = None
    if rank == 0:
        log = open(args.train_log, "w", buffering=1)  # noqa: SIM115 - closed below, line-buffered on purpose
        log.write("Type,ID,Timestamp,Loss,Accuracy\n")
    t_start = time.time()
    step_times = []
    for epoch in range(args.epochs):
        loss_sum = 0.0
        correct = 0
        seen = 0
        for b in range(args.steps_per_epoch):
            x, y = synthetic_batch(gen, proj, args.batch_size)
            x, y = x.to(device), y.to(device)
            t0 = time.time()
            opt.zero_grad(set_to_none=True)
            out = ddp(x)
            loss = F.cross_entropy(out, y)
            loss.backward()  # DDP all-reduces the gradient buckets here
            opt.step()
            step_times.append(time.time() - t0)
            loss_sum += loss.item() * len(y)
            correct += int((out.argmax(1) == y).sum())
            seen += len(y)
            if log is not None:
                log.write(f"Batch,{b},{time.time():.6f},{loss_sum / seen:.6f},{correct / seen:.6f}\n")
            if profiler is not None:
                profiler.step()
        if log is not None:
            log.write(f"Epoch,{epoch},{time.time():.6f},{loss_sum / seen:.6f},{correct / seen:.6f}\n")
    t_end = time.time()
    if profiler is not None:
        profiler.stop()
    dist.barrier()
    if rank == 0:
        assert log is not None
        log.close()
        if args.meta:
            grads = [p for p in model.parameters() if p.requires_grad]
            meta = {
                "n_params": n_params,
                "n_tensors": len(grads),
                "gradient_bytes": 4 * n_params,
                "param_dtype": "float32",
                "bucket_cap_mb": args.bucket_cap_mb,
                "torch_version": torch.__version__,
                "train_start_unix": t_start,
                "train_end_unix": t_end,
                "mean_step_s": sum(step_times) / len(step_times),
                "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME", ""),
                "backend": args.backend,
                "world_size": world,
                **_device_facts(device),
            }
            with open(args.meta, "w") as fh:
                json.dump(meta, fh, indent=2)
    dist.destroy_process_group()
    return 0


def _placement(args: argparse.Namespace) -> tuple[int, int, int]:
    """(rank, world size, local rank): from the arguments, else from torchrun's environment."""
    if args.rank is not None:
        if args.world_size is None:
            raise SystemExit("ddp_worker: --rank needs --world-size")
        return args.rank, args.world_size, int(os.environ.get("LOCAL_RANK", "0"))
    try:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))
    except (KeyError, ValueError):
        raise SystemExit("ddp_worker: give --rank and --world-size, or start it under torchrun") from None


def _profiler(args: argparse.Namespace, rank: int, device: torch.device) -> object | None:
    """A started PyTorch profiler writing `kineto-rank<R>.json` once its schedule's steps are recorded."""
    if not args.profile_dir:
        return None
    from torch.profiler import ProfilerActivity, profile, schedule

    wait, warmup, active = (int(v) for v in args.profile_schedule.split(","))
    path = os.path.join(args.profile_dir, f"kineto-rank{rank}.json")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof = profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
        record_shapes=True,
    )
    prof.start()
    return prof


def _device_facts(device: torch.device) -> dict:
    """What rank 0 ran on, for run.toml: the GPU and the CUDA and NCCL builds of torch."""
    if device.type != "cuda":
        return {"device": "cpu"}
    nccl = torch.cuda.nccl.version() if hasattr(torch.cuda, "nccl") else None
    return {
        "device": "cuda",
        "gpu": torch.cuda.get_device_name(device),
        "cuda_version": torch.version.cuda or "",
        "nccl_version": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl or ""),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
    }


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown of torch's thousands of modules (most of a
    second of CPU per rank, paid by every rank of every run), once the outputs are flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
