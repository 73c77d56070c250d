"""The CLI shell itself: help is fast and lists every command; errors become one line."""

from __future__ import annotations

import subprocess
import sys
import time

from tracecore.cli.app import COMMAND_MODULES, app
from typer.testing import CliRunner

runner = CliRunner()


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
    code = (
        "import sys, time; t=time.perf_counter(); from tracecore.cli.app import app; "
        "heavy=[m for m in ('pyarrow','duckdb','numba','polars','altair','sklearn') if m in sys.modules]; "
        "print(heavy); print(time.perf_counter()-t)"
    )
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    heavy, _ = out.splitlines()
    assert heavy == "[]", f"heavy imports at CLI import time: {heavy}"
    assert time.perf_counter() - start < 3.0
