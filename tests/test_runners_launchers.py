"""Launchers are pure argv builders: each kind's per-host argv and env against reviewed snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.amber import AmberSnapshotExtension
from tracecore.runners.experiment import ExperimentError, LauncherSettings, RunSpec
from tracecore.runners.launchers import KUNGFU_STRATEGIES, Host, host_commands

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
HOSTS = [Host(i, f"gpu{i}", f"10.0.0.{19 + i}", "eth0") for i in range(3)]
PROGRAM = ("python3", "train.py", "--model={model}", "--batch-size={batch_size}", "--log={log}")
HOSTILE = 'it\'s "$HOME"; rm -rf / `x` a b'


class RunnerSnapshot(AmberSnapshotExtension):
    """Runner snapshots in tests/snapshots/<test module>/, reviewed like the figure specs."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


@pytest.fixture
def snapshot_runner(snapshot):
    return snapshot.use_extension(RunnerSnapshot)


def _run(topology: str = "ring", model: str = "resnet20w8") -> RunSpec:
    return RunSpec("torch_ddp", model, "sgd", 32, "gloo", 0.0, topology, len(HOSTS), 1, "name")


def _render(commands) -> list[dict]:
    return [{"host": c.host.name, "argv": list(c.argv), "env": dict(c.env)} for c in commands]


@pytest.mark.parametrize("kind", ["ddp", "torchrun", "horovodrun", "mpirun", "tf", "command"])
def test_launcher_argv(kind: str, snapshot_runner) -> None:
    launcher = LauncherSettings(kind=kind, program=() if kind == "ddp" else PROGRAM, python="python3")
    commands = host_commands(_run(), launcher, HOSTS, "/scratch/run", "python3")
    assert len(commands) == (1 if kind in ("horovodrun", "mpirun") else 3)
    assert _render(commands) == snapshot_runner


@pytest.mark.parametrize("strategy", KUNGFU_STRATEGIES)
def test_kungfu_each_strategy(strategy: str, snapshot_runner) -> None:
    launcher = LauncherSettings(kind="kungfu", program=PROGRAM)
    commands = host_commands(_run(strategy), launcher, HOSTS, "/scratch/run", "python3")
    assert commands[0].argv[commands[0].argv.index("-strategy") + 1] == strategy
    assert _render(commands) == snapshot_runner


def test_kungfu_refuses_an_unknown_strategy() -> None:
    with pytest.raises(
        ExperimentError, match=r"topology 'ring': kungfu-run's -strategy is one of STAR, RING"
    ):
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
