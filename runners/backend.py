"""The one interface every place that runs training implements: netns, ssh and slurm.

Why one interface: a run's lifecycle (capture on, loss on, launch, wait, capture off, loss off,
collect, clean up; `tracecore.runners.execute`) is the same wherever the hosts are; only how a
command reaches a host differs. Each backend has two halves:

- pure builders (`hosts`, `host_dir`, `capture_command`, `loss_commands`, `launch_command`) that
  say exactly which argv a host runs: a dry run prints them, a real run executes the same lists;
- effects (`prepare`, `start_capture`/`stop_capture`, `apply_loss`/`clear_loss`, `launch`, `poll`,
  `stop`, `collect`, `cleanup`), where `cleanup` undoes everything and is safe to call twice.

How ssh and slurm fit: ssh's `launch_command` is `ssh -o
BatchMode=yes -o StrictHostKeyChecking=yes -o ControlMaster=auto … -- HOST shlex.join([sh, -c, SPAWN,
…, timeout, DEADLINE, env, K=V, …, argv])` (detached, its process group id in a pidfile), `poll`/`stop`
are separate ssh calls reading the pidfile and killing the group by its recorded id, `collect` is scp
plus a size check;
slurm's `submission` bundles the run's steps into one batch script, `wait` submits it (`sbatch
--parsable`), `poll` reads `squeue`/`scontrol`, `stop` is `scancel`, `collect` is nothing (shared
filesystem); see `tracecore.runners.slurm`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tracecore.runners.experiment import CaptureSettings, ExperimentError
from tracecore.runners.launchers import Host, HostCommand, fill_template
from tracecore.runners.testbed import CaptureStats, tcpdump_argv


@dataclass
class Proc:
    """A launched host command: the backend's handle (a Popen, a remote process group, a job id)."""

    host: Host
    handle: object
    log: Path
    returncode: int | None = None


@dataclass(frozen=True)
class Step:
    """One command of a dry run: where it runs, what it is for, the argv and any stdin it is fed."""

    where: str
    what: str
    argv: tuple[str, ...]  # exactly what tracecore starts here (ssh, ip netns exec, sbatch… included)
    stdin: str | None = None
    script: str | None = None  # the file the step submits (slurm's batch script), shown by --exact
    shown: tuple[str, ...] | None = None  # the command as the host runs it (None: argv itself)
    parts: tuple[Step, ...] = ()  # the steps a submission bundles (slurm: one srun step per command)


