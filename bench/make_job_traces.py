"""Job-scale PyTorch profiler traces made from one real rank: N ranks, skewed clocks, planted stragglers.

    python -m bench.make_job_traces OUT --ranks 64                 # 64 ranks x 100 steps x ~100 MB
    python -m bench.make_job_traces OUT --ranks 8 --gzip --inspector
    python -m bench.make_job_traces OUT --ranks 1024 --rank-mb 1000 --steps 100 --jobs 2

Why: tracecore's GPU side is proven on runs of 2 and 4 ranks, while real jobs have hundreds to thousands
of ranks and 100 MB-1 GB of Kineto JSON per rank (issue 38). Such a job cannot be run here, so one is
made from the real 4-rank H200 run (../shared/corpus-gpu/gpu-nccl-4rank), every rank from the same
template rank, so that ranks differ only by what this generator plants and writes in manifest.json
(clock skews, stragglers): a tool's answers can be checked against it.

Writes OUT/job-<N>r/ (first as job-<N>r.partial/, renamed when complete; an existing folder is
refused unless --force):
    kineto-rank<r>.json[.gz]      the rank's PyTorch profiler trace
    nccl.host<r>.<pid>.log        the rank's NCCL INFO log (NCCL_DEBUG_FILE=nccl.%h.%p.log)
    nccl-inspector/host<r>-pid<pid>.log   with --inspector: NCCL Inspector's JSON lines, one a collective
    run.toml                      the template run's name fields and gradient bytes (no worker pins,
                                  no host clocks: the skews are for the tools to cope with)
    manifest.json                 what was planted, and bytes and events per rank and in total
The folder ingests as one run without captures (`tracecore ingest OUT/job-<N>r --data DS`), one worker
per rank: the address its NCCL log names.

How a rank is made:
* Template: the trace of `--template-rank`. Its step k (ProfilerStep#4..#6 in the corpus) is the period
  [host start of ProfilerStep#k, host start of the next); the last ends at the trace's last event end.
  X, s and f events belong to the period holding their ts. X/s/f events before the first step are
  dropped (in the corpus: only the profiler's own "PyTorch Profiler (0)" span); M (process and thread
  names) and i events are written once, first; an i event inside the steps ("Record Window End") is
  moved to the same place before the generated trace's end.
* Step n = 0..steps-1 (ProfilerStep#n on the host and the GPU) is template step k = K[n % len(K)]
  shifted so the steps follow each other: by the sum of the earlier periods rounded up to a whole µs
  (gaps under 1 µs), so a time parsed from the generated text is the template's parsed time plus a
  whole number of µs, to the ns. External id, correlation and flow ids get n x (pad + 1) x stride,
  stride a power of ten above the template's largest id, so every copy's ids are its own.
* Per rank: distributedInfo rank/world_size/pg_config (one group of N ranks), record_param_comms'
  Rank, Group size, Process Group Ranks and Concrete Inputs (rank, world size), the NCCL kernels' group
  fields; pid = template pid + r (host events; tid = pid on the main thread); baseTimeNanoseconds plus
  a clock skew drawn uniformly in +-skew_us (seeded), listed per rank in the manifest.
* Stragglers: `--stragglers` ranks drawn from the seed among ranks 1..N-1, late by `--straggler-ms` in
  every collective: the record_param_comms call and everything nested in it on its thread (the nccl:
  annotation, the launch) start D later, whole; the NCCL kernel and the nccl: GPU annotation start D
  later and keep their end (everyone finishes together), dur - D (when dur <= D they shift whole). The
  other ranks are the template unchanged: theirs are the kernels that waited. A shifted call that would
  leave its step is refused.
* Size: each step gets `pad` extra copies (same times, fresh ids) of its cpu_op (not
  record_param_comms, not c10d::*), cuda_runtime, cuda_driver and non-NCCL kernel, memcpy and memset
  events; pad is the smallest that brings a rank's JSON to `--rank-mb` MB over `--steps` steps (0 when
  the steps alone reach it). The copies change no union of kernel time (step_breakdown) and no
  collective; they add rows to profiler_kernels and work for every parser.
* Writing: each template period is rendered once per rank as one %-format string (a slot per time and
  id), so a step costs one `fmt % values` over a numpy-shifted vector and one write; ranks are written
  by `--jobs` processes. --gzip writes .json.gz at level 6, not 1: torch.profiler writes its .json.gz
  at gzip.open's level 9, which level 6 comes close to in size and in a reader's decompression time,
  while level 1's stream is much larger and slower to read; level 6 costs a little more to write than
  level 1, far less than level 9 (measured in bench/results/job-traces.md).
* NCCL log: the template rank's own log (the one whose communicator line says its rank), with host
  host<r>, pid, the main thread's tid, interface eth0, NCCL_HOSTID and the address (10.0.0.1 onwards:
  254 hosts a /24 across 10.0.0.0/8, no .0 or .255) made rank r's, and its rank, nranks and nNodes
  (one rank a node) made r and N. The template's ring, tree and connection lines are dropped and the
  rank's own written in their place: the ring 0..N-1 (prev -> r -> next) on each ring channel, NCCL's
  double binary tree (trees.cc, ncclGetDtree) on each tree channel, a send and a receive per ring and
  tree neighbour; rank 0 lists each ring only while that line fits NCCL's 1 KiB line buffer.
* Inspector: one line per collective in Inspector v4.0's form: coll_msg_size_bytes from the trace's
  message, coll_start_ts/coll_stop_ts the call, each channel's (the kernel's grid) kernel start/stop the
  kernel's, all in the rank's Unix µs (with its skew).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import hashlib
import json
import math
import random
import re
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = REPO.parent / "shared/corpus-gpu/gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
VERSION = 1
GZIP_LEVEL = 6
NCCL_LINE_MAX = 1024  # NCCL formats a log line in a buffer of this many characters
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_WORK = re.compile(r"^(nccl|gloo|mpi|ucc|xccl|hccl|rccl):[A-Za-z_]+$")
_COMM_KERNEL = ("ncclDevKernel", "ncclKernel")
_THIN_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "user_annotation")
_PAD_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset")
_DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Byte": 1, "Char": 1}
_COLL_NAMES = {
    "allreduce": "AllReduce",
    "broadcast": "Broadcast",
    "allgather": "AllGather",
    "all_gather": "AllGather",
    "_allgather_base": "AllGather",
    "reduce_scatter": "ReduceScatter",
    "_reduce_scatter_base": "ReduceScatter",
    "reduce": "Reduce",
}
TS, ID, STEP = range(3)  # slot kinds of a rendered period
_MARK = re.compile(r'"@@slot(\d+)@@"')


class GenerationError(Exception):
    """A template or an option this generator cannot honour: one line for the user."""


# --- the template ----------------------------------------------------------------------------------


def _ns(value: object, what: str) -> int:
    """A Kineto time in µs (read as Decimal) → int ns, exactly."""
    ns = Decimal(value) * 1000  # type: ignore[arg-type]
    if ns != ns.to_integral_value():
        raise GenerationError(f"{what} {value} has more than 3 decimals: cannot shift it exactly")
    return int(ns)


def _plain(value: object) -> object:
    """Decimals (json.load's parse_float) back to floats, inside lists and dicts too."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _is_comm_kernel(e: dict) -> bool:
    return e.get("cat") == "kernel" and str(e.get("name", "")).startswith(_COMM_KERNEL)


def _pads(e: dict) -> bool:
    """Whether padding copies this event (see the module's docstring)."""
    if e["ph"] != "X" or e.get("cat") not in _PAD_CATS:
        return False
    name = str(e.get("name", ""))
    return not (_is_comm_kernel(e) or name == "record_param_comms" or name.startswith("c10d::"))


@dataclass
class Collective:
    """One collective of a template step as the Inspector needs it (times in template ns)."""

    op: str
    nbytes: int
    channels: int
    call: tuple[int, int]
    kernel: tuple[int, int]
    late_call: tuple[int, int]  # the same on a straggler
    late_kernel: tuple[int, int]


@dataclass
class Period:
    """One template step: its events (parsed, times in ns) and what a straggler changes."""

    step: int
    start: int
    end: int
    events: list[dict] = field(default_factory=list)  # each with "_ts" and, for X, "_dur" (ns)
    late: dict[int, tuple[int, int | None]] = field(default_factory=dict)  # index → (ts, dur) on a straggler
    collectives: list[Collective] = field(default_factory=list)


@dataclass
class Template:
    folder: Path
    rank: int
    trace: str
    head: dict
    tail: dict
    meta: list[dict]  # M and i events before the steps, written once
    end_marks: list[dict]  # i events inside the steps, moved before the generated end
    periods: list[Period]
    pid: int
    stride: int
    dropped: int
    nccl_log: str
    nccl_lines: list[str]
    run_toml: str


def _thin_keeps(e: dict) -> bool:
    """What `--thin` keeps: the steps, the collectives' calls and annotations and the GPU's activities
    (everything tracecore's collectives views and HTA's GPU breakdowns read); host operators, runtime
    calls and flow arrows are left out."""
    return e["ph"] == "X" and (e.get("cat") in _THIN_CATS or e.get("name") == "record_param_comms")


def load_template(folder: Path, rank: int, delay_ns: int, thin: bool = False) -> Template:
    """Read the template rank's trace and NCCL log and cut the trace into its steps (`thin`: only
    what `_thin_keeps`)."""
    trace = folder / f"kineto-rank{rank}.json"
    if not trace.is_file():
        raise GenerationError(f"{trace}: no such trace (--template, --template-rank)")
    with open(trace, encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Decimal)
    keys = list(doc)
    if "traceEvents" not in keys or not isinstance(doc["traceEvents"], list):
        raise GenerationError(f"{trace}: no traceEvents array")
    at = keys.index("traceEvents")
    head = {k: _plain(doc[k]) for k in keys[:at]}
    tail = {k: _plain(doc[k]) for k in keys[at + 1 :]}
    events = doc["traceEvents"]
    steps = sorted(
        (_ns(e["ts"], "ts"), int(m[1]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "user_annotation" and (m := _STEP.match(str(e.get("name"))))
    )
    if not steps:
        raise GenerationError(f"{trace}: no ProfilerStep#N on the host")
    last_end = max(_ns(e["ts"], "ts") + _ns(e.get("dur", 0), "dur") for e in events if "ts" in e)
    starts = [s for s, _ in steps]
    periods = [
        Period(k, s, starts[i + 1] if i + 1 < len(steps) else last_end) for i, (s, k) in enumerate(steps)
    ]
    meta, end_marks, dropped, max_id, pid = [], [], 0, 0, None
    for e in events:
        ph = e.get("ph")
        if ph in ("M", "i"):
            plain = _plain(e)
            if ph == "i" and "ts" in e and _ns(e["ts"], "ts") >= starts[0]:
                plain["_ts"] = _ns(e["ts"], "ts")
                end_marks.append(plain)
            else:
                meta.append(plain)
            continue
        if ph not in ("X", "s", "f") or "ts" not in e or _ns(e["ts"], "ts") < starts[0]:
            dropped += 1
            continue
        ev = _plain(e)
        ev["_ts"] = _ns(e["ts"], "ts")
        if ph == "X":
            ev["_dur"] = _ns(e.get("dur", 0), "dur")
        periods[bisect.bisect_right(starts, ev["_ts"]) - 1].events.append(ev)
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        max_id = max(
            max_id,
            int(ev.get("id", 0) or 0),
            *(int(args.get(k) or 0) for k in ("External id", "correlation")),
        )
        if ev.get("name") == "record_param_comms" and pid is None:
            pid = ev.get("pid")
    if not isinstance(pid, int):
        raise GenerationError(f"{trace}: no record_param_comms (the collectives' calls)")
    for p in periods:
        if thin:
            p.events = [e for e in p.events if _thin_keeps(e)]
        _plan_straggler(p, delay_ns, trace)
    log_name, lines = _template_log(folder, rank, pid)
    toml = _run_toml(folder)
    return Template(
        folder, rank, trace.name, head, tail, meta, end_marks, periods, pid,
        10 ** len(str(max_id)), dropped, log_name, lines, toml,
    )  # fmt: skip


def _plan_straggler(p: Period, delay: int, trace: Path) -> None:
    """What a straggler's copy of the period changes (module docstring), and the period's collectives."""
    ev = p.events
    for call in (e for e in ev if e["ph"] == "X" and e.get("name") == "record_param_comms"):
        s, end = call["_ts"], call["_ts"] + call["_dur"]
        if end + delay >= p.end:
            raise GenerationError(
                f"{trace}: a straggler's call in step {p.step} would end past the step "
                f"(--straggler-ms {delay / 1e6:g} is too long for this template)"
            )
        nested = [
            i
            for i, e in enumerate(ev)
            if e.get("pid") == call["pid"]
            and e.get("tid") == call["tid"]
            and s <= e["_ts"] <= end
            and (e["ph"] != "X" or e["_ts"] + e["_dur"] <= end)
        ]
        for i in nested:
            p.late[i] = (ev[i]["_ts"] + delay, ev[i].get("_dur"))
        works = {
            ev[i]["args"].get("External id")
            for i in nested
            if ev[i].get("cat") == "user_annotation"
            and _WORK.match(str(ev[i].get("name")))
            and "args" in ev[i]
        }
        ext = call["args"].get("External id")
        kernel_span = None
        for i, e in enumerate(ev):
            e_ext = (e.get("args") or {}).get("External id")
            gpu_work = e.get("cat") == "gpu_user_annotation" and e_ext in works
            kernel = _is_comm_kernel(e) and e_ext == ext
            if not (gpu_work or kernel):
                continue
            dur = e["_dur"]
            p.late[i] = (e["_ts"] + delay, dur - delay if dur > delay else dur)
            if kernel:
                kernel_span = (e, i)
                for j, f in enumerate(ev):  # the launch's flow arrow ends at the kernel's start
                    if f["ph"] in ("s", "f") and f.get("id") == e["args"].get("correlation") and (
                        f.get("pid"), f.get("tid"), f["_ts"]) == (e.get("pid"), e.get("tid"), e["_ts"]
                    ):  # fmt: skip
                        p.late[j] = (e["_ts"] + delay, None)
        if kernel_span is None:
            raise GenerationError(f"{trace}: record_param_comms of step {p.step} has no NCCL kernel")
        k, ki = kernel_span
        args = call["args"]
        dtype = str(args.get("dtype"))
        if dtype not in _DTYPE_BYTES:
            raise GenerationError(f"{trace}: collective dtype {dtype!r} not known to this generator")
        op = str(args.get("Collective name"))
        nelems = int(args.get("Out msg nelems" if "reduce_scatter" in op else "In msg nelems") or 0)
        grid = k["args"].get("grid")
        late_k = p.late[ki]
        p.collectives.append(
            Collective(
                op=_COLL_NAMES.get(op, op[:1].upper() + op[1:]),
                nbytes=nelems * _DTYPE_BYTES[dtype],
                channels=int(grid[0]) if isinstance(grid, list) and grid else 1,
                call=(s, end),
                kernel=(k["_ts"], k["_ts"] + k["_dur"]),
                late_call=(s + delay, end + delay),
                late_kernel=(late_k[0], late_k[0] + late_k[1]),
            )
        )


_LOG_PREFIX = re.compile(r"^(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) (?P<rest>.*)$")
_COMM_RANK = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (\d+) n[Rr]anks (\d+)\b")


def _template_log(folder: Path, rank: int, pid: int) -> tuple[str, list[str]]:
    """The NCCL log whose communicator line names the template rank (its process's pid first)."""
    logs = sorted(folder.glob("nccl.*.log"), key=lambda p: (f".{pid}." not in p.name, p.name))
    for log in logs:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        ranks = {int(m[1]) for line in lines if (m := _COMM_RANK.search(line))}
        if ranks == {rank}:
            return log.name, lines
    raise GenerationError(f"{folder}: no nccl.*.log whose communicator is rank {rank}")


def _run_toml(folder: Path) -> str:
    """run.toml for the job: the template run's name fields (the folder is named job-<N>r) and model."""
    from tracecore.ingest.runname import parse_run_name

    meta = parse_run_name(folder.name)
    lines = ["# made by bench.make_job_traces from " + folder.name, "[run]"]
    for key in ("framework", "model", "optimizer", "batch_size", "backend", "topology"):
        value = getattr(meta, key)
        if value is not None:
            lines.append(f"{key} = {json.dumps(value)}")
    if meta.loss_pct is not None:
        lines.append(f"loss_pct = {meta.loss_pct}")
    source = folder / "run.toml"
    if source.is_file():
        import tomllib

        model = tomllib.loads(source.read_text(encoding="utf-8")).get("model")
        if isinstance(model, dict):
            lines.append("[model]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in model.items() if isinstance(v, int | float | str)]
    return "\n".join(lines) + "\n"


# --- one rank --------------------------------------------------------------------------------------


@dataclass
class Job:
    template: Template
    out: Path
    ranks: int
    steps: int
    pad: int
    stragglers: list[int]
    skews: list[int]
    gzip: bool
    inspector: bool


def rank_ip(r: int) -> str:
    """Rank r's address: 10.0.0.1 onwards, 254 hosts a /24 (no .0, no .255), across 10.0.0.0/8."""
    net, host = divmod(r, 254)
    if net >= 1 << 16:
        raise GenerationError(f"rank {r}: more ranks than 10.0.0.0/8 holds at 254 a /24")
    return f"10.{net >> 8}.{net & 255}.{host + 1}"


def rank_pid(job: Job, r: int) -> int:
    return job.template.pid + r


@dataclass
class Block:
    """A period rendered for one rank: `fmt % tuple(base + shift·ts + ids·id + n·step)`."""

    fmt: str
    base: np.ndarray
    is_ts: np.ndarray
    is_id: np.ndarray
    is_step: np.ndarray
    events: int

    def render(self, shift_us: int, id_offset: int, step: int) -> str:
        vals = self.base + shift_us * self.is_ts + id_offset * self.is_id + step * self.is_step
        return self.fmt % tuple(vals.tolist())


def _decimal_us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _block(rendered: list[tuple[str, list[tuple[int, int]]]]) -> Block:
    """Events rendered by `_render` as one format string and its slots' values and kinds."""
    slots = [slot for _, event_slots in rendered for slot in event_slots]
    base = np.array([v for _, v in slots], dtype=np.int64)
    kinds = np.array([k for k, _ in slots], dtype=np.int64)
    return Block(
        "".join(",\n" + text for text, _ in rendered),
        base,
        (kinds == TS).astype(np.int64),
        (kinds == ID).astype(np.int64),
        (kinds == STEP).astype(np.int64),
        len(rendered),
    )


def _render(period: Period, job: Job, r: int, late: bool) -> tuple[Block, Block]:
    """The period's events for rank r, and the padded ones alone, each as one format string with slots."""
    t = job.template
    n_ranks = job.ranks
    pid = rank_pid(job, r)
    group = "[" + ", ".join(map(str, range(n_ranks))) + "]"
    rendered: list[tuple[str, list[tuple[int, int]]]] = []
    for i, e in enumerate(period.events):
        slots: list[tuple[int, int]] = []
        ts, dur = period.late[i] if late and i in period.late else (e["_ts"], e.get("_dur"))
        d = {k: v for k, v in e.items() if not k.startswith("_")}
        marks: list[tuple[int, int, str]] = []  # (kind, base value, the text around %d)

        def mark(kind: int, value: int, text: str = "%d", marks: list = marks) -> str:
            marks.append((kind, value, text))
            return f"@@slot{len(marks) - 1}@@"

        if d.get("pid") == t.pid:
            d["pid"] = pid
        if d.get("tid") == t.pid:
            d["tid"] = pid
        d["ts"] = mark(TS, ts // 1000, f"%d.{ts % 1000:03d}")
        if dur is not None:
            d["dur"] = mark(-1, 0, _decimal_us(dur))
        if "id" in d and d["ph"] in ("s", "f"):
            d["id"] = mark(ID, int(d["id"]))
        name = str(d.get("name"))
        if _STEP.match(name) and d.get("cat") in ("user_annotation", "gpu_user_annotation"):
            d["name"] = mark(STEP, 0, '"ProfilerStep#%d"')
        if isinstance(d.get("args"), dict):
            args = d["args"] = dict(d["args"])
            for key in ("External id", "correlation"):
                if isinstance(args.get(key), int):
                    args[key] = mark(ID, args[key])
            if name == "record_param_comms" or _is_comm_kernel(d):
                if "Rank" in args:
                    args["Rank"] = r
                if "Group size" in args:
                    args["Group size"] = n_ranks
                if "Process Group Ranks" in args:
                    args["Process Group Ranks"] = group
                inputs = args.get("Concrete Inputs")
                if name == "record_param_comms" and isinstance(inputs, list) and len(inputs) == 10:
                    args["Concrete Inputs"] = [*inputs[:3], str(r), *inputs[4:9], str(n_ranks)]
        text = json.dumps(d).replace("%", "%%")

        def place(m: re.Match, marks: list = marks, slots: list = slots) -> str:
            kind, value, around = marks[int(m[1])]
            if kind >= 0:
                slots.append((kind, value))
                return around
            return around.replace("%", "%%")

        rendered.append((_MARK.sub(place, text), slots))
    pads = [x for x, e in zip(rendered, period.events, strict=True) if _pads(e)]
    return _block(rendered), _block(pads)


def step_shifts(periods: list[Period], steps: int) -> tuple[list[int], int]:
    """Each generated step's shift from its template step (ns, whole µs) and the end of the last step."""
    cursor = periods[0].start
    shifts = []
    for n in range(steps):
        p = periods[n % len(periods)]
        shift = -(-(cursor - p.start) // 1000) * 1000
        shifts.append(shift)
        cursor = p.start + shift + (p.end - p.start)
    return shifts, cursor


def _header(job: Job, r: int) -> tuple[str, str]:
    """The trace object's text before and after its events."""
    t = job.template
    head = json.loads(json.dumps(t.head))
    info = head.get("distributedInfo")
    if isinstance(info, dict):
        info["rank"], info["world_size"] = r, job.ranks
        for pg in info.get("pg_config") or []:
            pg["pg_size"], pg["ranks"] = job.ranks, list(range(job.ranks))
    if "baseTimeNanoseconds" in head:
        head["baseTimeNanoseconds"] = int(head["baseTimeNanoseconds"]) + job.skews[r]
    if "trace_id" in head:
        head["trace_id"] = hashlib.md5(f"{job.out.name}/{r}".encode()).hexdigest().upper()
    tail = dict(t.tail)
    if "traceName" in tail:
        tail["traceName"] = f"kineto-rank{r}.json"
    before = "{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
    before += '  "traceEvents": ['
    after = "\n  ]" + "".join(f",\n  {json.dumps(k)}: {json.dumps(v)}" for k, v in tail.items()) + "\n}\n"
    return before, after


def _meta_text(job: Job, r: int, end_ns: int) -> tuple[str, int]:
    t = job.template
    pid = rank_pid(job, r)
    texts = []
    for e in t.meta:
        d = dict(e)
        if d.get("pid") == t.pid:
            d["pid"] = pid
        if d.get("tid") == t.pid:
            d["tid"] = pid
        if isinstance(d.get("args"), dict) and d["args"].get("sort_index") == t.pid:
            d["args"] = d["args"] | {"sort_index": pid}
        texts.append(json.dumps(d))
    last = t.periods[-1].end
    for e in t.end_marks:
        d = {k: v for k, v in e.items() if k != "_ts"} | {"ts": "@@end@@"}
        texts.append(json.dumps(d).replace('"@@end@@"', _decimal_us(e["_ts"] - last + end_ns)))
    return "\n" + ",\n".join(texts), len(texts)


def write_rank(job: Job, r: int) -> dict:
    """Rank r's trace, NCCL log and Inspector file; returns its manifest entry."""
    t = job.template
    late = r in job.stragglers
    blocks, pads = zip(*(_render(p, job, r, late) for p in t.periods), strict=True)
    shifts, end_ns = step_shifts(t.periods, job.steps)
    before, after = _header(job, r)
    meta, events = _meta_text(job, r, end_ns)
    name = f"kineto-rank{r}.json" + (".gz" if job.gzip else "")
    path = job.out / name
    raw = 0
    with (
        open(path, "wb") as disk,
        gzip.GzipFile(name[:-3], "wb", GZIP_LEVEL, disk, mtime=0) if job.gzip else disk as fh,
    ):  # mtime 0: the same options write the same bytes

        def put(text: str) -> None:
            nonlocal raw
            data = text.encode()
            raw += len(data)
            fh.write(data)

        put(before + meta)
        for n, shift in enumerate(shifts):
            k = n % len(t.periods)
            copy = n * (job.pad + 1)
            text = blocks[k].render(shift // 1000, copy * t.stride, n)
            events += blocks[k].events
            if not meta.strip() and n == 0:
                text = text[1:]
            parts = [text]
            for j in range(1, job.pad + 1):
                parts.append(pads[k].render(shift // 1000, (copy + j) * t.stride, n))
                events += pads[k].events
            put("".join(parts))
        put(after)
    pid = rank_pid(job, r)
    log = f"nccl.host{r}.{pid}.log"
    (job.out / log).write_text("\n".join(nccl_log(t, r, job.ranks, pid)) + "\n", encoding="utf-8")
    inspector = None
    if job.inspector:
        inspector = f"nccl-inspector/host{r}-pid{pid}.log"
        lines = inspector_lines(job, r, shifts)
        (job.out / inspector).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return {
        "rank": r,
        "pid": pid,
        "host": f"host{r}",
        "ip": rank_ip(r),
        "skew_ns": job.skews[r],
        "straggler": late,
        "trace": name,
        "bytes": path.stat().st_size,
        "json_bytes": raw,
        "events": events,
        "collectives": sum(len(t.periods[n % len(t.periods)].collectives) for n in range(job.steps)),
        "nccl_log": log,
        "inspector": inspector,
    }


# --- NCCL's log and the Inspector ------------------------------------------------------------------


def _btree(n: int, rank: int) -> tuple[int, int, int]:
    """(up, down0, down1) of `rank` in NCCL's binary tree over n ranks (trees.cc, ncclGetBtree)."""
    bit = 1
    while bit < n and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1 if n > 1 else -1)
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    low = bit >> 1
    down0 = -1 if low == 0 else rank - low
    down1 = -1 if low == 0 else rank + low
    while down1 >= n:
        down1 = -1 if low == 0 else rank + low
        low >>= 1
    return up, down0, down1


def dtree(n: int, rank: int) -> list[tuple[int, list[int]]]:
    """NCCL's double binary tree (ncclGetDtree): [(up, downs)] for tree 0 and tree 1."""
    up0, *d0 = _btree(n, rank)
    if n % 2:  # shifted by one
        u, *d = _btree(n, (rank - 1 + n) % n)
        up1, d1 = (-1 if u == -1 else (u + 1) % n), [-1 if x == -1 else (x + 1) % n for x in d]
    else:  # mirrored
        u, *d = _btree(n, n - 1 - rank)
        up1, d1 = (-1 if u == -1 else n - 1 - u), [-1 if x == -1 else n - 1 - x for x in d]
    return [(up0, [x for x in d0 if x != -1]), (up1, [x for x in d1 if x != -1])]


def _rank_topology(lines: list[str], r: int, n: int) -> dict[str, list[str]]:
    """The rank's own ring, tree and connection messages, by the kind of template line they replace."""
    rings = sorted({int(m[1]) for x in lines if (m := re.search(r"NCCL INFO Ring (\d+) :", x))})
    trees_line = next((x for x in lines if "NCCL INFO Trees" in x), "")
    tree_channels = [int(c) for c in re.findall(r"\[(\d+)\]", trees_line.split("NCCL INFO", 1)[-1])]
    via = next(
        (m[1] for x in lines if (m := re.search(r"\] \[(?:send|receive)\] via (\S.*?)\s*$", x))),
        "NET/Socket/0",
    )
    prev, nxt = (r - 1) % n, (r + 1) % n
    trees = dtree(n, r)

    def downs(ds: list[int]) -> str:
        return "/".join(map(str, [*ds, -1, -1, -1][:3]))

    tree_of = {c: trees[i % 2] for i, c in enumerate(tree_channels)}
    conns: list[str] = []
    for c in rings:
        conns += [f"Channel {c:02d}/0 : {prev}[0] -> {r}[0] [receive] via {via}",
                  f"Channel {c:02d}/0 : {r}[0] -> {nxt}[0] [send] via {via}"]  # fmt: skip
    for c, (up, ds) in tree_of.items():
        for d in ds:
            conns += [f"Channel {c:02d}/0 : {d}[0] -> {r}[0] [receive] via {via}",
                      f"Channel {c:02d}/0 : {r}[0] -> {d}[0] [send] via {via}"]  # fmt: skip
        if up != -1:
            conns += [f"Channel {c:02d}/0 : {r}[0] -> {up}[0] [send] via {via}",
                      f"Channel {c:02d}/0 : {up}[0] -> {r}[0] [receive] via {via}"]  # fmt: skip
    ring_list = [f"Channel {c:02d}/{len(rings):02d} : " + " ".join(map(str, range(n))) for c in rings]
    listed = r == 0 and all(len(x) + 40 <= NCCL_LINE_MAX for x in ring_list)
    return {
        "ring": (ring_list if listed else []) + [f"Ring {c:02d} : {prev} -> {r} -> {nxt}" for c in rings],
        "ring_list": [],
        "trees": ["Trees" + "".join(f" [{c}] {downs(ds)}->{r}->{up}" for c, (up, ds) in tree_of.items())],
        "tree": [f"Tree {c} : {up} -> {r} -> {downs(ds)}" for c, (up, ds) in tree_of.items()],
        "conn": list(dict.fromkeys(conns)),
    }


def _kind(message: str) -> str | None:
    if message.startswith("Ring "):
        return "ring"
    if message.startswith("Trees"):
        return "trees"
    if message.startswith("Tree "):
        return "tree"
    if re.match(r"^Channel \d+/\d+ :(?: +\d+)+ *$", message):
        return "ring_list"
    if re.match(r"^Channel \d+(?:/\d+)? : \d+\[", message):
        return "conn"
    return None


def nccl_log(t: Template, r: int, n: int, pid: int) -> list[str]:
    """The template rank's NCCL log made rank r's of n (module docstring)."""
    lines = t.nccl_lines
    first = next((m for x in lines if (m := _LOG_PREFIX.match(x))), None)
    if first is None:
        raise GenerationError(f"{t.nccl_log}: no NCCL line (host:pid:tid prefix)")
    t_pid = first["pid"]
    ip = next((m[2] for x in lines if (m := re.search(r"Bootstrap ?: Using ([^\s:]+):([^<\s]+)<", x))), None)
    iface = next((m[1] for x in lines if (m := re.search(r"Bootstrap ?: Using ([^\s:]+):", x))), None)
    hostid = next(
        (m[1] for x in lines if (m := re.search(r"NCCL_HOSTID set by environment to (\S+)", x))), None
    )
    t_rank = str(t.rank)
    t_n = next(m[2] for x in lines if (m := _COMM_RANK.search(x)))
    own = _rank_topology(lines, r, n)
    subs = [
        (re.compile(rf"(\bcomm 0x[0-9a-fA-F]+ rank ){t_rank}( n[Rr]anks ){t_n}\b"), rf"\g<1>{r}\g<2>{n}"),
        (re.compile(rf"\bnNodes {t_n}\b"), f"nNodes {n}"),
        (re.compile(rf"(ncclCommInitRankConfig: rank ){t_rank}( nranks ){t_n}\b"), rf"\g<1>{r}\g<2>{n}"),
        (re.compile(rf"(\bnranks: ){t_n}( rank: ){t_rank}\b"), rf"\g<1>{n}\g<2>{r}"),
    ]
    if ip:
        subs.append((re.compile(rf"(?<![\d.]){re.escape(ip)}(?![\d])"), rank_ip(r)))
    if iface:
        subs.append((re.compile(rf"\b{re.escape(iface)}\b"), "eth0"))
    if hostid:
        subs.append((re.compile(rf"\b{re.escape(hostid)}\b"), f"host{r}"))
    out: list[str] = []
    done: set[str] = set()
    for line in lines:
        m = _LOG_PREFIX.match(line)
        if m is None:
            out.append(line)
            continue
        tid = str(pid) if m["tid"] == t_pid else m["tid"]
        prefix = f"host{r}:{pid}:{tid} "
        rest = m["rest"]
        level, sep, message = rest.partition("NCCL INFO ")
        kind = _kind(message) if sep else None
        if kind is not None:
            if kind not in done:
                done.add(kind)
                out += [prefix + level + "NCCL INFO " + x for x in own[kind]]
            continue
        for pattern, repl in subs:
            rest = pattern.sub(repl, rest)
        out.append(prefix + rest)
    return out


def inspector_lines(job: Job, r: int, shifts: list[int]) -> list[str]:
    """NCCL Inspector v4.0 records of rank r's collectives, in its Unix µs."""
    t = job.template
    pid = rank_pid(job, r)
    comm_id = next((m[1] for x in t.nccl_lines if (m := re.search(r"\bcommId (0x[0-9a-fA-F]+)", x))), "0x0")
    base = int(t.head.get("baseTimeNanoseconds", 0)) + job.skews[r]
    late = r in job.stragglers
    seq: dict[str, int] = {}
    out = []
    for n, shift in enumerate(shifts):
        for c in t.periods[n % len(t.periods)].collectives:
            call, kernel = (c.late_call, c.late_kernel) if late else (c.call, c.kernel)
            call_us = [(base + x + shift) // 1000 for x in call]
            k_us = [(base + x + shift) // 1000 for x in kernel]
            seq[c.op] = seq.get(c.op, 0) + 1
            exec_us = max(k_us[1] - k_us[0], 1)
            algbw = c.nbytes / exec_us / 1e3
            busbw = algbw * (2 * (job.ranks - 1) / job.ranks if c.op == "AllReduce" else 1.0)
            channels = range(c.channels)
            record = {
                "header": {"id": comm_id[:-2], "comm_name": "unknown", "rank": r, "n_ranks": job.ranks,
                           "nnodes": job.ranks},
                "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "nccl-master-5067397c",
                             "rec_mechanism": "nccl_profiler_interface", "dump_timestamp_us": k_us[1] + 300,
                             "hostname": f"host{r}", "pid": pid},
                "coll_perf": {
                    "coll": c.op, "coll_sn": seq[c.op], "coll_msg_size_bytes": c.nbytes,
                    "coll_exec_time_us": exec_us, "coll_timing_source": "kernel_gpu",
                    "coll_algobw_gbs": round(algbw, 6), "coll_busbw_gbs": round(busbw, 6),
                    "event_trace_sn": {
                        "coll_start_sn": 1, "coll_stop_sn": 2,
                        "kernel_events": [{"channel_id": i, "kernel_start_sn": 3 + i,
                                           "kernel_stop_sn": 4 + c.channels + 2 * i,
                                           "kernel_record_sn": 3 + c.channels + 2 * i} for i in channels],
                    },
                    "event_trace_ts": {
                        "coll_start_ts": call_us[0], "coll_stop_ts": call_us[1],
                        "kernel_events": [{"channel_id": i, "kernel_start_ts": k_us[0],
                                           "kernel_stop_ts": k_us[1], "kernel_record_ts": k_us[1]}
                                          for i in channels],
                    },
                },
            }  # fmt: skip
            out.append(json.dumps(record, separators=(",", ":")))
    return out


# --- the job ---------------------------------------------------------------------------------------

_JOB: Job | None = None


def _init_worker(job: Job) -> None:
    global _JOB
    _JOB = job


def _write_in_worker(r: int) -> dict:
    assert _JOB is not None
    return write_rank(_JOB, r)


def choose_pad(job: Job, target_bytes: int) -> int:
    """The fewest padding copies per step that bring a rank's JSON to target_bytes (0 if it is there)."""
    if target_bytes <= 0:
        return 0
    t = job.template
    shifts, _end = step_shifts(t.periods, job.steps)
    blocks, pads = zip(*(_render(p, job, 0, False) for p in t.periods), strict=True)
    size = sum(len(x.encode()) for x in _header(job, 0)) + len(_meta_text(job, 0, _end)[0].encode())
    per_pad = 0
    for n, shift in enumerate(shifts):
        k = n % len(t.periods)
        size += len(blocks[k].render(shift // 1000, n * t.stride, n).encode())
        per_pad += len(pads[k].render(shift // 1000, n * t.stride, n).encode())
    if size >= target_bytes or per_pad == 0:
        return 0
    return math.ceil((target_bytes - size) / per_pad)


def plant(ranks: int, stragglers: int, skew_us: float, seed: int) -> tuple[list[int], list[int]]:
    """(straggler ranks, clock skew of each rank in ns), drawn from the seed."""
    rng = random.Random(seed)
    late = sorted(rng.sample(range(1, ranks), min(stragglers, ranks - 1)))
    skews = [round(rng.uniform(-skew_us, skew_us) * 1000) for _ in range(ranks)]
    return late, skews


def generate(args: argparse.Namespace) -> dict:
    """Write the job's folder; returns its manifest."""
    started = time.perf_counter()
    delay = round(args.straggler_ms * 1e6)
    planted = args.stragglers > 0 and args.ranks > 1
    template = load_template(args.template, args.template_rank, delay if planted else 0, args.thin)
    for p in template.periods:  # a straggler's kernels start later; the delay must fit in them
        if not p.collectives:
            raise GenerationError(f"{template.trace}: step {p.step} has no collective")
    late, skews = plant(args.ranks, args.stragglers, args.skew_us, args.seed)
    final = args.out / f"job-{args.ranks}r"
    if final.exists() and not args.force:
        raise GenerationError(f"{final} exists (pass --force to replace it)")
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "nccl-inspector" if args.inspector else partial).mkdir(parents=True)
    job = Job(template, partial, args.ranks, args.steps, 0, late, skews, args.gzip, args.inspector)
    job.pad = choose_pad(job, round(args.rank_mb * 1e6))
    expected = args.ranks * args.rank_mb * 1e6 / (8 if args.gzip else 1)
    free = shutil.disk_usage(partial).free
    if expected > free:
        shutil.rmtree(partial)
        raise GenerationError(
            f"{args.out}: {free / 1e9:.1f} GB free, the job needs about {expected / 1e9:.1f} GB"
        )
    if args.jobs > 1 and args.ranks > 1:
        with ProcessPoolExecutor(args.jobs, initializer=_init_worker, initargs=(job,)) as pool:
            per_rank = list(pool.map(_write_in_worker, range(args.ranks)))
    else:
        per_rank = [write_rank(job, r) for r in range(args.ranks)]
    (partial / "run.toml").write_text(template.run_toml, encoding="utf-8")
    seconds = time.perf_counter() - started
    total = {k: sum(x[k] for x in per_rank) for k in ("bytes", "json_bytes", "events", "collectives")}
    manifest = {
        "generator": "bench.make_job_traces",
        "version": VERSION,
        "seed": args.seed,
        "template": {
            "folder": template.folder.name,
            "rank": template.rank,
            "trace": template.trace,
            "nccl_log": template.nccl_log,
            "steps": [p.step for p in template.periods],
            "collectives_per_step": [len(p.collectives) for p in template.periods],
            "events_per_step": [len(p.events) for p in template.periods],
            "dropped_events": template.dropped,
            "id_stride": template.stride,
        },
        "ranks": args.ranks,
        "steps": args.steps,
        "pad": job.pad,
        "thin": args.thin,
        "rank_mb": args.rank_mb,
        "gzip_level": GZIP_LEVEL if args.gzip else None,
        "inspector": args.inspector,
        "stragglers": late,
        "straggler_delay_ns": delay,
        "skew_us": args.skew_us,
        "skews_ns": skews,
        "total": total,
        "seconds": round(seconds, 2),
        "json_mb_per_s": round(total["json_bytes"] / 1e6 / seconds, 1),
        "per_rank": per_rank,
    }
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    partial.rename(final)
    manifest["folder"] = str(final)
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.make_job_traces", description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="output root: the job goes to OUT/job-<N>r/")
    ap.add_argument("--ranks", type=int, required=True, help="ranks of the job (N)")
    ap.add_argument("--steps", type=int, default=100, help="profiler steps per rank (default 100)")
    ap.add_argument("--rank-mb", type=float, default=100, help="target MB of JSON per rank (0: no padding)")
    ap.add_argument("--stragglers", type=int, default=2, help="ranks late to every collective (default 2)")
    ap.add_argument("--straggler-ms", type=float, default=15, help="how late, ms (default 15)")
    ap.add_argument("--skew-us", type=float, default=200, help="clock skew per rank, uniform in ± this (µs)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the stragglers and skews (default 1)")
    ap.add_argument("--gzip", action="store_true", help=f"write .json.gz (gzip level {GZIP_LEVEL})")
    ap.add_argument("--inspector", action="store_true", help="NCCL Inspector files too")
    ap.add_argument(
        "--thin",
        action="store_true",
        help="only steps, collectives and GPU activities (no host operators): many ranks in little disk",
    )
    ap.add_argument("--template", type=Path, default=TEMPLATE, help="run folder of the template trace")
    ap.add_argument("--template-rank", type=int, default=0, help="the rank every rank is made from")
    ap.add_argument("--jobs", type=int, default=2, help="processes writing ranks (default 2)")
    ap.add_argument("--force", action="store_true", help="replace an existing OUT/job-<N>r/")
    args = ap.parse_args(argv)
    if args.ranks < 1 or args.steps < 1 or args.jobs < 1 or args.rank_mb < 0:
        ap.error("--ranks, --steps and --jobs must be at least 1, --rank-mb at least 0")
    if args.stragglers < 0 or args.straggler_ms < 0 or args.skew_us < 0:
        ap.error("--stragglers, --straggler-ms and --skew-us must not be negative")
    try:
        m = generate(args)
    except GenerationError as err:
        print(f"make_job_traces: {err}", file=sys.stderr)
        return 2
    total = m["total"]
    print(
        f"{m['folder']}: {m['ranks']} ranks x {m['steps']} steps, pad {m['pad']},"
        f" stragglers {m['stragglers']}:"
        f" {total['bytes'] / 1e6:,.1f} MB on disk ({total['json_bytes'] / 1e6:,.1f} MB of JSON),"
        f" {total['events']:,} events, {m['seconds']:.1f} s ({m['json_mb_per_s']} MB/s of JSON)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
