"""The built-in workload on GPUs: torchrun's path with one rank per GPU, NCCL's environment policy, the
preflight that refuses a host before anything starts, and the GPU check's code path run with gloo on
CPU (CI has no GPU; `python -m bench.gpu_nccl` runs the same path with CUDA and NCCL where one is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench._deps import ensure_torch
from tests.conftest import netns_made_by, require_tool
from tracecore.cli.app import app
from tracecore.runners import nccl_env
from tracecore.runners.experiment import ExperimentError, parse_experiment
from tracecore.runners.launchers import Host, host_commands
from tracecore.runners.preflight import Needs, needs, problems, run_here

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
HOSTS = [Host(0, "gpu-a", "10.0.0.1", "eth1"), Host(1, "gpu-b", "10.0.0.2", "eth1")]
MATRIX = {"framework": ["torch_ddp"], "model": ["resnet8w4"], "optimizer": ["sgd"], "batch_size": [4],
          "backend": ["nccl"], "loss": [0], "topology": ["ring"], "workers": [2]}  # fmt: skip


def experiment(launcher: dict, **matrix: object) -> object:
    return parse_experiment(Path("exp.toml"), {"launcher": launcher, "matrix": {**MATRIX, **matrix}})


def _toml(table: dict) -> str:
    return "\n".join(f"{k} = {json.dumps(v)}" for k, v in table.items())


def commands(launcher: dict, **matrix: object) -> list:
    exp = experiment(launcher, **matrix)
    return host_commands(exp.runs[0], exp.launcher, HOSTS, "/runs/r", "python3")


def test_torchrun_hands_every_worker_option_to_the_worker() -> None:
    """torchrun's argparse takes any option that abbreviates one of its own (`--log` would become its
    `--log-dir`): parsed by torchrun's own parser, the worker gets exactly the options it was given."""
    ensure_torch()
    from torch.distributed.run import get_args_parser

    cmd = commands({"kind": "ddp", "device": "cuda", "gpus_per_host": 4, "torch_profiler": True})[1]
    argv = list(cmd.argv)
    assert argv[:3] == ["python3", "-m", "torch.distributed.run"]
    args = get_args_parser().parse_args(argv[3:])
    (nnodes, per_node, node_rank) = (args.nnodes, args.nproc_per_node, args.node_rank)
    assert (nnodes, per_node, node_rank, args.master_addr, args.module) == ("2", "4", 1, "10.0.0.1", True)
    assert args.training_script == "tracecore.runners.ddp_worker"
    ours = argv[argv.index("tracecore.runners.ddp_worker") + 1 :]
    assert args.training_script_args == ours
    assert ours[ours.index("--train-log") + 1] == "/runs/r/train_history.log"
    assert ours[ours.index("--profile-dir") + 1 :][:3] == ["/runs/r", "--profile-schedule", "3,1,3"]
    from tracecore.runners import ddp_worker

    parsed = ddp_worker.parser().parse_args(ours)
    assert (parsed.backend, parsed.device, parsed.rank) == ("nccl", "cuda", None)  # rank from torchrun


def test_one_gpu_per_host_starts_the_rank_itself() -> None:
    argv = commands({"kind": "ddp", "device": "cuda"})[1].argv
    assert argv[:9] == ("python3", "-m", "tracecore.runners.ddp_worker", "--rank", "1", "--world-size", "2",
                        "--master-addr", "10.0.0.1")  # fmt: skip
    assert "--profile-dir" not in argv


CUDA = {"kind": "ddp", "device": "cuda"}


@pytest.mark.parametrize(
    ("launcher", "matrix", "message"),
    [
        ({"kind": "ddp"}, {}, 'launcher.device: NCCL runs on GPUs only: set device = "cuda"'),
        (CUDA, {"backend": ["mpi"]}, "matrix.backend: 'mpi': the ddp launcher runs torch.distributed's gloo"),
        ({**CUDA, "nproc_per_node": 2}, {},
         "launcher.nproc_per_node: on CUDA the ddp launcher starts one rank per GPU: set gpus_per_host"),
        ({"kind": "torchrun", "program": ["t.py"], "gpus_per_host": 2}, {},
         'launcher.gpus_per_host: only the built-in workload (kind = "ddp") takes it'),
        ({**CUDA, "torch_profiler": True, "epochs": 1, "steps_per_epoch": 6}, {},
         "launcher.torch_profiler: the profiler skips 4 steps and records the next 3, so a run needs at"),
        ({"kind": "ddp", "device": "tpu"}, {}, "launcher.device: 'tpu' is not one of cpu, cuda"),
    ],
)  # fmt: skip
def test_launcher_settings_that_cannot_work_together_are_refused(launcher, matrix, message) -> None:
    with pytest.raises(ExperimentError, match=None) as err:
        experiment(launcher, **matrix)
    assert message in str(err.value)
    assert str(err.value).startswith("exp.toml: ")


