"""The GPU check: two ranks on one GPU, NCCL over TCP sockets between two network namespaces, run by
`tracecore run`'s own code path, captured, ingested and judged in one line.

    sudo .venv/bin/python -m bench.gpu_nccl                   # CUDA + NCCL: one GPU is enough
    sudo .venv/bin/python -m bench.gpu_nccl --device cpu      # the same path with gloo on CPU (make test)
    sudo .venv/bin/python -m bench.gpu_nccl --tools DIR       # ip, ethtool, tcpdump carried to a bare box

It writes an experiment file (netns backend, two workers, the built-in DDP workload, `device = "cuda"`,
`backend = "nccl"`, NCCL confined to TCP sockets with `NCCL_IB_DISABLE`, `NCCL_P2P_DISABLE`,
`NCCL_SHM_DISABLE`, and a distinct `NCCL_HOSTID` per namespace, without which NCCL refuses two ranks on
one GPU: "Duplicate GPU detected"), runs it with `tracecore.runners.execute.run_experiment` (preflight,
captures, NCCL logs per rank, run.toml), ingests the run and prints one verdict line from
`topology_check`, `nccl_topology` and `data_per_step`. Exit 0 when every verdict holds, 1 when one
does not, 2 when the machine lacks something (named, with the fix).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOLS = ("ip", "ethtool", "tcpdump")  # what the namespace testbed runs
TOLERANCE = 0.05  # a verdict holds when measured bytes are within 5 % of the prediction

EXPERIMENT = """\
[experiment]
out = {out}
timeout_s = {timeout}
on_failure = "stop"

[backend]
kind = "netns"
subnet = "10.77.0.0/24"
first_host = 1

[capture]
snaplen = 128
filter = "src host {{ip}}"

[launcher]
kind = "ddp"
python = {python}
device = "{device}"
epochs = 2
steps_per_epoch = {steps}
env = {{ NCCL_HOSTID = "tracecore-{{host}}", NCCL_IB_DISABLE = "1", NCCL_P2P_DISABLE = "1", \
NCCL_SHM_DISABLE = "1" }}

[matrix]
framework = ["torch_ddp"]
model = ["{model}"]
optimizer = ["sgd"]
batch_size = [32]
backend = ["{backend}"]
loss = [0]
topology = ["ring"]
workers = [2]
"""


def missing(device: str) -> list[str]:
    """What this machine lacks for the check, each with its fix."""
    lack = [f"{t} (carry a static build and pass --tools DIR)" for t in TOOLS if shutil.which(t) is None]
    if os.geteuid() != 0:
        lack.append("root (network namespaces and tcpdump need it: run with sudo)")
    try:
        import torch
    except ImportError:
        return [*lack, "torch (pip install torch; a CUDA build on a GPU machine)"]
    if device == "cuda" and not torch.cuda.is_available():
        lack.append(f"a GPU torch can use (torch {torch.__version__}: CUDA {torch.version.cuda or 'none'})")
    return lack


def run_check(out: Path, device: str, steps: int, model: str, timeout_s: float) -> tuple[bool, str]:
    """Run, ingest and judge; returns (every verdict holds, the verdict line)."""
    from tracecore.ingest import ingest
    from tracecore.ingest.catalog import open_catalog
    from tracecore.runners.execute import run_experiment

    backend = "nccl" if device == "cuda" else "gloo"
    pcaps, data = out / "pcaps", out / "data"
    for folder in (pcaps, data):
        shutil.rmtree(folder, ignore_errors=True)
    exp = out / "gpu_nccl.toml"
    exp.write_text(EXPERIMENT.format(out=json.dumps(str(pcaps)), timeout=int(timeout_s), steps=steps,
                                     python=json.dumps(sys.executable), device=device, model=model,
                                     backend=backend))  # fmt: skip
    result = run_experiment(exp, progress=lambda line: print(f"  {line}", file=sys.stderr))
    (outcome,) = result.outcomes
    ingest([outcome.folder], data)
    con = open_catalog(data)
    try:
        return judge(con, device)
    finally:
        con.close()


def judge(con: object, device: str, run: str | None = None) -> tuple[bool, str]:
    """The verdicts of topology_check, nccl_topology and data_per_step on `run` (None: the dataset's
    one run)."""
    runs = None if run is None else [run]
    topo = con.execute(  # type: ignore[attr-defined]
        "SELECT any_value(pattern), min(per_step_ratio), max(per_step_ratio),"
        " coalesce(max(measured_share) FILTER (WHERE NOT predicted), 0) FROM topology_check(runs := $runs)"
        " WHERE predicted OR measured_share > 0",
        {"runs": runs},
    ).fetchone()
    pattern, low, high, stray = topo
    topo_ok = low is not None and max(abs(low - 1), abs(high - 1)) <= TOLERANCE and stray < TOLERANCE
    dps = con.execute(  # type: ignore[attr-defined]
        "SELECT payload_ratio, steps FROM data_per_step(runs := $runs)", {"runs": runs}
    ).fetchone()
    ratio, steps = dps if dps else (None, 0)
    dps_ok = ratio is not None and abs(ratio - 1) <= TOLERANCE
    parts = [
        f"topology_check {pattern} per-step ratio {_num(low)}-{_num(high)}, off-pattern share {stray:.4f}",
        f"data_per_step payload ratio {_num(ratio)} over {steps} steps",
    ]
    nccl_ok = True
    if device == "cuda":
        rows = con.execute(  # type: ignore[attr-defined]
            "SELECT any_value(verdict), count(*), count(*) FILTER (WHERE data_bytes > 0),"
            " coalesce(sum(data_bytes), 0) FROM nccl_topology(runs := $runs)",
            {"runs": runs},
        ).fetchone()
        verdict, edges, measured, moved = rows
        nccl_ok = verdict is True
        said = f"nccl_topology verdict {verdict} ({measured} of {edges} edges measured, {moved / 1e6:.1f} MB)"
        parts.insert(1, said)
    else:
        parts.insert(1, "nccl_topology n/a (gloo on CPU writes no NCCL log)")
    ok = topo_ok and dps_ok and nccl_ok
    return ok, f"gpu_nccl: {'PASS' if ok else 'FAIL'} device={device} | " + " | ".join(parts)


def _num(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "data" / "gpu_nccl")
    ap.add_argument("--tools", type=Path, help="a folder with ip, ethtool and tcpdump, put first on PATH")
    ap.add_argument("--steps", type=int, default=10, help="steps per epoch (2 epochs)")
    ap.add_argument("--model", default="resnet20", help="the built-in workload's resnet<6n+2>[w<width>]")
    ap.add_argument("--timeout", type=float, default=600.0)
    args = ap.parse_args(argv)
    if args.tools:
        os.environ["PATH"] = f"{args.tools.resolve()}{os.pathsep}{os.environ['PATH']}"
    lack = missing(args.device)
    if lack:
        print(f"gpu_nccl: NOT RUN device={args.device}: missing " + "; ".join(lack))
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    ok, line = run_check(args.out.resolve(), args.device, args.steps, args.model, args.timeout)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
