"""PyTorch profiler traces (Kineto's Chrome JSON, plain or .gz) → `collectives`, steps and GPU kernels.

`torch.profiler` exports one object per rank: `baseTimeNanoseconds` (Unix ns) and `traceEvents`
whose `ts`/`dur` are µs after it, so Unix time = baseTimeNanoseconds/1e9 + ts/1e6 (CUPTI puts GPU
times on the same host clock). `distributedInfo` names the rank and the process groups. What is read:

    ProfilerStep#N       user_annotation (host) and gpu_user_annotation (its span on the GPU): a step
    record_param_comms   cpu_op of c10d: "Collective name", "In msg nelems", dtype, "Process Group
                         Name", "Group size", "Rank"; its "External id" is that of the kernel below
    nccl:all_reduce, gloo:all_reduce, …   user_annotation of the backend's work: for NCCL on the
                         calling thread inside record_param_comms, for gloo on gloo's own thread when
                         the collective runs (with "Input Dims" and "Input type": the message)
    c10d::allreduce_, …  cpu_op of the call, used when a trace has no record_param_comms
    NCCL's kernels       the collective's GPU kernel (kind communication; names below); every other
                         kernel, memcpy and memset is a row of `profiler_kernels` too

One collective is one call: its kernel gives start/end (`gpu_kernel`), else the backend's work
(`backend_work`: gloo), else the call itself (`cpu_call`). A gloo work annotation is paired with the
call of the same operation in issue order. Events are kept only when they are one of these, so
memory grows with the collectives, steps and kernels, not with the file.

A collective's kernel is named by the NCCL (or RCCL) release that ran it, as CUPTI demangles it
(`_COMM_KERNEL_FORMS`, matched at the name's start; read from NVIDIA/nccl's sources at each tag):

    2.3          ncclAllReduceKernel_sum_f32, ncclAllReduceLLKernel_sum_f32
    2.4 – 2.7    ncclAllReduceRingLLKernel_sum_f32, …TreeLL…, …CollNetLL… (2.6),
                 ncclSendRecvKernel_copy_i8 (2.7)
    2.8 – 2.18   ncclKernel_AllReduce_RING_LL_Sum_float, ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t
    2.19 – 2.30  ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclDevKernel_AllGather_RING_LL,
                 ncclDevKernel_SendRecv, ncclDevKernel_Generic (RCCL: ncclDevKernel_Generic_1/_2/_4);
                 (ncclDevKernelArgsStorage<4096ul>) as their argument from 2.22
    2.19 – 2.30  (anonymous namespace)::oneRankReduce<FuncPreMulSum<float> > (one-rank communicator)
    2.27         ncclSymDevKernel_AllReduce_AGxLL_R_sum_f32 (symmetric memory)
    2.28 – 2.30  ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f32, ncclSymkDevKernel_AllGather_LL, …
    RCCL         mscclKernel_Sum_float_LL… (its MSCCL algorithms)

2.28's copy-engine collectives run no kernel (copies only). A kernel of no known form whose name
holds "nccl", "rccl" or "msccl", or that carries a collective's "Collective name" (Kineto copies
record_param_comms' metadata onto the kernels it launched) while its collective has no known NCCL
kernel, is taken as communication and counted in one warning; a trace whose NCCL collectives got no
communication kernel at all while it has GPU kernels says so in a warning too (never a silent zero).

Kineto's format across releases (libkineto's output_json.cpp), all read:

    before 2021-06   host operators and annotations "Operator", GPU annotations "User"
    to 2022-05       GPU annotations "gpu_user_Annotation"
    to 2022-04       kernels "Kernel", copies "Memcpy"/"Memset", their link "external id" (none at
                     all from 2021-11: such a kernel is not linked to its call; the GPU annotation
                     still times the collective)
    to 2023-12       record_param_comms' "In msg size"/"Out msg size" (element counts, since renamed
                     "In msg nelems"/"Out msg nelems")
    to 2024-04       "Process Group ID" (since "Process Group Name")
    to 2024-05       no baseTimeNanoseconds: ts are Unix µs (method absolute_us)

and a record_param_comms without "Collective name" (older PyTorch; "coalesced" records) takes its
operation, bytes and dtype from the backend's work annotation nested in it.
"""

from __future__ import annotations

import bisect
import re
from array import array
from pathlib import Path

import pyarrow as pa

