"""`tracecore run`: an experiment's runs, each captured, loss-injected, collected and recorded.

Why here: the per-run lifecycle is the same on every backend, so it is written once against
`tracecore.runners.backend.Backend`: capture on (confirmed), loss on, launch on every host, wait
(first failure or the timeout stops the rest), capture off with its drop counts, loss off, collect,
a capture sanity check, `run.toml`; the backend's `cleanup` runs whatever happened (also on Ctrl-C,
SIGTERM and SIGHUP, which unwind alike while hosts are driven: `tracecore.runners.signals`). A run is
staged in `<out>/<name>.partial/` and renamed to `<out>/<name>/` when it succeeded, or moved to
`<out>/_failed/<name>-<UTC time>/` (never ingested) when it did not.
"""

from __future__ import annotations

import datetime
import json
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tracecore import __version__
from tracecore.errors import ExitCode, Interrupted, Terminated, TracecoreError
from tracecore.ingest.runname import format_loss
from tracecore.runners import nccl_env, preflight
from tracecore.runners.backend import Backend, Step, counters_argv, env_argv, host_tcpdump_argv
from tracecore.runners.clocks import measure_offsets
from tracecore.runners.experiment import MAX_RUNS, Experiment, ExperimentError, RunSpec, load_experiment
from tracecore.runners.launchers import DDP_META, HostCommand, host_commands
from tracecore.runners.loss import NETEM_UNTESTED, choose_method
from tracecore.runners.rundir import staged_run_dir, write_run_toml
from tracecore.runners.signals import as_interrupts
from tracecore.terminal import safe

IDLE_HEAD_S = 0.3  # capture before training starts, so the first packets are never missed
Progress = Callable[[str], None]


class RunFailedError(TracecoreError):
    """One run failed (a host exited non-zero, the timeout, or a capture that saw no other worker)."""

    exit_code = ExitCode.TESTBED


class RunsFailedError(TracecoreError):
    """Some runs of the experiment failed; their folders are kept apart in `_failed/`."""

    exit_code = ExitCode.TESTBED


@dataclass
class RunOutcome:
    name: str
    status: str  # ok | failed | skipped | not run
    folder: Path | None = None
    reason: str | None = None
    seconds: float = 0.0


@dataclass
class ExperimentResult:
    experiment: Experiment
    outcomes: list[RunOutcome] = field(default_factory=list)
    ingested: object | None = None  # the IngestSummary when --ingest ran

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]


def make_backend(exp: Experiment) -> Backend:
    """The experiment's backend: netns, ssh or slurm; remote hosts are known by the address (and
    sockets) of the address interface, which is the capture interface unless the file names another."""
    nic = exp.capture.address_interface or exp.capture.interface
    if exp.backend.kind == "ssh":
        from tracecore.runners.ssh import SshBackend

        # the hosts' interpreter with tracecore: the built-in workload's and the counter sampler's
        return SshBackend(exp.backend, nic, exp.settings.timeout_s, python=exp.launcher.python or "python3")
    if exp.backend.kind == "slurm":
        from tracecore.runners.slurm import SlurmBackend

        gpus = exp.launcher.ranks_per_host if exp.launcher.device == "cuda" else 0
        return SlurmBackend(exp.backend, nic, exp.settings.timeout_s, python=exp.launcher.python or "python3",
                            gpus=gpus)  # fmt: skip
    if exp.backend.kind != "netns":
        raise ExperimentError(
            f"{exp.path}: backend.kind: {exp.backend.kind!r} is not available yet (use netns, ssh or slurm)"
        )
    from tracecore.runners.netns import NetnsBackend

    return NetnsBackend(exp.backend)


def _complete(out_root: Path, name: str) -> bool:
    """Whether run `name` finished before (its folder has its run.toml): `--resume` skips it."""
    return (out_root / name / "run.toml").is_file()


