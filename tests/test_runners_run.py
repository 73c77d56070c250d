"""`tracecore run`: dry runs (snapshots), the shipped examples, a real 2-run matrix on the netns backend."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest
from tracecore.cli.app import app
from typer.testing import CliRunner

from bench._deps import ensure_torch
from tests.conftest import netns_made_by, require_tool
from tests.runs import check_clocks, check_failed_run, check_loss, check_ok_ddp_run, netem_works
from tracecore.ingest.runname import parse_run_name

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "runners" / "examples"
runner = CliRunner()

TINY = """
[experiment]
out = "{out}"
timeout_s = 60
on_failure = "continue"

[backend]
kind = "netns"

[capture]
snaplen = 96
filter = "src host {{ip}}"

[launcher]
kind = "ddp"
python = "{python}"
epochs = 1
steps_per_epoch = 3

[matrix]
framework = ["torch_ddp"]
model = ["resnet8w4"]
optimizer = ["sgd"]
batch_size = [4]
backend = ["gloo"]
loss = [0, 1]
topology = ["ring"]
workers = [2]
"""


def test_dry_run_prints_every_host_command(tmp_path: Path, snapshot_runner) -> None:
    exp = tmp_path / "tiny.toml"
    exp.write_text(TINY.format(out="pcaps", python="python3"))
    res = runner.invoke(app, ["run", str(exp), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert res.stdout == snapshot_runner
    assert not (tmp_path / "pcaps").exists()
    assert not Path("pcaps").exists()


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.toml")))
def test_examples_parse_and_dry_run(example: str, snapshot_runner) -> None:
    res = runner.invoke(
        app, ["run", str(EXAMPLES / example), "--dry-run", "--set", "launcher.python=python3"]
    )
    assert res.exit_code == 0, res.output
    runs = [line.split()[2] for line in res.stdout.splitlines() if line.startswith("run ")]
    assert (
        len(runs)
        == {
            "ddp_loss_sweep.toml": 12,
            "ddp_loss_sweep_ssh.toml": 4,
            "ddp_scaling_sweep.toml": 9,
            "kungfu_topology_sweep.toml": 6,
        }[example]
    )
    assert all(parse_run_name(name).name_parsed for name in runs)
    assert res.stdout == snapshot_runner


def test_help_and_errors_name_the_argument_as_people_write_it() -> None:
    res = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 0, res.output
    usage = [line.strip() for line in res.stdout.splitlines() if "Usage:" in line]
    assert usage == ["Usage: tracecore run [OPTIONS] EXPERIMENT"]
    assert "│ *    EXPERIMENT      <path>  Experiment file (TOML). [required]" in res.stdout
    assert "{experiment}" not in res.stdout
    res = runner.invoke(app, ["run"], env={"COLUMNS": "120"}, terminal_width=120)
    assert res.exit_code == 2
    assert "Usage: tracecore run [OPTIONS] EXPERIMENT" in res.stderr
    assert "Missing argument 'EXPERIMENT'" in res.stderr


def test_bad_experiment_is_one_line_naming_file_and_key(tmp_path: Path) -> None:
    exp = tmp_path / "bad.toml"
    exp.write_text(TINY.format(out="pcaps", python="python3").replace("snaplen = 96", "snaplen = -1"))
    res = runner.invoke(app, ["run", str(exp), "--dry-run"])
    assert res.exit_code == 3
    assert res.stderr == f"Error: {exp}: capture.snaplen: -1 is not a whole number ≥ 1\n"


@pytest.mark.netns
@pytest.mark.slow
def test_real_two_run_matrix_on_netns(tmp_path: Path) -> None:
    """gloo DDP, 2 workers, 0 % and 1 % loss: run folders, run.toml, sanity check, resume, ingest."""
    for tool in ("ip", "tcpdump", "ethtool", "nft"):
        require_tool(tool)
    # torch is a hard requirement of this test, never a skip: installed here as the bench installs it
    # (bench/requirements.txt), so the test does not depend on a bench test having run before it
    ensure_torch()
    out = tmp_path / "pcaps"
    exp = tmp_path / "tiny.toml"
    exp.write_text(TINY.format(out=out, python=sys.executable))
    data = tmp_path / "data"
    res = runner.invoke(app, ["run", str(exp), "--set", f"experiment.data={data}", "--ingest"])
    assert res.exit_code == 0, res.output
    names = ["torch_ddp-resnet8w4-sgd-4-gloo-normal-ring", "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert not netns_made_by(os.getpid())
    for name, loss_pct in zip(names, (0.0, 1.0), strict=True):
        meta = check_ok_ddp_run(out / name, ["192.168.17.50", "192.168.17.51"])
        check_loss(meta, loss_pct)  # auto: netem where the kernel has it, else (here) nftables

    # --resume skips both; without it the complete runs are refused.
    res = runner.invoke(app, ["run", str(exp), "--resume"])
    assert res.exit_code == 0, res.output
    assert res.stdout.split() == [
        "skipped",
        names[0],
        str(out / names[0]),
        "skipped",
        names[1],
        str(out / names[1]),
    ]
    res = runner.invoke(app, ["run", str(exp)])
    assert res.exit_code == 3
    assert "already complete" in res.stderr
    assert "pass --resume to skip them" in res.stderr

    import duckdb

    con = duckdb.connect(str(data / "tracecore.duckdb"), read_only=True)
    rows = con.execute("SELECT run, n_workers, loss_pct FROM runs ORDER BY run").fetchall()
    assert rows == [(names[1], 2, 1.0), (names[0], 2, 0.0)]


@pytest.mark.netns
@pytest.mark.slow
def test_failed_run_is_kept_apart_and_exits_non_zero(tmp_path: Path) -> None:
    """A program that exits 1 on one host: the run is stopped, moved to _failed/, exit code 6."""
    require_tool("tcpdump")
    out = tmp_path / "pcaps"
    exp = tmp_path / "fail.toml"
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    text = text.replace("loss = [0, 1]", "loss = [0]")
    program = '["sh", "-c", "if [ {rank} = 1 ]; then exit 1; fi; sleep 30", "x"]'
    exp.write_text(text.replace("[launcher]", f"[launcher]\nprogram = {program}"))
    res = runner.invoke(app, ["run", str(exp)])
    assert res.exit_code == 6, res.output
    assert "1 of 1 run(s) failed" in res.stderr
    failed, _meta = check_failed_run(out, "w1 exited 1", [-15, 1])
    assert failed.name.startswith("torch_ddp-resnet8w4-sgd-4-gloo-normal-ring-")
    assert not netns_made_by(os.getpid())


def _ping_experiment(tmp_path: Path, out: Path) -> Path:
    """Two hosts, 50 % loss, rank 1 pings rank 0 forty times: a run of seconds whose loss shows."""
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    text = text.replace("loss = [0, 1]", "loss = [50]")
    program = '["sh", "-c", "[ {rank} = 0 ] || ping -q -c 40 -i 0.02 -W 1 {master_addr}; true"]'
    exp = tmp_path / "ping.toml"
    exp.write_text(text.replace("[launcher]", f"[launcher]\nprogram = {program}"))
    return exp


@pytest.mark.netns
def test_auto_loss_picks_netem_where_it_works_else_nftables_and_records_it(tmp_path: Path) -> None:
    for tool in ("tcpdump", "nft", "tc", "unshare"):
        require_tool(tool)
    out = tmp_path / "pcaps"
    res = runner.invoke(app, ["run", str(_ping_experiment(tmp_path, out))])
    assert res.exit_code == 0, res.output
    meta = tomllib.loads((out / "torch_ddp-resnet8w4-sgd-4-gloo-loss_50-ring" / "run.toml").read_text())
    check_loss(meta, 50.0)  # this machine's kernel has no netem: nftables
    check_clocks(meta)
    assert not netns_made_by(os.getpid())


@pytest.mark.netns
def test_explicit_netem_is_refused_before_anything_starts_where_the_kernel_lacks_it(tmp_path: Path) -> None:
    for tool in ("tcpdump", "tc", "unshare"):
        require_tool(tool)
    out = tmp_path / "pcaps"
    exp = _ping_experiment(tmp_path, out)
    res = runner.invoke(app, ["run", str(exp), "--set", "loss.method=netem"])
    if netem_works():  # a kernel with netem runs it, and run.toml says so
        assert res.exit_code == 0, res.output
        meta = tomllib.loads((out / "torch_ddp-resnet8w4-sgd-4-gloo-loss_50-ring" / "run.toml").read_text())
        check_loss(meta, 50.0, requested="netem")
        return
    assert res.exit_code == 6, res.output  # ExitCode.TESTBED: the hosts cannot do what the file asks
    assert res.stderr == (
        f"Error: {exp}: loss.method = netem, but this machine's kernel has no netem (unshare --net tc qdisc"
        ' add dev lo root netem loss 1%: Error: Specified qdisc kind is unknown.); use method = "auto"'
        ' (falls back to nftables) or "nftables"\n'
    )
    assert not out.exists()  # refused up front: no run folder, no namespace, nothing started
    assert not netns_made_by(os.getpid())
