"""Real OpenSSH hosts on this machine for the ssh backend's tests.

Per worker of a `Testbed` (network namespace, 192.168.17.5x on eth1): its own mount namespace with a
private tmpfs on the scratch path (so what the runner fetches really crosses ssh), and a real
`sshd -D -f CONFIG` listening on the worker's address with its own host key, accepting the key this
fixture makes (`PermitRootLogin prohibit-password`: the tests run as root). The runner stays outside
the namespaces and reaches host wI through an ssh_config (`-F`) whose `ProxyCommand` is
`ip netns exec NS nc %h %p`, as a user's ProxyJump would. Teardown stops sshd and everything in the
namespaces, which unmounts the tmpfs with its mount namespace, and deletes the namespaces.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tracecore.runners.testbed import Testbed

TOOLS = ("sshd", "ssh", "scp", "ssh-keygen", "nc", "ip", "unshare", "nsenter", "tcpdump", "nft")
_SSHD_CONFIG = """ListenAddress {ip}:22
HostKey {hostkey}
PidFile {pidfile}
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
MaxStartups 50
MaxSessions 50
Subsystem sftp internal-sftp
"""


@dataclass
class SshHosts:
    tb: Testbed
    dir: Path  # keys, configs, control sockets (short: a ControlPath must fit a socket name)
    workdir: str  # the scratch path: a separate tmpfs on each host
    names: list[str]
    sshd: list[subprocess.Popen] = field(default_factory=list)

    @property
    def config(self) -> Path:
        return self.dir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.dir / "known_hosts"

    @property
    def control_dir(self) -> str:
        return str(self.dir / "ctl")

    def host_key(self, i: int) -> str:
        return (self.dir / f"hostkey{i}.pub").read_text().split()[:2]

    def ssh(self, i: int, argv: list[str]) -> subprocess.CompletedProcess:
        """argv on host i through ssh, as the tests' own independent check of the remote side."""
        return subprocess.run(
            ["ssh", "-F", str(self.config), "-o", f"UserKnownHostsFile={self.known_hosts}",
             "-o", "ControlMaster=no", "--", self.names[i], shlex.join(argv)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip

    def close_masters(self) -> None:
        """End the runner's ssh master connections (`ssh -O exit` on each control socket), which
        otherwise outlive a killed runner by their ControlPersist (60 s) with a session on each host."""
        for socket in Path(self.control_dir).glob("*"):
            subprocess.run(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "--", "master"],
                           capture_output=True, timeout=30, check=False)  # fmt: skip

    def in_mounts(self, i: int, argv: list[str]) -> subprocess.CompletedProcess:
        """argv in host i's network and mount namespaces (sees its scratch), without ssh."""
        full = ["nsenter", "-t", str(self.sshd[i].pid), "-m", "-n", *argv]
        return subprocess.run(full, capture_output=True, text=True, timeout=30, check=False)

    def leftovers(self, i: int, settle_s: float = 5.0) -> dict:
        """What the runner left on host i: processes other than sshd's listener, files in the
        scratch, nft tables. Bounded wait for closing ssh sessions to go."""
        deadline = time.monotonic() + settle_s
        while True:
            pids = subprocess.run(["ip", "netns", "pids", self.tb.ns(i)], capture_output=True, text=True,
                                  check=False).stdout.split()  # fmt: skip
            procs = []
            for pid in pids:
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                    if int(pid) != self.sshd[i].pid and cmd:
                        procs.append(cmd)
            if not procs or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        files = self.in_mounts(i, ["find", self.workdir, "-mindepth", "1"]).stdout.split("\n")
        tables = self.in_mounts(i, ["nft", "list", "tables"]).stdout.split("\n")
        return {"procs": procs, "files": [f for f in files if f], "nft": [t for t in tables if t]}

    def stop_sshd(self, i: int) -> None:
        self.sshd[i].terminate()
        self.sshd[i].wait(timeout=10)

    def replace_host_key(self, i: int) -> None:
        """A new host key for host i (sshd restarted on it): what a reinstalled or spoofed host shows."""
        self.stop_sshd(i)
        key = self.dir / f"hostkey{i}"
        key.unlink()
        key.with_suffix(".pub").unlink()
        _run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", str(key)])
        self.sshd[i] = _start_sshd(self, i)


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def _start_sshd(hosts: SshHosts, i: int) -> subprocess.Popen:
    conf = hosts.dir / f"sshd{i}.conf"
    log = hosts.dir / f"sshd{i}.log"
    d = hosts.dir
    text = _SSHD_CONFIG.format(ip=hosts.tb.ip(i), hostkey=d / f"hostkey{i}", pidfile=d / f"sshd{i}.pid",
                               authorized=d / "authorized_keys")  # fmt: skip
    conf.write_text(text)
    script = 'mount -t tmpfs -o size=256m,mode=0755 tcscratch "$1" && exec /usr/sbin/sshd -D -e -f "$2"'
    with log.open("ab") as out:
        proc = hosts.tb.popen(i, ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                                  hosts.workdir, str(conf)], stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 15
    while "Server listening on" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sshd on {hosts.tb.ns(i)} did not start: {log.read_text(errors='replace')}")
        time.sleep(0.05)
    return proc


@contextlib.contextmanager
def ssh_hosts(n: int, workdir_name: str = "scratch") -> Iterator[SshHosts]:
    """n real sshd hosts w0..w{n-1}; every test-made file lives in one private temp folder."""
    missing = [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not found: run scripts/install-system-deps.sh")
    tmp = Path(tempfile.mkdtemp(prefix="tcssh"))
    made_privsep = not Path("/run/sshd").exists()
    if made_privsep:
        Path("/run/sshd").mkdir(mode=0o755)  # sshd's privilege-separation folder (no systemd here)
    tb = Testbed(n_workers=n)
    try:
        (tmp / "ctl").mkdir(mode=0o700)
        workdir = tmp / workdir_name
        workdir.mkdir()
        _run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", str(tmp / "id")])
        shutil.copy(tmp / "id.pub", tmp / "authorized_keys")
        tb.__enter__()
        hosts = SshHosts(tb, tmp, str(workdir), [f"w{i}" for i in range(n)])
        conf, known = [], []
        for i in range(n):
            _run(["ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", str(tmp / f"hostkey{i}")])
            hosts.sshd.append(_start_sshd(hosts, i))
            conf.append(
                f"Host w{i}\n  HostName {tb.ip(i)}\n  User root\n  IdentityFile {tmp / 'id'}\n"
                f"  IdentitiesOnly yes\n  ProxyCommand ip netns exec {tb.ns(i)} nc %h %p\n"
            )
            known.append(f"{tb.ip(i)} {' '.join(hosts.host_key(i))}\n")
        hosts.config.write_text("".join(conf))
        hosts.known_hosts.write_text("".join(known))
        yield hosts
    finally:
        tb.__exit__(None, None, None)
        shutil.rmtree(tmp, ignore_errors=True)
        if made_privsep:
            with contextlib.suppress(OSError):
                Path("/run/sshd").rmdir()
