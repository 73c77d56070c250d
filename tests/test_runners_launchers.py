"""Launchers are pure argv builders: templates, quoting and refusals (each kind's full commands are
snapshot-tested through `tracecore run --dry-run` in tests/test_runners_dryrun.py)."""

from __future__ import annotations

import pytest

from tracecore.runners.experiment import ExperimentError, LauncherSettings, RunSpec
from tracecore.runners.launchers import Host, host_commands

HOSTS = [Host(i, f"gpu{i}", f"10.0.0.{19 + i}", "eth0") for i in range(3)]
PROGRAM = ("python3", "train.py", "--model={model}", "--batch-size={batch_size}", "--log={log}")
HOSTILE = 'it\'s "$HOME"; rm -rf / `x` a b'


def _run(topology: str = "ring", model: str = "resnet20w8") -> RunSpec:
    return RunSpec("torch_ddp", model, "sgd", 32, "gloo", 0.0, topology, len(HOSTS), 1, "name")


def test_kungfu_refuses_an_unknown_strategy() -> None:
    every = "STAR, MULTI_STAR, RING, CLIQUE, TREE, BINARY_TREE, BINARY_TREE_STAR, MULTI_BINARY_TREE_STAR, "
    every += "AUTO"
    with pytest.raises(ExperimentError, match=rf"topology 'ring': kungfu-run's -strategy is one of {every}$"):
        host_commands(_run("ring"), LauncherSettings(kind="kungfu", program=PROGRAM), HOSTS, "/o", "python3")


def test_hostile_strings_stay_one_argument_each() -> None:
    launcher = LauncherSettings(kind="command", program=("prog", "--note", HOSTILE, "{rank}:" + HOSTILE),
                                env={"NOTE": HOSTILE + "{ip}"})  # fmt: skip
    commands = host_commands(_run(), launcher, HOSTS, f"/scratch/{HOSTILE}", "python3")
    assert commands[1].argv == ("prog", "--note", HOSTILE, "1:" + HOSTILE)
    assert dict(commands[1].env)["NOTE"] == HOSTILE + "10.0.0.20"


def test_unknown_placeholder_names_the_key() -> None:
    launcher = LauncherSettings(kind="command", program=("prog", "{nope}"))
    with pytest.raises(
        ExperimentError, match=r"^launcher.program: unknown placeholder \{nope\} in '\{nope\}'$"
    ):
        host_commands(_run(), launcher, HOSTS, "/o", "python3")


def test_ddp_refuses_a_model_it_cannot_build() -> None:
    with pytest.raises(ExperimentError, match="resnet<6n\\+2>"):
        host_commands(_run(model="resnet18"), LauncherSettings(), HOSTS, "/o", "python3")


def test_two_processes_per_host_are_two_slots_each() -> None:
    launcher = LauncherSettings(kind="kungfu", program=PROGRAM, nproc_per_node=2)
    (first, *_) = host_commands(_run("STAR"), launcher, HOSTS, "/o", "python3")
    assert first.argv[:5] == ("kungfu-run", "-np", "6", "-H", "10.0.0.19:2,10.0.0.20:2,10.0.0.21:2")
