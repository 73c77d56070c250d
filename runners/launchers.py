"""Launchers as pure argv builders: for one run and its hosts, what each host runs (argv + env).

Why pure: a dry run prints exactly what a real run executes, and the commands are snapshot-tested
without a cluster. Templates are formatted one argv element at a time (`{rank}`, `{ip}`,
`{master_addr}`, `{batch_size}`, `{log}`, …), so a value holding quotes, `$`, `;` or blanks stays one
argument; a backend joins the list once with `shlex.join` when it must cross a shell.

    ddp         built-in PyTorch DDP workload (tracecore.runners.ddp_worker) on every host: one rank per
                host, or torchrun (`python -m torch.distributed.run`) starting one rank per GPU
    torchrun    torchrun --nnodes N --node-rank i --master-addr … PROGRAM on every host
    horovodrun  horovodrun -np N -H ip:slots,… PROGRAM on the first host only
    mpirun      mpirun -np N -H ip:slots,… PROGRAM on the first host only
    kungfu      kungfu-run -np N -H … -nic IF -strategy TOPOLOGY PROGRAM on every host (seed 004)
    tf          PROGRAM on every host with TF_CONFIG (MultiWorkerMirroredStrategy) in its env
    command     PROGRAM on every host, nothing added

`-H` lists every host as `ip:slots` with slots = `nproc_per_node`, in host order (KungFu's rank
order). Besides the run's fields, templates may use {rank} {node_rank} {ip} {host} {interface}
{world_size} {nnodes} {master_addr} {master_port} {hosts} {out} {log} {python} {epochs}
{steps_per_epoch} {steps} {loss}, and for TensorFlow scripts that take their cluster as arguments
(the paper's `--worker_addrs … --task_index i`) {worker_addrs} and {task_index}.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from tracecore.ingest.runname import format_loss
from tracecore.runners import nccl_env
from tracecore.runners.experiment import PROFILE_SCHEDULE, ExperimentError, LauncherSettings, RunSpec

# kungfu-run's -strategy values (lsds/KungFu srcs/go/kungfu/base/strategy.go; AUTO: STAR on one host, else
# BINARY_TREE_STAR)
KUNGFU_STRATEGIES = ("STAR", "MULTI_STAR", "RING", "CLIQUE", "TREE", "BINARY_TREE", "BINARY_TREE_STAR",
                     "MULTI_BINARY_TREE_STAR", "AUTO")  # fmt: skip
_RESNET = re.compile(r"^resnet(\d+)(?:w(\d+))?$")
DDP_META = "ddp-meta.json"  # model facts rank 0 of the built-in workload writes beside the log


@dataclass(frozen=True)
class Host:
    """One worker host: its name for the backend, its address on the captured network, its NIC."""

    index: int
    name: str
    ip: str
    interface: str


@dataclass(frozen=True)
class HostCommand:
    """What one host runs for a run: argv plus the environment added to the host's own."""

    host: Host
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def ddp_worker_argv(
    python: str, rank: int, world_size: int, master: str, port: int, **opts: object
) -> list[str]:
    """One rank of the built-in DDP workload; `opts` are its remaining options (depth=8 → --depth 8)."""
    argv = [python, "-m", "tracecore.runners.ddp_worker", "--rank", str(rank),
            "--world-size", str(world_size), "--master-addr", master, "--master-port", str(port)]  # fmt: skip
    return argv + _options(opts)


def ddp_torchrun_argv(
    python: str, nnodes: int, per_host: int, node_rank: int, master: str, port: int, **opts: object
) -> list[str]:
    """One host's ranks of the built-in workload under torchrun (its own interpreter's, so no PATH
    lookup): torchrun gives each process RANK, WORLD_SIZE and LOCAL_RANK, and the worker takes GPU
    LOCAL_RANK of those the host makes visible."""
    argv = [python, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc-per-node",
            str(per_host), "--node-rank", str(node_rank), "--master-addr", master, "--master-port",
            str(port), "-m", "tracecore.runners.ddp_worker"]  # fmt: skip
    return argv + _options(opts)


def _options(opts: dict[str, object]) -> list[str]:
    argv: list[str] = []
    for key, value in opts.items():
        if value is True:
            argv.append(f"--{key.replace('_', '-')}")
        elif value is not None and value is not False:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def resnet_shape(model: str) -> tuple[int, int]:
    """`resnet8` → (8, 16), `resnet20w8` → (20, 8): the built-in workload's depth and width."""
    m = _RESNET.match(model)
    if m is None or (int(m.group(1)) - 2) % 6 or int(m.group(1)) < 8:
        raise ExperimentError(
            f"model {model!r}: the ddp launcher runs resnet<6n+2>[w<width>], e.g. resnet8w8"
        )
    return int(m.group(1)), int(m.group(2) or 16)