def dry_run(
    exp: Experiment, backend: Backend, complete: Callable[[str], bool] | None = None, exact: bool = False
) -> Iterator[str]:
    """Every command each host would run, per run, as shell lines, one run at a time (a matrix of a
    million runs prints its first run at once, in bounded memory); nothing is started. The header
    summarises the matrix and how commands reach the hosts; commands are shown as the hosts run them,
    or with `exact` as tracecore starts them (ssh, srun and sbatch wrapping, the batch script)."""
    out = Path(exp.settings.out)
    backend.loss_choice = exp.loss_method  # not probed: auto shows both outcomes
    most = max(s.workers for s in exp.runs)
    yield from (f"# {line}" for line in describe(exp, backend.kind))
    yield f"# {backend.transport()}"
    note = backend.address_note(most)
    if note:
        yield f"# {note}"
    for k, spec in enumerate(exp.runs, 1):
        head = f"run {k}/{len(exp.runs)} {spec.name} ({spec.workers} host(s))"
        if complete is not None and complete(spec.name):
            yield f"{head}: complete, skipped (--resume)"
            continue
        yield head
        for step in plan(exp, backend, spec, out / f"{spec.name}.partial"):
            yield from _shown(step, exact)


def _shown(step: Step, exact: bool, indent: str = "  ") -> list[str]:
    """A step's lines in a dry run: its command as the host runs it, or exactly as started."""
    if exact or step.shown is None:
        text = shlex.join(step.argv) + (f" <<< {shlex.quote(step.stdin)}" if step.stdin else "")
        lines = [f"{indent}[{step.where}] {step.what}: {text}"]
        return lines + [f"{indent}  {line}".rstrip() for line in (step.script or "").splitlines()]
    lines = [f"{indent}[{step.where}] {step.what}: {shlex.join(step.shown)}"]
    lines += [f"{indent}    | {line}".rstrip() for line in (step.stdin or "").splitlines()]
    for part in step.parts:
        lines += _shown(part, exact, indent + "  ")
    return lines


SHOWN_VALUES = 12  # a matrix axis with more values shows its first ones, the last and the count


def describe(exp: Experiment, backend_kind: str) -> list[str]:
    """The matrix in a few lines: how many runs on how many hosts, what varies, what stays."""
    runs = exp.runs
    hosts = sorted({s.workers for s in runs})
    launcher = exp.launcher
    where = "CUDA" if launcher.device == "cuda" else "CPU"
    per_host = f", {launcher.ranks_per_host} rank(s) per host" if launcher.ranks_per_host > 1 else ""
    workload = f"{launcher.kind} launcher" + (f" on {where}" if launcher.kind == "ddp" else "") + per_host
    head = (
        f"{exp.path.name}: {len(runs)} run(s) × {'/'.join(map(str, hosts))} host(s) on the {backend_kind}"
        f" backend, {workload}"
    )
    fields = ("framework", "model", "optimizer", "batch_size", "backend", "loss_pct", "topology", "workers",
              "repetition")  # fmt: skip
    labels = {"loss_pct": "loss", "workers": "hosts"}
    varies, fixed = [], []
    for key in fields:
        values = list(dict.fromkeys(getattr(s, key) for s in runs))
        texts = [f"{v:g} %" if key == "loss_pct" else str(v) for v in values]
        shown = (
            ", ".join(texts)
            if len(texts) <= SHOWN_VALUES
            else (f"{', '.join(texts[: SHOWN_VALUES - 2])}, …, {texts[-1]} ({len(texts):,} values)")
        )
        if len(values) > 1 or key != "repetition":
            (varies if len(values) > 1 else fixed).append(f"{labels.get(key, key)} {shown}")
    return [head, f"varies: {'; '.join(varies) or 'nothing'}", f"same in every run: {'; '.join(fixed)}"]


