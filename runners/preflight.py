"""Before a run touches any host: does each host have what the experiment needs? One line per host that
does not, naming the host and the fix.

Why before: a run that cannot start on one host otherwise fails minutes later, after captures and loss
rules went up everywhere, as `w3 exited 1`, with the cause (`No module named 'torch'`) only in a log
kept apart. The probe is one fixed shell script (`PROBE`) plus, when the workload is the built-in
one, one fixed Python program (`PROBE_PY`) run by the hosts' interpreter; every value reaches them as
a positional argument, never pasted into their text. The probe reports facts; what they mean and how
to fix them is decided here, on the runner (`problems`).

What is checked: the capture tool and the launcher's own program on PATH, the capture interface; for
the built-in workload the interpreter, tracecore and torch, and on CUDA torch's CUDA build, the GPUs it
sees, NCCL in that build (backend nccl) and GPUs no other process computes on (nvidia-smi, where
present).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from tracecore.errors import ExitCode, TracecoreError
from tracecore.runners.experiment import Experiment
from tracecore.runners.launchers import Host, HostCommand

TIMEOUT_S = 120.0  # one host's probe: importing torch may take a while on a cold disk
# $1 the address interface, $2 the capture interface ('' = not checked), $3 python ('' = not needed),
# $4 the Python program, $5 its JSON argument, $6 the counter sampler's python ('' = no sampler); the
# tools to find follow. Prints `missing-tool NAME`,
# `missing-interface NAME`, `missing-capture NAME` (not among the devices tcpdump can open, `tcpdump
# -D`: an RDMA NIC needs a libpcap built with RDMA support), `missing-python NAME`, the Python
# program's one JSON line, and `missing-sampler NAME` (that python cannot import the sampler).
PROBE = (
    'i=$1 c=$2 py=$3 code=$4 arg=$5 sp=$6; shift 6; for t in "$@"; do command -v "$t" >/dev/null 2>&1 || '
    'echo "missing-tool $t"; done; if [ -n "$i" ] && [ ! -e "/sys/class/net/$i" ]; then '
    'echo "missing-interface $i"; fi; if [ -n "$c" ] && command -v tcpdump >/dev/null 2>&1 && ! tcpdump -D '
    '2>/dev/null | grep -q "^[0-9][0-9]*\\.$c\\( \\|$\\)"; then echo "missing-capture $c"; fi; '
    'if [ -n "$py" ]; then if command -v "$py" >/dev/null 2>&1; then "$py" -c "$code" "$arg"; '
    'else echo "missing-python $py"; fi; fi; if [ -n "$sp" ] && '
    '! "$sp" -c "import tracecore.runners.counters" >/dev/null 2>&1; then '
    'echo "missing-sampler $sp"; fi; true'
)
# The built-in workload's side: tracecore, torch and its CUDA/NCCL build, GPUs and who uses them.
PROBE_PY = r"""
import importlib.util, json, shutil, subprocess, sys
need = json.loads(sys.argv[1])
facts = {"tracecore": importlib.util.find_spec("tracecore") is not None}
try:
    import torch
    import torch.distributed as dist
except Exception as err:
    facts["torch_error"] = f"{type(err).__name__}: {err}"
