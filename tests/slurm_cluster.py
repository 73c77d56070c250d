"""A real Slurm cluster on this machine for the slurm backend's tests: one slurmd per worker namespace.

Per worker of a `Testbed` (network namespace, 192.168.17.5x on eth1): a real `slurmd -D` in its own UTS
namespace whose hostname is the node's name (w0, w1, …), so each daemon finds its NodeName as on a real
node, without `slurmd -N`. `slurmctld -D` runs in w0's namespace (w0 is also the login node, where the
tests start `tracecore run` with `ip netns exec`); every daemon and client reads this fixture's own
slurm.conf (SLURM_CONF) and authenticates through its own `munged` (its own key and socket). There is no
slurmdbd, so `sacct` does not work, as on many clusters: the backend reads squeue/scontrol. Everything
lives in one private temp folder; teardown stops the daemons, kills whatever still runs in the
namespaces (slurmstepd, tcpdump, ranks), deletes them and the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tracecore.runners.testbed import Testbed

TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol", "scancel", "sinfo",
         "unshare", "ip", "tcpdump", "nft")  # fmt: skip
TRACECORE = Path(sys.executable).parent / "tracecore"
START_S = 30.0  # how long the daemons may take until every node is idle
_CONF = """ClusterName=tctest
SlurmctldHost=ctl({ctl_ip})
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=10
SlurmdParameters=config_overrides
{nodes}
PartitionName=t Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def missing_tools() -> list[str]:
    return [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]


