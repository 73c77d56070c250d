"""`tracecore model scaling` reads the dataset of every command: `--data`, else `$TRACECORE_DATA`, else
./tracecore-data, when no other input is given.

Why: scaling declared its own `--data` (default none, no variable), so after `export TRACECORE_DATA=…`
(the demo's last line) every command read the dataset but `model scaling` asked for an input. The
variable is a default: beside `--reference-study` or a times CSV it is not a second input.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.test_cli_help import help_of, option_rows
from tracecore.cli.app import app

runner = CliRunner()
INPUTS = "Error: give exactly one input: a times CSV, --reference-study, --wandb FILE or --data DIR"


def _scaling(*args: str, data: Path | None):
    """`tracecore model scaling ARGS` with $TRACECORE_DATA set to `data`, or unset."""
    env = {"TRACECORE_DATA": str(data) if data is not None else None}
    return runner.invoke(app, ["model", "scaling", *args], env=env)


def test_the_variable_is_read_as_the_option_is(sample_dataset: Path) -> None:
    from_variable = _scaling("-f", "json", data=sample_dataset)
    assert from_variable.exit_code == 0, from_variable.output
    from_option = _scaling("-f", "json", "--data", str(sample_dataset), data=None)
    assert from_option.exit_code == 0, from_option.output
    assert from_variable.stdout == from_option.stdout
    (rows,) = json.loads(from_variable.stdout).values()
    assert [(r["run"], r["gpus"], r["batch_size"]) for r in rows] == [
        ("torch_ddp-resnet8w8-sgd-16-gloo-normal-ring", 4, 16)
    ]


def test_the_variable_is_a_default_not_a_second_input(sample_dataset: Path) -> None:
    with_variable = _scaling("--reference-study", "-f", "csv", data=sample_dataset)
    without = _scaling("--reference-study", "-f", "csv", data=None)
    assert with_variable.exit_code == without.exit_code == 0
    assert with_variable.stdout == without.stdout
    both = _scaling("--reference-study", "--data", str(sample_dataset), data=None)
    assert (both.exit_code, both.stderr.strip()) == (2, INPUTS)


def test_no_input_and_no_default_dataset_names_both(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = _scaling(data=None)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"{INPUTS} (no dataset at tracecore-data, the default: $TRACECORE_DATA or ./tracecore-data)"
    )
    result = _scaling(data=tmp_path / "gone")
    assert f"(no dataset at {tmp_path / 'gone'}, the default" in result.stderr


def test_help_names_the_variable_and_default() -> None:
    row = option_rows(help_of(("model", "scaling")))["--data"]
    assert "[env var: TRACECORE_DATA]" in row
    assert "[default: (./tracecore-data)]" in row
