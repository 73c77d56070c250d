"""The experiment file: checked keys and values, matrix expansion, run names that parse back, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecore.errors import UsageError
from tracecore.ingest.runname import format_run_name, parse_run_name
from tracecore.runners.experiment import ExperimentError, load_experiment

BASE = """
[matrix]
framework = ["torch_ddp"]
model = ["resnet8"]
optimizer = ["sgd", "adam"]
batch_size = [16, 32]
backend = ["gloo"]
loss = [0, 0.5]
topology = ["ring"]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def test_matrix_expands_in_order_with_includes_and_excludes(tmp_path: Path) -> None:
    text = BASE + '[[matrix.exclude]]\noptimizer = "adam"\nloss = 0.5\n[[matrix.include]]\nbatch_size = 64\n'
    exp = load_experiment(_write(tmp_path, text))
    assert [r.name for r in exp.runs] == [
        "torch_ddp-resnet8-sgd-16-gloo-normal-ring",
        "torch_ddp-resnet8-sgd-16-gloo-loss_0.5-ring",
        "torch_ddp-resnet8-sgd-32-gloo-normal-ring",
        "torch_ddp-resnet8-sgd-32-gloo-loss_0.5-ring",
        "torch_ddp-resnet8-adam-16-gloo-normal-ring",
        "torch_ddp-resnet8-adam-32-gloo-normal-ring",
        "torch_ddp-resnet8-sgd-64-gloo-normal-ring",
    ]
    assert exp.settings.on_failure == "continue"
    assert exp.capture.filter == "src host {ip}"


def test_repetitions_and_worker_counts_get_a_variant_that_parses_back(tmp_path: Path) -> None:
    text = BASE.replace('["sgd", "adam"]', '["sgd"]').replace("[16, 32]", "[16]").replace("[0, 0.5]", "[0]")
    exp = load_experiment(_write(tmp_path, text + "workers = [1, 4]\nrepetitions = 2\n"))
    names = [r.name for r in exp.runs]
    assert names == [
        f"torch_ddp-resnet8-sgd-16-gloo-normal-ring-{v}" for v in ("w1r1", "w1r2", "w4r1", "w4r2")
    ]
    meta = parse_run_name(names[3])
    assert (meta.name_parsed, meta.batch_size, meta.topology, meta.extra) == (
        True, 16, "ring", {"workers": 4, "repetition": 2}
    )  # fmt: skip
    assert parse_run_name("torch_ddp-resnet8-sgd-16-gloo-normal-ring-r3").extra == {"repetition": 3}
    assert not parse_run_name("torch_ddp-resnet8-sgd-16-gloo-normal-ring-x3").name_parsed
    assert not parse_run_name("torch_ddp-resnet8-sgd-16-gloo-normal-ring-").name_parsed
    with pytest.raises(UsageError, match="run-name r value 0 must be a whole number ≥ 1"):
        format_run_name("a", "b", "c", 1, "d", 0, "e", repetition=0)


def test_only_and_set_overrides(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE)
    exp = load_experiment(path, ["batch_size=8", "optimizer=adam", "experiment.timeout_s=30"], "*loss_*")
    assert [r.name for r in exp.runs] == ["torch_ddp-resnet8-adam-8-gloo-loss_0.5-ring"]
    assert exp.settings.timeout_s == 30.0
    with pytest.raises(UsageError, match=r"^--set nope: not a matrix axis"):
        load_experiment(path, ["nope=1"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("[captur]\n", "unknown key 'captur'"),
        ('[capture]\nsnaplen = "big"\n', "capture.snaplen: 'big' is not a whole number ≥ 1"),
        ("[capture]\nport = 1\n", "capture.port: unknown key"),
        (
            '[experiment]\non_failure = "retry"\n',
            "experiment.on_failure: 'retry' is not one of continue, stop",
        ),
        ('[backend]\nkind = "ssh"\n', "backend.hosts: the ssh backend needs hosts"),
        ('[loss]\nmethod = "tc"\n', "loss.method: 'tc' is not one of auto, nftables, netem, none"),
        ('[[matrix.exclude]]\nframework = "torch_ddp"\n', "matrix: the excludes leave no run"),
    ],
)
def test_bad_keys_and_values_name_the_file_and_key(tmp_path: Path, extra: str, message: str) -> None:
    path = _write(tmp_path, BASE + extra if extra.startswith("[[matrix") else extra + BASE)
    with pytest.raises(ExperimentError) as err:
        load_experiment(path)
    assert str(err.value) == f"{path}: {message}" or str(err.value).startswith(f"{path}: {message} (")


