"""A captured gloo DDP run with PyTorch's profiler (2 ranks unless asked), made in a namespace testbed.

Why a helper of its own: the collectives' join needs a run with profiler traces, and the GPU corpus
cannot be remade in `make test`. On CPU, PyTorch's profiler records gloo's collectives as
`gloo:all_reduce` annotations on gloo's worker threads (and `c10d::allreduce_` calls), so a gloo run
exercises the same parser, the same join and the same views without a GPU. The run folder looks like
the corpus's: `worker-<i>-tcpdump.pcap` (sender side), `kineto-rank<r>.json`, `train_history.log`,
`run.toml`. The model is an MLP in one DDP bucket (gloo runs several buckets' all-reduces on its
worker threads at once, interleaved on one socket; one bucket keeps each socket's bytes in order).

`make_run` can also plant a known cause of slow collectives, for the verdicts' tests: one rank that
sleeps before each step (a straggler), one worker's egress rate-limited with `tc tbf`, or one worker's
egress dropping packets at random with nftables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import tomli_w

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

    rank, world, master, run_dir, steps, hidden, active, delay_rank, delay_s = sys.argv[1:10]
    rank, world, steps, hidden, active = int(rank), int(world), int(steps), int(hidden), int(active)
    delay_s = float(delay_s) if int(delay_rank) == rank else 0.0
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
                 schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(trace)) as prof:
        for step in range(steps):
            if delay_s:
                time.sleep(delay_s)  # a straggler: late to every step's all-reduce
            x, y = torch.randn(16, 1024), torch.randint(0, 10, (16,))
            opt.zero_grad()
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            opt.step()
            prof.step()
            if log:
                # the step's own output: a second forward pass made rank 0 a straggler of every step
                acc = (out.argmax(1) == y).float().mean().item()
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


@dataclass(frozen=True)
class Cause:
    """What to plant in a run: `delay_s` of sleep before each step on rank `delay_rank`; worker
    `shaped`'s egress limited to `rate` (tc tbf); `loss_pct` % of the IP frames worker `lossy` sends
    dropped by the bridge (nftables), so its capture holds every frame it sent."""

    delay_rank: int = -1
    delay_s: float = 0.0
    shaped: int = -1
    rate: str = "50mbit"
    lossy: int = -1
    loss_pct: float = 0.0


def _plant(tb: Testbed, cause: Cause) -> None:
    """Put the cause's rate limit and drop rule on the workers' interfaces."""
    if cause.shaped >= 0:
        tb.exec(cause.shaped, ["tc", "qdisc", "add", "dev", tb.interface, "root", "tbf",
                               "rate", cause.rate, "burst", "32kb", "latency", "400ms"])  # fmt: skip
    if cause.lossy >= 0:  # dropped on the bridge, after the sender's capture saw the frame
        per_mille = round(cause.loss_pct * 10)
        ruleset = (
            "table bridge tclossy {\n  chain lossy {\n"
            "    type filter hook forward priority 0; policy accept;\n"
            f'    iifname "v{cause.lossy}" ether type ip numgen random mod 1000 < {per_mille} counter drop\n'
            "  }\n}\n"
        )
        argv = ["ip", "netns", "exec", tb.bridge_ns, "nft", "-f", "-"]
        proc = subprocess.run(argv, input=ruleset, capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"nft drop rule failed: {proc.stderr.strip()}")


def make_run(
    root: Path,
    timeout_s: float = 240.0,
    *,
    run: str = RUN,
    ranks: int = 2,
    hidden: int = HIDDEN,
    steps: int = STEPS,
    active: int = len(PROFILED),
    cause: Cause | None = None,
    subnet: str = "192.168.93.0/24",
    name: str | None = None,
) -> Path:
    """Train, capture and profile `run` (ranks ranks, the profiler's active steps from step 2) in a
    fresh testbed with `cause` planted; returns the run folder. `name`: the run's name in run.toml."""
    cause = cause or Cause()
    run_dir = root / run
    run_dir.mkdir(parents=True)
    script = root / "gloo_worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "eth1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with Testbed(n_workers=ranks, subnet=subnet) as tb:
        _plant(tb, cause)
        caps = [tb.start_capture(i, run_dir / f"worker-{i}-tcpdump.pcap", snaplen=128) for i in range(ranks)]
        time.sleep(0.3)
        outs = [root / f"{run}-rank-{r}.out" for r in range(ranks)]
        procs = []
        for r, out in enumerate(outs):
            argv = [sys.executable, str(script), str(r), str(ranks), tb.ip(0), str(run_dir), str(steps),
                    str(hidden), str(active), str(cause.delay_rank), str(cause.delay_s)]  # fmt: skip
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
    renamed = tomli_w.dumps({"name": name}) if name else ""
    (run_dir / "run.toml").write_text(f"{renamed}[model]\ngradient_bytes = {gradient_bytes(hidden)}\n{hosts}")
    json.loads((run_dir / "kineto-rank0.json").read_text())  # written whole
    return run_dir
