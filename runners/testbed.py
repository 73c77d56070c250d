"""A throw-away network of Linux network namespaces: the local backend of every runner.

`Testbed(n_workers=4)` builds, in the image of the paper's testbed (192.168.17.50–53/24,
traffic on `eth1`):

    bridge namespace  <prefix>-br : bridge `br0`, ports v0..v{n-1}, no address
    worker namespaces <prefix>-w<i>: `eth1` (veth peer of v<i>), 192.168.17.<first_host+i>/24

Addresses exist only inside the namespaces; the host's own network is never touched.
TSO/GSO/GRO are switched off on every veth so each captured frame is one wire-sized frame
(≤ MTU + 14), as a real NIC would put on the wire. IPv6 is disabled inside the namespaces so
captures carry no router solicitations. Optional random loss (`loss_pct`) is emulated with an
nftables rule in the bridge namespace (`numgen random mod 1000 < k drop` on bridged IPv4
frames, i.e. every frame crossing the bridge is dropped with probability loss_pct/100, like
netem on each sender's egress in the paper); this kernel has no netem.

Teardown (context exit, also on exceptions, Ctrl-C, SIGTERM and SIGHUP: `tracecore.runners.signals`)
stops every process started through the testbed, kills whatever still runs inside its namespaces and
deletes the namespaces, which removes the veths and the bridge with them. Names carry the creating pid
(`tb<pid>x<n>`), so parallel test processes never collide, and `cleanup_stale()` removes
namespaces left behind by a process that died without tearing down (SIGKILL).

Requires root, iproute2, ethtool, tcpdump; nftables only when loss_pct > 0.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tracecore.errors import ExitCode, TracecoreError
from tracecore.runners.signals import as_interrupts

__all__ = [
    "CaptureStats",
    "Testbed",
    "TestbedError",
    "cleanup_stale",
    "list_netns",
    "nft_loss_ruleset",
    "read_tcpdump_report",
    "tcpdump_argv",
]

_COUNTER = itertools.count()
_NAME_RE = re.compile(r"^tb(\d+)x\d+-")


class TestbedError(TracecoreError):
    """The testbed cannot be built, a command inside it failed, or a capture lost packets."""

    __test__ = False  # not a pytest test class despite the name
    exit_code = ExitCode.TESTBED


@dataclass
class CaptureStats:
    """What tcpdump reported when it stopped (its last stderr lines)."""

    path: Path
    captured: int | None = None
    received_by_filter: int | None = None
    dropped_by_kernel: int | None = None
    dropped_by_interface: int | None = None
    stderr: str = ""

    @property
    def size_bytes(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise TestbedError(f"command failed ({proc.returncode}): {' '.join(argv)}: {proc.stderr.strip()}")
    return proc


def list_netns() -> list[str]:
    """Names of all network namespaces (`ip netns list`)."""
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (signal 0; one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_netns_pids(ns: str) -> None:
    """Kill every process still running inside namespace `ns` (all started by the testbed)."""
    proc = _run(["ip", "netns", "pids", ns], check=False)
    pids = [int(p) for p in proc.stdout.split() if p.strip().isdigit()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in pids if pid_alive(p)]
        if not alive:
            return
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(pid_alive(p) for p in alive):
            time.sleep(0.05)


def cleanup_stale() -> list[str]:
    """Delete testbed namespaces whose creating process is gone; returns the names deleted."""
    removed = []
    for ns in list_netns():
        m = _NAME_RE.match(ns)
        if m and not pid_alive(int(m.group(1))):
            _kill_netns_pids(ns)
            if _run(["ip", "netns", "del", ns], check=False).returncode == 0:
                removed.append(ns)
    return removed


def tcpdump_argv(
    interface: str, snaplen: int, buffer_kib: int, path: str | os.PathLike, bpf: str
) -> list[str]:
    """The capture command on one worker, one owner, so a dry run shows what a real run starts."""
    return ["tcpdump", "-i", interface, "-nn", "--immediate-mode", "-Z", "root",
            "-s", str(snaplen), "-B", str(buffer_kib), "-w", str(path), bpf]  # fmt: skip


def nft_loss_ruleset(loss_pct: float) -> str:
    """The bridge's random-drop rule for `loss_pct` % (0.1 % resolution): the netns loss method."""
    k = round(loss_pct * 10)  # per mille
    if k <= 0:
        raise TestbedError(f"loss {loss_pct}% is below the 0.1% resolution of the drop rule")
    return (
        "table bridge tbloss {\n"
        "  chain lossy {\n"
        "    type filter hook forward priority 0; policy accept;\n"
        f"    ether type ip numgen random mod 1000 < {k} counter drop\n"
        "  }\n"
        "}\n"
    )


