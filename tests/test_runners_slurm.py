"""The slurm backend against a real slurmctld and one slurmd per worker namespace (tests/slurm_cluster.py):
the DDP matrix through sbatch, scancel mid-run, Ctrl-C and SIGTERM, the timeout, a failing rank, hostile
names and paths, the state without sacct, loss refused, and the dry run's exact batch script."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench._deps import ensure_torch
from tests.conftest import netns_made_by
from tests.slurm_cluster import SlurmCluster, missing_tools, slurm_cluster
from tests.test_runners_ssh import HOSTILE, _toml, write
from tracecore.cli.app import app

runner = CliRunner()
NAME = "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring"
CLEAN = {"jobs": [], "procs": [], "nft": []}
PING = ["sh", "-c", 'ping -c 3 -i 0.2 -W 1 "$0" >/dev/null', "{master_addr}"]


@pytest.fixture(scope="module")
def cluster():
    missing = missing_tools()
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: run `make system-deps` (scripts/install-system-deps.sh)"
        )
    ensure_torch()  # a hard requirement of the DDP test (bench/requirements.txt), never a skip
    with slurm_cluster(2) as c:
        yield c
    assert not netns_made_by(os.getpid())


def experiment(out: Path, program: list[str] | None = None, **extra: object) -> str:
    """A slurm experiment on nodes w0, w1; `program` switches to the command launcher."""
    launcher = {"kind": "ddp", "python": sys.executable, "epochs": 1, "steps_per_epoch": 3}
    if program is not None:
        launcher = {"kind": "command", "program": program}
    doc = {
        "experiment": {"out": str(out), "timeout_s": 120, "on_failure": "continue"},
        "backend": {"kind": "slurm", "hosts": ["w0", "w1"], "deadman_margin_s": 60},
        "capture": {"snaplen": 96, "filter": "src host {ip}"},
        "launcher": launcher,
        "matrix": {
            "framework": ["torch_ddp"], "model": ["resnet8w4"], "optimizer": ["sgd"], "batch_size": [4],
            "backend": ["gloo"], "loss": [0], "topology": ["ring"], "workers": [2],
        },
    }  # fmt: skip
    for key, value in extra.items():
        section, _, name = key.partition("__")
        doc[section][name] = value
    return "\n".join(_toml(doc))


def only_failed(out: Path) -> Path:
    assert [p.name for p in out.iterdir()] == ["_failed"]
    (failed,) = (out / "_failed").iterdir()
    return failed


@pytest.mark.netns
@pytest.mark.slow
def test_ddp_matrix_through_sbatch_captured_lossy_ingested(cluster: SlurmCluster, tmp_path: Path) -> None:
    """Acceptance 3: gloo DDP on 2 nodes, 0 % and 1 % loss, each run one sbatch job."""
    import duckdb
    import torch

    out, data = tmp_path / "pcaps", tmp_path / "data"
    # resnet8 (width 16): ~300 kB of gradients a step, so 1 % loss drops frames in the lossy run
    exp = write(tmp_path, experiment(out, matrix__loss=[0, 1], matrix__model=["resnet8"],
                                     backend__allow_loss=True, experiment__ingest=True,
                                     experiment__data=str(data)))  # fmt: skip
    res = cluster.run([str(exp)])
    assert res.returncode == 0, res.stderr
    names = [f"torch_ddp-resnet8-sgd-4-gloo-{loss}-ring" for loss in ("normal", "loss_1")]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    jobs = dict(cluster.jobs())
    for name in names:
        run_dir = out / name
        meta = tomllib.loads((run_dir / "run.toml").read_text())
        job = meta["network"]["job_id"]
        lossy = "loss_1" in name
        assert sorted(p.name for p in run_dir.iterdir()) == [
            "logs", "run.toml", "slurm-job.sh", "train_history.log", "worker-0-tcpdump.pcap",
            "worker-1-tcpdump.pcap",
        ]  # fmt: skip
        assert sorted(p.name for p in (run_dir / "logs").iterdir()) == sorted(
            [f"slurm-{job}.out", "w0-tcpdump.txt", "w0.out", "w1-tcpdump.txt", "w1.out"]
            + (["w0-loss.txt", "w1-loss.txt"] if lossy else [])
        )
        assert jobs[job] == "COMPLETED"
        assert meta["result"]["status"] == "ok"
        assert [h["exit_code"] for h in meta["hosts"]] == [0, 0]
        assert [h["ip"] for h in meta["hosts"]] == ["192.168.17.50", "192.168.17.51"]  # the nodes' NodeAddr
        workers = meta["capture"]["worker"]
        assert [w["dropped_by_kernel"] for w in workers] == [0, 0]
        assert all(w["packets"] > 50 for w in workers)
        assert [w["bytes"] for w in workers] == [(run_dir / w["file"]).stat().st_size for w in workers]
        assert meta["versions"]["torch"] == torch.__version__
        assert meta["model"]["gradient_bytes"] == 4 * meta["model"]["n_params"]
        assert meta["network"]["nodes"] == ["w0", "w1"]
        assert meta["loss"]["method"] == (
            "nftables numgen random drop on each node's egress" if lossy else "none"
        )
        assert (meta["network"]["frames_dropped_by_loss_rule"] > 0) is lossy
        script = (run_dir / "slurm-job.sh").read_text()
        partial = f"{out / name}.partial"
        assert f"#       --chdir={partial} \\\n#       --output={partial}/logs/slurm-%j.out \\\n" in script
        assert "srun --overlap --nodes=1 --ntasks=1 --nodelist=w1 --output=logs/w1.out -- env" in script
        # tcpdump ran on each node (its own namespace) and stopped with its report
        report = (run_dir / "logs" / "w1-tcpdump.txt").read_text()
        assert "listening on eth1" in report
        assert f"{workers[1]['packets']} packets captured" in report
    assert cluster.leftovers() == CLEAN
    con = duckdb.connect(str(data / "tracecore.duckdb"), read_only=True)
    rows = con.execute("SELECT run, n_workers, loss_pct FROM runs ORDER BY run").fetchall()
    assert rows == sorted((n, 2, 1.0 if "loss_1" in n else 0.0) for n in names)
    cols = "run, src_worker, dst_worker, src_ip, dst_ip, bytes > 100000, packets > 100"
    flows = con.execute(f"SELECT {cols} FROM flow_matrix ORDER BY ALL").fetchall()
    ring = [("W1", "W2", "192.168.17.50", "192.168.17.51"), ("W2", "W1", "192.168.17.51", "192.168.17.50")]
    assert flows == [(n, *pair, True, True) for n in sorted(names) for pair in ring]


def _started(
    cluster: SlurmCluster, exp: Path, *ready: str, deadline_s: float = 90
) -> tuple[subprocess.Popen, str]:
    """The runner in the background, once its job runs and each of `ready` (files in the run folder)
    has a line; its job id."""
    proc = cluster.start_run([str(exp)])
    deadline = time.monotonic() + deadline_s
    while True:
        assert proc.poll() is None, (cluster.dir / "runner.log").read_text()
        assert time.monotonic() < deadline, "the job never got going"
        running = [j for j, state in cluster.jobs("RUNNING")]
        files = [list(exp.parent.glob(f"out/*.partial/{name}")) for name in ready]
        if running and all(found and found[0].read_text().strip() for found in files):
            return proc, running[0]
        time.sleep(0.2)


def _exit(proc: subprocess.Popen, cluster: SlurmCluster) -> tuple[int, str]:
    rc = proc.wait(timeout=90)
    return rc, (cluster.dir / "runner.log").read_text()


@pytest.mark.netns
@pytest.mark.slow
def test_scancel_mid_run_leaves_nothing_behind(cluster: SlurmCluster, tmp_path: Path) -> None:
    """Acceptance 3: the job cancelled while training (and dropping frames): no job, no tcpdump or
    rank or guard, no nft rule remains; the run is failed and kept in _failed/."""
    out = tmp_path / "out"
    exp = write(tmp_path, experiment(out, matrix__loss=[1], backend__allow_loss=True,
                                     launcher__steps_per_epoch=100000))  # fmt: skip
    proc, job = _started(cluster, exp, "train_history.log")
    assert cluster.leftovers(settle_s=0)["nft"] == ["table inet tracecore_loss"] * 2
    assert cluster.client(["scancel", job]).returncode == 0
    rc, log = _exit(proc, cluster)
    assert rc == 6, log
    assert cluster.leftovers() == CLEAN
    assert dict(cluster.jobs())[job] == "CANCELLED"
    failed = only_failed(out)
    meta = tomllib.loads((failed / "run.toml").read_text())
    assert meta["result"]["status"] == "failed"
    assert meta["result"]["reason"] == f"slurm job {job} ended CANCELLED"
    assert [h["exit_code"] for h in meta["hosts"]] == [-15, -15]
    assert not (failed / ".tracecore").exists()


@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "code", "said", "what"),
    [
        (signal.SIGINT, 130, "Interrupted", "Ctrl-C"),
        (signal.SIGTERM, 143, "Interrupted by SIGTERM", "SIGTERM"),
    ],
    ids=["ctrl_c", "sigterm"],
)
def test_ctrl_c_or_sigterm_cancels_the_job_and_keeps_the_run_apart(
    cluster: SlurmCluster, tmp_path: Path, sig: signal.Signals, code: int, said: str, what: str
) -> None:
    """The runner's signal ends the job (its loss rule and captures with it) before the runner exits."""
    out, name = tmp_path / "out", "torch_ddp-resnet8w4-sgd-4-gloo-loss_1-ring"
    program = ["sh", "-c", 'echo "rank $0 up"; exec sleep 300', "{rank}"]
    exp = write(tmp_path, experiment(out, program, matrix__loss=[1], backend__allow_loss=True))
    proc, job = _started(cluster, exp, "logs/w0.out", "logs/w1.out")
    assert cluster.leftovers(settle_s=0)["nft"] == ["table inet tracecore_loss"] * 2
    proc.send_signal(sig)
    rc, log = _exit(proc, cluster)
    assert rc == code, log
    failed = only_failed(out)
    assert log.endswith(f"{said}: run {name} stopped, kept in {failed}\n")
    assert cluster.leftovers() == CLEAN
    assert dict(cluster.jobs())[job] in ("FAILED", "CANCELLED")
    meta = tomllib.loads((failed / "run.toml").read_text())
    assert meta["result"] == meta["result"] | {"status": "failed", "reason": f"interrupted ({what})"}
    assert (failed / "logs" / "w0.out").read_text().startswith("rank 0 up\n")


