"""The ssh backend against real OpenSSH daemons (tests/sshd_hosts.py): quoting, faults, host keys,
the dead-man switch, resume after a SIGKILLed runner, SIGTERM, and the dry run's exact ssh command lines."""

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

from tests.conftest import netns_made_by
from tests.runs import (
    NETEM_NOT_RUN,
    check_clocks,
    check_failed_run,
    check_loss,
    check_ok_ddp_run,
    netem_works,
)
from tests.sshd_hosts import SshHosts, ssh_hosts
from tracecore.cli.app import app

runner = CliRunner()
TRACECORE = Path(sys.executable).parent / "tracecore"
HOSTILE = ["a b", "$HOME", "'single'", '"double"', "x;y", "64(x2)", "back\\slash", "*", "$(id)"]
NAME = "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring"


def experiment(hosts: SshHosts, out: Path, program: list[str] | None = None, **extra: object) -> str:
    """An ssh experiment on the fixture's hosts; `program` switches to the command launcher."""
    launcher = {"kind": "ddp", "python": sys.executable, "epochs": 1, "steps_per_epoch": 3}
    if program is not None:
        launcher = {"kind": "command", "program": program}
    doc = {
        "experiment": {"out": str(out), "timeout_s": 90, "on_failure": "continue"},
        "backend": {
            "kind": "ssh", "hosts": hosts.names, "workdir": hosts.workdir, "ssh_config": str(hosts.config),
            "known_hosts": str(hosts.known_hosts), "control_dir": hosts.control_dir,
        },
        "capture": {"snaplen": 96, "filter": "src host {ip}"},
        "launcher": launcher,
        "matrix": {
            "framework": ["torch_ddp"], "model": ["resnet8w4"], "optimizer": ["sgd"], "batch_size": [4],
            "backend": ["gloo"], "loss": [0], "topology": ["ring"], "workers": [len(hosts.names)],
        },
    }  # fmt: skip
    for key, value in extra.items():
        section, _, name = key.partition("__")
        doc[section][name] = value
    return "\n".join(_toml(doc))


def _toml(doc: dict) -> list[str]:
    lines = []
    for section, table in doc.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]  # JSON strings are TOML strings
    return lines


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return path


def assert_clean(hosts: SshHosts) -> None:
    for i in range(len(hosts.names)):
        assert hosts.leftovers(i) == {"procs": [], "files": [], "nft": []}, hosts.names[i]


@pytest.mark.netns
@pytest.mark.slow
def test_ddp_matrix_over_ssh_captured_lossy_fetched_ingested(tmp_path: Path) -> None:
    """Acceptance 1: 2 batch sizes × 0 %/1 % loss, gloo DDP on 2 hosts through real sshd."""
    import duckdb

    with ssh_hosts(2) as hosts:
        out, data = tmp_path / "pcaps", tmp_path / "data"
        # resnet8 (width 16): ~300 kB of gradients a step, so 1 % loss drops frames in every lossy run
        exp = write(tmp_path, experiment(hosts, out, matrix__batch_size=[4, 8], matrix__loss=[0, 1],
                                         matrix__model=["resnet8"], experiment__data=str(data),
                                         experiment__ingest=True))  # fmt: skip
        res = runner.invoke(app, ["run", str(exp)])
        assert res.exit_code == 0, res.output
        names = [
            f"torch_ddp-resnet8-sgd-{b}-gloo-{loss}-ring" for b in (4, 8) for loss in ("normal", "loss_1")
        ]
        assert sorted(p.name for p in out.iterdir()) == sorted(names)
        for name in names:
            run_dir = out / name
            meta = check_ok_ddp_run(run_dir, ["192.168.17.50", "192.168.17.51"])
            check_loss(meta, 1.0 if "loss_1" in name else 0.0)
            assert "listening on eth1" in (run_dir / "logs" / "w0-tcpdump.txt").read_text()
        assert_clean(hosts)
        con = duckdb.connect(str(data / "tracecore.duckdb"), read_only=True)
        rows = con.execute("SELECT run, n_workers, loss_pct FROM runs ORDER BY run").fetchall()
        assert rows == sorted((n, 2, 1.0 if "loss_1" in n else 0.0) for n in names)
        cols = "run, src_worker, dst_worker, src_ip, dst_ip, bytes > 100000, packets > 100"
        flows = con.execute(f"SELECT {cols} FROM flow_matrix ORDER BY ALL").fetchall()
        ring = [
            ("W1", "W2", "192.168.17.50", "192.168.17.51"),
            ("W2", "W1", "192.168.17.51", "192.168.17.50"),
        ]
        assert flows == [(n, *pair, True, True) for n in sorted(names) for pair in ring]