def host_commands(
    run: RunSpec, launcher: LauncherSettings, hosts: list[Host], out: str, python: str
) -> list[HostCommand]:
    """Per host, the argv and env of `run` under `launcher`; `out` is the run folder as hosts see it."""
    n = len(hosts)
    per_host = launcher.ranks_per_host
    world = n * per_host
    values = {
        **run.fields(),
        "loss": format_loss(run.loss_pct),
        "world_size": world,
        "nnodes": n,
        "master_addr": hosts[0].ip,
        "master_port": launcher.port,
        "hosts": ",".join(f"{h.ip}:{per_host}" for h in hosts),
        "worker_addrs": ",".join(f"{h.ip}:{launcher.port}" for h in hosts),
        "out": out,
        "log": f"{out}/train_history.log",
        "python": launcher.python or python,
        "epochs": launcher.epochs,
        "steps_per_epoch": launcher.steps_per_epoch,
        "steps": launcher.epochs * launcher.steps_per_epoch,
    }
    kind = launcher.kind
    if kind != "ddp" and not launcher.program:
        raise ExperimentError(f"launcher.program: the {kind} launcher needs the training program's argv")
    if kind == "kungfu" and run.topology not in KUNGFU_STRATEGIES:
        raise ExperimentError(
            f"topology {run.topology!r}: kungfu-run's -strategy is one of {', '.join(KUNGFU_STRATEGIES)}"
        )
    iface = hosts[0].interface
    commands = []
    for host in hosts if kind not in ("horovodrun", "mpirun") else hosts[:1]:
        v = {**values, "rank": host.index, "node_rank": host.index, "task_index": host.index, "ip": host.ip,
             "host": host.name, "interface": host.interface}  # fmt: skip
        program = [fill_template(t, v, "launcher.program") for t in launcher.program]
        env = {"GLOO_SOCKET_IFNAME": host.interface, "NCCL_SOCKET_IFNAME": host.interface}
        if nccl_env.uses_nccl(run.backend):
            one_place = kind in ("horovodrun", "mpirun")  # every rank inherits the first host's env
            env.update(nccl_env.policy(out, None if one_place else host.index, launcher.nccl_profiler_plugin))
        if kind == "ddp":
            argv = program or _ddp_argv(run, launcher, hosts, host, v)
            env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        elif kind == "torchrun":
            argv = ["torchrun", "--nnodes", str(n), "--nproc-per-node", str(per_host),
                    "--node-rank", str(host.index), "--master-addr", hosts[0].ip,
                    "--master-port", str(launcher.port), *program]  # fmt: skip
        elif kind == "horovodrun":
            argv = [
                "horovodrun",
                "-np",
                str(world),
                "-H",
                values["hosts"],
                "--network-interface",
                iface,
                *program,
            ]
        elif kind == "mpirun":
            argv = ["mpirun", "-np", str(world), "-H", values["hosts"], "-bind-to", "none", "-map-by", "slot",
                    "-mca", "btl_tcp_if_include", iface, "-x", f"NCCL_SOCKET_IFNAME={iface}",
                    *program]  # fmt: skip
        elif kind == "kungfu":
            argv = ["kungfu-run", "-np", str(world), "-H", values["hosts"], "-nic", iface,
                    "-strategy", run.topology, *program]  # fmt: skip
        else:
            argv = program
        if kind == "tf":
            cluster = {"worker": values["worker_addrs"].split(",")}
            task = {"type": "worker", "index": host.index}
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": task}, separators=(",", ":"))
        env.update({k: fill_template(t, v, f"launcher.env.{k}") for k, t in launcher.env.items()})
        commands.append(HostCommand(host, tuple(argv), tuple(sorted(env.items()))))
    return commands


def _ddp_argv(run: RunSpec, launcher: LauncherSettings, hosts: list[Host], host: Host, v: dict) -> list[str]:
    """The built-in workload on one host: the rank itself, or torchrun with one rank per GPU."""
    depth, width = resnet_shape(run.model)
    out = v["out"]
    profile = launcher.torch_profiler
    opts = {
        "depth": depth, "width": width, "batch_size": run.batch_size, "epochs": launcher.epochs,
        "steps_per_epoch": launcher.steps_per_epoch, "optimizer": run.optimizer, "backend": run.backend,
        "device": launcher.device, "train_log": v["log"], "meta": f"{out}/{DDP_META}",
        "profile_dir": out if profile else None,
        "profile_schedule": ",".join(map(str, PROFILE_SCHEDULE)) if profile else None,
    }  # fmt: skip
    master, port, per_host = hosts[0].ip, launcher.port, launcher.ranks_per_host
    if per_host == 1:
        return ddp_worker_argv(v["python"], host.index, len(hosts), master, port, **opts)
    return ddp_torchrun_argv(v["python"], len(hosts), per_host, host.index, master, port, **opts)


def fill_template(template: str, values: dict, where: str) -> str:
    """One template element filled in; an unknown placeholder is an error naming the key."""
    try:
        return template.format_map(values)
    except KeyError as err:
        raise ExperimentError(f"{where}: unknown placeholder {{{err.args[0]}}} in {template!r}") from None
    except (ValueError, IndexError, AttributeError) as err:
        raise ExperimentError(f"{where}: bad template {template!r}: {err}") from None