@pytest.mark.netns
@pytest.mark.slow
def test_ctrl_c_while_sbatch_answers_cancels_the_job_it_queued(cluster: SlurmCluster, tmp_path: Path) -> None:
    """Ctrl-C after slurmctld queued the job but before sbatch printed its id (a slow controller): the
    runner finds the job by its comment and cancels it. Before, the job stayed queued and later started
    on the nodes with nobody watching (here it then FAILED on the run folder moved to _failed/)."""
    wrapper, mark = tmp_path / "bin", tmp_path / "submitted"
    wrapper.mkdir()
    real = shutil.which("sbatch")
    (wrapper / "sbatch").write_text(f'#!/bin/sh\n"{real}" "$@" >/dev/null\ntouch "{mark}"\nexec sleep 60\n')
    (wrapper / "sbatch").chmod(0o755)
    program = ["sh", "-c", "exec sleep 300"]
    exp = write(tmp_path, experiment(tmp_path / "out", program))
    proc = cluster.start_run([str(exp)], path=f"{wrapper}:{os.environ['PATH']}")
    deadline = time.monotonic() + 60
    while not mark.exists():
        assert proc.poll() is None, (cluster.dir / "runner.log").read_text()
        assert time.monotonic() < deadline, "sbatch never submitted"
        time.sleep(0.1)
    (job,) = [j for j, state in cluster.jobs() if state in ("PENDING", "CONFIGURING", "RUNNING")]
    proc.send_signal(signal.SIGINT)
    rc, log = _exit(proc, cluster)
    assert rc == 130, log
    assert dict(cluster.jobs())[job] == "CANCELLED"
    assert cluster.leftovers() == CLEAN


