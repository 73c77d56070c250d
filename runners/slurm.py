"""The slurm backend: each run is one generated batch script, submitted with sbatch and watched with squeue.

Why one script per run: on a cluster the nodes belong to the scheduler, so everything a run does on
them (tcpdump on every node, the loss rule, the launcher on every node, stopping the captures) happens
inside one job that the scheduler accounts for and can cancel as a whole. The script is kept in the run
folder (`slurm-job.sh`); every command in it is an argv list joined once with `shlex.join`, and the few
fixed shell snippets below receive values as positional parameters, so quotes, `$`, `;` and blanks
arrive intact.

    sbatch --parsable --job-name=RUN --nodes=N --ntasks-per-node=1 --exclusive --nodelist=NODES
           --time=MIN --chdir=RUN_DIR --output=RUN_DIR/logs/slurm-%j.out --comment='tracecore RUN_DIR'
           [--partition=P] [sbatch_args…] RUN_DIR/slurm-job.sh

Inside, every step is `srun --overlap --nodes=1 --ntasks=1 --nodelist=NODE`: tcpdump on every node
(its report in `logs/NODE-tcpdump.txt`); for a lossy run, where the experiment says the nodes allow it
(`backend.allow_loss`), a guard on every node that installs the nft drop rule and deletes it when told
to stop; then the launcher on every node (`logs/NODE.out`). The first launcher to fail stops the others.
At the end, and on a signal (scancel, the time limit), the script ends the launchers, records their exit
codes (`.tracecore/exit-codes`) and sends the captures and guards SIGUSR2 through srun (srun turns
SIGTERM into SIGKILL), on which tcpdump writes its report and each guard deletes its rule.

The runner: `sbatch --parsable` gives the job id; the state comes from `squeue`, else `scontrol`, else
`sacct` when accounting works (it often does not). Ctrl-C, SIGTERM, SIGHUP or the timeout signals the script
(`scancel --batch --signal=TERM`), then cancels the job if it has not ended. The run folder must be on
a filesystem the nodes share with the runner: the job writes there and nothing is fetched. The job's
time limit (timeout_s + deadman_margin_s) ends everything if the runner dies, and the next runner of
the same run folder (`--resume`) cancels a job still running there (found by its comment) first.
"""

from __future__ import annotations

import contextlib
import getpass
import ipaddress
import math
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from tracecore.errors import ExitCode, TracecoreError
from tracecore.runners.backend import Backend, Proc, Step, counters_argv, env_argv, host_tcpdump_argv
from tracecore.runners.experiment import BackendSettings, CaptureSettings, ExperimentError
from tracecore.runners.launchers import Host, HostCommand
from tracecore.runners.preflight import TIMEOUT_S as PREFLIGHT_TIMEOUT_S
from tracecore.runners.ssh import IFACE_NAME, LOSS_TABLE, egress_loss_ruleset
from tracecore.runners.testbed import CaptureStats, read_tcpdump_report