PING = [
    "sh",
    "-c",
    'ping -c 3 -i 0.2 -W 1 "$0" >/dev/null; [ {rank} = 0 ] || exit 0; sleep 0.5',
    "{master_addr}",
]


@pytest.mark.netns
@pytest.mark.slow
def test_the_counter_sampler_runs_beside_tcpdump_and_comes_back(tmp_path: Path) -> None:
    """capture.method "both" over ssh: each host's sampler starts before the launch, stops with the
    capture (its last line written), comes back with the run folder, its output in logs/; nothing is
    left on the hosts."""
    with ssh_hosts(2) as hosts:
        out = tmp_path / "pcaps"
        text = experiment(hosts, out, PING, capture__method="both", capture__counters_interval="20ms",
                          launcher__python=sys.executable)  # fmt: skip
        res = runner.invoke(app, ["run", str(write(tmp_path, text)), "--no-ingest"])
        assert res.exit_code == 0, res.output
        run_dir = out / NAME
        for i, name in enumerate(hosts.names):
            lines = (run_dir / f"worker-{i}-counters.tsv").read_text().splitlines()
            assert lines[0] == "# tracecore counters 1"
            assert lines[-1].startswith("# end\tsamples\t")
            samples = [line for line in lines if not line.startswith("#")]
            assert len(samples) >= 20, len(samples)  # ≥ 0.4 s at 20 ms
            assert (run_dir / "logs" / f"{name}-counters.txt").exists()
        meta = tomllib.loads((run_dir / "run.toml").read_text())
        assert meta["capture"]["method"] == "both"
        assert meta["capture"]["counters_interval"] == "20ms"
        assert_clean(hosts)


@pytest.mark.netns
@pytest.mark.slow
def test_hostile_argv_and_paths_arrive_intact(tmp_path: Path) -> None:
    """Quotes, `$`, `;`, blanks, globs in the program's argv and in the remote scratch path."""
    with ssh_hosts(2, workdir_name="scr a'b$c;d\"e f") as hosts:
        script = 'printf "%s\\n" "$@" >"argv-$0.txt"; pwd >"pwd-$0.txt"; ping -c 3 -i 0.2 -W 1 "$1"'
        program = ["sh", "-c", script, "{rank}", "{master_addr}", *HOSTILE]
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", program, capture__filter="host {ip}"))
        res = runner.invoke(app, ["run", str(exp)])
        assert res.exit_code == 0, res.output
        run_dir = tmp_path / "out" / NAME
        for rank in (0, 1):
            assert (run_dir / f"argv-{rank}.txt").read_text() == "".join(
                f"{a}\n" for a in ["192.168.17.50", *HOSTILE]
            )
            assert (run_dir / f"pwd-{rank}.txt").read_text() == f"{hosts.workdir}/{NAME}\n"
        assert sorted(p.name for p in (run_dir / "logs").iterdir()) == [
            "w0-tcpdump.txt", "w0.out", "w1-tcpdump.txt", "w1.out"
        ]  # fmt: skip
        meta = tomllib.loads((run_dir / "run.toml").read_text())
        assert meta["network"]["workdir"] == hosts.workdir
        assert meta["network"]["ips"] == ["192.168.17.50", "192.168.17.51"]
        assert_clean(hosts)
    assert not netns_made_by(os.getpid())


