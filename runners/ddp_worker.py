"""One rank of a PyTorch DistributedDataParallel (gloo, CPU) training run.

Started by `tracecore.runners.torch_ddp` once per worker namespace:

    python -m tracecore.runners.ddp_worker --rank R --world-size N --master-addr IP --master-port P
        --depth 8 --width 16 --batch-size 32 --epochs 2 --steps-per-epoch 10 --log train_history.log

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--master-addr", required=True)
    ap.add_argument("--master-port", type=int, default=29500)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps-per-epoch", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--bucket-cap-mb", type=float, default=25.0)
    ap.add_argument("--log", required=True, help="train_history.log path (rank 0 writes it)")
    ap.add_argument("--meta", help="JSON file rank 0 writes with model facts")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    args = ap.parse_args(argv)

    torch.set_num_threads(1)
    torch.manual_seed(1234)  # same initial weights everywhere (DDP broadcasts rank 0's anyway)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master_addr}:{args.master_port}",
        rank=args.rank,
        world_size=args.world_size,
        timeout=datetime.timedelta(seconds=args.timeout_s),
    )
    model = CifarResNet(args.depth, args.width)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    ddp = DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    else:
        opt = torch.optim.Adam(ddp.parameters(), lr=args.lr * 0.02)
    proj = torch.randn(48, 10, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(1000 + args.rank)

    log = None
    if args.rank == 0:
        log = open(args.log, "w", buffering=1)  # noqa: SIM115 - closed below, line-buffered on purpose
        log.write("Type,ID,Timestamp,Loss,Accuracy\n")
    t_start = time.time()
    step_times = []
    for epoch in range(args.epochs):
        loss_sum = 0.0
        correct = 0
        seen = 0
        for b in range(args.steps_per_epoch):
            x, y = synthetic_batch(gen, proj, args.batch_size)
            t0 = time.time()
            opt.zero_grad(set_to_none=True)
            out = ddp(x)
            loss = F.cross_entropy(out, y)
            loss.backward()  # DDP all-reduces the gradient buckets here (gloo ring)
            opt.step()
            step_times.append(time.time() - t0)
            loss_sum += loss.item() * len(y)
            correct += int((out.argmax(1) == y).sum())
            seen += len(y)
            if log is not None:
                log.write(f"Batch,{b},{time.time():.6f},{loss_sum / seen:.6f},{correct / seen:.6f}\n")
        if log is not None:
            log.write(f"Epoch,{epoch},{time.time():.6f},{loss_sum / seen:.6f},{correct / seen:.6f}\n")
    t_end = time.time()
    dist.barrier()
    if args.rank == 0:
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
            }
            with open(args.meta, "w") as fh:
                json.dump(meta, fh, indent=2)
    dist.destroy_process_group()
    return 0


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown of torch's thousands of modules (most of a
    second of CPU per rank, paid by every rank of every run), once the outputs are flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