def plan(exp: Experiment, backend: Backend, spec: RunSpec, run_dir: Path) -> list[Step]:
    """The ordered commands of one run, from the backend's pure builders."""
    hosts = backend.hosts(spec.workers)
    steps = []
    for h in hosts:
        if exp.capture.tcpdump:
            path = _capture_path(backend, h, run_dir)
            steps.append(Step(h.name, "capture", tuple(backend.capture_command(h, exp.capture, path)),
                              shown=tuple(host_tcpdump_argv(h, exp.capture, path))))  # fmt: skip
        if exp.capture.counters:
            path = _counters_path(backend, h, run_dir)
            steps.append(Step(h.name, "counters", tuple(backend.counters_command(h, exp.capture, path)),
                              shown=tuple(counters_argv(backend.python, exp.capture, path))))  # fmt: skip
    steps += backend.loss_commands(hosts, spec.loss_pct)
    for cmd in _commands(exp, backend, spec, hosts, run_dir):
        launch = tuple(backend.launch_command(cmd))
        steps.append(Step(cmd.host.name, "launch", launch, shown=tuple(env_argv(cmd))))
    return backend.submission(steps, run_dir)


def _commands(
    exp: Experiment, backend: Backend, spec: RunSpec, hosts: list, run_dir: Path
) -> list[HostCommand]:
    try:
        return host_commands(spec, exp.launcher, hosts, backend.host_dir(hosts[0], run_dir), backend.python)
    except ExperimentError as err:
        raise ExperimentError(f"{exp.path}: {err}") from None


def _capture_path(backend: Backend, host: object, run_dir: Path) -> str:
    return f"{backend.host_dir(host, run_dir)}/worker-{host.index}-tcpdump.pcap"  # type: ignore[attr-defined]


def _counters_path(backend: Backend, host: object, run_dir: Path) -> str:
    return f"{backend.host_dir(host, run_dir)}/worker-{host.index}-counters.tsv"  # type: ignore[attr-defined]


def run_experiment(
    path: str | Path,
    *,
    dry: bool = False,
    exact: bool = False,
    only: str | None = None,
    resume: bool = False,
    ingest: bool | None = None,
    overrides: list[str] | None = None,
    progress: Progress | None = None,
    trust: str | None = None,
    max_runs: int = MAX_RUNS,
) -> ExperimentResult | Iterator[str]:
    """Run the experiment (or with `dry`, give its plan line by line); raises RunsFailedError when any
    run failed.
    `trust` ("w0,w1" or "all") records those hosts' keys first (ssh)."""
    exp = load_experiment(path, overrides, only, max_runs)
    backend = make_backend(exp)
    out_root = Path(exp.settings.out).resolve()
    if dry:  # a run folder is looked at only when its turn comes
        return dry_run(exp, backend, (lambda name: _complete(out_root, name)) if resume else None, exact)
    complete = {s.name for s in exp.runs if _complete(out_root, s.name)}
    if complete and not resume:
        raise ExperimentError(
            f"{len(complete)} run(s) already complete in {out_root} (e.g. {sorted(complete)[0]}):"
            " pass --resume to skip them, or remove them"
        )
    for spec in exp.runs:  # every launcher template checked before anything starts
        plan(exp, backend, spec, out_root / spec.name)
    # SIGTERM/SIGHUP unwind like Ctrl-C while hosts are driven; not during the ingest after, whose
    # commit holds off only Ctrl-C (a signal's default end is a crash the next ingest recovers from)
    with as_interrupts():
        result = _run_all(exp, backend, complete, out_root, progress or (lambda _msg: None), trust)
    ok = [o for o in result.outcomes if o.status in ("ok", "skipped")]
    if (exp.settings.ingest if ingest is None else ingest) and ok:
        from tracecore.ingest import ingest as run_ingest

        result.ingested = run_ingest([o.folder for o in ok], exp.settings.data)
    if result.failed:
        names = ", ".join(o.name for o in result.failed)
        raise RunsFailedError(
            f"{len(result.failed)} of {len(exp.runs)} run(s) failed, kept in {out_root / '_failed'}: {names}"
        )
    return result