@pytest.mark.netns
@pytest.mark.slow
def test_runner_sigkilled_then_resume_cancels_its_job_and_completes(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    script = 'echo up; ping -c 3 -i 0.2 -W 1 "$0" >/dev/null; [ -e "$1" ] && exec sleep 300; true'
    program = ["sh", "-c", script, "{master_addr}", str(hold)]
    # without the sweep the new job would wait behind the old one: the queue timeout fails it fast
    exp = write(tmp_path, experiment(tmp_path / "out", program, capture__filter="host {ip}",
                                     backend__queue_timeout_s=20))  # fmt: skip
    proc, job = _started(cluster, exp, "logs/w1.out")
    proc.kill()
    proc.wait(timeout=10)
    time.sleep(1)
    assert dict(cluster.jobs())[job] == "RUNNING"  # the runner is gone, its job is not
    hold.unlink()
    res = cluster.run([str(exp), "--resume"])
    assert res.returncode == 0, res.stderr
    assert dict(cluster.jobs())[job] == "CANCELLED"
    assert [p.name for p in (tmp_path / "out").iterdir()] == [NAME]
    assert tomllib.loads((tmp_path / "out" / NAME / "run.toml").read_text())["result"]["status"] == "ok"
    assert cluster.leftovers() == CLEAN


@pytest.mark.netns
@pytest.mark.slow
def test_timeout_a_failing_rank_or_capture_stop_the_job(cluster: SlurmCluster, tmp_path: Path) -> None:
    """The timeout counts from the job's start; a rank exiting 1 stops the other node's rank; a
    capture that does not start stops the job before any launcher, saying which."""
    program = ["sh", "-c", "echo rank $0 up; exec sleep 300", "{rank}"]
    exp = write(tmp_path, experiment(tmp_path / "slow", program, experiment__timeout_s=4))
    started = time.monotonic()
    res = cluster.run([str(exp)])
    assert res.returncode == 6, res.stderr
    meta = tomllib.loads((only_failed(tmp_path / "slow") / "run.toml").read_text())
    assert meta["result"]["reason"] == "timeout after 4 s"
    assert [h["exit_code"] for h in meta["hosts"]] == [-15, -15]
    assert cluster.leftovers() == CLEAN

    program = [
        "sh",
        "-c",
        # rank 1 fails once rank 0's step is up (the two steps start on their own), at most 10 s later
        "echo rank $0 up; if [ $0 = 1 ]; then i=0; until grep -qs up logs/w0.out || [ $i = 100 ]; do "
        "sleep 0.1; i=$((i+1)); done; exit 1; fi; exec sleep 300",
        "{rank}",
    ]
    res = cluster.run([str(write(tmp_path, experiment(tmp_path / "fail", program)))])
    assert time.monotonic() - started < 150  # not the 300 s sleep
    assert res.returncode == 6, res.stderr
    assert "1 of 1 run(s) failed" in res.stderr
    failed = only_failed(tmp_path / "fail")
    meta = tomllib.loads((failed / "run.toml").read_text())
    assert meta["result"]["reason"] == "w1 exited 1: rank 1 up"  # its log's last line
    assert [h["exit_code"] for h in meta["hosts"]] == [-15, 1]
    assert (failed / "logs" / "w0.out").read_text().startswith("rank 0 up\nslurmstepd-w0: error: *** STEP ")
    assert (failed / "logs" / "w1.out").read_text() == "rank 1 up\n"
    assert (
        "tracecore: the launcher on w1 exited 1: stopping the others"
        in next((failed / "logs").glob("slurm-*.out")).read_text()
    )
    assert cluster.leftovers() == CLEAN

    # a capture interface the nodes lack: the preflight's srun step on each node says so, nothing starts
    exp = write(tmp_path, experiment(tmp_path / "nocap", program, capture__interface="eth9"))
    res = cluster.run([str(exp)])
    assert res.returncode == 6, res.stderr
    assert res.stderr.startswith(
        "Error: preflight: w0: no interface eth9 (the NIC of the host's address and its sockets) (and 3 more:"
        " w0: tcpdump cannot open eth9 (tcpdump -D lists what it can"
    )
    assert res.stderr.endswith("; nothing was started\n")
    assert not (tmp_path / "nocap").exists()
    assert cluster.leftovers() == CLEAN

    # a capture step that fails all the same (here: a filter tcpdump refuses) stops the job
    exp = write(tmp_path, experiment(tmp_path / "nocap", program, capture__filter="src host {ip} and"))
    res = cluster.run([str(exp)])
    assert res.returncode == 6, res.stderr
    failed = only_failed(tmp_path / "nocap")
    meta = tomllib.loads((failed / "run.toml").read_text())
    job = meta["network"]["job_id"]
    assert meta["result"]["reason"] == (
        f"slurm job {job} ended FAILED (NonZeroExitCode): logs/w0-tcpdump.txt does not say 'listening on':"
        " its step did not start"
    )
    assert not (failed / "logs" / "w0.out").exists()
    assert cluster.leftovers() == CLEAN


@pytest.mark.netns
@pytest.mark.slow
def test_the_counter_sampler_is_a_step_of_the_job(cluster: SlurmCluster, tmp_path: Path) -> None:
    """capture.method "both" on Slurm: the batch script starts a sampler step on every node and waits
    for its first sample before launching; the script's end stops it (SIGUSR2) with its last line
    written; nothing is left."""
    out = tmp_path / "pcaps"
    text = experiment(out, PING, capture__method="both", capture__counters_interval="20ms",
                      launcher__python=sys.executable)  # fmt: skip
    res = cluster.run([str(write(tmp_path, text))])
    assert res.returncode == 0, res.stderr
    run_dir = out / NAME
    script = (run_dir / "slurm-job.sh").read_text()
    assert "# the NIC counter sampler on every node until the end" in script
    assert script.index("tracecore.runners.counters") < script.index("# the launcher on every node")
    for i, node in enumerate(("w0", "w1")):
        lines = (run_dir / f"worker-{i}-counters.tsv").read_text().splitlines()
        assert lines[0] == "# tracecore counters 1"
        assert lines[-1].startswith("# end\tsamples\t")
        assert (run_dir / "logs" / f"{node}-counters.txt").read_text().split() == ["sampling", "stopped"]
    meta = tomllib.loads((run_dir / "run.toml").read_text())
    assert meta["capture"]["method"] == "both"
    assert cluster.leftovers() == CLEAN


@pytest.mark.netns
@pytest.mark.slow
def test_hostile_names_argv_and_paths_arrive_intact(cluster: SlurmCluster, tmp_path: Path) -> None:
    """Quotes, `$`, `;`, `%`, blanks and globs in the run folder's path, the run name (so the job name)
    and the program's argv."""
    out = tmp_path / "o a'b$c;d\"e%jf"
    script = 'printf "%s\\n" "$@" >"argv-$0.txt"; pwd >"pwd-$0.txt"; ping -c 3 -i 0.2 -W 1 "$1" >/dev/null'
    program = ["sh", "-c", script, "{rank}", "{master_addr}", *HOSTILE]
    framework = "t'o$r;c%h*"
    exp = write(
        tmp_path, experiment(out, program, matrix__framework=[framework], capture__filter="host {ip}")
    )
    res = cluster.run([str(exp)])
    assert res.returncode == 0, res.stderr
    name = f"{framework}-resnet8w4-sgd-4-gloo-normal-ring"
    run_dir = out / name
    for rank in (0, 1):
        assert (run_dir / f"argv-{rank}.txt").read_text() == "".join(
            f"{a}\n" for a in ["192.168.17.50", *HOSTILE]
        )
        assert (run_dir / f"pwd-{rank}.txt").read_text() == f"{run_dir}.partial\n"
    meta = tomllib.loads((run_dir / "run.toml").read_text())
    job = cluster.client(["scontrol", "show", "job", "-o", meta["network"]["job_id"]]).stdout
    assert f"JobName={name} " in job
    assert (run_dir / "logs" / f"slurm-{meta['network']['job_id']}.out").is_file()  # `%` kept literal
    assert cluster.leftovers() == CLEAN


@pytest.mark.netns
def test_state_comes_from_squeue_or_scontrol_without_sacct(cluster: SlurmCluster, tmp_path: Path) -> None:
    """sacct fails on a cluster without accounting; a finished job's state still reads, an unknown
    job is GONE."""
    assert "accounting storage is disabled" in cluster.client(["sacct", "-j", "1"]).stderr
    finished = cluster.client(
        ["sbatch", "--parsable", "-N1", "-w", "w1", "-o", "/dev/null", "--wrap", "true"]
    )
    finished = finished.stdout.strip()
    deadline = time.monotonic() + 30
    while dict(cluster.jobs()).get(finished) != "COMPLETED":
        assert time.monotonic() < deadline, cluster.jobs()
        time.sleep(0.2)
    code = (
        "from tracecore.runners.experiment import BackendSettings\n"
        "from tracecore.runners.slurm import SlurmBackend\n"
        f"b = SlurmBackend(BackendSettings(kind='slurm', hosts=('w0',)), 'eth1', 60)\n"
        f"print(b.job_state({finished!r}), b.job_state('999999'))\n"
    )
    res = subprocess.run(cluster.login([sys.executable, "-c", code]), env=cluster.env, capture_output=True,
                         text=True, timeout=60, check=False)  # fmt: skip
    assert res.stdout == "('COMPLETED', 'None') ('GONE', 'unknown to squeue, scontrol and sacct')\n", (
        res.stderr
    )


# ---- no cluster needed ----------------------------------------------------------------------------


def test_loss_is_refused_unless_the_nodes_allow_it(tmp_path: Path) -> None:
    exp = write(tmp_path, experiment(tmp_path / "out", matrix__loss=[0, 1]))
    for args in ([], ["--dry-run"]):
        res = runner.invoke(app, ["run", str(exp), *args])
        assert res.exit_code == 3, res.output
        assert res.stderr == (
            "Error: a run asks for 1% loss, but on Slurm loss is injected only where the nodes allow jobs to"
            " change their nftables rules: set backend.allow_loss = true if they do, else use loss = [0]\n"
        )
    assert not (tmp_path / "out").exists()


def test_a_run_folder_under_a_backslash_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "a\\b"
    res = runner.invoke(app, ["run", str(write(tmp_path, experiment(out))), "--dry-run"])
    assert res.exit_code == 3
    assert res.stderr == (
        f"Error: {out}/{NAME}.partial: the slurm backend cannot write its job output under a path holding"
        " a backslash (Slurm reads it as an escape): choose another experiment.out\n"
    )


def test_dry_run_prints_the_exact_batch_script(tmp_path: Path, snapshot_runner) -> None:
    doc = {
        "experiment": {"out": "pcaps", "timeout_s": 600},
        "backend": {
            "kind": "slurm", "hosts": ["gpu-a", "gpu-b"], "ips": ["10.0.0.1", "10.0.0.2"],
            "partition": "gpu", "sbatch_args": ["--account=netlab", "--gres=gpu:1"], "allow_loss": True,
        },
        "capture": {"interface": "ens5", "snaplen": 128, "filter": "src host {ip}"},
        "launcher": {"kind": "ddp", "python": "python3", "epochs": 1, "steps_per_epoch": 5},
        "matrix": {"framework": ["torch_ddp"], "model": ["resnet8w4"], "optimizer": ["sgd"],
                   "batch_size": [16], "backend": ["gloo"], "loss": [0, 1], "topology": ["ring"],
                   "workers": [2]},
    }  # fmt: skip
    exp = write(tmp_path, "\n".join(_toml(doc)))
    for extra in ([], ["--exact"]):  # each node's commands, then the batch script itself
        res = runner.invoke(app, ["run", str(exp), "--dry-run", *extra])
        assert res.exit_code == 0, res.output
        assert res.stdout == snapshot_runner
        assert ("#!/bin/bash" in res.stdout) == bool(extra)
    assert not (tmp_path / "pcaps").exists()
    assert not Path("pcaps").exists()