@pytest.mark.netns
@pytest.mark.slow
def test_rank_exit_1_stops_every_host_and_keeps_logs_apart(tmp_path: Path) -> None:
    with ssh_hosts(2) as hosts:
        program = [
            "sh",
            "-c",
            "echo rank $0 up; if [ $0 = 1 ]; then sleep 1; exit 1; fi; exec sleep 300",
            "{rank}",
        ]
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", program))
        started = time.monotonic()
        res = runner.invoke(app, ["run", str(exp)])
        assert time.monotonic() - started < 120  # not the 300 s sleep
        assert res.exit_code == 6, res.output
        assert "1 of 1 run(s) failed" in res.stderr
        assert ": failed in " in res.stderr
        assert " s (w1 exited 1: rank 1 up)\n" in res.stderr  # the failed rank's last log line
        failed, meta = check_failed_run(tmp_path / "out", "w1 exited 1: rank 1 up", [-15, 1])
        check_clocks(meta)
        assert (failed / "logs" / "w0.out").read_text() == "rank 0 up\n"
        assert (failed / "logs" / "w1.out").read_text() == "rank 1 up\n"
        assert_clean(hosts)


@pytest.mark.netns
@pytest.mark.slow
def test_unreachable_host_fails_fast_and_leaves_nothing(tmp_path: Path) -> None:
    """The preflight reaches every host before any run starts: one line naming the host, no run folder."""
    with ssh_hosts(2) as hosts:
        hosts.stop_sshd(1)
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", PING))
        started = time.monotonic()
        res = runner.invoke(app, ["run", str(exp)])
        assert time.monotonic() - started < 20
        assert res.exit_code == 6, res.output
        assert res.stderr.startswith("Error: w1: preflight: unreachable (")
        assert len(res.stderr.splitlines()) == 1
        assert not (tmp_path / "out").exists()
        assert hosts.leftovers(0) == {"procs": [], "files": [], "nft": []}


