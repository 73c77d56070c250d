"""`tracecore run`: dry runs (snapshots), the shipped examples, a real 2-run matrix on the netns backend,
SIGHUP mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench._deps import ensure_torch
from tests.conftest import default_signals, netns_made_by, require_tool
from tests.runs import (
    NETEM_NOT_RUN,
    check_clocks,
    check_failed_run,
    check_loss,
    check_ok_ddp_run,
    netem_works,
)
from tracecore.cli.app import app
from tracecore.ingest.runname import parse_run_name
from tracecore.runners.loss import NETEM_UNTESTED

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "runners" / "examples"
TRACECORE = Path(sys.executable).parent / "tracecore"
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
    for extra in ([], ["--exact"]):  # as each namespace runs it, then with `ip netns exec`
        res = runner.invoke(app, ["run", str(exp), "--dry-run", *extra])
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
            "ddp_loss_sweep_slurm.toml": 4,
            "ddp_scaling_sweep.toml": 9,
            "kungfu_topology_sweep.toml": 6,
            "ddp_gpu_ssh.toml": 2,
            "ddp_gpu_slurm.toml": 2,
            "torchrun_ssh.toml": 2,
            "horovodrun_ssh.toml": 2,
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
def test_failed_run_is_kept_apart_and_exits_non_zero(tmp_path: Path) -> None:
    """A program that exits 1 on one host: the run is stopped, moved to _failed/, exit code 6, and the
    reason quotes the last lines of that host's log (its control characters escaped)."""
    require_tool("tcpdump")
    out = tmp_path / "pcaps"
    exp = tmp_path / "fail.toml"
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    text = text.replace("loss = [0, 1]", "loss = [0]")
    fail = r"printf 'a\\nTraceback\\n\\n\\033[31mNo module named torch\\n' >&2; exit 1"
    program = f'["sh", "-c", "if [ {{rank}} = 1 ]; then {fail}; fi; sleep 30", "x"]'
    exp.write_text(text.replace("[launcher]", f"[launcher]\nprogram = {program}"))
    res = runner.invoke(app, ["run", str(exp)])
    assert res.exit_code == 6, res.output
    assert "1 of 1 run(s) failed" in res.stderr
    said = "w1 exited 1: a | Traceback | \\x1b[31mNo module named torch"
    assert f" s ({said})\n" in res.stderr
    failed, _meta = check_failed_run(out, said, [-15, 1])
    assert failed.name.startswith("torch_ddp-resnet8w4-sgd-4-gloo-normal-ring-")
    assert not netns_made_by(os.getpid())


@pytest.mark.netns
def test_sighup_mid_run_tears_the_testbed_down_and_keeps_the_run_apart(tmp_path: Path) -> None:
    """A closed terminal (SIGHUP) unwinds like Ctrl-C on the netns backend too: namespaces (with their
    loss rule, tcpdump and ranks) deleted, the run kept in _failed/ saying why, exit 129."""
    require_tool("tcpdump")
    out = tmp_path / "pcaps"
    exp = tmp_path / "hup.toml"
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    program = '["sh", "-c", "echo up; exec sleep 60"]'
    exp.write_text(
        text.replace("loss = [0, 1]", "loss = [1]").replace("[launcher]", f"[launcher]\nprogram = {program}")
    )
    with (tmp_path / "runner.log").open("w+") as log:
        proc = subprocess.Popen([str(TRACECORE), "run", str(exp)], stdout=subprocess.DEVNULL, stderr=log,
                                start_new_session=True, preexec_fn=default_signals)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not any(f.read_text() for f in out.glob("*.partial/logs/w1.out")):
                assert proc.poll() is None, log.read()
                assert time.monotonic() < deadline, "training never started"
                time.sleep(0.1)
            assert netns_made_by(proc.pid)
            proc.send_signal(signal.SIGHUP)
            rc = proc.wait(timeout=60)
        finally:
            proc.kill()
        log.seek(0)
        said = log.read()
    assert rc == 129, said
    assert not netns_made_by(proc.pid)
    (failed,) = (out / "_failed").iterdir()
    name = "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring"
    assert said.endswith(f"Interrupted by SIGHUP: run {name} stopped, kept in {failed}\n")
    meta = tomllib.loads((failed / "run.toml").read_text())
    assert meta["result"] == meta["result"] | {"status": "failed", "reason": "interrupted (SIGHUP)"}
    assert (failed / "logs" / "w1.out").read_text() == "up\n"


