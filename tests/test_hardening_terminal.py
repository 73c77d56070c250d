"""Bytes read from outside never reach the terminal raw: control sequences in run-folder names and log
lines are escaped in the ingest table, problem and warning lines, result tables and error lines
(issue 25, item 16). Data written as CSV stays as it was read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracecore.sample import sample_run

HOSTILE = "\x1b]0;pwned\x07\x1b[31m"  # retitles the terminal, then turns what follows red
SHOWN = "\\x1b]0;pwned\\x07\\x1b[31m"  # how it must appear instead
RAW = ("\x1b", "\x07")


def console(*args: str) -> subprocess.CompletedProcess:
    """The installed `tracecore` script, stdout and stderr captured (not a terminal: nothing is cut)."""
    script = Path(sys.executable).with_name("tracecore")
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A run folder whose name holds the sequence, with an NCCL log line holding it too, ingested."""
    base = tmp_path_factory.mktemp("hostile")
    run = base / "runs" / f"my-run{HOSTILE}"
    shutil.copytree(sample_run(), run)
    (run / "run.toml").unlink()  # its [run] name would name the run: the folder's name does
    (run / "worker-0-nccl.log").write_text(
        "host:1:1 [0] NCCL INFO NCCL version 2.20.5+cuda12.2\n"
        f"host:1:1 [0] NCCL INFO Ring 00 : 2 -> {HOSTILE} -> 1\n"
    )
    res = console("ingest", str(base / "runs"), "--out", str(base / "data"))
    return base, res.stdout + res.stderr


def test_the_ingest_table_problems_and_warnings_are_escaped(hostile: tuple[Path, str]) -> None:
    """Before: the name and the log line went out raw in the table's run column, the `problem:` line
    and the run-name warning (the terminal was retitled)."""
    _, out = hostile
    assert not any(c in out for c in RAW), out
    lines = out.splitlines()
    assert any(f"my-run{SHOWN}" in line and "│" in line for line in lines)  # the table's run cell
    (problem,) = [line for line in lines if line.startswith("problem: ")]
    assert f"Ring 00 : 2 -> {SHOWN} -> 1" in problem
    assert any(line.startswith("warning: ") and f"my-run{SHOWN}" in line for line in lines)


def test_result_tables_are_escaped_and_csv_is_data(hostile: tuple[Path, str]) -> None:
    base, _ = hostile
    table = console("sql", "SELECT run FROM runs", "--data", str(base / "data"))
    assert table.returncode == 0, table.stderr
    assert not any(c in table.stdout for c in RAW)
    assert f"my-run{SHOWN}" in table.stdout
    csv = console("sql", "SELECT run FROM runs", "--data", str(base / "data"), "--format", "csv")
    assert csv.stdout == f'"run"\n"my-run{HOSTILE}"\n'


def test_error_lines_are_escaped(tmp_path: Path) -> None:
    res = console("ingest", str(tmp_path / f"missing{HOSTILE}"), "--out", str(tmp_path / "data"))
    assert res.returncode == 3, res.stderr
    (line,) = res.stderr.splitlines()
    assert not any(c in line for c in RAW)
    assert f"missing{SHOWN}: no such file or directory" in line
