"""Launcher: real PyTorch DDP (gloo, CPU) training across a namespace testbed, captured per worker.

`run_ddp(DDPConfig(...), out_root)` builds (or reuses) a `Testbed`, starts tcpdump on every
worker's eth1 (the paper's `src <own ip>`, snaplen 128 by default), launches one
`tracecore.runners.ddp_worker` rank per namespace with rank 0 at the first address as master, waits
(bounded), stops the captures (raising if tcpdump dropped anything) and writes a run directory
named after the paper's convention `framework-model-optimizer-batchsize-backend-loss-topology`:

    torch_ddp-resnet8-sgd-32-gloo-normal-ring/
        worker-0-tcpdump.pcap … worker-<N-1>-tcpdump.pcap
        train_history.log
        run.toml

The directory is assembled under `<name>.partial` and renamed at the end, so a failed or
interrupted run leaves no half-written run behind. This module does not import torch; the
ranks need it in the interpreter given as `python` (bench/requirements.txt).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tracecore.ingest.runname import format_loss, format_run_name
from tracecore.runners.launchers import ddp_worker_argv
from tracecore.runners.rundir import staged_run_dir, write_run_toml
from tracecore.runners.testbed import CaptureStats, Testbed, TestbedError

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class DDPConfig:
    depth: int = 8  # ResNet-(6n+2)
    width: int = 16  # first-stage channels (CIFAR ResNet: 16)
    batch_size: int = 32  # per worker
    epochs: int = 2
    steps_per_epoch: int = 10
    optimizer: str = "sgd"
    loss_pct: float = 0.0
    n_workers: int = 4
    bucket_cap_mb: float = 25.0
    lr: float = 0.05

    @property
    def model(self) -> str:
        return f"resnet{self.depth}" if self.width == 16 else f"resnet{self.depth}w{self.width}"

    @property
    def steps(self) -> int:
        return self.epochs * self.steps_per_epoch

    @property
    def run_name(self) -> str:
        return format_run_name(
            "torch_ddp", self.model, self.optimizer, self.batch_size, "gloo", self.loss_pct, "ring"
        )


def torch_available(python: str = sys.executable) -> bool:
    if python == sys.executable:
        return importlib.util.find_spec("torch") is not None
    proc = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120, check=False)
    return proc.returncode == 0


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except FileNotFoundError:
        return ""


def run_ddp(
    cfg: DDPConfig,
    out_root: str | os.PathLike,
    *,
    snaplen: int = 128,
    sender_only: bool = True,
    python: str = sys.executable,
    timeout_s: float = 300.0,
    testbed: Testbed | None = None,
    overwrite: bool = True,
    idle_head_s: float = 0.3,
) -> Path:
    """Run one captured DDP training; returns the finished run directory."""
    with staged_run_dir(out_root, cfg.run_name, overwrite=overwrite) as partial:
        with contextlib.ExitStack() as stack:
            tb = testbed
            if tb is None:
                tb = stack.enter_context(Testbed(n_workers=cfg.n_workers, loss_pct=cfg.loss_pct))
            elif tb.n_workers != cfg.n_workers or tb.loss_pct != cfg.loss_pct:
                raise TestbedError("testbed size or loss does not match the DDP config")
            facts = _run_in(tb, cfg, partial, snaplen, sender_only, python, timeout_s, idle_head_s, stack)
        write_run_toml(partial, facts)
    return Path(out_root).resolve() / cfg.run_name


def _run_in(
    tb: Testbed,
    cfg: DDPConfig,
    run_dir: Path,
    snaplen: int,
    sender_only: bool,
    python: str,
    timeout_s: float,
    idle_head_s: float,
    stack: contextlib.ExitStack,
) -> dict:
    scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ddp-")))
    meta_path = scratch / "meta.json"
    log_path = run_dir / "train_history.log"
    caps = [
        tb.start_capture(i, run_dir / f"worker-{i}-tcpdump.pcap", snaplen=snaplen, sender_only=sender_only)
        for i in range(cfg.n_workers)
    ]
    captured_from = time.time()
    time.sleep(idle_head_s)
    env = dict(os.environ)
    env.update(
        GLOO_SOCKET_IFNAME=tb.interface,
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONPATH=str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        PYTHONUNBUFFERED="1",
    )
    procs = []
    outs = []
    for r in range(cfg.n_workers):
        argv = ddp_worker_argv(
            python, r, cfg.n_workers, tb.ip(0), 29500, depth=cfg.depth, width=cfg.width,
            batch_size=cfg.batch_size, epochs=cfg.epochs, steps_per_epoch=cfg.steps_per_epoch,
            optimizer=cfg.optimizer, lr=cfg.lr, bucket_cap_mb=cfg.bucket_cap_mb, train_log=log_path,
            meta=meta_path,
        )  # fmt: skip
        out = scratch / f"rank-{r}.out"
        fh = stack.enter_context(out.open("wb"))
        outs.append(out)
        procs.append(tb.popen(r, argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=scratch))
    deadline = time.monotonic() + timeout_s
    while any(p.poll() is None for p in procs):
        failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            why = (
                f"rank {failed[0]} exited {procs[failed[0]].returncode}"
                if failed
                else f"timeout {timeout_s}s"
            )
            r = failed[0] if failed else 0
            raise TestbedError(f"DDP run {cfg.run_name} failed ({why}); rank {r} output:\n{_tail(outs[r])}")
        time.sleep(0.1)
    bad = [r for r, p in enumerate(procs) if p.returncode != 0]
    if bad:
        raise TestbedError(f"DDP rank {bad[0]} exited {procs[bad[0]].returncode}:\n{_tail(outs[bad[0]])}")
    time.sleep(0.1)
    stats: list[CaptureStats] = [tb.stop_capture(c) for c in caps]
    captured_to = time.time()
    dropped_by_rule = tb.loss_counter()
    meta = json.loads(meta_path.read_text())
    n = cfg.n_workers
    grad = meta["gradient_bytes"]
    return {
        "run": {
            "name": cfg.run_name,
            "framework": "torch_ddp",
            "model": cfg.model,
            "optimizer": cfg.optimizer,
            "batch_size": cfg.batch_size,
            "backend": "gloo",
            "loss_pct": float(cfg.loss_pct),
            "loss": format_loss(cfg.loss_pct),
            "topology": "ring",
            "n_workers": n,
            "generator": "tracecore.runners.torch_ddp (python -m bench.make_captures)",
            "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        },
        "model": {
            "architecture": f"CIFAR ResNet-{cfg.depth} (6n+2), first-stage width {cfg.width}",
            "depth": cfg.depth,
            "width": cfg.width,
            "n_params": meta["n_params"],
            "n_tensors": meta["n_tensors"],
            "gradient_bytes": grad,
            "param_dtype": meta["param_dtype"],
        },
        "training": {
            "epochs": cfg.epochs,
            "steps_per_epoch": cfg.steps_per_epoch,
            "steps": cfg.steps,
            "global_batch_size": cfg.batch_size * n,
            "lr": cfg.lr,
            "dataset": "synthetic 32x32x3 images, 10 learnable classes, per-rank streams",
            "bucket_cap_mb": cfg.bucket_cap_mb,
            "torch_version": meta["torch_version"],
            "train_start_unix": meta["train_start_unix"],
            "train_end_unix": meta["train_end_unix"],
            "mean_step_s": meta["mean_step_s"],
            "log_writer": "rank 0",
        },
        "expected": {
            "allreduce": "gloo ring (reduce-scatter + allgather)",
            "ring_direction": "rank i sends to rank i-1 (mod N)",
            "bytes_per_rank_per_step": 2 * (n - 1) / n * grad,
            "bytes_per_rank_per_step_formula": "2(N-1)/N x gradient_bytes, payload only",
        },
        "network": {**tb.network_facts(dropped_by_rule), "master": f"{tb.ip(0)}:29500"},
        "capture": {
            "tool": "tcpdump",
            "snaplen": snaplen,
            "sender_only": sender_only,
            "filter": "src <own ip>" if sender_only else "host <own ip>",
            "start_unix": captured_from,
            "end_unix": captured_to,
            "worker": [
                {
                    "index": i,
                    "ip": tb.ip(i),
                    "file": st.path.name,
                    "packets": st.captured or 0,
                    "bytes": st.size_bytes,
                    "dropped_by_kernel": st.dropped_by_kernel or 0,
                }
                for i, st in enumerate(stats)
            ],
        },
    }


def config_dict(cfg: DDPConfig) -> dict:
    return asdict(cfg)