def test_nccl_policy_logs_each_rank_into_the_run_folder_and_the_users_settings_win() -> None:
    env = [dict(c.env) for c in commands({"kind": "ddp", "device": "cuda", "env": {"NCCL_DEBUG": "TRACE"}})]
    assert env[1]["NCCL_DEBUG"] == "TRACE"  # the experiment's own setting
    assert env[1]["NCCL_DEBUG_SUBSYS"] == "INIT,BOOTSTRAP,ENV,GRAPH,NET"
    assert [e["NCCL_DEBUG_FILE"] for e in env] == [f"/runs/r/worker-{i}-nccl.%h.%p.log" for i in (0, 1)]
    assert env[0]["NCCL_SOCKET_IFNAME"] == "eth1"
    plugin = dict(commands({"kind": "ddp", "device": "cuda", "nccl_profiler_plugin": "/p/lib.so"})[0].env)
    assert plugin["NCCL_PROFILER_PLUGIN"] == "/p/lib.so"
    assert plugin["NCCL_PROFILE_DUMP_FILE"] == "/runs/r/nccl-profiler-example"
    assert plugin["NCCL_INSPECTOR_DUMP_DIR"] == "/runs/r/nccl-inspector"
    assert plugin["NCCL_DEBUG_SUBSYS"].endswith(",PROFILE")
    # horovodrun starts every rank from the first host: the log is paired by its addresses, not its name
    horovod = commands({"kind": "horovodrun", "program": ["python3", "t.py"]}, backend=["mpi_nccl"])
    assert dict(horovod[0].env)["NCCL_DEBUG_FILE"] == "/runs/r/nccl.%h.%p.log"
    gloo = dict(commands({"kind": "ddp"}, backend=["gloo"])[0].env)
    assert "NCCL_DEBUG" not in gloo


# NCCL's profiler event types (ext-profiler's profiler_v5.h): the bits of NCCL_PROFILE_EVENT_MASK
NCCL_EVENTS = {"group": 1 << 0, "coll": 1 << 1, "p2p": 1 << 2, "proxy_op": 1 << 3, "proxy_step": 1 << 4,
               "proxy_ctrl": 1 << 5, "kernel_ch": 1 << 6, "net_plugin": 1 << 7, "group_api": 1 << 8,
               "coll_api": 1 << 9, "p2p_api": 1 << 10, "kernel_launch": 1 << 11}  # fmt: skip


def test_a_profiler_plugin_gets_both_reference_plugins_settings_and_run_toml_says_who_set_each() -> None:
    """With a profiler plugin, every rank's environment holds the example plugin's (events, dump file)
    and the Inspector's (enable, dump folder, verbose) settings beside the logs'; the experiment's own
    settings win, and run.toml's [nccl] tells the two apart."""
    user = {"NCCL_DEBUG": "TRACE", "NCCL_IB_HCA": "mlx5_0", "OMP_NUM_THREADS": "2"}
    cmds = commands({"kind": "ddp", "device": "cuda", "nccl_profiler_plugin": "/p/lib.so", "env": user})
    env = [{k: v for k, v in c.env if k.startswith("NCCL_")} for c in cmds]
    # group, collective, proxy op and step, kernel channel, network plugin, group/collective API, launch
    # (the corpus' plugin runs: event mask 3035)
    events = ("group", "coll", "proxy_op", "proxy_step", "kernel_ch", "net_plugin", "group_api", "coll_api",
              "kernel_launch")  # fmt: skip
    assert env[1] == {
        "NCCL_DEBUG": "TRACE",
        "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP,ENV,GRAPH,NET,PROFILE",
        "NCCL_DEBUG_FILE": "/runs/r/worker-1-nccl.%h.%p.log",
        "NCCL_SOCKET_IFNAME": "eth1",
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_PROFILER_PLUGIN": "/p/lib.so",
        "NCCL_PROFILE_EVENT_MASK": str(sum(NCCL_EVENTS[e] for e in events)),
        "NCCL_PROFILE_DUMP_FILE": "/runs/r/nccl-profiler-example",
        "NCCL_INSPECTOR_ENABLE": "1",
        "NCCL_INSPECTOR_DUMP_DIR": "/runs/r/nccl-inspector",
        "NCCL_INSPECTOR_DUMP_VERBOSE": "1",
    }
    assert env[0] == {**env[1], "NCCL_DEBUG_FILE": "/runs/r/worker-0-nccl.%h.%p.log"}
    recorded = nccl_env.record([dict(c.env) for c in cmds], user)
    assert recorded == {
        "env": dict(sorted(env[0].items())),
        "set_by_tracecore": sorted(set(env[0]) - {"NCCL_DEBUG", "NCCL_IB_HCA"}),
        "set_by_experiment": ["NCCL_DEBUG", "NCCL_IB_HCA"],
    }
    assert list(recorded["env"]) == sorted(env[0])