def _ping_experiment(tmp_path: Path, out: Path) -> Path:
    """Two hosts, 50 % loss, rank 1 pings rank 0 forty times: a run of seconds whose loss shows."""
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    text = text.replace("loss = [0, 1]", "loss = [50]")
    program = '["sh", "-c", "[ {rank} = 0 ] || ping -q -c 40 -i 0.02 -W 1 {master_addr}; true"]'
    exp = tmp_path / "ping.toml"
    exp.write_text(text.replace("[launcher]", f"[launcher]\nprogram = {program}"))
    return exp


@pytest.mark.netns
def test_default_loss_is_the_nftables_rule_and_recorded(tmp_path: Path) -> None:
    """The default method is the one these machines test (runners/loss.py): no probe, nftables drops."""
    for tool in ("tcpdump", "nft"):
        require_tool(tool)
    out = tmp_path / "pcaps"
    res = runner.invoke(app, ["run", str(_ping_experiment(tmp_path, out))])
    assert res.exit_code == 0, res.output
    assert "netem" not in res.output
    meta = tomllib.loads((out / "torch_ddp-resnet8w4-sgd-4-gloo-loss_50-ring" / "run.toml").read_text())
    check_loss(meta, 50.0)
    assert meta["loss"]["method"] == "nftables"
    check_clocks(meta)
    assert not netns_made_by(os.getpid())


@pytest.mark.netns
def test_explicit_netem_is_refused_before_anything_starts_where_the_kernel_lacks_it(
    tmp_path: Path, untested
) -> None:
    for tool in ("tcpdump", "tc", "unshare"):
        require_tool(tool)
    out = tmp_path / "pcaps"
    exp = _ping_experiment(tmp_path, out)
    res = runner.invoke(app, ["run", str(exp), "--set", "loss.method=netem"])
    if netem_works():  # a kernel with netem runs it, says it is the untested method, and run.toml says so
        assert res.exit_code == 0, res.output
        assert NETEM_UNTESTED in res.output
        meta = tomllib.loads((out / "torch_ddp-resnet8w4-sgd-4-gloo-loss_50-ring" / "run.toml").read_text())
        check_loss(meta, 50.0, requested="netem")
        return
    untested(NETEM_NOT_RUN)
    assert res.exit_code == 6, res.output  # ExitCode.TESTBED: the hosts cannot do what the file asks
    assert res.stderr == (
        f"Error: {exp}: loss.method = netem, but this machine's kernel has no netem (unshare --net tc qdisc"
        ' add dev lo root netem loss 1%: Error: Specified qdisc kind is unknown.); use method = "auto"'
        ' (falls back to nftables) or "nftables"\n'
    )
    assert not out.exists()  # refused up front: no run folder, no namespace, nothing started
    assert not netns_made_by(os.getpid())


def _epoch_seconds(log: Path) -> float:
    """Epoch 1's time in rank 0's own log (its timestamp minus Epoch 0's), read without tracecore."""
    stamps = {int(f[1]): float(f[2]) for f in (line.split(",") for line in log.read_text().splitlines())
              if f[0] == "Epoch"}  # fmt: skip
    return stamps[1] - stamps[0]