@pytest.mark.netns
@pytest.mark.slow
def test_a_host_python_without_torch_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The new user's case: the built-in workload on hosts whose python3 has no torch. The preflight
    asks each host's own interpreter over ssh and names the host and the fix; no run folder, no
    capture, nothing left on the hosts (before, the run failed after starting as `w1 exited 1`)."""
    with ssh_hosts(2) as hosts:
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", launcher__python="/usr/bin/python3"))
        res = runner.invoke(app, ["run", str(exp)])
        assert res.exit_code == 6, res.output
        assert res.stderr.startswith("Error: preflight: w0: /usr/bin/python3 cannot import ")
        assert (
            "w1: /usr/bin/python3 cannot import torch (ModuleNotFoundError: No module named 'torch'):"
            in res.stderr
        )
        assert res.stderr.endswith("; nothing was started\n")
        assert len(res.stderr.splitlines()) == 1
        assert not (tmp_path / "out").exists()
        assert_clean(hosts)


@pytest.mark.netns
@pytest.mark.slow
def test_trust_records_new_keys_and_a_changed_key_is_refused(tmp_path: Path) -> None:
    with ssh_hosts(2) as hosts:
        hosts.known_hosts.write_text("")
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", PING))
        res = runner.invoke(app, ["run", str(exp)])
        assert res.exit_code == 6
        assert res.stderr == (
            f"Error: w0: preflight: its host key is not in {hosts.known_hosts}: run with --trust w0 (or"
            " ssh-keyscan)\n"
        )
        assert not (tmp_path / "out").exists()
        res = runner.invoke(app, ["run", str(exp), "--trust", "all", "--resume"])
        assert res.exit_code == 0, res.output
        for i in (0, 1):
            fp = subprocess.run(["ssh-keygen", "-l", "-f", str(hosts.dir / f"hostkey{i}.pub")],
                                capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
            assert f"trusted w{i}: 192.168.17.5{i} ED25519 {fp[1]}\n" in res.stderr
        assert [line.split()[1] for line in hosts.known_hosts.read_text().splitlines()] == ["ssh-ed25519"] * 2

        hosts.replace_host_key(1)
        exp2 = write(tmp_path, experiment(hosts, tmp_path / "out2", PING))
        res = runner.invoke(app, ["run", str(exp2), "--trust", "all"])
        assert res.exit_code == 6
        assert res.stderr.startswith(
            "Error: w1: --trust: its host key changed, refused (if the change is expected"
        )
        assert not (tmp_path / "out2").exists()
        res = runner.invoke(app, ["run", str(exp2)])
        assert res.exit_code == 6
        assert res.stderr.startswith("Error: w1: preflight: its host key changed, refused")
        assert not (tmp_path / "out2").exists()
        assert_clean(hosts)


@pytest.mark.netns
@pytest.mark.slow
def test_loss_method_over_ssh_explicit_netem_refused_up_front_auto_falls_back(
    tmp_path: Path, untested
) -> None:
    """The netem probe runs on the hosts: an explicit netem they lack stops the experiment before any
    run (exit 6, nothing left on them); auto falls back to nftables and run.toml says so."""
    with ssh_hosts(2) as hosts:
        program = ["sh", "-c", "[ {rank} = 0 ] || ping -q -c 40 -i 0.02 -W 1 {master_addr}; true"]
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", program, matrix__loss=[50],
                                         capture__filter="host {ip}"))  # fmt: skip
        name = "torch_ddp-resnet8w4-sgd-4-gloo-loss_50-ring"
        if not netem_works():
            untested(NETEM_NOT_RUN)
            res = runner.invoke(app, ["run", str(exp), "--set", "loss.method=netem"])
            assert res.exit_code == 6, res.output
            assert res.stderr == (
                f"Error: {exp}: loss.method = netem, but w0 has no netem (unshare --net tc qdisc add dev lo"
                ' root netem loss 1%: Error: Specified qdisc kind is unknown.); use method = "auto" (falls'
                ' back to nftables) or "nftables"\n'
            )
            assert not (tmp_path / "out").exists()
            assert_clean(hosts)
        res = runner.invoke(app, ["run", str(exp), "--set", "loss.method=auto"])
        assert res.exit_code == 0, res.output
        meta = tomllib.loads((tmp_path / "out" / name / "run.toml").read_text())
        check_loss(meta, 50.0, requested="auto")
        check_clocks(meta)
        assert meta["loss"]["where"] == "each host's egress on eth1"
        assert_clean(hosts)


def _runner(exp: Path, stderr: object = None) -> subprocess.Popen:
    """`tracecore run EXP` as a process of its own (stdout discarded)."""
    return subprocess.Popen([str(TRACECORE), "run", str(exp)], stdout=subprocess.DEVNULL,
                            stderr=stderr or subprocess.DEVNULL, start_new_session=True)  # fmt: skip


def _start_training(hosts: SshHosts, exp: Path, name: str = NAME, stderr: object = None) -> subprocess.Popen:
    """Start the runner; returns once training runs on every host."""
    proc = _runner(exp, stderr)
    deadline = time.monotonic() + 60
    try:
        while not all(
            hosts.in_mounts(i, ["test", "-s", _pidfile(hosts, name)]).returncode == 0 for i in (0, 1)
        ):
            assert proc.poll() is None, "the runner ended before training started"
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
    except BaseException:
        proc.kill()
        proc.wait(timeout=10)
        raise
    return proc


def _pidfile(hosts: SshHosts, name: str) -> str:
    return f"{hosts.workdir}/{name}/.tracecore/train.pid"


def _start_and_kill(hosts: SshHosts, exp: Path, name: str = NAME) -> list[int]:
    """Start the runner as a process, SIGKILL it once training runs on every host; the orphans' pgids."""
    proc = _start_training(hosts, exp, name)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return [int(hosts.in_mounts(i, ["cat", _pidfile(hosts, name)]).stdout) for i in (0, 1)]


def _group_alive(hosts: SshHosts, i: int, pgid: int) -> bool:
    ps = hosts.in_mounts(i, ["ps", "-e", "-o", "pgid=,stat="]).stdout.split("\n")
    return any(line.split()[:1] == [str(pgid)] and not line.split()[1].startswith("Z") for line in ps if line)