def _run_all(
    exp: Experiment, backend: Backend, complete: set[str], out_root: Path, say: Progress, trust: str | None
) -> ExperimentResult:
    """Every run not complete yet, in order, after --trust and the loss method's probe."""
    if trust:
        names = list(exp.backend.hosts) if trust == "all" else [n for n in trust.split(",") if n]
        for line in backend.trust(names):
            say(line)
    lossy = max((s.workers for s in exp.runs if s.loss_pct > 0 and s.name not in complete), default=0)
    if lossy:  # settled once, before any run: an explicit netem the hosts lack stops everything here
        backend.loss_choice = choose_method(exp.loss_method, lambda: backend.netem_missing(lossy), exp.path)
        if backend.loss_choice == "netem":
            say(NETEM_UNTESTED)
    todo = [s for s in exp.runs if s.name not in complete]
    if todo:  # before any host is touched: each has what the runs need, or nothing starts
        backend.sweep_stale([out_root / f"{s.name}.partial" for s in todo])
        _preflight(exp, backend, max(todo, key=lambda s: s.workers), say)
    result = ExperimentResult(exp)
    for k, spec in enumerate(exp.runs, 1):
        tag = f"run {k}/{len(exp.runs)} {spec.name}"
        if spec.name in complete:
            result.outcomes.append(RunOutcome(spec.name, "skipped", out_root / spec.name, "complete"))
            say(f"{tag}: complete, skipped")
        elif result.failed and exp.settings.on_failure == "stop":
            result.outcomes.append(RunOutcome(spec.name, "not run", reason="on_failure = stop"))
        else:
            say(f"{tag}: starting on {spec.workers} host(s)")
            outcome = _run_one(exp, backend, spec, out_root, lambda msg, t=tag: say(f"{t}: {msg}"))
            say(
                f"{tag}: {outcome.status} in {outcome.seconds:.1f} s"
                + (f" ({outcome.reason})" if outcome.reason else "")
            )
            result.outcomes.append(outcome)
    return result


def _preflight(exp: Experiment, backend: Backend, spec: RunSpec, say: Progress) -> None:
    """Probe the hosts of the experiment's largest run for what its commands need (PreflightError)."""
    hosts = backend.hosts(spec.workers)
    commands = _commands(exp, backend, spec, hosts, Path(exp.settings.out) / spec.name)
    need = preflight.needs(exp, commands, backend.preflight_interfaces(exp.capture), backend.python)
    probed = backend.preflight_hosts(spec.workers)
    preflight.check_hosts(probed, need, backend.probe)
    say(f"preflight: {', '.join(h.name for h in probed)} ready ({need.describe()})")


def _run_one(exp: Experiment, backend: Backend, spec: RunSpec, out_root: Path, say: Progress) -> RunOutcome:
    started = time.time()
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    failed_to = out_root / "_failed" / f"{spec.name}-{stamp}"
    record = _record(exp, spec, started)
    try:
        with staged_run_dir(out_root, spec.name, failed_to=failed_to) as partial:
            try:
                _lifecycle(exp, backend, spec, partial, record, say)
            except TracecoreError as err:  # a host, a capture or the loss rule failed: this run only
                record["result"].update(status="failed", reason=str(err))
                raise RunFailedError(str(err)) from err
            except KeyboardInterrupt as err:  # Ctrl-C, SIGTERM, SIGHUP: cleaned up; the run is kept apart
                sig = err.signal_name if isinstance(err, Terminated) else None
                record["result"].update(status="failed", reason=f"interrupted ({sig or 'Ctrl-C'})")
                said = f"Interrupted{f' by {sig}' if sig else ''}: run {spec.name} stopped"
                left = record["result"].get("cleanup")  # what the cleanup could not undo
                said += f", kept in {failed_to}" + (f"; {left}" if left else "")
                raise Interrupted(said, getattr(err, "exit_code", ExitCode.INTERRUPTED)) from None
            finally:
                record["result"]["end_unix"] = time.time()
                record["result"]["duration_s"] = record["result"]["end_unix"] - started
                write_run_toml(partial, record)
    except RunFailedError as err:
        return RunOutcome(spec.name, "failed", failed_to, str(err), time.time() - started)
    return RunOutcome(spec.name, "ok", out_root / spec.name, None, time.time() - started)