SCRIPT = "slurm-job.sh"  # the batch script, kept in the run folder
BOOK = ".tracecore"  # the job's bookkeeping in the run folder (removed at the end)
EXIT_CODES = f"{BOOK}/exit-codes"
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel")
CLIENT_TIMEOUT_S = 60.0  # one Slurm client call
END_WAIT_S = 30.0  # how long a signalled job, then a cancelled one, may take to end
SHARED_FS_WAIT_S = 10.0  # how long a file the job wrote may take to appear here (NFS attribute caches)
STATE_TTL_S = 0.5  # one squeue answer serves every host's poll of one tick
WAITING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"})
ACTIVE = WAITING | {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING", "SIGNALING", "STAGE_OUT"}

# A capture step: "$@" (tcpdump) in the background; SIGUSR2 (forwarded by srun), SIGINT or SIGTERM
# sends it SIGINT, on which it writes its report; the step exits with its exit code.
_UNTIL_USR2 = (
    '"$@" & p=$!; trap "kill -INT $p 2>/dev/null" USR2 INT TERM; '
    "while :; do wait $p; r=$?; kill -0 $p 2>/dev/null || exit $r; done"
)
# A loss guard step: install the ruleset $1, say so, and on SIGUSR2, SIGINT or SIGTERM print the
# rule's drop counter and delete the rule.
_GUARD = (
    'printf "%s" "$1" | nft -f - || exit 1; echo "loss rule applied"; s=; '
    f'gone() {{ nft list table inet {LOSS_TABLE} 2>/dev/null | grep -o "counter packets [0-9]*"; '
    f'nft delete table inet {LOSS_TABLE} && echo "loss rule removed"; kill $s 2>/dev/null; exit 0; }}; '
    "trap gone USR2 INT TERM; while :; do sleep 3600 & s=$!; wait $s 2>/dev/null; done"
)
# The script's fixed part: bookkeeping arrays and the functions the generated steps call.
_PROLOGUE = r"""set -u
book=.tracecore
mkdir -p "$book" logs
side=()    # srun pids of the captures and loss guards
launch=()  # srun pids of the launchers
nodes=()   # the launchers' nodes
codes=()   # the launchers' exit codes; none for a launcher that was stopped

record() {  # the launchers' exit codes, one "node code" line each (-15: stopped)
  local i
  for i in "${!launch[@]}"; do echo "${nodes[$i]} ${codes[$i]:--15}"; done >"$book/exit-codes.new"
  mv "$book/exit-codes.new" "$book/exit-codes"
}
end_side() {  # SIGUSR2: tcpdump writes its report, a guard deletes its rule (30 s, then SIGTERM)
  local i=0
  [ "${#side[@]}" -gt 0 ] || return 0
  kill -USR2 "${side[@]}" 2>/dev/null
  while kill -0 "${side[@]}" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 300 ]; then kill -TERM "${side[@]}" 2>/dev/null; break; fi
    sleep 0.1
  done
  wait "${side[@]}" 2>/dev/null
}
stop() {  # end the launchers (srun turns SIGTERM into SIGKILL), record, end the captures and guards
  if [ "${#launch[@]}" -gt 0 ]; then
    kill -TERM "${launch[@]}" 2>/dev/null
    wait "${launch[@]}" 2>/dev/null
  fi
  record
  end_side
}
trap 'trap "" TERM INT HUP; stop; exit 143' TERM INT HUP
ready() {  # ready FILE TEXT PID: wait (30 s at most) until the step PID writing FILE says TEXT
  local i=0
  until grep -qF -- "$2" "$1" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 300 ] || ! kill -0 "$3" 2>/dev/null; then
      echo "tracecore: $1 does not say '$2': its step did not start" >&2
      stop
      exit 90
    fi
    sleep 0.1
  done
}
watch() {  # wait for every launcher; the first to fail stops the others
  local i left=${#launch[@]}
  while [ "$left" -gt 0 ]; do
    sleep 0.2 &
    wait $!
    for i in "${!launch[@]}"; do
      if [ -n "${codes[$i]:-}" ] || kill -0 "${launch[$i]}" 2>/dev/null; then continue; fi
      wait "${launch[$i]}"
      codes[$i]=$?
      left=$((left - 1))
      if [ "${codes[$i]}" -ne 0 ]; then
        echo "tracecore: the launcher on ${nodes[$i]} exited ${codes[$i]}: stopping the others" >&2
        stop
        exit 1
      fi
    done
  done
}
"""


class SlurmError(TracecoreError):
    """Slurm cannot be reached, refused the job, or the job ended without doing its work."""

    exit_code = ExitCode.TESTBED


def step_log(what: str, node: str) -> str:
    """Where a step's output goes, relative to the run folder (the job's working directory)."""
    logs = {"capture": f"logs/{node}-tcpdump.txt", "loss": f"logs/{node}-loss.txt",
            "counters": f"logs/{node}-counters.txt"}  # fmt: skip
    return logs.get(what, f"logs/{node}.out")


def srun_argv(node: str, what: str, argv: list[str]) -> list[str]:
    """One step on one node, sharing the node with the run's other steps; `%` kept literal."""
    out = step_log(what, node).replace("%", "%%")
    return ["srun", "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}", f"--output={out}", "--",
            *argv]  # fmt: skip


class SlurmBackend(Backend):
    """Hosts are Slurm node names (rank i on hosts[i]); a run is one job; loss by a guard step per node."""

    kind = "slurm"
    loss_method = "nftables numgen random drop on each node's egress"
    poll_interval_s = 1.0

    def __init__(
        self, settings: BackendSettings, interface: str, timeout_s: float, python: str = "python3",
        gpus: int = 0,
    ):  # fmt: skip
        if not IFACE_NAME.match(interface):
            raise SlurmError(f"capture.interface {interface!r} is not an interface name")
        self.settings = settings
        self.interface = interface
        self.timeout_s = timeout_s
        self.python = python
        self.gpus = gpus  # GPUs per node the run's ranks use: asked for with --gres unless sbatch_args do
        self._ips: dict[int, str] = {}  # NodeAddr of each host, read by prepare
        self._reset()

    def _reset(self) -> None:
        self._run_dir: Path | None = None
        self._captures: list[tuple[Host, CaptureSettings, str]] = []
        self._counters: list[tuple[Host, CaptureSettings, str]] = []
        self._loss: tuple[list[Host], float] | None = None
        self._commands: list[HostCommand] = []
        self._job: str | None = None
        self._seen: tuple[float, tuple[str, str]] = (0.0, ("", ""))
        self._ended: tuple[str, str] | None = None
        self._codes: dict[str, int] | None = None

    # ---- pure -----------------------------------------------------------------------------
    def hosts(self, n: int) -> list[Host]:
        names = self.settings.hosts
        if n > len(names):
            raise SlurmError(f"a run needs {n} nodes; backend.hosts lists {len(names)}")
        ips = self.settings.ips

        def ip(i: int) -> str:  # backend.ips, else the NodeAddr read by prepare, else a placeholder (dry run)
            return ips[i] if i < len(ips) else self._ips.get(i) or f"<{names[i]}:{self.interface}>"

        return [Host(i, names[i], ip(i), self.interface) for i in range(n)]

    def host_dir(self, host: Host, run_dir: Path) -> str:
        return str(run_dir)

    def capture_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        tcpdump = host_tcpdump_argv(host, capture, path)
        return srun_argv(host.name, "capture", ["sh", "-c", _UNTIL_USR2, "sh", *tcpdump])

    def counters_command(self, host: Host, capture: CaptureSettings, path: str) -> list[str]:
        return srun_argv(host.name, "counters", counters_argv(self.python, capture, path))

    def loss_commands(self, hosts: list[Host], loss_pct: float) -> list[Step]:
        if loss_pct <= 0:
            return []
        if not self.settings.allow_loss:
            raise ExperimentError(
                f"a run asks for {loss_pct:g}% loss, but on Slurm loss is injected only where the nodes"
                " allow jobs to change their nftables rules: set backend.allow_loss = true if they do,"
                " else use loss = [0]"
            )
        rules = egress_loss_ruleset(self.interface, loss_pct)
        return [Step(h.name, "loss", tuple(srun_argv(h.name, "loss", ["sh", "-c", _GUARD, "sh", rules])),
                     rules, shown=("nft", "-f", "-")) for h in hosts]  # fmt: skip

    def launch_command(self, cmd: HostCommand) -> list[str]:
        return srun_argv(cmd.host.name, "launch", env_argv(cmd))

    def transport(self) -> str:
        return (
            "each run is one batch job (sbatch; --exact shows its script); each command is an srun step"
            " on its node, writing into the run folder on the filesystem the nodes share"
        )

    def address_note(self, n: int) -> str | None:
        """Each node's NodeAddr when scontrol answers here (read-only), else where it will come from."""
        if len(self.settings.ips) >= n:
            return None
        if shutil.which("scontrol"):
            with contextlib.suppress(SlurmError):
                self._read_addresses(self.hosts(n))
                return "addresses: each node's NodeAddr (scontrol show node)"
        return (
            "addresses: each node's NodeAddr, read when a run starts (scontrol does not answer here),"
            f" shown as <node:{self.interface}> (backend.ips pins them)"
        )

    def _gres(self) -> list[str]:
        """--gres=gpu:N for GPU runs, unless sbatch_args already ask for GPUs their own way."""
        asked = any(a.startswith(("--gres", "--gpus", "-G")) for a in self.settings.sbatch_args)
        return [f"--gres=gpu:{self.gpus}"] if self.gpus and not asked else []

    def submission(self, steps: list[Step], run_dir: Path) -> list[Step]:
        """The run's steps as one batch script and the sbatch command that submits it."""
        if "\\" in str(run_dir):
            raise ExperimentError(
                f"{run_dir}: the slurm backend cannot write its job output under a path holding a backslash"
                " (Slurm reads it as an escape): choose another experiment.out"
            )
        sbatch = self.sbatch_argv([s.where for s in steps if s.what == "capture"], run_dir)
        script, argv = self.script(steps, run_dir), tuple(sbatch)
        return [Step("login", "submit", argv, script=script, shown=argv, parts=tuple(steps))]

    def sbatch_argv(self, nodes: list[str], run_dir: Path) -> list[str]:
        minutes = max(1, math.ceil((self.timeout_s + self.settings.deadman_margin_s) / 60))
        literal = str(run_dir).replace("%", "%%")  # --output is a filename pattern
        argv = ["sbatch", "--parsable", f"--job-name={run_dir.name.removesuffix('.partial')}",
                f"--nodes={len(nodes)}", "--ntasks-per-node=1", "--exclusive",
                f"--nodelist={','.join(nodes)}", f"--time={minutes}", f"--chdir={run_dir}",
                f"--output={literal}/logs/slurm-%j.out", f"--comment={_owner(run_dir)}"]  # fmt: skip
        if self.settings.partition:
            argv.append(f"--partition={self.settings.partition}")
        return [*argv, *self._gres(), *self.settings.sbatch_args, f"{run_dir}/{SCRIPT}"]

    def script(self, steps: list[Step], run_dir: Path) -> str:
        """The batch script: the prologue's functions, then each step as one shlex-joined srun line."""
        nodes = [s.where for s in steps if s.what == "capture"]
        submit = " \\\n    ".join(shlex.quote(arg) for arg in self.sbatch_argv(nodes, run_dir))
        out = [
            "#!/bin/bash",
            "# One run of `tracecore run`, kept in its run folder. Submitted with:",
            *(f"#   {line}" for line in submit.splitlines()),
            _PROLOGUE,
        ]
        side = 0
        for what, title, ready in (
            ("capture", "# tcpdump on every node until the end", "listening on"),
            ("counters", "# the NIC counter sampler on every node until the end", "sampling"),
            ("loss", "# the loss rule on every node, deleted at the end by its guard", "loss rule applied"),
        ):
            mine = [s for s in steps if s.what == what]
            if not mine:
                continue
            out.append(title)
            for s in mine:
                out += [f": >{shlex.quote(step_log(what, s.where))}", f"{shlex.join(s.argv)} &", "side+=($!)"]
            for k, s in enumerate(mine, side):
                out.append(
                    f'ready {shlex.quote(step_log(what, s.where))} {shlex.quote(ready)} "${{side[{k}]}}"'
                )
            side += len(mine)
        out.append("# the launcher on every node; the first to fail stops the others")
        for s in steps:
            if s.what == "launch":
                log = shlex.quote(step_log("launch", s.where))
                out += [
                    f": >{log}",
                    f"{shlex.join(s.argv)} &",
                    f"launch+=($!) nodes+=({shlex.quote(s.where)})",
                ]
        out += ["watch", "record", "end_side", ""]
        return "\n".join(out)

    # ---- Slurm clients --------------------------------------------------------------------
    def _client(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, check=False)
        except FileNotFoundError:
            raise SlurmError(
                f"{argv[0]} not found: the slurm backend needs the Slurm client commands"
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{argv[0]}: no answer from Slurm within {CLIENT_TIMEOUT_S:g} s") from None
        if check and proc.returncode != 0:
            raise SlurmError(f"{shlex.join(argv[:3])}: exited {proc.returncode}: {_last_line(proc)}")
        return proc

    def job_state(self, job: str) -> tuple[str, str]:
        """(state, reason): from squeue, else scontrol, else sacct where accounting works; GONE when
        none of them knows the job."""
        for attempt in range(3):
            q = self._client(["squeue", "-h", "-j", job, "-t", "all", "-o", "%T|%r"], check=False)
            lines = q.stdout.split("\n")
            if q.returncode == 0 and lines[0].strip():
                state, _, reason = lines[0].strip().partition("|")
                return state, reason
            if q.returncode == 0 or "Invalid job id" in q.stderr:
                break
            if attempt == 2:
                raise SlurmError(f"squeue: cannot read the state of job {job}: {_last_line(q)}")
            time.sleep(2)
        c = self._client(["scontrol", "show", "job", "-o", job], check=False)
        state = re.search(r"\bJobState=(\S+)", c.stdout)
        if c.returncode == 0 and state:
            reason = re.search(r"\bReason=(\S+)", c.stdout)
            return state.group(1), reason.group(1) if reason else ""
        if shutil.which("sacct"):
            a = self._client(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], check=False)
            if a.returncode == 0 and a.stdout.split():
                return a.stdout.split()[0], "from sacct"
        return "GONE", "unknown to squeue, scontrol and sacct"

    def _state(self, fresh: bool = False) -> tuple[str, str]:
        """The job's state, asked at most once per STATE_TTL_S; an ended job's is kept."""
        if self._ended is not None or self._job is None:
            return self._ended or ("", "")
        at, seen = self._seen
        if fresh or time.monotonic() - at > STATE_TTL_S:
            seen = self.job_state(self._job)
            self._seen = (time.monotonic(), seen)
            if seen[0] not in ACTIVE:
                self._ended = seen
        return seen

    # ---- effects --------------------------------------------------------------------------
    def prepare(self, n: int) -> list[Host]:
        """The client commands are here and every node is known to Slurm (its NodeAddr is the host's
        address unless backend.ips says otherwise)."""
        self.cleanup()
        missing = [c for c in CLIENTS if shutil.which(c) is None]
        if missing:
            raise SlurmError(
                f"{', '.join(missing)} not found: the slurm backend runs the Slurm client commands"
                " (Debian/Ubuntu: apt install slurm-client)"
            )
        self._read_addresses(self.hosts(n))
        return self.hosts(n)

    def _read_addresses(self, hosts: list[Host]) -> None:
        """Every node is known to Slurm; its NodeAddr is its address unless backend.ips says otherwise."""
        for h in hosts:
            out = self._client(["scontrol", "show", "node", "-o", h.name]).stdout
            addr = re.search(r"\bNodeAddr=(\S+)", out)
            if addr is None:
                raise SlurmError(f"{h.name}: scontrol show node names no NodeAddr")
            if h.index >= len(self.settings.ips):
                try:
                    self._ips[h.index] = str(ipaddress.ip_address(addr.group(1)))
                except ValueError:
                    raise SlurmError(
                        f"{h.name}: its NodeAddr {addr.group(1)!r} is not an address: list the nodes'"
                        " addresses on the captured interface in backend.ips"
                    ) from None

    def probe(self, host: Host, argv: list[str]) -> str | None:
        """The probe as a one-task job step on the node (srun waits for the allocation like any job,
        up to backend.queue_timeout_s), with the run's partition, options and GPUs."""
        part = [f"--partition={self.settings.partition}"] if self.settings.partition else []
        srun = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={host.name}", "--time=5",
                "--job-name=tracecore-preflight", *part, *self._gres(), *self.settings.sbatch_args, "--",
                *argv]  # fmt: skip
        limit = self.settings.queue_timeout_s + PREFLIGHT_TIMEOUT_S
        try:
            proc = subprocess.run(srun, capture_output=True, text=True, timeout=limit, check=False)
        except FileNotFoundError:
            raise SlurmError("srun not found: the slurm backend needs the Slurm client commands") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{host.name}: the preflight step did not run within {limit:g} s") from None
        if proc.returncode != 0:
            said = _last_line(proc)
            raise SlurmError(f"{host.name}: the preflight step (srun) exited {proc.returncode}: {said}")
        return proc.stdout

    def start_capture(self, host: Host, capture: CaptureSettings, path: Path) -> object:
        """Noted for the batch script, which starts it (and waits until it listens) before the launchers."""
        self._run_dir = path.parent
        self._captures.append((host, capture, str(path)))
        return (host, path)

    def start_counters(self, host: Host, capture: CaptureSettings, path: Path, log: Path) -> object:
        """Noted for the batch script, which starts it (and waits for its first sample) before launching."""
        self._counters.append((host, capture, str(path)))
        return host

    def stop_counters(self, handle: object) -> int | None:
        """The script stops the samplers at its end (SIGUSR2); 0 when the sampler said it stopped."""
        self._end_job()
        said = self._read(step_log("counters", handle.name))  # type: ignore[attr-defined]
        return 0 if "stopped" in said.split() else -15

    def apply_loss(self, hosts: list[Host], loss_pct: float) -> dict:
        if loss_pct <= 0:
            return {"method": "none", "loss_pct": 0.0}
        rules = egress_loss_ruleset(self.interface, loss_pct)
        self.loss_commands(hosts, loss_pct)  # refused unless the nodes allow it
        self._loss = (hosts, loss_pct)
        return {
            "method": self.loss_method,
            "loss_pct": float(loss_pct),
            "rule": rules.splitlines()[-3].strip(),
        }

    def launch(self, cmd: HostCommand, log: Path) -> Proc:
        """Noted for the batch script; `wait` submits it once every host's command is known."""
        self._commands.append(cmd)
        return Proc(cmd.host, cmd.host.name, log)

    def wait(self, procs: list[Proc], timeout_s: float, tick_s: float | None = None) -> str | None:
        """Submit the run's job, wait (up to backend.queue_timeout_s) until it runs, then wait like every
        backend: the timeout counts from the job's start."""
        self._submit()
        deadline = time.monotonic() + self.settings.queue_timeout_s
        while (state := self._state(fresh=True))[0] in WAITING:
            if time.monotonic() > deadline:
                raise SlurmError(
                    f"slurm job {self._job} still {state[0]} ({state[1]}) after"
                    f" {self.settings.queue_timeout_s:g} s in the queue (backend.queue_timeout_s)"
                )
            time.sleep(self.poll_interval_s if tick_s is None else tick_s)
        why = super().wait(procs, timeout_s, tick_s)
        if why is None or why.startswith("timeout"):
            return why
        # every exit code arrives at the job's end: name a launcher that failed, not one it stopped
        failed = [p for p in procs if p.returncode not in (None, 0, -15)]
        if failed:
            return f"{failed[0].host.name} exited {failed[0].returncode}"
        state, reason = self._state()  # no launcher failed: the job itself ended early
        note = self._job_note()
        why = f"slurm job {self._job} ended {state}" + (f" ({reason})" if reason not in ("", "None") else "")
        return why + (f": {note}" if note else "")

    def _submit(self) -> None:
        run_dir = self._run_dir
        if run_dir is None or not self._commands:
            raise SlurmError("slurm backend: wait() before any capture or launch")
        steps = [Step(h.name, "capture", tuple(self.capture_command(h, c, p))) for h, c, p in self._captures]
        steps += [
            Step(h.name, "counters", tuple(self.counters_command(h, c, p))) for h, c, p in self._counters
        ]
        steps += self.loss_commands(*self._loss) if self._loss else []
        steps += [Step(c.host.name, "launch", tuple(self.launch_command(c))) for c in self._commands]
        (submit,) = self.submission(steps, run_dir)
        self._sweep(run_dir)
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / SCRIPT).write_text(submit.script or "", encoding="utf-8")
        try:
            out = self._client(list(submit.argv)).stdout.strip()
        except BaseException:  # Ctrl-C, SIGTERM or no answer: Slurm may have queued the job all the same
            with contextlib.suppress(SlurmError):
                self._sweep(run_dir)
            raise
        job = out.split(";")[0]
        if not job.isdigit():
            raise SlurmError(f"sbatch --parsable printed {out!r}, not a job id")
        self._job = job

    def sweep_stale(self, run_dirs: list[Path]) -> None:
        """Before the preflight: an earlier runner's jobs for these run folders would hold the nodes."""
        if shutil.which("squeue"):
            self._sweep(*run_dirs)

    def _sweep(self, *run_dirs: Path) -> None:
        """Cancel this user's jobs still running for these run folders (a runner that died, then
        `--resume`): they would hold the nodes and write into the folders."""
        out = self._client(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i %k"]).stdout
        owners = {_owner(d) for d in run_dirs}
        stale = [line.split(" ", 1)[0] for line in out.splitlines() if line.partition(" ")[2] in owners]
        for job in stale:
            self._client(["scancel", job], check=False)
            deadline = time.monotonic() + 3 * END_WAIT_S
            while self.job_state(job)[0] in ACTIVE:
                if time.monotonic() > deadline:
                    raise SlurmError(f"slurm job {job}, left by an earlier runner of this run, does not end")
                time.sleep(0.2)

    def poll(self, proc: Proc) -> int | None:
        if self._job is None or self._state()[0] in ACTIVE:
            return None
        return self._exit_codes().get(proc.host.name, -15)

    def stop(self, proc: Proc) -> None:
        self._end_job()

    def _end_job(self) -> None:
        """Signal the script (it stops every step in order), then cancel the job if it has not ended;
        returns once the job has ended."""
        if self._job is None or self._state(fresh=True)[0] not in ACTIVE:
            return
        if self._state()[0] == "RUNNING":
            self._client(["scancel", "--batch", "--signal=TERM", self._job], check=False)
            if self._wait_end(END_WAIT_S):
                return
        self._client(["scancel", self._job], check=False)
        if not self._wait_end(2 * END_WAIT_S):
            raise SlurmError(f"slurm job {self._job} did not end within {2 * END_WAIT_S:g} s of scancel")

    def _wait_end(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self._state(fresh=True)[0] in ACTIVE:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def _read(self, rel: str) -> str:
        """A file the job wrote in the run folder ('' if missing). When the job ended by itself, a
        missing file is waited for (bounded): a shared filesystem's client may cache its absence; once
        it is seen, opening it after the job's end gives its whole content (close-to-open)."""
        assert self._run_dir is not None
        path = self._run_dir / rel
        patient = self._state()[0] in ("COMPLETED", "FAILED")
        deadline = time.monotonic() + (SHARED_FS_WAIT_S if patient else 0.0)
        while True:
            try:
                return path.read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    return ""
            except OSError:
                return ""
            time.sleep(0.2)

    def _exit_codes(self) -> dict[str, int]:
        if self._codes is None:
            codes = {}
            for line in self._read(EXIT_CODES).splitlines():
                parts = line.split()
                if len(parts) == 2 and re.fullmatch(r"-?\d{1,4}", parts[1]):
                    codes[parts[0]] = int(parts[1])
            self._codes = codes
        return self._codes

    def _job_note(self) -> str:
        """The script's own last word on why it stopped (its `tracecore:` lines), if any."""
        text = self._read(f"logs/slurm-{self._job}.out")
        notes = [line for line in text.splitlines() if line.startswith("tracecore: ")]
        return notes[-1].removeprefix("tracecore: ") if notes else ""

    def stop_capture(self, handle: object) -> CaptureStats:
        host, path = handle  # type: ignore[misc]
        self._end_job()  # the script stops the captures at its end
        text = self._read(step_log("capture", host.name))
        return read_tcpdump_report(CaptureStats(path=path), text)

    def _loss_log(self, host: Host) -> str:
        return self._read(step_log("loss", host.name))

    def facts(self) -> dict:
        hosts = [h for h, _c, _p in self._captures]
        lossy = self._loss[0] if self._loss else []
        dropped = [re.search(r"counter packets (\d+)", self._loss_log(h)) for h in lossy]
        return {
            "backend": "slurm (sbatch; state from squeue/scontrol)",
            "job_id": self._job or "",
            "nodes": [h.name for h in hosts],
            "ips": [h.ip for h in hosts],
            "interface": self.interface,
            "script": SCRIPT,
            "partition": self.settings.partition or "(default)",
            "loss_method": self.loss_method if lossy else "none",
            "frames_dropped_by_loss_rule": sum(int(m.group(1)) for m in dropped if m),
        }

    def clear_loss(self) -> None:
        """The guards delete their rules at the job's end; a rule not confirmed removed fails the run."""
        if self._loss is None:
            return
        hosts, self._loss = self._loss[0], None
        self._end_job()
        left = [h.name for h in hosts if "loss rule removed" not in self._loss_log(h)]
        if left:
            raise SlurmError(
                f"{', '.join(left)}: the loss rule was not confirmed removed (logs/NODE-loss.txt); if it"
                f" remains there: nft delete table inet {LOSS_TABLE}"
            )

    def collect(self, host: Host, run_dir: Path) -> None:
        """Nothing to fetch: the job wrote into the run folder on the shared filesystem."""

    def cleanup(self) -> None:
        """End the job if it still runs (Ctrl-C, an error), remove its bookkeeping; safe to call twice."""
        try:
            self._end_job()
        finally:
            if self._run_dir is not None and self._state()[0] not in ACTIVE:
                shutil.rmtree(self._run_dir / BOOK, ignore_errors=True)
            self._reset()


def _owner(run_dir: Path) -> str:
    """The job's comment: which run folder it writes (how a later runner finds it)."""
    return f"tracecore {run_dir}"


def _last_line(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
    return lines[-1] if lines else "no message"
