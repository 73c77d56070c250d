"""`tracecore demo` (what `make demo` runs): the whole pipeline on the embedded sample."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.demo import SHOWN, run_demo


def test_demo_library_finds_the_gloo_ring(tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo")
    ring = result.tables["topology_check"].to_pylist()
    assert sorted((r["src_worker"], r["dst_worker"]) for r in ring) == [
        ("W1", "W4"),
        ("W2", "W1"),
        ("W3", "W2"),
        ("W4", "W3"),
    ]
    for row in ring:  # per-rank payload per step within 10% of 2(N-1)/N x gradient bytes
        assert 0.95 < row["ratio"] < 1.10
    matrix = {r["from"]: r for r in result.tables["flow_matrix"].to_pylist()}
    assert matrix["W1"]["W4"] > 10 * matrix["W1"]["W2"]
    assert result.report == tmp_path / "demo" / "report" / "index.html"
    assert result.report.is_file()
    assert result.report.stat().st_size > 100_000  # self-contained: the chart runtime is inline


@pytest.mark.slow
def test_demo_command_prints_every_question_and_the_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = CliRunner().invoke(app, ["demo", "--out", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    for shown in SHOWN:
        assert f"tracecore query {shown.view}" in result.output
    assert "ring_prev" in result.output
    assert str((out / "report").resolve()) in result.output
    rerun = CliRunner().invoke(app, ["demo", "--out", str(out)], catch_exceptions=False)
    assert rerun.exit_code == 0  # idempotent: a second demo reuses the dataset


def test_after_the_demo_the_readme_commands_find_its_dataset(tmp_path: Path) -> None:
    """As a new user in a fresh folder: `tracecore demo`, then the line it prints, then a README command.
    Before, `tracecore query …` said `no dataset at tracecore-data`, and the demo warned about the
    sample's other run folder, which is the tests' (issue 25, item 9)."""
    script = Path(sys.executable).with_name("tracecore")  # the installed console script
    env = {k: v for k, v in os.environ.items() if k != "TRACECORE_DATA"}
    demo = subprocess.run(
        [script, "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert demo.returncode == 0, demo.stderr
    assert "warning" not in demo.stderr.lower(), demo.stderr
    assert "both_directions" not in demo.stdout + demo.stderr
    (export,) = [line for line in demo.stdout.splitlines() if line.startswith("Next:")]
    name, _, value = shlex.split(export.removeprefix("Next:"), comments=True)[1].partition("=")
    assert name == "TRACECORE_DATA"
    assert Path(value) == (tmp_path / "tracecore-demo" / "data").resolve()
    query = subprocess.run(
        [script, "query", "flow_counts", "--format", "csv"],
        cwd=tmp_path,
        env={**env, name: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert query.returncode == 0, query.stderr
    assert '"torch_ddp-resnet8w8-sgd-16-gloo-normal-ring","connection",11' in query.stdout.splitlines()