@dataclass
class SlurmCluster:
    tb: Testbed
    dir: Path
    names: list[str]
    daemons: list[subprocess.Popen] = field(default_factory=list)

    @property
    def conf(self) -> Path:
        return self.dir / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def login(self, argv: list[str]) -> list[str]:
        """argv as run on the login node (w0's namespace, where slurmctld listens)."""
        return ["ip", "netns", "exec", self.tb.ns(0), *argv]

    def client(self, argv: list[str]) -> subprocess.CompletedProcess:
        """A Slurm client command on the login node, as the tests' own check."""
        return subprocess.run(self.login(argv), env=self.env, capture_output=True, text=True, timeout=30,
                              check=False)  # fmt: skip

    def run(self, args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
        """`tracecore run ARGS` on the login node, to its end."""
        return subprocess.run(self.login([str(TRACECORE), "run", *args]), env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip

    def start_run(self, args: list[str], path: str | None = None) -> subprocess.Popen:
        """`tracecore run ARGS` on the login node, in the background (its output in the temp folder);
        `path` replaces its PATH (a test's wrapper of a client command first)."""
        log = (self.dir / "runner.log").open("wb")
        env = self.env | ({"PATH": path} if path else {})
        return subprocess.Popen(self.login([str(TRACECORE), "run", *args]), env=env, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)  # fmt: skip

    def jobs(self, states: str = "all") -> list[tuple[str, str]]:
        """(job id, state) of the jobs slurmctld knows (finished ones stay MinJobAge = 600 s)."""
        out = self.client(["squeue", "-h", "-t", states, "-o", "%i %T"]).stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]  # type: ignore[misc]

    def leftovers(self, settle_s: float = 10.0) -> dict:
        """What runs left behind: active jobs, processes in the namespaces other than the daemons,
        nft tables. Bounded wait for ending steps to go."""
        deadline = time.monotonic() + settle_s
        daemons = {p.pid for p in self.daemons}
        while True:
            procs = []
            for i in range(len(self.names)):
                pids = subprocess.run(["ip", "netns", "pids", self.tb.ns(i)], capture_output=True, text=True,
                                      check=False).stdout.split()  # fmt: skip
                for pid in pids:
                    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                        cmd = (
                            Path(f"/proc/{pid}/cmdline")
                            .read_bytes()
                            .replace(b"\0", b" ")
                            .decode()
                            .strip(": ")
                        )
                        if int(pid) not in daemons and cmd and cmd != "slurmscriptd":  # slurmctld's helper
                            procs.append(f"{self.names[i]}: {cmd}")
            active = self.jobs("PENDING,RUNNING,COMPLETING,CONFIGURING,SUSPENDED")
            if (not procs and not active) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        tables = [t for i in range(len(self.names))
                  for t in self.tb.exec(i, ["nft", "list", "tables"]).stdout.splitlines() if t]  # fmt: skip
        return {"jobs": active, "procs": procs, "nft": tables}


def _wait_idle(cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + START_S
    while True:
        out = cluster.client(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split()
        if out.count("idle") == len(cluster.names):
            return
        dead = [p.args for p in cluster.daemons if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            logs = "".join(f"\n--- {f.name}\n{f.read_text(errors='replace')[-1500:]}"
                           for f in sorted(cluster.dir.glob("*.out")))  # fmt: skip
            raise RuntimeError(f"slurm did not come up (sinfo: {out}, exited: {dead}){logs}")
        time.sleep(0.2)


def _cgroup_conf() -> str:
    """slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc; this machine's hierarchy."""
    unified = subprocess.run(["stat", "-f", "-c", "%T", "/sys/fs/cgroup"], capture_output=True, text=True,
                             check=False).stdout.strip() == "cgroup2fs"  # fmt: skip
    return "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n" if unified else "CgroupPlugin=cgroup/v1\n"


@contextlib.contextmanager
def slurm_cluster(n: int) -> Iterator[SlurmCluster]:
    """n slurmd nodes w0..w{n-1} and a slurmctld, each in the testbed's namespaces."""
    tmp = Path(tempfile.mkdtemp(prefix="tcslurm"))
    tb = Testbed(n_workers=n)
    munged = None
    try:
        for sub in ("ctld", "log", "spool", *(f"spool/w{i}" for i in range(n))):
            (tmp / sub).mkdir(parents=True)
        subprocess.run(["mungekey", "--create", "--keyfile", str(tmp / "munge.key")], check=True,
                       capture_output=True, timeout=30)  # fmt: skip
        munged = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={tmp}/munge.sock",
             f"--key-file={tmp}/munge.key", f"--log-file={tmp}/munged.log", f"--pid-file={tmp}/munged.pid",
             f"--seed-file={tmp}/munged.seed"],
            stdout=(tmp / "munged.out").open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        tb.__enter__()
        nodes = "\n".join(
            f"NodeName=w{i} NodeAddr={tb.ip(i)} CPUs=2 RealMemory=1000 State=UNKNOWN" for i in range(n)
        )
        (tmp / "slurm.conf").write_text(_CONF.format(ctl_ip=tb.ip(0), dir=tmp, nodes=nodes))
        (tmp / "cgroup.conf").write_text(_cgroup_conf())
        cluster = SlurmCluster(tb, tmp, [f"w{i}" for i in range(n)])
        deadline = time.monotonic() + 10
        while not (tmp / "munge.sock").exists():
            if munged.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"munged did not start: {(tmp / 'munged.out').read_text(errors='replace')}"
                )
            time.sleep(0.05)
        as_host = 'hostname "$1" && shift && exec "$@"'  # the daemon sees its node name as its hostname
        daemons = [("ctl", 0, "slurmctld")] + [(f"w{i}", i, "slurmd") for i in range(n)]
        for name, i, daemon in daemons:
            argv = [daemon, "-D", "-f", str(cluster.conf)]
            out = (tmp / f"{argv[0]}-{name}.out").open("wb")
            cluster.daemons.append(tb.popen(i, ["unshare", "--uts", "sh", "-c", as_host, "sh", name, *argv],
                                            env=cluster.env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL))  # fmt: skip
        _wait_idle(cluster)
        yield cluster
    finally:
        tb.__exit__(None, None, None)  # the daemons, slurmstepd and anything a job left, then the namespaces
        if munged is not None:
            munged.terminate()
            munged.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