else:
    facts["torch"] = torch.__version__
    facts["gloo"] = dist.is_available() and dist.is_gloo_available()
    facts["cuda_build"] = torch.version.cuda
    if need.get("cuda"):
        facts["gpus"] = torch.cuda.device_count() if torch.version.cuda else 0
        facts["nccl"] = dist.is_available() and dist.is_nccl_available()
        smi = shutil.which("nvidia-smi")
        if smi:
            q = [smi, "--query-compute-apps=gpu_uuid,pid", "--format=csv,noheader"]
            p = subprocess.run(q, capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                rows = [r.split(",") for r in p.stdout.splitlines() if r.strip()]
                facts["busy"] = sorted({r[0].strip() for r in rows})
                facts["busy_pids"] = sorted({r[1].strip() for r in rows if len(r) > 1})
print("facts " + json.dumps(facts))
"""


class PreflightError(TracecoreError):
    """A host lacks what the experiment needs; nothing was started anywhere."""

    exit_code = ExitCode.TESTBED


@dataclass(frozen=True)
class Needs:
    """What every host must have for the experiment's runs."""

    tools: tuple[str, ...]  # on PATH
    interface: str  # the host's address and sockets ('' when the backend makes it: netns)
    capture_interface: str
    python: str  # '' when the workload is not the built-in one
    cuda_gpus: int  # GPUs per host on CUDA, 0 on CPU
    nccl: bool
    sampler_python: str = ""  # the counter sampler's interpreter ('' without capture.method counters/both)

    def describe(self) -> str:
        """What was checked, in a few words."""
        nics = dict.fromkeys(n for n in (self.interface, self.capture_interface) if n)
        what = [*self.tools] + [f"interface {n}" for n in nics]
        if self.python:
            gpu = f" (CUDA, {self.cuda_gpus} GPU(s){', NCCL' if self.nccl else ''})" if self.cuda_gpus else ""
            what.append(f"{self.python} with tracecore and torch{gpu}")
        if self.sampler_python:
            what.append(f"{self.sampler_python} with the counter sampler")
        return ", ".join(what)

    def probe_argv(self) -> list[str]:
        arg = json.dumps({"cuda": self.cuda_gpus > 0}, separators=(",", ":"))
        nics = [self.interface, self.capture_interface]
        return ["sh", "-c", PROBE, "sh", *nics, self.python, PROBE_PY, arg, self.sampler_python, *self.tools]


def needs(
    exp: Experiment, commands: list[HostCommand], interfaces: tuple[str, str], sampler_python: str = ""
) -> Needs:
    """The needs of an experiment whose first host runs `commands[0]`; `interfaces` are the address
    and capture interfaces to check ('' for one the backend makes); `sampler_python` the counter
    sampler's interpreter when the experiment samples counters."""
    launcher = exp.launcher
    program = commands[0].argv[0] if commands and commands[0].argv else ""
    builtin = launcher.kind == "ddp" and not launcher.program
    tools = (*(("tcpdump",) if exp.capture.tcpdump else ()), *((program,) if program and not builtin else ()))
    if not exp.capture.tcpdump:  # counters alone: no tcpdump to open the capture interface
        interfaces = (interfaces[0], "")
    cuda = launcher.ranks_per_host if builtin and launcher.device == "cuda" else 0
    nccl = builtin and any(s.backend == "nccl" for s in exp.runs)
    sampler = sampler_python if exp.capture.counters else ""
    return Needs(tools, *interfaces, program if builtin else "", cuda, nccl, sampler)


def problems(host: str, need: Needs, output: str) -> list[str]:
    """What the probe's output says is missing on `host`, each as `host: what; fix`."""
    found: list[str] = []
    facts: dict = {}
    for line in output.splitlines():
        kind, _, value = line.partition(" ")
        if kind == "missing-tool":
            fix = "apt install tcpdump" if value == "tcpdump" else "install it or give its full path"
            found.append(f"{host}: {value} not found on PATH ({fix})")
        elif kind == "missing-interface":
            found.append(f"{host}: no interface {value} (the NIC of the host's address and its sockets)")
        elif kind == "missing-capture":
            found.append(f"{host}: tcpdump cannot open {value} (tcpdump -D lists what it can: an RDMA NIC"
                         " needs a libpcap built with RDMA support)")  # fmt: skip
        elif kind == "missing-sampler":
            found.append(f"{host}: {value} cannot import tracecore.runners.counters (the counter sampler:"
                         " pip install tracecore there, or set launcher.python)")  # fmt: skip
        elif kind == "missing-python":
            found.append(f"{host}: no {value} on PATH (launcher.python: one with torch, tracecore)")
        elif kind == "facts":
            facts = json.loads(value)
    if need.python and not facts and not any("launcher.python" in p for p in found):
        said = output.strip()[-200:] or "no output"
        found.append(f"{host}: {need.python} did not answer the probe: {said}")
    if facts:
        found += _python_problems(host, need, facts)
    return found


def _python_problems(host: str, need: Needs, facts: dict) -> list[str]:
    py = need.python
    found = []
    if not facts.get("tracecore"):
        found.append(f"{host}: {py} cannot import tracecore (pip install tracecore, or launcher.python)")
    if "torch_error" in facts:
        return [*found, f"{host}: {py} cannot import torch ({facts['torch_error']}): pip install torch there"]
    torch = facts.get("torch", "?")
    if not need.cuda_gpus:
        return found if facts.get("gloo") else [*found, f"{host}: torch {torch} has no gloo backend"]
    if not facts.get("cuda_build"):
        return [*found, f"{host}: torch {torch} is a CPU-only build: install a CUDA build of torch"
                        " (pytorch.org/get-started) or set launcher.device = \"cpu\""]  # fmt: skip
    gpus = facts.get("gpus", 0)
    if gpus < need.cuda_gpus:
        seen = "sees no GPU" if not gpus else f"sees {gpus} GPU(s)"
        found.append(
            f"{host}: torch {torch} (CUDA {facts['cuda_build']}) {seen}, launcher.gpus_per_host ="
            f" {need.cuda_gpus} (check nvidia-smi, the driver and CUDA_VISIBLE_DEVICES)"
        )
    if need.nccl and not facts.get("nccl"):
        found.append(f"{host}: torch {torch} was built without NCCL: use backend gloo or a build with NCCL")
    busy = facts.get("busy")
    if busy is not None and gpus - len(busy) < need.cuda_gpus <= gpus:
        pids = ", ".join(facts.get("busy_pids", []))
        found.append(
            f"{host}: {max(gpus - len(busy), 0)} of {gpus} GPU(s) free (pids {pids} compute on the others),"
            f" launcher.gpus_per_host = {need.cuda_gpus}"
        )
    return found


def check_hosts(hosts: list[Host], need: Needs, probe: Callable[[Host, list[str]], str | None]) -> list[str]:
    """Probe every host the backend can probe now (`probe` runs the argv there and returns its output,
    None when the backend probes inside the run instead); returns those deferred; raises
    PreflightError naming every problem found."""
    found: list[str] = []
    deferred = []
    for host in hosts:
        output = probe(host, need.probe_argv())
        if output is None:
            deferred.append(host.name)
        else:
            found += problems(host.name, need, output)
    if found:
        more = f" (and {len(found) - 1} more: {'; '.join(found[1:])})" if len(found) > 1 else ""
        raise PreflightError(f"preflight: {found[0]}{more}; nothing was started")
    return deferred


def run_here(argv: list[str], where: str) -> str:
    """The probe run on this machine (netns: the namespaces share its files and interpreters)."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise PreflightError(f"preflight: {where}: the probe did not answer within {TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr.strip() or proc.stdout.strip()).splitlines()[-2:])
        raise PreflightError(f"preflight: {where}: the probe exited {proc.returncode}: {tail}")
    return proc.stdout