def _record(exp: Experiment, spec: RunSpec, started: float) -> dict:
    run = {k: v for k, v in spec.fields().items() if k != "workers"}
    return {
        "run": {
            **run,
            "loss": format_loss(spec.loss_pct),
            "n_workers": spec.workers,
            "generator": "tracecore run",
            "experiment": str(exp.path.resolve()),
        },
        "launcher": _launcher_record(exp),
        "versions": {
            "tracecore": __version__,
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        "result": {"status": "running", "start_unix": started},
    }


def _launcher_record(exp: Experiment) -> dict:
    launcher = exp.launcher
    record = {"kind": launcher.kind, "epochs": launcher.epochs, "steps_per_epoch": launcher.steps_per_epoch,
              "ranks_per_host": launcher.ranks_per_host}  # fmt: skip
    if launcher.kind == "ddp":
        record.update(device=launcher.device, torch_profiler=launcher.torch_profiler)
    if launcher.nccl_profiler_plugin:
        record["nccl_profiler_plugin"] = launcher.nccl_profiler_plugin
    return record


def _lifecycle(
    exp: Experiment, backend: Backend, spec: RunSpec, run_dir: Path, record: dict, say: Progress
) -> None:
    """One run on prepared hosts; `record` becomes run.toml whatever happens."""
    try:
        hosts = backend.prepare(spec.workers)
        commands = _commands(exp, backend, spec, hosts, run_dir)
        if nccl_env.uses_nccl(spec.backend):
            record["nccl"] = nccl_env.record([dict(c.env) for c in commands], exp.launcher.env)
        offsets = measure_offsets(backend.clock_argv, hosts)
        caps = [
            (h, backend.start_capture(h, exp.capture, Path(_capture_path(backend, h, run_dir))))
            for h in (hosts if exp.capture.tcpdump else [])
        ]
        samplers = [
            backend.start_counters(h, exp.capture, Path(_counters_path(backend, h, run_dir)),
                                   run_dir / "logs" / f"{h.name}-counters.out")
            for h in (hosts if exp.capture.counters else [])
        ]  # fmt: skip
        record["capture"] = {
            "tool": "tcpdump" if exp.capture.tcpdump else "counters",
            "interface": exp.capture.interface,
            "snaplen": exp.capture.snaplen,
            "filter": exp.capture.filter,
            "start_unix": time.time(),
        }
        if exp.capture.counters:
            c = exp.capture
            record["capture"] |= {"method": c.method, "counters_interval": c.counters_interval,
                                  "counters_rdma": c.counters_rdma}  # fmt: skip
        time.sleep(IDLE_HEAD_S)
        record["loss"] = {**backend.apply_loss(hosts, spec.loss_pct), "requested": exp.loss_method}
        procs = [backend.launch(c, run_dir / "logs" / f"{c.host.name}.out") for c in commands]
        say(f"launched on {', '.join(h.name for h in hosts)}")
        why = backend.wait(procs, exp.settings.timeout_s)
        stats = [backend.stop_capture(handle) for _h, handle in caps]
        sampled = [backend.stop_counters(handle) for handle in samplers]
        if any(code not in (0, -15) for code in sampled):  # -15: its group ended by our SIGTERM
            why = why or f"the counter sampler exited {', '.join(map(str, sampled))}"
        record["capture"]["end_unix"] = time.time()
        record["network"] = backend.facts()
        backend.clear_loss()
        for h in hosts:
            backend.collect(h, run_dir)
    finally:
        _cleanup(backend, record)
    by_host = {p.host.index: p.returncode for p in procs}
    record["hosts"] = [
        {
            "name": c.host.name,
            "ip": c.host.ip,
            "interface": c.host.interface,
            "exit_code": by_host[c.host.index],
            **offsets.get(c.host.index, {}),
            "argv": list(c.argv),
            "env": dict(c.env),
        }
        for c in commands
    ]
    record["capture"]["worker"] = [
        {
            "index": h.index,
            "ip": h.ip,
            "file": st.path.name,
            "packets": st.captured or 0,
            "bytes": st.size_bytes,
            "dropped_by_kernel": st.dropped_by_kernel or 0,
            "dropped_by_interface": st.dropped_by_interface or 0,
        }
        for (h, _), st in zip(caps, stats, strict=True)
    ] or [  # counters alone: each host's sampler file pins its address, as a capture's would
        {"index": h.index, "ip": h.ip, "file": Path(_counters_path(backend, h, run_dir)).name}
        for h in (hosts if exp.capture.counters else [])
    ]
    _absorb_ddp_meta(run_dir, record)
    if why:
        failed = [p for p in procs if p.returncode not in (None, 0, -15)]
        tail = log_tail(run_dir / "logs" / f"{failed[0].host.name}.out") if failed else ""
        raise RunFailedError(f"{why}: {tail}" if tail else why)
    if not caps:
        silent = [w["file"] for w in record["capture"]["worker"] if not _has_samples(run_dir / w["file"])]
        if silent:
            raise RunFailedError(f"counters sanity: no sample in {', '.join(silent)}")
        record["result"]["status"] = "ok"
        return
    lonely = insane_captures(record["capture"]["worker"], run_dir)
    if lonely:
        raise RunFailedError(f"capture sanity: no traffic to or from another worker in {', '.join(lonely)}")
    record["result"]["status"] = "ok"


def _cleanup(backend: Backend, record: dict) -> None:
    """The backend's cleanup. During an interrupt its error goes into run.toml (`[result] cleanup`)
    instead of replacing the interrupt, which would fail only this run and go on with the next."""
    interrupt = sys.exception()
    try:
        backend.cleanup()
    except TracecoreError as err:
        if not isinstance(interrupt, KeyboardInterrupt):
            raise
        record["result"]["cleanup"] = str(err)


def log_tail(path: Path, lines: int = 3, width: int = 240) -> str:
    """The last lines of a host's log, one line for a message: control characters escaped, so a log
    cannot drive the terminal."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    shown = [safe(line)[:width] for line in kept]
    return " | ".join(shown)


def _absorb_ddp_meta(run_dir: Path, record: dict) -> None:
    """The built-in workload's model facts go into run.toml ([model]), not a stray JSON file."""
    meta_path = run_dir / DDP_META
    if not meta_path.is_file():
        return
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta_path.unlink()
    record["model"] = {"n_params": meta["n_params"], "gradient_bytes": meta["gradient_bytes"]}
    record["versions"]["torch"] = meta["torch_version"]
    record["launcher"]["mean_step_s"] = meta["mean_step_s"]
    for key, into in (("cuda_version", "cuda"), ("nccl_version", "nccl")):
        if meta.get(key):
            record["versions"][into] = meta[key]
    if meta.get("gpu"):
        record["launcher"]["gpu"] = meta["gpu"]


def _has_samples(path: Path) -> bool:
    """Whether the sampler's file holds a sample line (its header lines start with '#')."""
    try:
        with path.open("rb") as fh:
            return any(line.strip() and not line.startswith(b"#") for line in fh)
    except OSError:
        return False


def insane_captures(workers: list[dict], run_dir: Path) -> list[str]:
    """Capture files holding no packet to or from another worker (wrong interface, RDMA bypass);
    a single worker has no peer, so its run is not checked."""
    if len(workers) < 2:
        return []
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracecore.reader import read_capture

    bad = []
    for w in workers:
        others = pa.array([o["ip"] for o in workers if o is not w])
        table = read_capture(run_dir / w["file"])
        peers = pc.or_(
            pc.is_in(pc.cast(table["src_ip"], "string"), value_set=others),
            pc.is_in(pc.cast(table["dst_ip"], "string"), value_set=others),
        )
        if not pc.any(peers).as_py():
            bad.append(w["file"])
    return bad
