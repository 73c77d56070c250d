"""The ssh backend: the experiment's hosts are machines reached with the system OpenSSH client.

Why the system client in a subprocess: users keep their `~/.ssh/config` (aliases, User, Port,
ProxyJump, keys, agent, certificates) for free, and it is the client mpirun and pdsh use. Every call
adds `BatchMode=yes`, `StrictHostKeyChecking=yes` against the runner's known_hosts (`--trust`
records new keys; a changed key is always refused), keep-alives and ControlMaster reuse (one
connection per host, the socket in a short private folder). `-F` is passed only when the experiment
names an ssh_config (the tests do).

Every remote command is an argv list joined once with `shlex.join`; values never enter a shell
script's text: the few fixed scripts below (`_SPAWN`, `_POLL`, `_STOP`, …) receive them as
positional parameters (`sh -c SCRIPT sh ARG…`), so quotes, `$`, `;` and blanks arrive intact.

Remote processes (tcpdump, the training command, the loss rule's guard) start detached with
`setsid -f timeout -k 10 DEADLINE sh -c 'record pgid; "$@"; record exit code'` in
`<workdir>/<run>/.tracecore/`: the process group id is recorded in a pidfile before anything runs,
`timeout` is a dead-man switch that ends the whole group if the runner dies (SIGKILL, lost network),
and stopping kills the group by its recorded id in a separate ssh call (SSH does not deliver signals
reliably). Collection copies the host's run folder with scp, compares every size with the remote
listing, and only then is the remote scratch deleted. Leftovers of a runner that died are swept by
the next `prepare` on the same host (by the recorded ids), which is what `tracecore run --resume` does.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tracecore.errors import ExitCode, TracecoreError
from tracecore.runners.backend import Backend, Proc, Step, counters_argv, env_argv, host_tcpdump_argv
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
from tracecore.runners.preflight import TIMEOUT_S as PREFLIGHT_TIMEOUT_S
from tracecore.runners.testbed import CaptureStats, pid_alive, read_tcpdump_report

LOSS_TABLE = "tracecore_loss"
BOOK = ".tracecore"  # per-run bookkeeping folder on each host: pidfiles, exit codes, outputs
TOOLS = ("sh", "setsid", "timeout", "tcpdump", "ip", "ps", "awk", "find")
SSH_TIMEOUT_S = 60.0  # one ssh call (not the training: that runs detached)
IFACE_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")

# Start "$@" detached in its own session (pgid = the pid of `timeout`), output in $b.out; wait
# (bounded) for the pidfile the inner shell writes, and print the group id.
_SPAWN = (
    'b=$1; shift; d=${b%/*}; mkdir -p "$d" && cd "$d/.." || exit 90; rm -f "$b.pid" "$b.rc"; '
    'setsid -f "$@" </dev/null >"$b.out" 2>&1; i=0; '
    'while [ ! -s "$b.pid" ]; do i=$((i+1)); '
    'if [ $i -gt 150 ]; then echo "no pidfile $b.pid" >&2; exit 91; fi; sleep 0.1; done; cat "$b.pid"'
)
# Runs under `timeout`, whose pid is the group id: record it, run the command, record its exit code.
_RECORD = 'b=$0; echo $PPID >"$b.pid.new" && mv "$b.pid.new" "$b.pid"; "$@"; echo $? >"$b.rc"'
# Is anything of group $1 still running (zombies do not count)?
_ALIVE = "alive() { ps -e -o pgid=,stat= | awk -v g=\"$1\" '$1==g && $2 !~ /^Z/ {f=1} END {exit !f}'; }; "
# Liveness first, the exit code second: the code is written before the group ends, so a group found
# gone has its code on disk by the time it is read (the other order calls a command that ends
# between the two looks "gone").
_POLL = (
    _ALIVE + 'b=$1; if [ -s "$b.pid" ] && alive "$(cat "$b.pid")"; then s=running; else s=gone; fi; '
    'if [ -s "$b.rc" ]; then echo "rc $(cat "$b.rc")"; else echo "$s"; fi'
)
# Signal group $2's members with $3, wait up to 10 s for them to end, then SIGKILL what remains.
_STOP = (
    _ALIVE + 'b=$1 s=$2; [ -s "$b.pid" ] || exit 0; g=$(cat "$b.pid"); alive "$g" || exit 0; '
    'kill -s "$s" -- "-$g" 2>/dev/null; i=0; while alive "$g"; do i=$((i+1)); '
    'if [ $i -gt 100 ]; then kill -s KILL -- "-$g" 2>/dev/null; sleep 0.2; exit 0; fi; sleep 0.1; done'
)
_LISTENING = (
    'i=0; until grep -q "listening on" "$1" 2>/dev/null; do i=$((i+1)); '
    'if [ $i -gt 150 ] || ! { [ -s "$2" ] && [ ! -s "$3" ]; }; then cat "$1" 2>/dev/null; exit 1; fi; '
    "sleep 0.1; done"
)
# Wait until the counter sampler's file $1 holds a sample line (20 s); its group's pid file $2 and exit
# code $3 as for tcpdump; on failure print its output $4.
_SAMPLING = (
    'i=0; until grep -qv "^#" "$1" 2>/dev/null; do i=$((i+1)); '
    'if [ $i -gt 200 ] || ! { [ -s "$2" ] && [ ! -s "$3" ]; }; then cat "$4" 2>/dev/null; exit 1; fi; '
    "sleep 0.1; done"
)
_PROBE = (
    'w=$1 f=$2; shift 2; for t in "$@"; do command -v "$t" >/dev/null || { echo "missing $t"; exit 92; }; '
    'done; mkdir -p "$w" && ip -4 -o addr show dev "$f" || exit 93; for o in "$w"/*/' + BOOK + "/runner; do "
    '[ -f "$o" ] || continue; r=${o%/*}; r=${r%/*}; printf "runner %s %s\\n" "${r##*/}" "$(cat "$o")"; done'
)
# Kill every recorded group under the stale run folders $2… of workdir $1, then remove them.
_SWEEP = (
    _ALIVE
    + 'w=$1; shift; for r in "$@"; do for p in "$w/$r/'
    + BOOK
    + '"/*.pid; do [ -s "$p" ] || continue; '
    'g=$(cat "$p"); alive "$g" && kill -s KILL -- "-$g" 2>/dev/null; done; rm -rf -- "${w:?}/$r"; done; '
    "nft delete table inet " + LOSS_TABLE + " 2>/dev/null; true"
)
_QUIET = '"$@" 2>/dev/null; true'  # a clean-up step that may find nothing to remove
_NETEM_OK = '"$@" 2>&1 && echo netem-ok; true'  # the probe's answer, whatever it exits with
_LIST = 'cd "$1" && find . -type f ! -name "*.pid" ! -name "*.rc" ! -name runner -printf "%s %P\\n"'


class SshError(TracecoreError):
    """A host cannot be reached, refuses the runner (host key, login), or a remote step failed."""

    exit_code = ExitCode.TESTBED


@dataclass
class Remote:
    """A detached remote process group: where its bookkeeping files live (`<base>.pid/.rc/.out`)."""

    host: Host
    base: str
    pgid: int  # 0 until the start is confirmed


class SshBackend(Backend):
    """Hosts are ssh_config aliases; scratch in `<workdir>/<run>/`; loss by netem or an nft egress drop
    rule on the capture interface."""

    kind = "ssh"
    poll_interval_s = 1.0

    def __init__(self, settings: BackendSettings, interface: str, timeout_s: float, python: str = "python3"):
        if not IFACE_NAME.match(interface):
            raise SshError(f"capture.interface {interface!r} is not an interface name")
        self.settings = settings
        self.interface = interface
        self.python = python
        self.deadline_s = int(timeout_s + settings.deadman_margin_s)
        # shown and passed to ssh as written (ssh expands `~` itself); expanded here for file operations
        self.known_hosts = settings.known_hosts or "~/.config/tracecore/known_hosts"
        self.control_dir = settings.control_dir or "~/.cache/tracecore/ssh"
        self._ips: dict[int, str] = {}
        self._run = ""
        self._touched: list[Host] = []
        self._groups: list[Remote] = []
        self._loss_hosts: list[Host] = []
        self._keep: set[int] = set()  # hosts whose files did not all arrive: scratch kept
        self._stats: dict[int, CaptureStats] = {}

    # ---- ssh argv -------------------------------------------------------------------------
    def _options(self) -> list[str]:
        opts = ["-F", self.settings.ssh_config] if self.settings.ssh_config else []
        for o in (
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            f"UserKnownHostsFile={self.known_hosts}",
            "ConnectTimeout=10",
            "ServerAliveInterval=15",
            "ServerAliveCountMax=3",
            "ControlMaster=auto",
            f"ControlPath={self.control_dir}/%C",
            "ControlPersist=60",
        ):
            opts += ["-o", o]
        return opts

    def ssh_argv(self, host: Host | str, argv: list[str]) -> list[str]:
        """`ssh OPTIONS -- HOST 'argv joined once'`: the one place a remote command is built."""
        name = host if isinstance(host, str) else host.name
        return ["ssh", *self._options(), "--", name, shlex.join(argv)]

    def _spawn_argv(self, base: str, argv: list[str], extra_s: int = 0) -> list[str]:
        deadline = str(self.deadline_s + extra_s)
        return [
            "sh",
            "-c",
            _SPAWN,
            "sh",
            base,
            "timeout",
            "-k",
            "10",
            deadline,
            "sh",
            "-c",
            _RECORD,
            base,
            *argv,
        ]

    # ---- pure -----------------------------------------------------------------------------
    def hosts(self, n: int) -> list[Host]:
        names = self.settings.hosts
        if n > len(names):
            raise SshError(f"a run needs {n} hosts; backend.hosts lists {len(names)}")
        ips = self.settings.ips

        def ip(i: int) -> str:  # probed by prepare, else backend.ips, else a placeholder (dry run)
            return self._ips.get(i) or (ips[i] if i < len(ips) else f"<{names[i]}:{self.interface}>")

        return [Host(i, names[i], ip(i), self.interface) for i in range(n)]

    def host_dir(self, host: Host, run_dir: Path) -> str:
        return f"{self.settings.workdir}/{run_dir.name.removesuffix('.partial')}"

    def _base(self, host: Host, what: str) -> str:
        return f"{self.settings.workdir}/{self._run}/{BOOK}/{what}"

    def capture_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        self._run = Path(path).parent.name
        return self.ssh_argv(
            host, self._spawn_argv(self._base(host, "capture"), host_tcpdump_argv(host, capture, path))
        )

    def counters_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        self._run = Path(path).parent.name
        argv = counters_argv(self.python, capture, path)
        return self.ssh_argv(host, self._spawn_argv(self._base(host, "counters"), argv))

    def loss_commands(self, hosts: list[Host], loss_pct: float) -> list[Step]:
        if loss_pct <= 0:
            return []
        nft_argv = ["nft", "-f", "-"]
        netem_argv = netem_add_argv(self.interface, loss_pct)
        rules = self.ruleset(loss_pct)
        nft = [Step(h.name, "loss", tuple(self.ssh_argv(h, nft_argv)), rules, shown=tuple(nft_argv))
               for h in hosts]  # fmt: skip
        netem = [Step(h.name, "loss", tuple(self.ssh_argv(h, netem_argv)), shown=tuple(netem_argv))
                 for h in hosts]  # fmt: skip
        probe = [Step(h.name, "probe", tuple(self.ssh_argv(h, self._probe_argv())), shown=NETEM_PROBE)
                 for h in hosts]  # fmt: skip
        return loss_steps(self.loss_choice, probe, netem, nft)

    def transport(self) -> str:
        return (
            f"each command runs on its host over ssh (BatchMode, StrictHostKeyChecking against"
            f" {self.known_hosts}), started detached in {self.settings.workdir}/RUN/ under"
            f" `timeout {self.deadline_s}` (the dead-man switch: timeout_s + deadman_margin_s)"
        )

    def address_note(self, n: int) -> str | None:
        if len(self.settings.ips) >= n:
            return None
        return (
            f"addresses: read from {self.interface} on each host when a run starts, shown as"
            f" <host:{self.interface}> (backend.ips pins them)"
        )

    def _probe_argv(self) -> list[str]:
        return ["sh", "-c", _NETEM_OK, "sh", *NETEM_PROBE]

    def _clear_argv(self) -> list[str]:
        """What removes this run's loss on a host (the guard runs it at the deadline)."""
        if self.loss_choice == "netem":
            return netem_del_argv(self.interface)
        return ["nft", "delete", "table", "inet", LOSS_TABLE]

    def ruleset(self, loss_pct: float) -> str:
        """Drop loss_pct % of the frames leaving the capture interface (0.1 % resolution)."""
        return egress_loss_ruleset(self.interface, loss_pct)

    def launch_command(self, cmd: HostCommand) -> list[str]:
        return self.ssh_argv(cmd.host, self._spawn_argv(self._base(cmd.host, "train"), env_argv(cmd)))

    # ---- one ssh call ---------------------------------------------------------------------
    def _call(self, host: Host | str, argv: list[str], what: str, stdin: str | None = None,
              timeout: float = SSH_TIMEOUT_S) -> str:  # fmt: skip
        full = self.ssh_argv(host, argv)
        self._control_dir()
        try:
            proc = subprocess.run(
                full, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired:
            raise SshError(f"{_name(host)}: {what}: no answer within {timeout:g} s") from None
        if proc.returncode != 0:
            raise SshError(f"{_name(host)}: {what}: {self._explain(host, proc)}")
        return proc.stdout

    def _explain(self, host: Host | str, proc: subprocess.CompletedProcess) -> str:
        err = proc.stderr.strip()
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in err or (
            "Host key for" in err and "has changed" in err
        ):
            return (
                f"its host key changed, refused (if the change is expected: ssh-keygen -f {self.known_hosts}"
                f" -R HOST, then --trust {_name(host)})"
            )
        if "Host key verification failed" in err or "No ED25519 host key is known" in err:
            return (
                f"its host key is not in {self.known_hosts}: run with --trust {_name(host)} (or ssh-keyscan)"
            )
        if proc.returncode == 255:
            last = err.splitlines()[-1] if err else "ssh failed"
            return f"unreachable ({last})"
        tail = " | ".join((err or proc.stdout.strip()).splitlines()[-3:])
        return f"exited {proc.returncode}: {tail}"

    def _control_dir(self) -> None:
        """The ControlMaster socket folder: created 0700, and refused unless it is ours and private."""
        path = Path(self.control_dir).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        st = path.lstat()
        if not path.is_dir() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise SshError(f"{path}: the ssh control folder must be a private directory owned by this user")

    # ---- effects --------------------------------------------------------------------------
    def trust(self, names: list[str]) -> list[str]:
        """Record new host keys in the runner's known_hosts through the user's ssh configuration
        (aliases, ProxyJump: what ssh-keyscan cannot follow); a key that changed stays refused."""
        known = Path(self.known_hosts).expanduser()
        known.parent.mkdir(parents=True, exist_ok=True)
        known.touch()
        lines = []
        for name in names:
            swap = {
                "StrictHostKeyChecking=yes": "StrictHostKeyChecking=accept-new",
                "ControlMaster=auto": "ControlMaster=no",
            }
            opts = [swap.get(o, o) for o in self._options()]
            full = ["ssh", *opts, "--", name, "true"]
            self._control_dir()
            proc = subprocess.run(full, capture_output=True, text=True, timeout=SSH_TIMEOUT_S, check=False)
            if proc.returncode != 0:
                raise SshError(f"{name}: --trust: {self._explain(name, proc)}")
            lines.append(f"trusted {name}: {self._fingerprint(name)}")
        return lines

    def _fingerprint(self, name: str) -> str:
        conf = subprocess.run(["ssh", *self._options(), "-G", "--", name], capture_output=True, text=True,
                              timeout=SSH_TIMEOUT_S, check=False).stdout  # fmt: skip
        cfg = dict(line.split(" ", 1) for line in conf.splitlines() if " " in line)
        key = cfg.get("hostkeyalias") or cfg.get("hostname", name)
        if cfg.get("port", "22") != "22":
            key = f"[{key}]:{cfg['port']}"
        known = os.path.expanduser(self.known_hosts)
        out = subprocess.run(["ssh-keygen", "-l", "-F", key, "-f", known], capture_output=True,
                             text=True, timeout=SSH_TIMEOUT_S, check=False).stdout  # fmt: skip
        prints = [line.split(" ", 1)[1] for line in out.splitlines() if line and not line.startswith("#")]
        return f"{key} " + "; ".join(prints)

    def prepare(self, n: int) -> list[Host]:
        """Reach every host (fail fast), probe tools and the capture address, sweep what a dead
        runner left there (by its recorded ids), create the run's scratch folder."""
        self.cleanup()
        hosts = self.hosts(n)
        me = socket.gethostname()
        for h in hosts:
            out = self._call(h, ["sh", "-c", _PROBE, "sh", self.settings.workdir, self.interface, *TOOLS],
                             "prepare", timeout=30)  # fmt: skip
            self._touched.append(h)
            m = re.search(r"\binet (\d+\.\d+\.\d+\.\d+)/", out)
            if m is None:
                raise SshError(f"{h.name}: no IPv4 address on {self.interface}")
            want = self.settings.ips[h.index] if self.settings.ips else m.group(1)
            if want != m.group(1):
                raise SshError(f"{h.name}: {self.interface} has {m.group(1)}, not {want} (backend.ips)")
            self._ips[h.index] = m.group(1)
            stale = _stale_runs(out, me)
            if stale:
                self._call(h, ["sh", "-c", _SWEEP, "sh", self.settings.workdir, *stale], "sweep stale runs")
                if self.loss_choice == "netem":  # a dead runner's netem (its nft table went above)
                    self._call(h, ["sh", "-c", _QUIET, "sh", *netem_del_argv(self.interface)], "sweep netem")
        return self.hosts(n)

    def _begin(self, host: Host) -> None:
        """The run's folder and its owner line (this runner), created once per host."""
        marker = f"{self.settings.workdir}/{self._run}/{BOOK}/runner"
        self._call(host, ["sh", "-c", 'mkdir -p "${1%/*}" && echo "$2" >"$1"', "sh", marker,
                          f"{socket.gethostname()} {os.getpid()}"], "create the run folder")  # fmt: skip

    def _spawn(self, host: Host, what: str, argv: list[str], extra_s: int = 0) -> Remote:
        base = self._base(host, what)
        # recorded before it starts: stopping reads the pidfile, so a group whose start an interrupt cut
        # short (it runs, its id not read back yet) is still stopped by cleanup
        group = Remote(host, base, 0)
        self._groups.append(group)
        out = self._call(host, self._spawn_argv(base, argv, extra_s), f"start {what}")
        group.pgid = int(out.split()[-1])
        return group

    def start_capture(self, host: Host, capture: CaptureSettings, path: Path) -> object:
        self._run = path.parent.name.removesuffix(".partial")
        self._begin(host)
        remote = f"{self.host_dir(host, path.parent)}/{path.name}"
        group = self._spawn(host, "capture", host_tcpdump_argv(host, capture, remote))
        try:
            self._call(host, ["sh", "-c", _LISTENING, "sh", f"{group.base}.out", f"{group.base}.pid",
                              f"{group.base}.rc"], "start tcpdump", timeout=30)  # fmt: skip
        except SshError as err:
            raise SshError(f"{err} (tcpdump is not capturing)") from None
        return (group, path)

    def stop_capture(self, handle: object) -> CaptureStats:
        group, path = handle  # type: ignore[misc]
        self._stop(group, "INT")
        text = self._call(group.host, ["cat", f"{group.base}.out"], "read the tcpdump report")
        stats = read_tcpdump_report(CaptureStats(path=path), text)
        self._stats[group.host.index] = stats  # its path becomes the local copy's in collect
        return stats

    def start_counters(self, host: Host, capture: CaptureSettings, path: Path, log: Path) -> object:
        self._run = path.parent.name.removesuffix(".partial")
        self._begin(host)
        remote = f"{self.host_dir(host, path.parent)}/{path.name}"
        group = self._spawn(host, "counters", counters_argv(self.python, capture, remote))
        try:
            self._call(host, ["sh", "-c", _SAMPLING, "sh", remote, f"{group.base}.pid", f"{group.base}.rc",
                              f"{group.base}.out"], "start the counter sampler", timeout=30)  # fmt: skip
        except SshError as err:
            raise SshError(f"{err} (the counter sampler is not sampling)") from None
        return group

    def stop_counters(self, handle: object) -> int | None:
        group: Remote = handle  # type: ignore[assignment]
        self._stop(group, "TERM")
        state = self._call(
            group.host, ["sh", "-c", _POLL, "sh", group.base], "poll the counter sampler"
        ).split()
        return int(state[1]) if state[:1] == ["rc"] else -15

    def apply_loss(self, hosts: list[Host], loss_pct: float) -> dict:
        if loss_pct <= 0 or self.loss_choice == "none":
            return {"method": "none", "loss_pct": float(loss_pct)}
        netem = self.loss_choice == "netem"
        rules = "" if netem else self.ruleset(loss_pct)
        add = netem_add_argv(self.interface, loss_pct) if netem else ["nft", "-f", "-"]
        for h in hosts:
            self._loss_hosts.append(h)
            self._call(h, add, f"apply the loss (needs root and {'sch_netem' if netem else 'nftables'})",
                       stdin=None if netem else rules)  # fmt: skip
            # the loss's own dead-man switch: removed at the deadline if the runner is gone by then
            self._spawn(h, "loss-guard", ["sh", "-c", 'sleep "$1"; shift; "$@"', "sh", str(self.deadline_s),
                                          *self._clear_argv()], extra_s=30)  # fmt: skip
        return {
            "method": self.loss_choice,
            "loss_pct": float(loss_pct),
            "rule": shlex.join(add) if netem else rules.splitlines()[-3].strip(),
            "where": f"each host's egress on {self.interface}",
        }

    def loss_counter(self, host: Host) -> int:
        """Frames the loss dropped on host so far."""
        if self.loss_choice == "netem":
            return netem_dropped(self._call(host, netem_show_argv(self.interface), "read the netem counter"))
        out = self._call(
            host, ["sh", "-c", f"nft list table inet {LOSS_TABLE} 2>/dev/null; true"], "read the loss counter"
        )
        m = re.search(r"counter packets (\d+)", out)
        return int(m.group(1)) if m else 0

    def clear_loss(self) -> None:
        for h in self._loss_hosts:
            for g in [g for g in self._groups if g.host == h and g.base.endswith("/loss-guard")]:
                self._stop(g, "TERM")
            self._call(h, ["sh", "-c", _QUIET, "sh", *self._clear_argv()], "clear the loss")
        self._loss_hosts.clear()

    def netem_missing(self, n: int) -> str | None:
        """The probe on each of the first n hosts; their connections are closed again."""
        hosts = self.hosts(n)
        try:
            for h in hosts:
                answer = self._call(h, self._probe_argv(), "probe netem").strip()
                if not answer.endswith("netem-ok"):
                    last = answer.splitlines()[-1] if answer else "no answer"
                    return f"{h.name} has no netem ({shlex.join(NETEM_PROBE)}: {last})"
            return None
        finally:
            for h in hosts:
                self._close(h)

    def probe(self, host: Host, argv: list[str]) -> str | None:
        """The preflight probe in one ssh call; the connection is closed again (nothing stays behind)."""
        try:
            return self._call(host, argv, "preflight", timeout=PREFLIGHT_TIMEOUT_S)
        finally:
            self._close(host)

    def _close(self, host: Host) -> None:
        """End the host's ControlMaster connection, if one is open."""
        subprocess.run(["ssh", *self._options(), "-O", "exit", "--", host.name], capture_output=True,
                       timeout=SSH_TIMEOUT_S, check=False)  # fmt: skip

    def clock_argv(self, host: Host) -> list[str] | None:
        self._control_dir()
        return self.ssh_argv(host, ["sh", "-c", CLOCK_LOOP])

    def launch(self, cmd: HostCommand, log: Path) -> Proc:
        return Proc(cmd.host, self._spawn(cmd.host, "train", env_argv(cmd)), log)

    def poll(self, proc: Proc) -> int | None:
        group: Remote = proc.handle  # type: ignore[assignment]
        state = self._call(group.host, ["sh", "-c", _POLL, "sh", group.base], "poll").split()
        if state[:1] == ["rc"]:
            return int(state[1])
        return None if state == ["running"] else -15  # gone without an exit code: ended by a signal

    def stop(self, proc: Proc) -> None:
        self._stop(proc.handle, "TERM")  # type: ignore[arg-type]

    def _stop(self, group: Remote, sig: str) -> None:
        self._call(group.host, ["sh", "-c", _STOP, "sh", group.base, sig], f"stop group {group.pgid}")

    def collect(self, host: Host, run_dir: Path) -> None:
        """scp the host's run folder here, check every size against the remote listing, then sort the
        bookkeeping outputs into logs/ (`<host>.out` for the command, `<host>-tcpdump.txt`)."""
        remote = self.host_dir(host, run_dir)
        listing = self._call(host, ["sh", "-c", _LIST, "sh", remote], "list the run folder")
        sizes = {
            rel: int(size) for size, rel in (line.split(" ", 1) for line in listing.splitlines() if line)
        }
        tmp = run_dir / f".fetch-{host.index}"
        shutil.rmtree(tmp, ignore_errors=True)
        self._keep.add(host.index)
        scp = ["scp", "-q", "-r", "-p", *self._options(), "--", f"{host.name}:{remote}", str(tmp)]
        proc = subprocess.run(scp, capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise SshError(f"{host.name}: fetch {remote}: {self._explain(host, proc)}")
        wrong = [
            rel
            for rel, size in sizes.items()
            if not (tmp / rel).is_file() or (tmp / rel).stat().st_size != size
        ]
        if wrong:
            raise SshError(
                f"{host.name}: fetched sizes differ from the remote ones for {', '.join(sorted(wrong))}"
                f" (remote scratch {remote} kept)"
            )
        (run_dir / "logs").mkdir(exist_ok=True)
        for rel in sizes:
            to = {
                f"{BOOK}/train.out": f"logs/{host.name}.out",
                f"{BOOK}/capture.out": f"logs/{host.name}-tcpdump.txt",
                f"{BOOK}/counters.out": f"logs/{host.name}-counters.txt",
            }
            if rel.startswith(f"{BOOK}/") and rel not in to:
                continue
            dest = run_dir / to.get(rel, rel)
            dest.parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).replace(dest)
        shutil.rmtree(tmp)
        self._keep.discard(host.index)
        stats = self._stats.pop(host.index, None)
        if stats is not None:
            stats.path = run_dir / stats.path.name

    def facts(self) -> dict:
        hosts = self._touched
        return {
            "backend": "ssh (OpenSSH client, StrictHostKeyChecking=yes)",
            "hosts": [h.name for h in hosts],
            "ips": [self._ips.get(h.index, "") for h in hosts],
            "interface": self.interface,
            "workdir": self.settings.workdir,
            "loss_method": self.loss_choice if self._loss_hosts else "none",
            "frames_dropped_by_loss_rule": sum(self.loss_counter(h) for h in self._loss_hosts),
        }

    def cleanup(self) -> None:
        """Stop every recorded group, clear the loss, delete the scratch (except where a fetch did
        not verify), close the connections; a host that cannot be reached is named in one error."""
        errors = []
        for group in reversed(self._groups):
            try:
                self._stop(group, "TERM")
            except SshError as err:
                errors.append(str(err))
        self._groups.clear()
        try:
            self.clear_loss()
        except SshError as err:
            errors.append(str(err))
            self._loss_hosts.clear()
        for h in self._touched:
            try:
                if self._run and h.index not in self._keep:
                    self._call(
                        h, ["rm", "-rf", "--", f"{self.settings.workdir}/{self._run}"], "remove the scratch"
                    )
            except SshError as err:
                errors.append(str(err))
            self._close(h)
        self._touched.clear()
        self._keep.clear()
        if errors:
            raise SshError("cleanup: " + "; ".join(dict.fromkeys(errors)))


def egress_loss_ruleset(interface: str, loss_pct: float) -> str:
    """The nft ruleset dropping loss_pct % (0.1 % resolution) of the frames leaving `interface`, in
    table inet LOSS_TABLE (replacing it): the loss rule of every backend that reaches real hosts."""
    k = round(loss_pct * 10)
    if k <= 0:
        raise SshError(f"loss {loss_pct}% is below the 0.1% resolution of the drop rule")
    return (
        f"table inet {LOSS_TABLE}\ndelete table inet {LOSS_TABLE}\n"
        f"table inet {LOSS_TABLE} {{\n  chain egress {{\n"
        "    type filter hook output priority 0; policy accept;\n"
        f'    oifname "{interface}" numgen random mod 1000 < {k} counter drop\n  }}\n}}\n'
    )


def _name(host: Host | str) -> str:
    return host if isinstance(host, str) else host.name


def _stale_runs(probe_out: str, me: str) -> list[str]:
    """Run folders left by a runner of this machine that is gone (or by this one): `_PROBE` prints
    `runner RUN HOST PID` per folder. A live runner's folders, or another machine's, are left alone."""
    stale = []
    for line in probe_out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "runner" and parts[2] == me and parts[3].isdigit():
            pid = int(parts[3])
            if pid == os.getpid() or not pid_alive(pid):
                stale.append(parts[1])
    return stale