def test_bad_axis_values(tmp_path: Path) -> None:
    for old, new, message in [
        ('["ring"]', '["a-b"]', "matrix.topology: 'a-b' must be a non-empty name without '-', '/' or blanks"),
        ("[0, 0.5]", "[100]", "matrix.loss: 100 is not a loss in percent in [0, 100)"),
        ("[16, 32]", "[0]", "matrix.batch_size: 0 is not a whole number ≥ 1"),
    ]:
        path = _write(tmp_path, BASE.replace(old, new))
        with pytest.raises(ExperimentError) as err:
            load_experiment(path)
        assert str(err.value) == f"{path}: {message}"


def _matrix(optimizers: int, batch_sizes: int, losses: int) -> str:
    """BASE with axes of the given lengths (a product of them runs)."""
    names = ", ".join(f'"o{i}"' for i in range(optimizers))
    return (
        BASE.replace('["sgd", "adam"]', f"[{names}]")
        .replace("[16, 32]", str(list(range(1, batch_sizes + 1))))
        .replace("[0, 0.5]", str(list(range(losses))))
    )


def test_a_matrix_past_max_runs_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Before: 100 × 100 × 100 values printed 14.9 M dry-run lines in 72 s at 5 GB RSS (issue 25,
    item 15). The count comes from the axes' lengths: nothing is expanded to refuse it."""
    import subprocess
    import sys
    import time

    path = _write(tmp_path, _matrix(100, 100, 100))
    script = Path(sys.executable).with_name("tracecore")
    start = time.monotonic()
    res = subprocess.run([script, "run", str(path), "--dry-run"], capture_output=True, text=True, timeout=120)
    assert time.monotonic() - start < 30  # 0.5 s on the 2-core machine
    assert res.returncode == 3, res.stderr
    assert res.stdout == ""
    assert res.stderr.splitlines() == [
        f"Error: {path}: matrix: 1,000,000 runs (100 optimizer × 100 batch_size × 100 loss), more than the "
        "1,000 allowed: trim the axes, or pass --max-runs 1000000 if you mean it"
    ]


def test_max_runs_counts_includes_and_repetitions_and_can_be_raised(tmp_path: Path) -> None:
    text = BASE + "repetitions = 2\n[[matrix.include]]\nbatch_size = 64\n"  # (8 + 1) × 2 runs
    path = _write(tmp_path, text)
    with pytest.raises(ExperimentError, match=r"18 runs \(2 optimizer × 2 batch_size × 2 loss \+ 1 included"):
        load_experiment(path, max_runs=17)
    assert len(load_experiment(path, max_runs=18).runs) == 18
    exclude = '[[matrix.exclude]]\noptimizer = "adam"\n'
    assert len(load_experiment(_write(tmp_path, text + exclude), max_runs=18).runs) == 10  # after excludes


def test_the_default_loss_method_is_nftables_the_tested_one(tmp_path: Path) -> None:
    """netem never ran on the project's machines (no sch_netem): a file that names no method gets the
    nftables rule the tests run, and `auto` or `netem` only when it asks (runners/loss.py)."""
    assert load_experiment(_write(tmp_path, BASE)).loss_method == "nftables"
    assert load_experiment(_write(tmp_path, '[loss]\nmethod = "auto"\n' + BASE)).loss_method == "auto"