class Backend(ABC):
    """Hosts, processes, captures and loss for one experiment; see the module docstring."""

    kind: ClassVar[str]
    python: str  # interpreter the built-in workload runs with on the hosts
    poll_interval_s: ClassVar[float] = 0.1  # how often `wait` polls (a remote poll is one ssh call)

    # ---- pure builders --------------------------------------------------------------------
    @abstractmethod
    def hosts(self, n: int) -> list[Host]:
        """The first n hosts, named and addressed as the commands will see them."""

    @abstractmethod
    def host_dir(self, host: Host, run_dir: Path) -> str:
        """The folder host writes its capture and logs into for a run staged at run_dir."""

    @abstractmethod
    def capture_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        """The tcpdump command on host, writing path."""

    @abstractmethod
    def loss_commands(self, hosts: list[Host], loss_pct: float) -> list[Step]:
        """The commands that make the network drop loss_pct % of packets between the hosts."""

    @abstractmethod
    def launch_command(self, cmd: HostCommand) -> list[str]:
        """The launcher's argv and env as the command actually started for the host."""

    def transport(self) -> str:
        """How the commands reach the hosts, for a dry run's header (what --exact spells out)."""
        return "each command runs as shown"

    def address_note(self, n: int) -> str | None:
        """Where the hosts' addresses shown by a dry run come from, when they are not known yet."""
        return None

    def submission(self, steps: list[Step], run_dir: Path) -> list[Step]:
        """The run's steps as this backend hands them over: one by one (netns, ssh), or bundled into
        one batch script submitted once (slurm)."""
        return steps

    # ---- effects --------------------------------------------------------------------------
    @abstractmethod
    def prepare(self, n: int) -> list[Host]:
        """Make n hosts ready (namespaces, connections, scratch folders, tool probes); returns them."""

    @abstractmethod
    def start_capture(self, host: Host, capture: CaptureSettings, path: Path) -> object:
        """Start tcpdump and return once it is capturing."""

    @abstractmethod
    def stop_capture(self, handle: object) -> CaptureStats:
        """Stop a capture and report its packet and kernel-drop counts."""

    def counters_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        """The counter sampler's argv as started for host, writing path (a dry run shows it)."""
        raise ExperimentError(f"capture.method: the {self.kind} backend does not run the counter sampler")

    def start_counters(self, host: Host, capture: CaptureSettings, path: Path, log: Path) -> object:
        """Start the counter sampler on host, its output in log; returns its handle."""
        raise ExperimentError(f"capture.method: the {self.kind} backend does not run the counter sampler")

    def stop_counters(self, handle: object) -> int | None:
        """Stop the sampler (SIGTERM: it writes its last line and exits 0); returns its exit code."""
        raise ExperimentError(f"capture.method: the {self.kind} backend does not run the counter sampler")

    @abstractmethod
    def apply_loss(self, hosts: list[Host], loss_pct: float) -> dict:
        """Install the loss; returns facts for run.toml (method, rule)."""

    @abstractmethod
    def clear_loss(self) -> None:
        """Remove any loss this backend installed; idempotent."""

    @abstractmethod
    def launch(self, cmd: HostCommand, log: Path) -> Proc:
        """Start the host's command detached, its output in log."""

    @abstractmethod
    def poll(self, proc: Proc) -> int | None:
        """The exit code, or None while it runs."""

    @abstractmethod
    def stop(self, proc: Proc) -> None:
        """Terminate the command and everything it started; idempotent."""

    @abstractmethod
    def collect(self, host: Host, run_dir: Path) -> None:
        """Bring the host's files for the run into run_dir (and check their sizes)."""

    @abstractmethod
    def cleanup(self) -> None:
        """Undo everything prepare and the run did on every host; also after failures."""

    @abstractmethod
    def facts(self) -> dict:
        """The network and hosts as run.toml's [network] table."""

    # ---- shared ---------------------------------------------------------------------------
    def trust(self, names: list[str]) -> list[str]:
        """Record the host keys of `names` (`tracecore run --trust`); one line per host for the user."""
        raise ExperimentError(f"--trust: the {self.kind} backend has no host keys to verify")

    def wait(self, procs: list[Proc], timeout_s: float, tick_s: float | None = None) -> str | None:
        """Wait for every proc; the first failure or the timeout stops the rest. Returns why it
        stopped early (None when all exited 0); exit codes are left in each Proc."""
        deadline = time.monotonic() + timeout_s
        why = None
        while True:
            for p in procs:
                if p.returncode is None:
                    p.returncode = self.poll(p)
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed:
                why = f"{failed[0].host.name} exited {failed[0].returncode}"
            elif time.monotonic() > deadline and any(p.returncode is None for p in procs):
                why = f"timeout after {timeout_s:g} s"
            if why or all(p.returncode == 0 for p in procs):
                break
            time.sleep(self.poll_interval_s if tick_s is None else tick_s)
        if why:
            for p in procs:
                if p.returncode is None:
                    self.stop(p)
                    p.returncode = self.poll(p)
        return why

    # ---- loss method and host clocks (defaults: a backend with neither netem nor clock reads) --------
    # what apply_loss installs (netem | nftables | none), settled before the first run by
    # `tracecore.runners.loss.choose_method`; a dry run sets the requested method (auto shows both outcomes)
    loss_choice: str = "nftables"

    def netem_missing(self, n: int) -> str | None:
        """Why netem cannot drop packets on the first n hosts, or None when it can."""
        return f"the {self.kind} backend does not install netem"

    def clock_argv(self, host: Host) -> list[str] | None:
        """The command, run here, that starts `tracecore.runners.clocks.CLOCK_LOOP` on host (None:
        this backend reads no clocks)."""
        return None

    # ---- preflight (tracecore.runners.preflight) -------------------------------------------------
    def sweep_stale(self, run_dirs: list[Path]) -> None:  # noqa: B027 - most backends have nothing to sweep
        """End what an earlier runner of these run folders left holding the hosts (`--resume`)."""

    def preflight_hosts(self, n: int) -> list[Host]:
        """The hosts to probe before the first run of n hosts."""
        return self.hosts(n)

    def preflight_interfaces(self, capture: CaptureSettings) -> tuple[str, str]:
        """The address and capture interfaces each host must have ('' when the backend makes them)."""
        return capture.address_interface or capture.interface, capture.interface

    @abstractmethod
    def probe(self, host: Host, argv: list[str]) -> str | None:
        """Run the preflight probe's argv on host (nothing else is started there) and return its output."""


def env_argv(cmd: HostCommand) -> list[str]:
    """`env K=V … argv`: the added environment travels in the argv, so what is shown is what runs."""
    return ["env", *(f"{k}={v}" for k, v in cmd.env), *cmd.argv] if cmd.env else list(cmd.argv)


def capture_filter(host: Host, capture: CaptureSettings) -> str:
    """The host's BPF filter: `capture.filter` with {ip}, {host} and {interface} filled in."""
    values = {"ip": host.ip, "host": host.name, "interface": host.interface}
    return fill_template(capture.filter, values, "capture.filter")


def counters_argv(python: str, capture: CaptureSettings, path: str) -> list[str]:
    """The NIC counter sampler a host runs beside tcpdump, writing path (runners/counters.py)."""
    interface = capture.address_interface or capture.interface
    return [python, "-m", "tracecore.runners.counters", "--interface", interface, "--interval",
            capture.counters_interval, "--rdma", capture.counters_rdma, "--out", path]  # fmt: skip


def host_tcpdump_argv(host: Host, capture: CaptureSettings, path: str) -> list[str]:
    """The tcpdump command a host runs for the capture settings, writing path."""
    bpf = capture_filter(host, capture)
    return tcpdump_argv(capture.interface, capture.snaplen, capture.buffer_kib, path, bpf)