def read_tcpdump_report(stats: CaptureStats, text: str) -> CaptureStats:
    """Fill `stats` from tcpdump's closing report (its stderr, wherever it was written)."""
    stats.stderr = text

    def grab(pattern: str) -> int | None:
        m = re.search(r"(\d+) packets? " + pattern, text)
        return int(m.group(1)) if m else None

    stats.captured = grab("captured")
    stats.received_by_filter = grab("received by filter")
    stats.dropped_by_kernel = grab("dropped by kernel")
    stats.dropped_by_interface = grab("dropped by interface")
    return stats


@dataclass
class _Capture:
    proc: subprocess.Popen
    stats: CaptureStats
    stopped: bool = False


@dataclass
class Testbed:
    """A bridge namespace plus `n_workers` worker namespaces; use as a context manager.

    Workers are indexed 0..n_workers-1; worker i has address `ip(i)` on interface `eth1`.
    """

    __test__ = False  # not a pytest test class despite the name

    n_workers: int = 4
    subnet: str = "192.168.17.0/24"
    first_host: int = 50
    mtu: int = 1500
    loss_pct: float = 0.0
    prefix: str | None = None
    offload_off: bool = True
    _namespaces: list[str] = field(default_factory=list, init=False, repr=False)
    _procs: list[subprocess.Popen] = field(default_factory=list, init=False, repr=False)
    _captures: list[_Capture] = field(default_factory=list, init=False, repr=False)
    _signals: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, init=False, repr=False)
    _up: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 1 <= self.n_workers <= 200:
            raise TestbedError(f"n_workers must be 1..200, got {self.n_workers}")
        net = ipaddress.ip_network(self.subnet, strict=False)
        self._net = net
        hosts = [net.network_address + self.first_host + i for i in range(self.n_workers)]
        if hosts[-1] not in net or hosts[-1] == net.broadcast_address:
            raise TestbedError(
                f"{self.n_workers} workers from .{self.first_host} do not fit in {self.subnet}"
            )
        self._ips = [str(h) for h in hosts]
        if not 0.0 <= self.loss_pct < 100.0:
            raise TestbedError(f"loss_pct must be in [0, 100), got {self.loss_pct}")
        if self.prefix is None:
            self.prefix = f"tb{os.getpid()}x{next(_COUNTER)}"
        if len(self.prefix) > 40 or not re.fullmatch(r"[A-Za-z0-9_.]+", self.prefix):
            raise TestbedError(f"bad namespace prefix {self.prefix!r}")

    # ---- names ----------------------------------------------------------------------------
    @property
    def bridge_ns(self) -> str:
        return f"{self.prefix}-br"

    def ns(self, i: int) -> str:
        """Namespace name of worker i."""
        self._check_worker(i)
        return f"{self.prefix}-w{i}"

    def ip(self, i: int) -> str:
        """IPv4 address of worker i."""
        self._check_worker(i)
        return self._ips[i]

    @property
    def ips(self) -> list[str]:
        return list(self._ips)

    @property
    def interface(self) -> str:
        return "eth1"

    @property
    def namespaces(self) -> list[str]:
        return list(self._namespaces)

    def _check_worker(self, i: int) -> None:
        if not 0 <= i < self.n_workers:
            raise TestbedError(f"worker index {i} out of range 0..{self.n_workers - 1}")

    # ---- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        self._signals.enter_context(as_interrupts())
        try:
            self.up()
        except BaseException:
            self.down()
            self._signals.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.down()
        finally:
            self._signals.close()

    def _ip(self, ns: str, *args: str) -> None:
        _run(["ip", "-n", ns, *args])

    def _nsexec(self, ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", ns, *args], check=check)

    def up(self) -> None:
        """Build the namespaces, bridge and veths (normally via `with`)."""
        for tool in ("ip", "ethtool"):
            if shutil.which(tool) is None:
                raise TestbedError(f"{tool} not found: run scripts/install-system-deps.sh")
        if os.geteuid() != 0:
            raise TestbedError("network namespaces need root")
        if self._up:
            return
        self._up = True
        br = self.bridge_ns
        self._add_ns(br)
        self._ip(br, "link", "set", "lo", "up")
        self._ip(br, "link", "add", "br0", "mtu", str(self.mtu), "type", "bridge")
        # No STP/forward delay: ports forward immediately.
        self._ip(br, "link", "set", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0")
        self._ip(br, "link", "set", "br0", "up")
        plen = self._net.prefixlen
        for i in range(self.n_workers):
            wns = f"{self.prefix}-w{i}"
            self._add_ns(wns)
            self._nsexec(wns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            self._nsexec(wns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
            self._ip(wns, "link", "set", "lo", "up")
            self._ip(br, "link", "add", f"v{i}", "mtu", str(self.mtu), "type", "veth",
                     "peer", "name", "eth1", "netns", wns)  # fmt: skip
            self._ip(br, "link", "set", f"v{i}", "master", "br0")
            self._ip(wns, "link", "set", "eth1", "mtu", str(self.mtu))
            self._ip(wns, "addr", "add", f"{self._ips[i]}/{plen}", "dev", "eth1")
            if self.offload_off:
                self._nsexec(wns, "ethtool", "-K", "eth1", "tso", "off", "gso", "off", "gro", "off")
                self._nsexec(br, "ethtool", "-K", f"v{i}", "tso", "off", "gso", "off", "gro", "off")
            self._ip(br, "link", "set", f"v{i}", "up")
            self._ip(wns, "link", "set", "eth1", "up")
        if self.loss_pct > 0:
            self._add_loss(self.loss_pct)

    def _add_ns(self, name: str) -> None:
        """Recorded before it is made: why: a signal while `ip netns add` runs may leave it made, and
        `down` must delete it (deleting one that is not there is harmless)."""
        self._namespaces.append(name)
        try:
            _run(["ip", "netns", "add", name])
        except TestbedError:  # `ip` refused it: nothing of ours to delete
            self._namespaces.remove(name)
            raise

    def _add_loss(self, loss_pct: float) -> None:
        if shutil.which("nft") is None:
            raise TestbedError("nft not found: run scripts/install-system-deps.sh (loss needs nftables)")
        argv, ruleset = self.loss_command(loss_pct)
        proc = subprocess.run(
            argv,
            input=ruleset,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if proc.returncode != 0:
            raise TestbedError(f"nft loss rule failed: {proc.stderr.strip()}")

    def set_loss(self, loss_pct: float) -> None:
        """Switch the random-drop rule to `loss_pct` % (0 removes it) on a testbed that is up."""
        if not 0.0 <= loss_pct < 100.0:
            raise TestbedError(f"loss_pct must be in [0, 100), got {loss_pct}")
        if self.loss_pct > 0:
            self._nsexec(self.bridge_ns, "nft", "delete", "table", "bridge", "tbloss")
            self.loss_pct = 0.0
        if loss_pct > 0:
            self._add_loss(loss_pct)
            self.loss_pct = loss_pct

    def loss_counter(self) -> int:
        """Packets dropped so far by the loss rule (0 without loss)."""
        if self.loss_pct <= 0:
            return 0
        out = self._nsexec(self.bridge_ns, "nft", "list", "chain", "bridge", "tbloss", "lossy").stdout
        m = re.search(r"counter packets (\d+)", out)
        return int(m.group(1)) if m else 0

    def network_facts(self, dropped_by_rule: int | None = None) -> dict:
        """The testbed as a run.toml `[network]` table: what a reader of the run needs to know."""
        dropped = self.loss_counter() if dropped_by_rule is None else dropped_by_rule
        return {
            "testbed": "tracecore.runners.testbed (network namespaces, veth + bridge)",
            "subnet": self.subnet,
            "ips": self.ips,
            "interface": self.interface,
            "mtu": self.mtu,
            "offloads": "tso/gso/gro off" if self.offload_off else "default",
            "loss_method": "nftables numgen random drop in bridge forward" if self.loss_pct else "none",
            "frames_dropped_by_loss_rule": dropped,
        }

    def down(self) -> None:
        """Stop captures and processes, kill leftovers in the namespaces, delete the namespaces."""
        for cap in list(self._captures):
            with contextlib.suppress(Exception):
                self._stop_capture(cap, check=False)
        self._captures.clear()
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
        deadline = time.monotonic() + 3.0
        for p in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=2)
        for p in self._procs:
            for stream in (p.stdin, p.stdout, p.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self._procs.clear()
        errors = []
        for ns in reversed(self._namespaces):
            _kill_netns_pids(ns)
            proc = _run(["ip", "netns", "del", ns], check=False)
            if proc.returncode != 0 and ns in list_netns():
                errors.append(f"{ns}: {proc.stderr.strip()}")
        self._namespaces.clear()
        self._up = False
        if errors:
            raise TestbedError("teardown left namespaces behind: " + "; ".join(errors))

    # ---- running things inside ------------------------------------------------------------
    def wrap(self, i: int, argv: Sequence[str]) -> list[str]:
        """argv as run inside worker i's namespace (pure: dry runs show it before the testbed is up)."""
        return ["ip", "netns", "exec", self.ns(i), *map(str, argv)]

    def loss_command(self, loss_pct: float) -> tuple[list[str], str]:
        """The command (argv, stdin) that installs the random-drop rule in the bridge namespace."""
        return ["ip", "netns", "exec", self.bridge_ns, "nft", "-f", "-"], nft_loss_ruleset(loss_pct)

    def _argv(self, i: int, argv: Sequence[str]) -> list[str]:
        if not self._up:
            raise TestbedError("testbed is not up (use `with Testbed(...) as tb:`)")
        return self.wrap(i, argv)

    def exec(
        self, i: int, argv: Sequence[str], *, check: bool = True, timeout: float = 60.0, **kwargs
    ) -> subprocess.CompletedProcess:
        """Run argv inside worker i's namespace to completion; output captured as text."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        full = self._argv(i, argv)
        proc = subprocess.run(full, timeout=timeout, check=False, **kwargs)
        if check and proc.returncode != 0:
            err = proc.stderr.strip() if isinstance(proc.stderr, str) else ""
            raise TestbedError(f"worker {i}: {' '.join(full[4:])} exited {proc.returncode}: {err[-2000:]}")
        return proc

    def popen(self, i: int, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start argv inside worker i's namespace; the testbed stops it at teardown."""
        p = subprocess.Popen(self._argv(i, argv), **kwargs)
        self._procs.append(p)
        return p

    # ---- capture --------------------------------------------------------------------------
    @contextlib.contextmanager
    def capture(
        self,
        i: int,
        path: str | os.PathLike,
        snaplen: int = 128,
        sender_only: bool = True,
        buffer_kib: int = 32768,
        extra_filter: str | None = None,
    ) -> Iterator[CaptureStats]:
        """tcpdump on worker i's eth1 while the block runs; pcap written to `path`.

        sender_only=True records `src <own ip>` (the paper's filter: each packet once, at its
        sender); False records `host <own ip>` (both directions). On exit tcpdump is stopped
        with SIGINT and its report parsed into the yielded CaptureStats; a capture whose
        kernel dropped packets raises TestbedError (unless the block itself raised).
        """
        cap = self.start_capture(i, path, snaplen, sender_only, buffer_kib, extra_filter)
        ok = False
        try:
            yield cap.stats
            ok = True
        finally:
            self._stop_capture(cap, check=ok)

    def start_capture(
        self,
        i: int,
        path: str | os.PathLike,
        snaplen: int = 128,
        sender_only: bool = True,
        buffer_kib: int = 32768,
        extra_filter: str | None = None,
        bpf: str | None = None,
        interface: str | None = None,
    ) -> _Capture:
        """Non-context form of `capture`; stop with `stop_capture`. `bpf` replaces the built filter."""
        if shutil.which("tcpdump") is None:
            raise TestbedError("tcpdump not found: run scripts/install-system-deps.sh")
        path = Path(path).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        if bpf is None:
            bpf = f"{'src' if sender_only else 'host'} {self.ip(i)}"
            if extra_filter:
                bpf = f"({bpf}) and ({extra_filter})"
        argv = self._argv(i, tcpdump_argv(interface or self.interface, snaplen, buffer_kib, path, bpf))
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        stats = CaptureStats(path=path)
        cap = _Capture(proc=proc, stats=stats)
        self._captures.append(cap)
        # Wait (bounded) until tcpdump says it is listening, so no early packet is missed.
        assert proc.stderr is not None
        buf = b""
        deadline = time.monotonic() + 15.0
        while b"listening on" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                rest = proc.stderr.read() if proc.poll() is not None else b""
                self._stop_capture(cap, check=False)
                raise TestbedError(
                    f"tcpdump on worker {i} did not start: {(buf + rest).decode(errors='replace')}"
                )
            ready, _, _ = select.select([proc.stderr], [], [], min(remaining, 0.2))
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                if not chunk:
                    continue
                buf += chunk
        stats.stderr = buf.decode(errors="replace")
        return cap

    def stop_capture(self, cap: _Capture, check: bool = True) -> CaptureStats:
        return self._stop_capture(cap, check=check)

    def _stop_capture(self, cap: _Capture, check: bool) -> CaptureStats:
        if cap.stopped:
            return cap.stats
        cap.stopped = True
        proc = cap.proc
        # Let packets already in flight reach the capture before stopping it.
        if proc.poll() is None:
            time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=5)
        if cap in self._captures:
            self._captures.remove(cap)
        text = cap.stats.stderr + (err or b"").decode(errors="replace")
        read_tcpdump_report(cap.stats, text)
        if check:
            if cap.stats.dropped_by_kernel is None:
                raise TestbedError(f"tcpdump for {cap.stats.path} gave no statistics: {text.strip()[-500:]}")
            dropped = (cap.stats.dropped_by_kernel or 0) + (cap.stats.dropped_by_interface or 0)
            if dropped:
                raise TestbedError(
                    f"tcpdump dropped {dropped} packets writing {cap.stats.path} "
                    f"(captured {cap.stats.captured}); slow the traffic down or enlarge the buffer"
                )
        return cap.stats