CUDA_NEED = Needs(("tcpdump",), "eth1", "eth1", "python3", cuda_gpus=2, nccl=True)
GPU = {"tracecore": True, "torch": "2.13.0", "cuda_build": "12.8", "gpus": 2, "nccl": True, "gloo": True}
NO_TORCH = "ModuleNotFoundError: No module named 'torch'"


def facts(**changes: object) -> str:
    return "facts " + json.dumps({**GPU, **changes})


@pytest.mark.parametrize(
    ("output", "said"),
    [
        (f"missing-tool tcpdump\nmissing-interface eth1\nmissing-capture mlx5_0\n{facts()}",
         ["gpu-a: tcpdump not found on PATH (apt install tcpdump)",
          "gpu-a: no interface eth1 (the NIC of the host's address and its sockets)",
          "gpu-a: tcpdump cannot open mlx5_0 (tcpdump -D lists what it can: an RDMA NIC needs a libpcap"
          " built with RDMA support)"]),
        (facts(torch="2.13.0+cpu", cuda_build=None),
         ["gpu-a: torch 2.13.0+cpu is a CPU-only build: install a CUDA build of torch"
          ' (pytorch.org/get-started) or set launcher.device = "cpu"']),
        ("facts " + json.dumps({"tracecore": False, "torch_error": NO_TORCH}),
         ["gpu-a: python3 cannot import tracecore (pip install tracecore, or launcher.python)",
          f"gpu-a: python3 cannot import torch ({NO_TORCH}): pip install torch there"]),
        (facts(gpus=1, nccl=False),
         ["gpu-a: torch 2.13.0 (CUDA 12.8) sees 1 GPU(s), launcher.gpus_per_host = 2 (check nvidia-smi,"
          " the driver and CUDA_VISIBLE_DEVICES)",
          "gpu-a: torch 2.13.0 was built without NCCL: use backend gloo or a build with NCCL"]),
        (facts(busy=["GPU-1"], busy_pids=["4242"]),
         ["gpu-a: 1 of 2 GPU(s) free (pids 4242 compute on the others), launcher.gpus_per_host = 2"]),
        (facts(busy=[], busy_pids=[]), []),
        ("missing-python python3\n",
         ["gpu-a: no python3 on PATH (launcher.python: one with torch, tracecore)"]),
        ("Traceback (most recent call last):\n",
         ["gpu-a: python3 did not answer the probe: Traceback (most recent call last):"]),
    ],
)  # fmt: skip
def test_preflight_names_the_host_and_the_fix(output: str, said: list[str]) -> None:
    assert problems("gpu-a", CUDA_NEED, output) == said


@pytest.mark.parametrize(
    ("program", "said"),
    [
        ("/opt/nowhere/train.sh", ["this machine: /opt/nowhere/train.sh not found on PATH (install it or give"
                                   " its full path)"]),
        (sys.executable, []),
    ],
)  # fmt: skip
def test_preflight_looks_for_a_custom_launchers_program(program: str, said: list[str]) -> None:
    """A launcher that runs the user's own program (`command`) needs that program on every host, and no
    interpreter with torch: the real probe, run on this machine, finds it or names it."""
    exp = experiment({"kind": "command", "program": [program, "--rank", "{rank}"]}, backend=["gloo"])
    cmds = host_commands(exp.runs[0], exp.launcher, HOSTS, "/runs/r", "python3")
    need = needs(exp, cmds, ("", ""))
    assert (need.tools, need.python, need.cuda_gpus) == (("tcpdump", program), "", 0)
    require_tool("tcpdump")
    assert problems("this machine", need, run_here(need.probe_argv(), "this machine")) == said