from tracecore.arrow_rows import array as arrow_array  # not pa.array: it imports pandas
from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._chrome import (
    TraceRecords,
    each_record,
    int_or_none,
    preview,
    skippable_record,
    us_to_ns,
)
from tracecore.logs._collectives import (
    DTYPE_BYTES,
    PLAUSIBLE_NS,
    TABLES,
    Clock,
    Columns,
    dtype_name,
    int_array,
    op_name,
    plausible,
    refused_clock,
)
from tracecore.logs._common import BadLines, note_empty

SOURCE = "pytorch_profiler"
_WORK = re.compile(r"^(nccl|gloo|mpi|ucc|xccl|hccl|rccl):([A-Za-z_]{1,64})$")
_STEP = re.compile(r"^ProfilerStep#(\d{1,12})$")
_C10D = re.compile(r"^c10d::([A-Za-z_]{1,64})$")
# The collective kernels' names by NCCL release (the module docstring's table), in one pattern
_COMM_KERNEL_FORMS = (
    ("2.3-2.7", r"nccl(?:AllReduce|AllGather|ReduceScatter|Reduce|Broadcast|SendRecv)\w*?Kernel_"),
    ("2.8-2.18", r"ncclKernel_"),
    ("2.19-2.30, RCCL", r"ncclDevKernel"),
    ("2.19-2.30 one rank", r"(?:void )?(?:\(anonymous namespace\)::)?oneRankReduce<"),
    ("2.27", r"ncclSymDevKernel_"),
    ("2.28-2.30", r"ncclSymkDevKernel_"),
    ("RCCL MSCCL", r"mscclKernel_"),
)
_COMM_KERNEL = re.compile("|".join(f"(?:{form})" for _, form in _COMM_KERNEL_FORMS))
_NCCL_LIKE = re.compile(r"nccl|rccl|msccl", re.IGNORECASE)  # a name of no known form, still NCCL's
_CPU_BACKENDS = ("gloo", "mpi")  # their collectives run no GPU kernel
# Kineto's categories, old and new (the module docstring), as `_Trace.add` reads them
_CATEGORY = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy",
    "Memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset",
    "Memset": "gpu_memset",
    "cpu_op": "cpu_op",
    "Operator": "cpu_op",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
    "gpu_user_Annotation": "gpu_user_annotation",
    "User": "gpu_user_annotation",
}
_KINDS = ("communication", "compute", "memcpy", "memset")
# the mapping's stated error: CUPTI and the host's clock, both Unix time on the host that captured
ERROR_NS = 1_000_000
ABSOLUTE_US = 1e15  # ts beyond this is already Unix µs (traces written before baseTimeNanoseconds)
INT32, INT64 = range(-(2**31), 2**31), range(-(2**63), 2**63)
# records `_Trace.add` has no use for, told by Kineto's leading "ph", "cat" and "name" (unescaped):
# every phase but X, and complete events of any other category than those read (`_CATEGORY`), or
# host operators other than record_param_comms and c10d's calls
_UNUSED = skippable_record(
    r'\{\s*+"ph":\s*+"(?:[^X"\\]"|X",\s*+"cat":\s*+"(?:(?!(?:' + "|".join(_CATEGORY) + r')")[A-Za-z_]++"'
    r'|cpu_op",\s*+"name":\s*+"(?!record_param_comms"|c10d::)[^"\\]*+"))'
)


def _nccl_like(name: str) -> bool:
    """Whether a kernel's name holds "nccl", "rccl" or "msccl" in any case (a cheap test first: most
    names are long C++ templates)."""
    return ("ccl" in name or "CCL" in name) and _NCCL_LIKE.search(name) is not None


def detect(head: str) -> bool:
    """A Chrome-trace object with Kineto's header keys or PyTorch's event names."""
    text = head.lstrip()
    return (
        text.startswith("{")
        and '"traceEvents"' in text
        and any(m in text for m in ('"baseTimeNanoseconds"', '"distributedInfo"', '"schemaVersion"'))
    )


