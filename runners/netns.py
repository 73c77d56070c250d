"""The netns backend: the experiment's hosts are worker namespaces of a `Testbed` on this machine.

Why: it runs the whole lifecycle with real tcpdump, real loss rules and real training processes
without any cluster, so the runner is tested end to end on one box. One testbed per run, sized to
the run's worker count; every host sees the run folder directly, so collecting is nothing.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tracecore.runners.backend import (
    Backend,
    Proc,
    Step,
    capture_filter,
    counters_argv,
    env_argv,
    host_tcpdump_argv,
)
from tracecore.runners.clocks import CLOCK_LOOP
from tracecore.runners.experiment import BackendSettings, CaptureSettings
from tracecore.runners.launchers import Host, HostCommand
from tracecore.runners.loss import (
    NETEM_PROBE,
    loss_steps,
    netem_add_argv,
    netem_del_argv,
    netem_dropped,
    netem_show_argv,
)
from tracecore.runners.preflight import run_here
from tracecore.runners.testbed import CaptureStats, Testbed, TestbedError, nft_loss_ruleset

DRY_PREFIX = "tbPIDxN"  # namespace prefix shown by dry runs; real testbeds use tb<pid>x<n>


class NetnsBackend(Backend):
    """Worker namespaces 192.168.17.50+ on a bridge; loss by netem on each worker's eth1 where the
    kernel has it, else an nftables drop rule on the bridge."""

    kind = "netns"

    def __init__(self, settings: BackendSettings, python: str = sys.executable):
        self.settings = settings
        self.python = python
        self._tb: Testbed | None = None
        self._dry: Testbed | None = None
        self._procs: list[Proc] = []
        self._netem_on: list[Host] = []

    def _testbed(self, n: int | None = None) -> Testbed:
        """The live testbed, else a stand-in (never brought up) that names what a real one would."""
        if self._tb is not None:
            return self._tb
        if n is not None and (self._dry is None or self._dry.n_workers != n):
            self._dry = Testbed(
                n, subnet=self.settings.subnet, first_host=self.settings.first_host, prefix=DRY_PREFIX
            )
        if self._dry is None:
            raise RuntimeError("netns backend: hosts() comes before any command is built")
        return self._dry

    # ---- pure -----------------------------------------------------------------------------
    def hosts(self, n: int) -> list[Host]:
        tb = self._testbed(n)
        return [Host(i, f"w{i}", tb.ip(i), tb.interface) for i in range(n)]

    def host_dir(self, host: Host, run_dir: Path) -> str:
        return str(run_dir)

    def capture_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        return self._testbed().wrap(host.index, host_tcpdump_argv(host, capture, path))

    def counters_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        return self._testbed().wrap(host.index, counters_argv(self.python, capture, path))

    def loss_commands(self, hosts: list[Host], loss_pct: float) -> list[Step]:
        if loss_pct <= 0:
            return []
        tb = self._testbed(len(hosts))
        argv, stdin = tb.loss_command(loss_pct)
        netem = [Step(h.name, "loss", tuple(tb.wrap(h.index, add)), shown=tuple(add))
                 for h in hosts for add in [netem_add_argv(h.interface, loss_pct)]]  # fmt: skip
        probe = [Step("local", "probe", NETEM_PROBE)]
        bridge = Step("bridge", "loss", tuple(argv), stdin, shown=tuple(argv[argv.index("nft") :]))
        return loss_steps(self.loss_choice, probe, netem, [bridge])

    def transport(self) -> str:
        first = self.hosts(1)[0].ip
        return (
            f"each worker is a network namespace on this machine (eth1 at {first} and up, bridged);"
            " its commands run there with `ip netns exec` (--exact shows it)"
        )

    def launch_command(self, cmd: HostCommand) -> list[str]:
        return self._testbed().wrap(cmd.host.index, env_argv(cmd))

    # ---- effects --------------------------------------------------------------------------
    def preflight_hosts(self, n: int) -> list[Host]:
        """One probe: the namespaces share this machine's files and interpreters."""
        return [Host(0, "this machine", "", "")]

    def preflight_interfaces(self, capture: CaptureSettings) -> tuple[str, str]:
        return "", ""  # the testbed makes eth1 in each namespace

    def probe(self, host: Host, argv: list[str]) -> str | None:
        return run_here(argv, host.name)

    def prepare(self, n: int) -> list[Host]:
        self.cleanup()
        tb = Testbed(n_workers=n, subnet=self.settings.subnet, first_host=self.settings.first_host)
        tb.__enter__()
        self._tb = tb
        return self.hosts(n)

    def start_capture(self, host: Host, capture: CaptureSettings, path: Path) -> object:
        return self._up().start_capture(
            host.index, path, snaplen=capture.snaplen, buffer_kib=capture.buffer_kib,
            bpf=capture_filter(host, capture), interface=capture.interface,
        )  # fmt: skip

    def stop_capture(self, handle: object) -> CaptureStats:
        return self._up().stop_capture(handle, check=False)  # type: ignore[arg-type]

    def start_counters(self, host: Host, capture: CaptureSettings, path: Path, log: Path) -> object:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            popen = self._up().popen(host.index, counters_argv(self.python, capture, str(path)), stdout=out,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip
        proc = Proc(host, popen, log)
        self._procs.append(proc)
        sampling(path, lambda: popen.poll(), log, host.name)
        return proc

    def stop_counters(self, handle: object) -> int | None:
        self.stop(handle)  # type: ignore[arg-type]
        return handle.handle.returncode  # type: ignore[attr-defined]

    def apply_loss(self, hosts: list[Host], loss_pct: float) -> dict:
        tb = self._up()
        if loss_pct <= 0 or self.loss_choice == "none":
            return {"method": "none", "loss_pct": float(loss_pct)}
        if self.loss_choice == "netem":
            for h in hosts:
                self._netem_on.append(h)
                tb.exec(h.index, netem_add_argv(h.interface, loss_pct))
            rule = shlex.join(netem_add_argv(hosts[0].interface, loss_pct))
            return {"method": "netem", "loss_pct": float(loss_pct), "rule": rule,
                    "where": "each worker's egress"}  # fmt: skip
        tb.set_loss(loss_pct)
        rule = nft_loss_ruleset(loss_pct).splitlines()[3].strip()
        return {"method": "nftables", "loss_pct": float(loss_pct), "rule": rule, "where": "bridge forward"}

    def clear_loss(self) -> None:
        for h in self._netem_on:
            if self._tb is not None:
                self._tb.exec(h.index, netem_del_argv(h.interface), check=False)
        self._netem_on.clear()
        if self._tb is not None and self._tb.loss_pct > 0:
            self._tb.set_loss(0.0)

    def netem_missing(self, n: int) -> str | None:
        """The probe on this machine (the namespaces share its kernel)."""
        try:
            proc = subprocess.run(NETEM_PROBE, capture_output=True, text=True, timeout=30, check=False)
        except FileNotFoundError as err:
            return f"this machine cannot probe netem ({err.filename} not found)"
        if proc.returncode == 0:
            return None
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        return f"this machine's kernel has no netem ({shlex.join(NETEM_PROBE)}: {last})"

    def clock_argv(self, host: Host) -> list[str] | None:
        return self._up().wrap(host.index, ["sh", "-c", CLOCK_LOOP])

    def launch(self, cmd: HostCommand, log: Path) -> Proc:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            popen = self._up().popen(cmd.host.index, env_argv(cmd), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=log.parent)  # fmt: skip
        proc = Proc(cmd.host, popen, log)
        self._procs.append(proc)
        return proc

    def poll(self, proc: Proc) -> int | None:
        return proc.handle.poll()  # type: ignore[attr-defined]

    def stop(self, proc: Proc) -> None:
        popen: subprocess.Popen = proc.handle  # type: ignore[assignment]
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=5)

    def collect(self, host: Host, run_dir: Path) -> None:
        """Nothing to fetch: the namespaces share this machine's filesystem."""

    def facts(self) -> dict:
        tb = self._up()
        if not self._netem_on:
            return {**tb.network_facts(), "loss_method": "nftables" if tb.loss_pct else "none"}
        shown = [tb.exec(h.index, netem_show_argv(h.interface)).stdout for h in self._netem_on]
        return {**tb.network_facts(sum(map(netem_dropped, shown))), "loss_method": "netem"}

    def cleanup(self) -> None:
        for proc in self._procs:
            with contextlib.suppress(Exception):
                self.stop(proc)
        self._procs.clear()
        self._netem_on.clear()  # the qdiscs go with the namespaces
        tb, self._tb = self._tb, None
        if tb is not None:
            tb.__exit__(None, None, None)

    def _up(self) -> Testbed:
        if self._tb is None:
            raise RuntimeError("netns backend used before prepare()")
        return self._tb


SAMPLER_START_S = 20.0  # a Python start-up on a loaded host, then its first sample


def sampling(path: Path, exited: Callable[[], int | None], log: Path, host: str) -> None:
    """Return once the sampler's file holds a sample (it samples before training starts, as tcpdump
    captures); its exit or SAMPLER_START_S without one is this run's failure, naming its output."""
    deadline = time.monotonic() + SAMPLER_START_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if any(not line.startswith("#") for line in path.read_text(errors="replace").splitlines()):
                return
        code = exited()
        if code is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise TestbedError(f"{host}: the counter sampler exited {code}: {' '.join(tail) or 'no output'}")
        time.sleep(0.05)
    raise TestbedError(f"{host}: the counter sampler wrote no sample within {SAMPLER_START_S:g} s ({path})")