@pytest.mark.netns
def test_a_cuda_run_on_a_cpu_torch_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The preflight runs the real probe with this machine's CPU torch: one line, exit 6, no run folder,
    no namespace (the run would otherwise start captures and fail minutes later on every rank)."""
    require_tool("tcpdump")
    ensure_torch()
    out = tmp_path / "pcaps"
    exp = tmp_path / "gpu.toml"
    launcher = f'kind = "ddp"\npython = "{sys.executable}"\ndevice = "cuda"\ngpus_per_host = 2'
    exp.write_text(f'[experiment]\nout = "{out}"\n[launcher]\n{launcher}\n[matrix]\n{_toml(MATRIX)}')
    res = runner.invoke(app, ["run", str(exp)])
    assert res.exit_code == 6, res.output
    import torch

    assert res.stderr == (
        f"Error: preflight: this machine: torch {torch.__version__} is a CPU-only build: install a CUDA build"
        ' of torch (pytorch.org/get-started) or set launcher.device = "cpu"; nothing was started\n'
    )
    assert not out.exists()
    assert not netns_made_by(os.getpid())


@pytest.mark.netns
@pytest.mark.slow
def test_torchrun_path_two_ranks_per_host_with_the_profiler_on_cpu(tmp_path: Path) -> None:
    """The multi-GPU host's path (torchrun, LOCAL_RANK, one profiler trace per rank) with gloo on CPU:
    2 hosts × 2 ranks, captured, recorded and ingested; every rank's trace has the recorded steps."""
    for tool in ("ip", "tcpdump", "ethtool"):
        require_tool(tool)
    ensure_torch()
    out, data = tmp_path / "pcaps", tmp_path / "data"
    exp = tmp_path / "torchrun.toml"
    matrix = {**MATRIX, "backend": ["gloo"]}
    exp.write_text(
        f'[experiment]\nout = "{out}"\ntimeout_s = 240\n[capture]\nsnaplen = 96\n[launcher]\nkind = "ddp"\n'
        f'python = "{sys.executable}"\nnproc_per_node = 2\ntorch_profiler = true\nepochs = 1\n'
        f"steps_per_epoch = 8\n[matrix]\n{_toml(matrix)}"
    )
    res = runner.invoke(app, ["run", str(exp), "--set", f"experiment.data={data}", "--ingest"])
    assert res.exit_code == 0, res.output
    assert "preflight: this machine ready (tcpdump, " in res.stderr
    run = out / "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring"
    assert sorted(p.name for p in run.iterdir()) == [
        *(f"kineto-rank{r}.json" for r in range(4)), "logs", "run.toml", "train_history.log",
        "worker-0-tcpdump.pcap", "worker-1-tcpdump.pcap",
    ]  # fmt: skip
    meta = tomllib.loads((run / "run.toml").read_text())
    assert meta["launcher"] | {"mean_step_s": 0} == {
        "kind": "ddp", "epochs": 1, "steps_per_epoch": 8, "ranks_per_host": 2, "device": "cpu",
        "torch_profiler": True, "mean_step_s": 0,
    }  # fmt: skip
    assert "nccl" not in meta  # gloo: no NCCL policy
    assert [h["argv"][2:4] for h in meta["hosts"]] == [["torch.distributed.run", "--nnodes"]] * 2
    for rank in range(4):
        events = json.loads((run / f"kineto-rank{rank}.json").read_text())["traceEvents"]
        names = {e.get("name", "") for e in events}
        assert {"ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"} <= names
        assert not {"ProfilerStep#3", "ProfilerStep#7"} & names
        assert "gloo:all_reduce" in names
    rows = [line.split(",")[0] for line in (run / "train_history.log").read_text().splitlines()[1:]]
    assert rows == ["Batch"] * 8 + ["Epoch"]
    assert not netns_made_by(os.getpid())
    import duckdb

    con = duckdb.connect(str(data / "tracecore.duckdb"), read_only=True)
    # 4 ranks on 2 hosts: gloo's ring crosses the wire between the hosts both ways
    pairs = con.sql("SELECT src_worker, dst_worker FROM topology_check() WHERE payload_bytes > 1e5")
    assert sorted(pairs.fetchall()) == [("W1", "W2"), ("W2", "W1")]
    # every rank's profiler trace became collectives: the DDP bucket's all-reduce in steps 4-6
    got = con.sql(
        "SELECT rank, list(DISTINCT step ORDER BY step) FROM collectives WHERE source ="
        " 'pytorch_profiler' AND op = 'all_reduce' AND backend = 'gloo' GROUP BY rank ORDER BY rank"
    )
    assert got.fetchall() == [(r, [4, 5, 6]) for r in range(4)]
    con.close()


@pytest.mark.netns
@pytest.mark.slow
def test_the_gpu_check_runs_its_path_with_gloo_on_cpu(tmp_path: Path) -> None:
    """`python -m bench.gpu_nccl --device cpu`: the GPU check's own code (experiment, run, ingest,
    verdicts) on this machine; on a GPU machine the same with CUDA and NCCL (bench/results)."""
    for tool in ("ip", "tcpdump", "ethtool"):
        require_tool(tool)
    ensure_torch()
    argv = [sys.executable, "-m", "bench.gpu_nccl", "--device", "cpu", "--out", str(tmp_path), "--steps", "6",
            "--model", "resnet8w8"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stdout + stderr
    (line,) = stdout.splitlines()
    assert line.startswith("gpu_nccl: PASS device=cpu | topology_check ring_prev per-step ratio ")
    assert "| nccl_topology n/a (gloo on CPU writes no NCCL log) | data_per_step payload ratio " in line
    assert "over 11 steps" in line
    assert not netns_made_by(proc.pid)
