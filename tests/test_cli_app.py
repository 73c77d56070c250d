"""The CLI shell itself: help is fast and lists every command; errors become one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import tracecore.cli
from tracecore.cli.app import COMMAND_MODULES, app
from tracecore.cli.common import boundary
from tracecore.errors import ExitCode

runner = CliRunner()
MAX_CLI_LINES = 150  # commands stay thin: parse, call one library function, print


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMAND_MODULES:
        assert name in result.output


def test_each_command_has_help() -> None:
    for name in COMMAND_MODULES:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage" in result.output


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("tracecore ")


def test_help_is_instant_and_imports_nothing_heavy() -> None:
    # CPU seconds, not wall: a loaded CI machine stretches wall time, not the work of importing
    code = (
        "import sys, time; t=time.process_time(); from tracecore.cli.app import app; "
        "heavy=[m for m in ('pyarrow','duckdb','numba','polars','altair','sklearn') if m in sys.modules]; "
        "print(heavy); print(time.process_time()-t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, cpu_s = out.splitlines()
    assert heavy == "[]", f"heavy imports at CLI import time: {heavy}"
    assert float(cpu_s) < 1.5


def test_every_cli_module_is_thin() -> None:
    sizes = {
        p.name: len(p.read_text().splitlines()) for p in Path(tracecore.cli.__file__).parent.glob("*.py")
    }
    assert "model.py" in sizes
    assert {name: n for name, n in sizes.items() if n > MAX_CLI_LINES} == {}


def test_dataset_default_is_shown_and_follows_the_environment(tmp_path: Path) -> None:
    help_text = runner.invoke(app, ["query", "--help"], env={"COLUMNS": "240"}).output
    assert "[env var: TRACECORE_DATA] [default: (./tracecore-data)]" in help_text
    result = runner.invoke(app, ["sql", "SELECT 1"], env={"TRACECORE_DATA": str(tmp_path / "elsewhere")})
    assert result.exit_code == ExitCode.DATASET == 4
    assert f"no dataset at {tmp_path / 'elsewhere'}" in result.stderr


def test_interrupt_exits_130_with_one_line() -> None:
    @boundary
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(typer.Exit) as done:
        interrupted()
    assert done.value.exit_code == ExitCode.INTERRUPTED == 130
