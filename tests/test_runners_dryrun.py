"""Acceptance 4: `tracecore run EXP.toml --dry-run` for every launcher and every kungfu-run strategy,
against reviewed snapshots (tests/snapshots/test_runners_dryrun/): the commands a person would type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.runners.launchers import KUNGFU_STRATEGIES

runner = CliRunner()

# The paper's programs (original-semantics.md §1.5, the KungFu artifact): what each launcher starts.
PROGRAMS = {
    "ddp": [],
    "torchrun": ["train.py", "--model={model}", "--batch-size={batch_size}", "--log={log}"],
    "horovodrun": ["python3", "script.py", "--model", "{model}", "--batchsize", "{batch_size}"],
    "mpirun": ["python3", "benchmarks/system/benchmark_horovod.py", "--model={model}",
               "--batch-size={batch_size}"],
    "kungfu": ["python3", "benchmarks/system/benchmark_kungfu.py", "--kf-optimizer=sync-sgd",
               "--optimizer={optimizer}", "--model={model}", "--batch-size={batch_size}"],
    "tf": ["python3", "script.py", "--worker_addrs", "{worker_addrs}", "--task_index", "{task_index}",
           "--model", "{model}", "--batchsize", "{batch_size}"],
    "command": ["python3", "my_train.py", "--rank={rank}", "--world-size={world_size}",
                "--master={master_addr}:{master_port}", "--log={log}"],
}  # fmt: skip
# framework, model, backend and topology as the paper named such runs
NAMES = {
    "ddp": ("torch_ddp", "resnet20w8", "gloo", "ring"),
    "torchrun": ("torch_ddp", "resnet50", "nccl", "ring"),
    "horovodrun": ("horovod", "mobilenetv2", "mpi", "ring"),
    "mpirun": ("horovod", "resnet50", "mpi", "ring"),
    "kungfu": ("kungfu_ssgd", "resnet50", "kungfu", "STAR"),
    "tf": ("tf_sync", "mobilenetv2", "grpc", "ring"),
    "command": ("custom", "resnet50", "gloo", "ring"),
}


def experiment(tmp_path: Path, kind: str, loss: float = 0, method: str = "auto", hosts: int = 3) -> Path:
    framework, model, backend, topology = NAMES[kind]
    launcher = {"kind": kind, "python": "python3", "epochs": 2, "steps_per_epoch": 10}
    if PROGRAMS[kind]:
        launcher["program"] = PROGRAMS[kind]
    doc = {
        "experiment": {"out": "pcaps", "timeout_s": 600},
        "backend": {"kind": "netns"},
        "capture": {"interface": "eth1", "snaplen": 100, "filter": "src host {ip}"},
        "loss": {"method": method},
        "launcher": launcher,
        "matrix": {"framework": [framework], "model": [model], "optimizer": ["adam"], "batch_size": [64],
                   "backend": [backend], "loss": [loss], "topology": [topology], "workers": [hosts]},
    }  # fmt: skip
    lines = []
    for section, table in doc.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]  # JSON strings are TOML strings
    path = tmp_path / f"{kind}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def dry_run(path: Path, *extra: str) -> str:
    res = runner.invoke(app, ["run", str(path), "--dry-run", *extra])
    assert res.exit_code == 0, res.output
    assert not Path("pcaps").exists()
    return res.stdout


def launch_lines(text: str) -> list[str]:
    return [line.split("] launch: ", 1)[1] for line in text.splitlines() if "] launch: " in line]


@pytest.mark.parametrize("kind", ["ddp", "torchrun", "horovodrun", "mpirun", "tf", "command"])
def test_dry_run_of_each_launcher(tmp_path: Path, kind: str, snapshot_runner) -> None:
    # TF with loss, as the paper swept it (0.5 %): the loss commands of `auto` show up too
    text = dry_run(experiment(tmp_path, kind, loss=0.5 if kind == "tf" else 0))
    launches = launch_lines(text)
    assert len(launches) == (1 if kind in ("horovodrun", "mpirun") else 3)  # mpirun starts the others
    assert text == snapshot_runner


@pytest.mark.parametrize("strategy", KUNGFU_STRATEGIES)
def test_dry_run_of_kungfu_run_with_each_strategy(tmp_path: Path, strategy: str, snapshot_runner) -> None:
    text = dry_run(experiment(tmp_path, "kungfu", hosts=4), "--set", f"topology={strategy}")
    launches = launch_lines(text)
    hosts = "192.168.17.50:1,192.168.17.51:1,192.168.17.52:1,192.168.17.53:1"
    prefix = f"kungfu-run -np 4 -H {hosts} -nic eth1 -strategy {strategy} python3 "
    assert [line.split(" ", 3)[3].startswith(prefix) for line in launches] == [True] * 4
    assert text == snapshot_runner


def test_tf_config_names_every_worker_and_this_host_s_index(tmp_path: Path) -> None:
    launches = launch_lines(dry_run(experiment(tmp_path, "tf")))
    for index, line in enumerate(launches):
        config = json.loads(line.split("TF_CONFIG=", 1)[1].split("' ", 1)[0].strip("'"))
        assert config == {
            "cluster": {"worker": ["192.168.17.50:29500", "192.168.17.51:29500", "192.168.17.52:29500"]},
            "task": {"type": "worker", "index": index},
        }


@pytest.mark.parametrize(
    ("method", "whats"),
    [
        ("auto", ["loss probe (netem?)"] + ["loss if netem works"] * 2 + ["loss else (nftables)"]),
        ("netem", ["loss probe (netem?)", "loss", "loss"]),
        ("nftables", ["loss"]),
        ("none", []),
    ],
)
def test_dry_run_shows_the_loss_commands_of_the_method(tmp_path: Path, method: str, whats: list[str]) -> None:
    """As the hosts run them, and with --exact as tracecore starts them (in each worker's namespace)."""
    path = experiment(tmp_path, "ddp", loss=1, method=method, hosts=2)
    tc = "tc qdisc add dev eth1 root netem loss 1%"
    for extra, netem_lines in (
        ((), [tc, tc]),
        (("--exact",), [f"ip netns exec tbPIDxN-w{i} {tc}" for i in (0, 1)]),
    ):
        text = dry_run(path, *extra)
        steps = [
            line.split("] ", 1)[1].split(": ", 1) for line in text.splitlines() if line.startswith("  [")
        ]
        assert [what for what, _ in steps if what.startswith("loss")] == whats
        commands = dict(steps)
        if method in ("auto", "netem"):
            assert commands["loss probe (netem?)"] == "unshare --net tc qdisc add dev lo root netem loss 1%"
            assert [cmd for what, cmd in steps if what in ("loss", "loss if netem works")] == netem_lines
        if method in ("auto", "nftables"):
            bridge = commands["loss" if method == "nftables" else "loss else (nftables)"]
            exact = "ip netns exec tbPIDxN-br nft -f - <<< 'table bridge tbloss {"  # the ruleset: next lines
            assert bridge == (exact if extra else "nft -f -")


def test_a_large_matrix_streams_its_plan(tmp_path: Path) -> None:
    """100,000 runs: the first run's commands arrive while the peak memory is still small (the whole
    plan was built first: 1 GB here, 3.5 GB and 300 s of silence for a million runs), and the header
    names the axis' first values, its last and how many instead of all 10,000."""
    import subprocess
    import sys

    path = experiment(tmp_path, "ddp")
    text = path.read_text()
    text = text.replace('"optimizer": ["adam"]', "").replace('"batch_size": [64]', "")
    many = ", ".join(str(b) for b in range(1, 10_001))
    text = text.replace(
        'optimizer = ["adam"]', 'optimizer = ["o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "o9"]'
    )
    path.write_text(text.replace("batch_size = [64]", f"batch_size = [{many}]"))
    script = Path(sys.executable).with_name("tracecore")
    argv = [script, "run", path, "--dry-run", "--max-runs", "100000"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        head = [proc.stdout.readline() for _ in range(12)]
        status = Path(f"/proc/{proc.pid}/status").read_text()
        peak_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])
        assert proc.poll() is None  # still planning the other 99,999 runs
    finally:
        proc.kill()
        proc.communicate()
    assert head[0].startswith(f"# {path.name}: 100000 run(s) × 3 host(s)")
    assert "batch_size 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, …, 10000 (10,000 values)" in head[1]
    assert any(line.startswith("run 1/100000 torch_ddp-resnet20w8-o0-1-gloo-normal-ring") for line in head)
    assert peak_kb < 400_000, peak_kb