@pytest.mark.netns
@pytest.mark.slow
def test_runner_sigkilled_then_resume_sweeps_orphans_and_completes(tmp_path: Path) -> None:
    with ssh_hosts(2) as hosts:
        hold = hosts.dir / "hold"
        hold.touch()
        program = ["sh", "-c", 'ping -c 3 -i 0.2 -W 1 "$0" >/dev/null; [ -e "$1" ] && sleep 300; true',
                   "{master_addr}", str(hold)]  # fmt: skip
        exp = write(tmp_path, experiment(hosts, tmp_path / "out", program, matrix__loss=[0, 1],
                                         capture__filter="host {ip}"))  # fmt: skip
        orphans = _start_and_kill(hosts, exp)
        time.sleep(1)
        assert all(
            _group_alive(hosts, i, g) for i, g in enumerate(orphans)
        )  # the runner is gone, they are not
        hold.unlink()
        res = runner.invoke(app, ["run", str(exp), "--resume"])
        assert res.exit_code == 0, res.output
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
            "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring", NAME
        ]  # fmt: skip
        assert not any(_group_alive(hosts, i, g) for i, g in enumerate(orphans))
        assert_clean(hosts)


@pytest.mark.netns
@pytest.mark.slow
def test_dead_man_switch_ends_orphans_and_the_loss_rule(tmp_path: Path) -> None:
    with ssh_hosts(2) as hosts:
        program = ["sh", "-c", 'ping -c 3 -i 0.2 -W 1 "$0" >/dev/null; sleep 300', "{master_addr}"]
        text = experiment(hosts, tmp_path / "out", program, matrix__loss=[1], experiment__timeout_s=14,
                          backend__deadman_margin_s=2)  # fmt: skip
        orphans = _start_and_kill(hosts, write(tmp_path, text), "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring")
        assert all(hosts.leftovers(i, settle_s=0)["nft"] == ["table inet tracecore_loss"] for i in (0, 1))
        hosts.close_masters()  # the killed runner's ssh sessions are not what the switch must end
        deadline = time.monotonic() + 90  # the switch fires 16 s after each start, +10 s for `timeout -k`
        while any(
            hosts.leftovers(i, settle_s=0)["procs"] or hosts.leftovers(i, settle_s=0)["nft"] for i in (0, 1)
        ):
            assert time.monotonic() < deadline, [hosts.leftovers(i, settle_s=0) for i in (0, 1)]
            time.sleep(1)
        assert not any(_group_alive(hosts, i, g) for i, g in enumerate(orphans))


# how rank 0 begins: `training` pings rank 1 (the test sends SIGTERM once both ranks run); `starting`
# sends SIGTERM to the runner itself (its pid is in the run folder's owner file) while the runner still
# waits for that start to be confirmed
BEGIN = {
    "training": 'ping -c 3 -i 0.2 -W 1 "$1" >/dev/null',
    "starting": '[ "$0" = 1 ] || kill -s TERM "$(cut -d " " -f 2 .tracecore/runner)"',
}


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize("when", list(BEGIN))
def test_sigterm_mid_lossy_run_cleans_every_host_and_keeps_the_run_apart(tmp_path: Path, when: str) -> None:
    """SIGTERM (a batch system, `kill`) unwinds like Ctrl-C: every host's processes, tcpdump, loss rule
    and scratch are removed before the runner exits 143, and the run is kept in _failed/."""
    with ssh_hosts(2) as hosts, (tmp_path / "runner.log").open("w+") as log:
        program = ["sh", "-c", BEGIN[when] + "; exec sleep 300", "{rank}", "{master_addr}"]
        out, name = tmp_path / "out", "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring"
        exp = write(tmp_path, experiment(hosts, out, program, matrix__loss=[1]))
        if when == "training":
            proc = _start_training(hosts, exp, name, log)
            assert all(hosts.leftovers(i, settle_s=0)["nft"] == ["table inet tracecore_loss"] for i in (0, 1))
            os.kill(proc.pid, signal.SIGTERM)
        else:
            proc = _runner(exp, log)
        try:
            rc = proc.wait(timeout=60)
        finally:
            proc.kill()
        log.seek(0)
        said = log.read()
        assert rc == 143, said
        (failed,) = (out / "_failed").iterdir()
        assert said.endswith(f"Interrupted by SIGTERM: run {name} stopped, kept in {failed}\n")
        assert_clean(hosts)  # no process (training, tcpdump, loss guard), no nft table, no scratch
        assert [p.name for p in out.iterdir()] == ["_failed"]
        meta = tomllib.loads((failed / "run.toml").read_text())
        assert meta["result"] == meta["result"] | {"status": "failed", "reason": "interrupted (SIGTERM)"}
        assert meta["loss"]["loss_pct"] == 1.0  # it was on


