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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tracecore import __version__
from tracecore.errors import ExitCode, Interrupted, Terminated, TracecoreError
from tracecore.ingest.runname import format_loss
from tracecore.runners.backend import Backend, Step
from tracecore.runners.clocks import measure_offsets
from tracecore.runners.experiment import Experiment, ExperimentError, RunSpec, load_experiment
from tracecore.runners.launchers import DDP_META, HostCommand, host_commands
from tracecore.runners.loss import choose_method
from tracecore.runners.rundir import staged_run_dir, write_run_toml
from tracecore.runners.signals import as_interrupts

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
    """The experiment's backend: netns, ssh or slurm."""
    if exp.backend.kind == "ssh":
        from tracecore.runners.ssh import SshBackend

        return SshBackend(exp.backend, exp.capture.interface, exp.settings.timeout_s)
    if exp.backend.kind == "slurm":
        from tracecore.runners.slurm import SlurmBackend

        return SlurmBackend(exp.backend, exp.capture.interface, exp.settings.timeout_s)
    if exp.backend.kind != "netns":
        raise ExperimentError(
            f"{exp.path}: backend.kind: {exp.backend.kind!r} is not available yet (use netns, ssh or slurm)"
        )
    from tracecore.runners.netns import NetnsBackend

    return NetnsBackend(exp.backend)


def dry_run(exp: Experiment, backend: Backend, complete: set[str] | None = None) -> str:
    """Every command each host would run, per run, as shell lines; nothing is started."""
    out = Path(exp.settings.out)
    lines = [f"# {exp.path.name}: {len(exp.runs)} run(s) on the {backend.kind} backend"]
    backend.loss_choice = exp.loss_method  # not probed: auto shows both outcomes
    for k, spec in enumerate(exp.runs, 1):
        head = f"run {k}/{len(exp.runs)} {spec.name} ({spec.workers} host(s))"
        if spec.name in (complete or set()):
            lines.append(f"{head}: complete, skipped (--resume)")
            continue
        lines.append(head)
        for step in plan(exp, backend, spec, out / f"{spec.name}.partial"):
            text = shlex.join(step.argv) + (f" <<< {shlex.quote(step.stdin)}" if step.stdin else "")
            lines.append(f"  [{step.where}] {step.what}: {text}")
            lines += [f"    {line}".rstrip() for line in (step.script or "").splitlines()]
    return "\n".join(lines) + "\n"


def plan(exp: Experiment, backend: Backend, spec: RunSpec, run_dir: Path) -> list[Step]:
    """The ordered commands of one run, from the backend's pure builders."""
    hosts = backend.hosts(spec.workers)
    steps = [
        Step(
            h.name,
            "capture",
            tuple(backend.capture_command(h, exp.capture, _capture_path(backend, h, run_dir))),
        )
        for h in hosts
    ]
    steps += backend.loss_commands(hosts, spec.loss_pct)
    for cmd in _commands(exp, backend, spec, hosts, run_dir):
        steps.append(Step(cmd.host.name, "launch", tuple(backend.launch_command(cmd))))
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


def run_experiment(
    path: str | Path,
    *,
    dry: bool = False,
    only: str | None = None,
    resume: bool = False,
    ingest: bool | None = None,
    overrides: list[str] | None = None,
    progress: Progress | None = None,
    trust: str | None = None,
) -> ExperimentResult | str:
    """Run (or with `dry`, print) the experiment; raises RunsFailedError when any run failed.
    `trust` ("w0,w1" or "all") records those hosts' keys first (ssh)."""
    exp = load_experiment(path, overrides, only)
    backend = make_backend(exp)
    out_root = Path(exp.settings.out).resolve()
    complete = {s.name for s in exp.runs if (out_root / s.name / "run.toml").is_file()}
    if dry:
        return dry_run(exp, backend, complete if resume else None)
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
        "launcher": {
            "kind": exp.launcher.kind,
            "epochs": exp.launcher.epochs,
            "steps_per_epoch": exp.launcher.steps_per_epoch,
        },
        "versions": {
            "tracecore": __version__,
            "python": platform.python_version(),
            "kernel": platform.release(),
        },
        "result": {"status": "running", "start_unix": started},
    }


def _lifecycle(
    exp: Experiment, backend: Backend, spec: RunSpec, run_dir: Path, record: dict, say: Progress
) -> None:
    """One run on prepared hosts; `record` becomes run.toml whatever happens."""
    try:
        hosts = backend.prepare(spec.workers)
        commands = _commands(exp, backend, spec, hosts, run_dir)
        offsets = measure_offsets(backend.clock_argv, hosts)
        caps = [
            (h, backend.start_capture(h, exp.capture, Path(_capture_path(backend, h, run_dir))))
            for h in hosts
        ]
        record["capture"] = {
            "tool": "tcpdump",
            "interface": exp.capture.interface,
            "snaplen": exp.capture.snaplen,
            "filter": exp.capture.filter,
            "start_unix": time.time(),
        }
        time.sleep(IDLE_HEAD_S)
        record["loss"] = {**backend.apply_loss(hosts, spec.loss_pct), "requested": exp.loss_method}
        procs = [backend.launch(c, run_dir / "logs" / f"{c.host.name}.out") for c in commands]
        say(f"launched on {', '.join(h.name for h in hosts)}")
        why = backend.wait(procs, exp.settings.timeout_s)
        stats = [backend.stop_capture(handle) for _h, handle in caps]
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
    ]
    _absorb_ddp_meta(run_dir, record)
    if why:
        raise RunFailedError(why)
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