@pytest.mark.netns
@pytest.mark.slow
def test_real_matrix_on_netns_is_captured_ingested_and_fits_model_scaling(tmp_path: Path) -> None:
    """gloo DDP, the tiny scaling sweep: 1 and 2 workers × batch 4 and 8, plus one 2-worker run at 1 %
    loss. Run folders, run.toml (loss method, clocks), sanity check, resume, ingest; then `model
    scaling --data` fits exactly the 4 loss-free runs on the epoch times their logs measured."""
    for tool in ("ip", "tcpdump", "ethtool", "nft", "tc", "unshare"):
        require_tool(tool)
    # torch is a hard requirement of this test, never a skip: installed here as the bench installs it
    # (bench/requirements.txt), so the test does not depend on a bench test having run before it
    ensure_torch()
    out, data = tmp_path / "pcaps", tmp_path / "data"
    exp = tmp_path / "scaling.toml"
    text = TINY.format(out=out, python=sys.executable).replace("epochs = 1", "epochs = 2")
    text = text.replace("loss = [0, 1]", "loss = [0]").replace("batch_size = [4]", "batch_size = [4, 8]")
    text = text.replace("workers = [2]", "workers = [1, 2]")
    exp.write_text(text + "\n[[matrix.include]]\nworkers = 2\nbatch_size = 4\nloss = 1\n")
    res = runner.invoke(app, ["run", str(exp), "--set", f"experiment.data={data}", "--ingest"])
    assert res.exit_code == 0, res.output
    names = {(w, b): f"torch_ddp-resnet8w4-sgd-{b}-gloo-normal-ring-w{w}" for b in (4, 8) for w in (1, 2)}
    lossy = "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring-w2"
    assert sorted(p.name for p in out.iterdir()) == sorted([*names.values(), lossy])
    assert not netns_made_by(os.getpid())
    ips = ["192.168.17.50", "192.168.17.51"]
    for (workers, _b), name in names.items():
        meta = check_ok_ddp_run(out / name, ips[:workers], min_packets=0 if workers == 1 else 50)
        check_loss(meta, 0.0)
    check_loss(check_ok_ddp_run(out / lossy, ips), 1.0)  # the default: nftables

    # --resume skips them all; without it the complete runs are refused.
    res = runner.invoke(app, ["run", str(exp), "--resume"])
    assert res.exit_code == 0, res.output
    assert [line.split()[:2] for line in res.stdout.splitlines()] == [
        ["skipped", name] for name in [*names.values(), lossy]
    ]
    res = runner.invoke(app, ["run", str(exp)])
    assert res.exit_code == 3
    assert "5 run(s) already complete" in res.stderr
    assert "pass --resume to skip them" in res.stderr

    import duckdb

    con = duckdb.connect(str(data / "tracecore.duckdb"), read_only=True)
    rows = con.execute("SELECT run, n_workers, loss_pct FROM runs ORDER BY run").fetchall()
    assert rows == sorted([(n, w, 0.0) for (w, _b), n in names.items()] + [(lossy, 2, 1.0)])
    con.close()

    res = runner.invoke(app, ["model", "scaling", "--data", str(data), "--run", "torch_ddp-resnet8w4-*",
                              "-f", "json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    (rows,) = json.loads(res.stdout).values()
    assert sorted((r["gpus"], r["batch_size"], r["run"]) for r in rows) == sorted(
        (w, b, name) for (w, b), name in names.items()
    )  # the lossy run is not fitted
    by = {(r["gpus"], r["batch_size"]): r for r in rows}
    for (workers, batch), name in names.items():
        row = by[(workers, batch)]
        measured = _epoch_seconds(out / name / "train_history.log")
        assert row["epoch_time_s"] == pytest.approx(measured, abs=2e-6)
        assert row["iters"] == 3
        t1 = by[(1, batch)]["epoch_time_s"]
        assert row["strong_speedup"] == pytest.approx(t1 / row["epoch_time_s"])
        assert row["communication_s"] == pytest.approx(row["epoch_time_s"] - t1 / workers)
    res = runner.invoke(app, ["model", "scaling", "--data", str(data), "--run", "tf_sync-*"])
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: --run 'tf_sync-*' matches no run; runs in the dataset: torch_ddp-")