@pytest.mark.netns
@pytest.mark.slow
def test_sigterm_stays_an_interrupt_when_the_cleanup_fails(tmp_path: Path) -> None:
    """A cleanup error (w1's scratch holds a busy mount point) is recorded, not raised in the interrupt's
    place: the runner still exits 143 and starts no further run."""
    with ssh_hosts(2) as hosts, (tmp_path / "runner.log").open("w+") as log:
        program = ["sh", "-c", 'ping -c 3 -i 0.2 -W 1 "$0" >/dev/null; exec sleep 300', "{master_addr}"]
        out = tmp_path / "out"
        exp = write(tmp_path, experiment(hosts, out, program, matrix__batch_size=[4, 8]))
        proc = _start_training(hosts, exp, stderr=log)
        busy = f"{hosts.workdir}/{NAME}/busy"
        assert (
            hosts.in_mounts(1, ["sh", "-c", 'mkdir "$0" && mount -t tmpfs busy "$0"', busy]).returncode == 0
        )
        os.kill(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        finally:
            proc.kill()
        log.seek(0)
        said = log.read()
        assert rc == 143, said
        (failed,) = (out / "_failed").iterdir()
        left = (
            f"cleanup: w1: remove the scratch: exited 1: rm: cannot remove '{busy}': Device or resource busy"
        )
        assert said.endswith(f"Interrupted by SIGTERM: run {NAME} stopped, kept in {failed}; {left}\n")
        assert [p.name for p in out.iterdir()] == ["_failed"]  # the second run never started
        meta = tomllib.loads((failed / "run.toml").read_text())
        assert meta["result"] == meta["result"] | {"reason": "interrupted (SIGTERM)", "cleanup": left}
        assert hosts.leftovers(0) == {"procs": [], "files": [], "nft": []}
        assert hosts.leftovers(1) == {"procs": [], "files": [f"{hosts.workdir}/{NAME}", busy], "nft": []}


def test_dry_run_prints_the_exact_ssh_command_lines(tmp_path: Path, snapshot_runner) -> None:
    doc = {
        "experiment": {"out": "pcaps", "timeout_s": 600},
        "backend": {
            "kind": "ssh", "hosts": ["gpu-a", "gpu-b"], "workdir": "/srv/tracecore runs",
            "known_hosts": "/etc/tracecore/known_hosts", "control_dir": "/tmp/tc-ctl",
            "ips": ["10.0.0.1", "10.0.0.2"],
        },
        "capture": {"interface": "ens5", "snaplen": 128, "filter": "src host {ip}"},
        "launcher": {"kind": "ddp", "python": "python3", "epochs": 1, "steps_per_epoch": 5},
        "matrix": {"framework": ["torch_ddp"], "model": ["resnet8w4"], "optimizer": ["sgd"],
                   "batch_size": [16], "backend": ["gloo"], "loss": [0, 1], "topology": ["ring"],
                   "workers": [2]},
    }  # fmt: skip
    exp = write(tmp_path, "\n".join(_toml(doc)))
    for extra in ([], ["--exact"]):  # as each host runs it, and the ssh command lines themselves
        res = runner.invoke(app, ["run", str(exp), "--dry-run", *extra])
        assert res.exit_code == 0, res.output
        assert res.stdout == snapshot_runner
        launches = [line.split("] launch: ")[1] for line in res.stdout.splitlines() if "] launch: " in line]
        assert len(launches) == 4
        wrapped = [cmd.startswith("ssh -o BatchMode=yes") and "setsid -f" in cmd for cmd in launches]
        assert wrapped == [bool(extra)] * 4  # the quoting folded away unless --exact
    assert not (tmp_path / "pcaps").exists()
    assert not Path("/tmp/tc-ctl").exists()