class _Trace:
    """What one pass over the file keeps: the events that become rows, with the file's own times
    (ns after the trace's base)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []  # record_param_comms
        self.c10d: list[dict] = []  # c10d::op calls (used only when there is no record_param_comms)
        self.works: list[dict] = []  # nccl:/gloo: annotations on the host
        self.gpu_work: dict[int, tuple[int, int]] = {}  # External id → span of its GPU annotation
        self.comm_kernels: dict[int, list[int]] = {}  # External id → [start, end] of its kernels
        # kernels of no NCCL name that carry a collective's "Collective name": External id → (the first
        # one's name, their rows in `kernels`)
        self.launched: dict[int, tuple[str, list[int]]] = {}
        self.guessed, self.guessed_name = 0, ""  # kernels taken as communication though of no known form
        self.call_exts: set[int] = set()  # External ids of the record_param_comms calls read so far
        self.call_kernels, self.call_kernel_name = 0, ""  # compute kernels of those calls
        self.steps: dict[int, dict] = {}
        self.kernels = {k: array("q") for k in ("device", "stream", "kind", "start", "end")}
        self.pid: int | None = None
        self.min_ts: int | None = None

    def add(self, line: int, rec: dict, bad: BadLines) -> None:
        if rec.get("ph") != "X":
            return
        name, category = rec.get("name"), rec.get("cat")
        cat = _CATEGORY.get(category) if isinstance(category, str) else None
        ts, dur = us_to_ns(rec.get("ts")), us_to_ns(rec.get("dur"))
        if not isinstance(name, str) or ts is None or dur is None or dur < 0:
            bad.add(line, preview(rec), "complete event without a name, ts or dur")
            return
        self.min_ts = ts if self.min_ts is None else min(self.min_ts, ts)
        args = rec.get("args") if isinstance(rec.get("args"), dict) else {}
        ext = int_or_none(args.get("External id", args.get("external id")))
        span = {"ts": ts, "end": ts + dur, "line": line, "ext": ext, "tid": rec.get("tid"), "args": args}
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            self._kernel(name, cat, span)
        elif cat == "cpu_op" and name == "record_param_comms":
            self.calls.append(span | {"name": name})
            if ext is not None:
                self.call_exts.add(ext)
            self._note_pid(rec)
        elif cat == "cpu_op" and (m := _C10D.match(name)):
            self.c10d.append(span | {"name": m[1]})
        elif cat in ("user_annotation", "gpu_user_annotation"):
            self._annotation(name, cat, span, rec)
        elif category == "Operator":  # Kineto before 2021-06: annotations were operators too
            self._annotation(name, "user_annotation", span, rec)

    def _note_pid(self, rec: dict) -> None:
        pid = rec.get("pid")
        if self.pid is None and isinstance(pid, int) and not isinstance(pid, bool) and pid in INT64:
            self.pid = pid

    def _kernel(self, name: str, cat: str, span: dict) -> None:
        args = span["args"]
        known = cat == "kernel" and _COMM_KERNEL.match(name) is not None
        guessed = cat == "kernel" and not known and _nccl_like(name)
        communication = known or guessed
        if guessed:
            self._guess(name)
        kind = "communication" if communication else {"kernel": "compute"}.get(cat, cat[4:])
        device, stream = int_or_none(args.get("device")) or 0, int_or_none(args.get("stream")) or 0
        if device not in INT32 or stream not in INT64 or span["end"] not in INT64:
            raise ValueError("device, stream or end past its type")  # checked before any is kept
        k = self.kernels
        k["device"].append(device)
        k["stream"].append(stream)
        k["kind"].append(_KINDS.index(kind))
        k["start"].append(span["ts"])
        k["end"].append(span["end"])
        if cat == "kernel" and not communication and span["ext"] is not None:
            if "Collective name" in args:
                self.launched.setdefault(span["ext"], (name, []))[1].append(len(k["kind"]) - 1)
            if span["ext"] in self.call_exts:  # Kineto writes the host's events before the GPU's
                self.call_kernels += 1
                self.call_kernel_name = self.call_kernel_name or name
        if communication and span["ext"] is not None:
            known = self.comm_kernels.setdefault(span["ext"], [span["ts"], span["end"]])
            known[0], known[1] = min(known[0], span["ts"]), max(known[1], span["end"])

    def _guess(self, name: str, times: int = 1) -> None:
        self.guessed += times
        self.guessed_name = self.guessed_name or name

    def adopt_launched(self) -> None:
        """The kernels a collective launched, when none of them has an NCCL name: its communication
        kernels all the same (a release's new name), counted with the guessed."""
        k = self.kernels
        for ext, (name, rows) in self.launched.items():
            if ext in self.comm_kernels:  # its NCCL kernel is known: the others are its own compute
                continue
            self.comm_kernels[ext] = [min(k["start"][i] for i in rows), max(k["end"][i] for i in rows)]
            for i in rows:
                k["kind"][i] = _KINDS.index("communication")
            self._guess(name, len(rows))

    def _annotation(self, name: str, cat: str, span: dict, rec: dict) -> None:
        step = _STEP.match(name)
        if step:
            entry = self.steps.setdefault(int(step[1]), {})
            prefix = "gpu_" if cat == "gpu_user_annotation" else ""
            entry[prefix + "start"], entry[prefix + "end"] = span["ts"], span["end"]
            if not prefix:
                self._note_pid(rec)
            return
        work = _WORK.match(name)
        if not work:
            return
        if cat == "gpu_user_annotation":
            if span["ext"] is not None:
                self.gpu_work[span["ext"]] = (span["ts"], span["end"])
        else:
            self.works.append(span | {"name": name, "backend": work[1], "op": work[2]})


def _message(args: dict) -> tuple[int | None, str | None]:
    """(bytes, dtype) of a work annotation: its input tensors' elements × element size."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None, None
    total, first = 0, None
    for shape, type_name in zip(dims, types, strict=False):
        dtype = dtype_name(type_name)
        if dtype is None or not isinstance(shape, list):
            continue
        elements = 1
        for d in shape:
            size = int_or_none(d)
            if size is None or size < 0:
                return None, None
            elements *= size
        total += elements * DTYPE_BYTES[dtype]
        first = first or dtype
    return (total, first) if first else (None, None)


def _assemble(trace: _Trace, info: dict) -> list[dict]:
    """One row per collective call, in the file's own time (ns after its base)."""
    rows: list[dict] = []
    works_by_tid: dict[object, list[dict]] = {}
    for w in sorted(trace.works, key=lambda w: w["ts"]):
        works_by_tid.setdefault(w["tid"], []).append(w)
    used: set[int] = set()
    for call in sorted(trace.calls, key=lambda c: c["ts"]):
        args = call["args"]
        nested = next(
            (
                w
                for w in works_by_tid.get(call["tid"], [])
                if id(w) not in used and call["ts"] <= w["ts"] <= call["end"]
            ),
            None,
        )
        if nested is not None:
            used.add(id(nested))
        named = args.get("Collective name")  # absent in older traces: the nested work names it
        op = op_name(named) or (op_name(nested["op"]) if nested is not None else None)
        dtype = dtype_name(args.get("dtype"))
        # bytes as NCCL counts them: a reduce-scatter's count is each rank's output ("… msg size" to 2023)
        side = "Out" if op == "reduce_scatter" else "In"
        nelems = int_or_none(args.get(f"{side} msg nelems", args.get(f"{side} msg size")))
        size = nelems * DTYPE_BYTES[dtype] if nelems is not None and dtype else None
        if size is None and nested is not None and op != "reduce_scatter":
            size, work_dtype = _message(nested["args"])
            dtype = dtype or work_dtype
        group = args.get("Process Group Name", args.get("Process Group ID"))  # "… ID" to 2024-04
        row = {
            "op": op,
            "source_op": str(named)[:64] if named is not None else nested["name"] if nested else None,
            "bytes": size,
            "dtype": dtype,
            "comm": str(group)[:64] if group is not None else None,
            "comm_size": int_or_none(args.get("Group size")),
            "rank": int_or_none(args.get("Rank")),
            "call": (call["ts"], call["end"]),
            "line": call["line"],
        }
        kernel = trace.comm_kernels.get(call["ext"]) if call["ext"] is not None else None
        gpu = trace.gpu_work.get(nested["ext"]) if nested is not None and nested["ext"] is not None else None
        if kernel is not None or gpu is not None:
            row["span"], row["time_source"] = tuple(kernel or gpu), "gpu_kernel"
        rows.append(row)
    # Work annotations no call encloses: gloo runs each on its own thread. They pair with the calls
    # of their operation that have no work yet (record_param_comms, else c10d::op), in issue order.
    pending = [w for w in sorted(trace.works, key=lambda w: w["ts"]) if id(w) not in used]
    waiting = (
        [r for r in rows if "span" not in r]
        if trace.calls
        else [
            {"op": op_name(c["name"]), "call": (c["ts"], c["end"]), "line": c["line"], "c10d": True}
            for c in sorted(trace.c10d, key=lambda c: c["ts"])
        ]
    )
    for work in pending:
        op = op_name(work["op"])
        call = next((r for r in waiting if r["op"] == op and "span" not in r), None)
        size, dtype = _message(work["args"])
        gpu = trace.gpu_work.get(work["ext"]) if work["ext"] is not None else None
        row = call if call is not None else {"op": op, "line": work["line"]}
        row.update(source_op=row.get("source_op") or work["name"], span=gpu or (work["ts"], work["end"]))
        row["backend"] = work["backend"].lower()
        row["time_source"] = "gpu_kernel" if gpu else "backend_work"
        if row.get("bytes") is None:
            row["bytes"], row["dtype"] = size, row.get("dtype") or dtype
        if call is None:
            rows.append(row)
    rows += [r for r in waiting if r.get("c10d") and "span" in r]
    pg = info.get("pg_config") if isinstance(info.get("pg_config"), list) else []
    only_pg = pg[0] if len(pg) == 1 and isinstance(pg[0], dict) else {}
    for row in rows:
        row.setdefault("comm", str(only_pg["pg_name"])[:64] if "pg_name" in only_pg else None)
        size = int_or_none(only_pg.get("pg_size")) or int_or_none(info.get("world_size"))
        row.setdefault("comm_size", size)
        if row.get("rank") is None:
            row["rank"] = int_or_none(info.get("rank"))
    return rows


def parse(path: Path) -> ParsedLog:
    """Every collective, step and GPU activity of the trace, streamed."""
    bad = BadLines()
    records = TraceRecords(path, bad, skip=_UNUSED)
    trace = _Trace()
    each_record(records, lambda line, rec: trace.add(line, rec, bad))
    meta = records.meta
    info = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    base = int_or_none(meta.get("baseTimeNanoseconds"))
    method = "baseTimeNanoseconds"
    warnings = []
    if base is not None and not plausible(base):
        warnings.append(refused_clock(f"baseTimeNanoseconds {base}", base))
        base = None
    elif base is None and trace.min_ts is not None and trace.min_ts >= ABSOLUTE_US * 1000:
        base, method = 0, "absolute_us"  # traces written before Kineto had a base: Unix µs
    elif base is None and trace.min_ts is not None:
        bad.add(0, "", "no baseTimeNanoseconds: the trace's times stay relative and are not stored")
    backend = str(info["backend"]).lower()[:32] if isinstance(info.get("backend"), str) else None
    if backend not in _CPU_BACKENDS:
        trace.adopt_launched()
    rows = _assemble(trace, info)
    warnings += _unrecognised(trace, rows, backend)
    rank = int_or_none(info.get("rank"))
    if rank is not None and rank not in INT32:
        bad.add(0, str(rank)[:40], "distributedInfo.rank is not a rank; not stored")
        rank = None
    host = meta["host_name"][:255] if isinstance(meta.get("host_name"), str) else None
    name = Path(path).name
    unix = Clock(base)  # each time checked: one outside PLAUSIBLE_NS is not stored, and counted

    step_starts = sorted((s["start"], n, s["end"]) for n, s in trace.steps.items() if "start" in s)
    keys = [s[0] for s in step_starts]

    def step_of(t: int | None) -> int | None:
        i = bisect.bisect_right(keys, t) - 1 if t is not None else -1
        return step_starts[i][1] if i >= 0 and t < step_starts[i][2] else None

    out = Columns(TABLES["collectives"])
    rows.sort(key=lambda r: (r.get("call") or r["span"])[0])
    seqs: dict[object, int] = {}
    for row in rows:
        span, call = row.get("span"), row.get("call")
        seq = seqs[row["comm"]] = seqs.get(row["comm"], -1) + 1
        out.add(
            file=name,
            source=SOURCE,
            backend=row.get("backend") or backend,
            host=host,
            pid=trace.pid,
            rank=row["rank"],
            comm=row["comm"],
            comm_size=row["comm_size"],
            op=row["op"],
            source_op=row.get("source_op"),
            seq=seq,
            bytes=row.get("bytes"),
            dtype=row.get("dtype"),
            start_ns=unix((span or call)[0], row["line"]),
            end_ns=unix((span or call)[1], row["line"]),
            time_source=row.get("time_source", "cpu_call"),
            call_start_ns=unix(call[0], row["line"]) if call else None,
            call_end_ns=unix(call[1], row["line"]) if call else None,
            step=step_of((call or span)[0]),
            line=row["line"],
        )
    note_empty(out.rows + len(trace.steps), bad, "PyTorch profiler step or collective")
    steps = Columns(TABLES["profiler_steps"])
    for n, s in sorted(trace.steps.items()):
        steps.add(
            file=name,
            pid=trace.pid,
            rank=rank,
            step=n,
            start_ns=unix(s.get("start")),
            end_ns=unix(s.get("end")),
            gpu_start_ns=unix(s.get("gpu_start")),
            gpu_end_ns=unix(s.get("gpu_end")),
        )
    clocks = Columns(TABLES["collective_clocks"])
    clocks.add(
        file=name,
        source=SOURCE,
        host=host,
        pid=trace.pid,
        rank=rank,
        method=method if base is not None else "none",
        offset_ns=base,
        error_ns=ERROR_NS,
        anchors=None,
        collectives=out.rows,
    )
    kernels = _kernels(trace, name, rank, unix)
    unix.report(bad)
    return ParsedLog(
        out.table(),
        bad.count,
        bad.examples,
        more={
            "collective_clocks": clocks.table(),
            "profiler_steps": steps.table(),
            "profiler_kernels": kernels,
        },
        warnings=warnings,
    )


def _unrecognised(trace: _Trace, rows: list[dict], backend: str | None) -> list[str]:
    """One warning for the kernels taken as communication though of no known NCCL name, one for NCCL
    collectives with no communication kernel at all in a trace with GPU kernels: what a name-only
    match silently counts as zero communication when a release renames its kernels."""
    warnings = []
    if trace.guessed:
        warnings.append(
            f"{trace.guessed} GPU kernel(s) of no known NCCL kernel name (e.g. {_cut(trace.guessed_name)!r})"
            " taken as communication: named like NCCL's, or launched by a collective"
        )
    nccl = [r for r in rows if (r.get("backend") or backend) not in _CPU_BACKENDS and r["comm_size"] != 1]
    kinds = trace.kernels["kind"]
    if nccl and _KINDS.index("communication") not in kinds and _KINDS.index("compute") in kinds:
        seen = (
            f" (the kernels they launched are named like {_cut(trace.call_kernel_name)!r}"
            f" ×{trace.call_kernels})"
            if trace.call_kernels
            else ""
        )
        warnings.append(
            f"{len(nccl)} of {len(nccl)} NCCL collectives have no GPU kernel recognised as NCCL's{seen}:"
            " their kernels count as compute, and their times are their GPU annotations' or host calls'"
        )
    return warnings


def _cut(name: str, limit: int = 60) -> str:
    """A kernel's name for a warning: at most `limit` characters, … where cut."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _kernels(trace: _Trace, file: str, rank: int | None, unix: Clock) -> pa.Table:
    """The GPU activities as a table (empty when the trace's times cannot be placed); those at times
    outside PLAUSIBLE_NS are left out, counted by `unix`."""
    k = trace.kernels
    base = unix.offset
    n = len(k["start"]) if base is not None else 0
    low, high = PLAUSIBLE_NS[0] - (base or 0), PLAUSIBLE_NS[1] - (base or 0)
    if n and not (min(k["start"]) >= low and max(k["end"]) < high and max(k["start"]) < high):
        keep = [i for i in range(n) if low <= k["start"][i] < high and low <= k["end"][i] < high]
        first = next(i for i, j in enumerate([*keep, n]) if i != j)  # the first left out
        outside = k["start"][first] if not low <= k["start"][first] < high else k["end"][first]
        unix.refuse(outside + (base or 0), times=n - len(keep))
        for key, values in k.items():
            k[key] = array("q", (values[i] for i in keep))
        n = len(keep)
    if base:
        k["start"] = array("q", (t + base for t in k["start"]))
        k["end"] = array("q", (t + base for t in k["end"]))

    def ints(key: str) -> pa.Array:
        return int_array(k[key] if n else array("q"), [], n)

    kinds = arrow_array(list(_KINDS), pa.string())
    return pa.table(
        {
            "worker": pa.nulls(n, pa.string()),
            "file": arrow_array([file] * n, pa.string()),
            "pid": arrow_array([trace.pid] * n, pa.int64()),
            "rank": arrow_array([rank] * n, pa.int32()),
            "device": ints("device").cast(pa.int32(), safe=False),
            "stream": ints("stream"),
            "kind": pa.DictionaryArray.from_arrays(ints("kind").cast(pa.int32()), kinds).cast(pa.string()),
            "start_ns": ints("start"),
            "end_ns": ints("end"),
        },
        schema=TABLES["profiler_kernels"],
    )


PARSER = LogParser(
    table="collectives",
    detect=detect,
    parse=parse,
    more_tables=("collective_clocks", "profiler_steps", "profiler_kernels"),
)
