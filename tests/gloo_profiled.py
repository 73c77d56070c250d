"""A captured 2-rank gloo DDP run with PyTorch's profiler, made in a network-namespace testbed.

Why a helper of its own: the collectives' join needs a run with profiler traces, and the GPU corpus
cannot be remade in `make test`. On CPU, PyTorch's profiler records gloo's collectives as
`gloo:all_reduce` annotations on gloo's worker threads (and `c10d::allreduce_` calls), so a gloo run
exercises the same parser, the same join and the same views without a GPU. The run folder looks like
the corpus's: `worker-<i>-tcpdump.pcap` (sender side), `kineto-rank<r>.json`, `train_history.log`,
`run.toml`. The model is an MLP in one DDP bucket (gloo runs several buckets' all-reduces on its
worker threads at once, interleaved on one socket; one bucket keeps each socket's bytes in order).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tracecore.runners.testbed import Testbed

RUN = "torch_ddp-mlp4m-sgd-16-gloo-normal-ring"
STEPS = 8
PROFILED = (2, 3, 4)  # schedule: wait 1, warmup 1, active 3 (ProfilerStep#2–#4)
HIDDEN = 1000  # 1024·1000 + 1000 + 1000·1000 + 1000 + 1000·10 + 10 parameters

WORKER = textwrap.dedent(
    """
    import faulthandler, json, os, sys, time
    faulthandler.enable()
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule

    rank, world, master, run_dir, steps, hidden = sys.argv[1:7]
    rank, world, steps, hidden = int(rank), int(world), int(steps), int(hidden)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", init_method=f"tcp://{master}:29511", rank=rank, world_size=world)
    net = torch.nn.Sequential(torch.nn.Linear(1024, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
    model = DistributedDataParallel(net, bucket_cap_mb=100)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    log = open(os.path.join(run_dir, "train_history.log"), "w") if rank == 0 else None
    if log:
        log.write("Type,ID,Timestamp,Loss,Accuracy\\n")
    trace = os.path.join(run_dir, f"kineto-rank{rank}.json")
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for step in range(steps):
            x, y = torch.randn(16, 1024), torch.randint(0, 10, (16,))
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            prof.step()
            if log:
                acc = (model(x).argmax(1) == y).float().mean().item()
                log.write(f"Batch,{step},{time.time():.6f},{loss.item():.6f},{acc:.6f}\\n")
                log.flush()
    if log:
        log.write(f"Epoch,0,{time.time():.6f},{loss.item():.6f},0.0\\n")
        log.close()
    dist.barrier()
    dist.destroy_process_group()
    # DDP's reducer still holds the gloo process group; without os._exit its threads are torn down in
    # the interpreter's finalization, which aborted rank 1 once in CI ("terminate called without an
    # active exception", exit -6) after every output was written. runners/ddp_worker.py leaves the same way.
    sys.stdout.flush()
    os._exit(0)
    """
)


def gradient_bytes(hidden: int = HIDDEN) -> int:
    return 4 * (1024 * hidden + hidden + hidden * hidden + hidden + hidden * 10 + 10)


def make_run(root: Path, timeout_s: float = 240.0) -> Path:
    """Train, capture and profile RUN in a fresh 2-worker testbed; returns the run folder."""
    run_dir = root / RUN
    run_dir.mkdir(parents=True)
    script = root / "gloo_worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with Testbed(n_workers=2, subnet="192.168.93.0/24") as tb:
        caps = [tb.start_capture(i, run_dir / f"worker-{i}-tcpdump.pcap", snaplen=128) for i in range(2)]
        time.sleep(0.3)
        outs = [root / f"rank-{r}.out" for r in range(2)]
        procs = []
        for r, out in enumerate(outs):
            argv = [sys.executable, str(script), str(r), "2", tb.ip(0), str(run_dir), str(STEPS), str(HIDDEN)]
            with out.open("wb") as fh:
                procs.append(tb.popen(r, argv, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=root))
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        time.sleep(0.1)
        for cap in caps:
            tb.stop_capture(cap)
        ips = tb.ips
    failed = [r for r, p in enumerate(procs) if p.returncode != 0]
    if failed:
        r = failed[0]
        raise RuntimeError(f"gloo rank {r} exited {procs[r].returncode}: {outs[r].read_text()[-2000:]}")
    hosts = "".join(
        f'\n[[hosts]]\nname = "w{i}"\nip = "{ip}"\nclock_offset_ns = 0\nclock_rtt_ns = 50000\n'
        for i, ip in enumerate(ips)
    )
    (run_dir / "run.toml").write_text(f"[model]\ngradient_bytes = {gradient_bytes()}\n{hosts}")
    json.loads((run_dir / "kineto-rank0.json").read_text())  # written whole
    return run_dir
