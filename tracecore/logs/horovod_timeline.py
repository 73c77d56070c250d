"""Horovod timeline (`HOROVOD_TIMELINE=timeline.json`) → table `horovod_timeline`, one row per event.

The file is a Chrome-trace JSON array written by rank 0 (`horovod/common/timeline.cc`). The first
record `{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": T}}`
anchors time: an event's absolute time is T + ts µs, stored as `ts_ns` (UTC ns). Each tensor is a
"process": a `process_name` metadata record names pid n. Events are `B`/`E` (nested activities: the
response type such as ALLREDUCE, then QUEUE, MEMCPY_IN_FUSION_BUFFER, NCCL_ALLREDUCE, ...), `X` (dur 0
per-rank readiness ticks inside NEGOTIATE_*) and `i` cycle markers (no pid).

Writers differ in how they end the array: newer Horovod closes it after every event (`}]`, then seeks
back and writes `,`), older ones leave it open (`},\\n`), and a killed job leaves half a record. So the
parser reads the records one by one and counts each unreadable one as a bad line. `E` events carry no
name; they get the name of the `B` they close. Without the anchor (old versions) `ts_ns` is null and
`ts_us` (µs since the timeline start, steady clock) still orders events; an anchor outside
`PLAUSIBLE_NS` (2000-2200) is refused with a warning, and so is each time it would place there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._chrome import TraceRecords, each_record, int_or_none, preview
from tracecore.logs._collectives import (
    DTYPE_BYTES,
    TABLES,
    Clock,
    Columns,
    dtype_name,
    op_name,
    plausible,
    refused_clock,
)
from tracecore.logs._common import BadLines, Rows, note_empty, parsed_log

TABLE = "horovod_timeline"
ANCHOR = "start_time_since_epoch_in_micros"
MARKERS = ('"process_name"', ANCHOR, '"NEGOTIATE_', '"ALLREDUCE"')
# the activity in which a tensor's bytes cross the network: the backend's collective
_WIRE = re.compile(
    r"^(NCCL|GLOO|MPI|CCL|DDL|ADASUM)_(ALLREDUCE|ALLGATHER|BCAST|BROADCAST|REDUCESCATTER|ALLTOALL)$"
)
_SHAPE = re.compile(r"^\[\s*(\d{1,12}(?:\s*,\s*\d{1,12}){0,31})?\s*\]$")
ERROR_NS = 1_000_000  # the timeline's steady clock anchored once to Unix time on rank 0's host


def detect(head: str) -> bool:
    """A JSON array of Chrome-trace records with Horovod's metadata or operation names."""
    text = head.lstrip()
    return text.startswith("[") and '"ph"' in text and any(m in text for m in MARKERS)


def _tensor_bytes(args: object) -> tuple[int | None, str | None]:
    """A tensor's bytes from the `dtype` and `shape` Horovod writes on its operation's end."""
    if not isinstance(args, dict):
        return None, None
    dtype = dtype_name(args.get("dtype"))
    shape = _SHAPE.match(str(args.get("shape", "")).strip())
    if dtype is None or shape is None:
        return None, dtype
    elements = 1
    for d in (shape[1] or "").split(","):
        elements *= int(d) if d.strip() else 1
    return elements * DTYPE_BYTES[dtype], dtype


SCHEMA_FIELDS = (
    ("tensor_id", "int64"),
    ("tensor", "string"),
    ("ph", "string"),
    ("name", "string"),
    ("ts_us", "float64"),
    ("ts_ns", "int64"),
    ("dur_us", "float64"),
    ("args", "string"),
)
INT64 = range(-(2**63), 2**63)


def parse(path: Path) -> ParsedLog:
    """Streamed record by record (`TraceRecords`) into Arrow batches (`Rows`): memory follows the table,
    not the file (an 87 MB timeline took 1.6 GB when every event was kept as a dict first)."""
    import pyarrow as pa

    schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMA_FIELDS])
    # `tensor` is filled at the end (a tensor's name may come after its events); `ts_int` keeps an
    # integer ts exact for the rows read before the anchor
    gathered = pa.schema([f for f in schema if f.name != "tensor"] + [pa.field("ts_int", pa.int64())])
    bad = BadLines()
    anchor_us: int | None = None
    before_anchor = 0  # rows read before the anchor, whose ts_ns is made once it is known
    tensors: dict[int, str] = {}
    open_names: dict[object, list[str]] = {}
    out = Rows(gathered)
    wire = _Wire()
    warnings: list[str] = []
    clock = Clock(0)  # the anchored times (ns), each checked to be plausible

    def use(line_no: int, rec: dict) -> None:
        nonlocal anchor_us, before_anchor
        ph = rec.get("ph")
        if ph == "M":
            args = rec.get("args") if isinstance(rec.get("args"), dict) else {}
            if ANCHOR in args and anchor_us is None and not warnings:
                anchor = int_or_none(args[ANCHOR])
                if anchor is None or not plausible(anchor * 1000):
                    ns = anchor * 1000 if anchor is not None else 0
                    warnings.append(refused_clock(f"{ANCHOR} {str(args[ANCHOR])[:40]}", ns))
                else:
                    anchor_us = anchor
            elif rec.get("name") == "process_name" and "name" in args and isinstance(rec.get("pid"), int):
                tensors[rec["pid"]] = str(args["name"])
            return
        ts = rec.get("ts")
        if not isinstance(ph, str) or not isinstance(ts, int | float) or isinstance(ts, bool) or ts != ts:
            bad.add(line_no, preview(rec), "event without ph or numeric ts")
            return
        if abs(ts) > 9e15:  # µs: past 285 years from the anchor
            bad.add(line_no, preview(rec), "ts past any time")
            return
        pid = rec.get("pid")
        if not isinstance(pid, int | float | str | None):  # a list or object: no tensor to file it under
            bad.add(line_no, preview(rec), "pid is not a number or a string")
            return
        name = rec.get("name")
        stack = open_names.setdefault(pid, [])
        if ph == "B":
            stack.append(str(name))
        elif ph == "E" and name is None:
            name = stack.pop() if stack else None
        elif ph == "E" and stack:
            stack.pop()
        if anchor_us is None:
            before_anchor += 1
        args = rec.get("args")
        dur = rec.get("dur")
        out.add(
            tensor_id=_int64(pid),
            ph=ph,
            name=None if name is None else str(name),
            ts_us=float(ts),
            ts_ns=None if anchor_us is None else clock.check(_ts_ns(anchor_us, ts), line_no),
            dur_us=float(dur) if isinstance(dur, int | float) and not isinstance(dur, bool) else None,
            args=json.dumps(args, sort_keys=True) if args else None,
            ts_int=_int64(ts) if isinstance(ts, int) else None,
        )
        wire.add(line_no, ph, name, pid, ts, args, depth=len(stack))

    each_record(TraceRecords(path, bad), use)
    note_empty(out.count, bad, "Horovod timeline event")
    parsed = parsed_log(out, gathered, bad)
    parsed.table = _finish(parsed.table, schema, tensors, anchor_us, before_anchor, clock)
    parsed.more = wire.tables(Path(path).name, anchor_us, clock)
    clock.report(bad)
    parsed.bad_lines, parsed.first_bad, parsed.warnings = bad.count, bad.examples, warnings
    return parsed


def _ts_ns(anchor_us: int, ts: float) -> int | None:
    """An event's Unix time in ns: exact for an integer ts (µs after the anchor)."""
    return _int64(round((anchor_us + ts) * 1000))


def _int64(value: object) -> int | None:
    return value if isinstance(value, int) and value in INT64 else None


def _finish(table, schema, tensors: dict[int, str], anchor_us: int | None, before_anchor: int, clock: Clock):
    """The gathered rows as `schema`: each tensor's name by its id, and the ts_ns of the rows read
    before the anchor (none in Horovod's own files, whose first record is the anchor)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tracecore.arrow_rows import array  # not pa.array: it imports pandas

    known = [(pid, name) for pid, name in tensors.items() if pid in INT64]
    ids = array([pid for pid, _ in known], pa.int64())
    names = array([name for _, name in known], pa.string())
    tensor = pc.take(names, pc.index_in(table["tensor_id"], value_set=ids))
    ts_ns = table["ts_ns"]
    if anchor_us is not None and before_anchor:
        early = table.slice(0, before_anchor).select(["ts_us", "ts_int"]).to_pylist()
        exact = [
            clock.check(_ts_ns(anchor_us, r["ts_us"] if r["ts_int"] is None else r["ts_int"])) for r in early
        ]
        rest = table["ts_ns"].slice(before_anchor).combine_chunks()
        ts_ns = pa.concat_arrays([array(exact, pa.int64()), rest])
    columns = {f.name: table[f.name] for f in schema if f.name not in ("tensor", "ts_ns")}
    columns |= {"tensor": tensor, "ts_ns": ts_ns}
    return pa.table([columns[f.name] for f in schema], schema=schema)


class _Activity:
    """One backend activity of a tensor (slots: a timeline holds hundreds of thousands)."""

    __slots__ = ("bytes", "dtype", "end", "line", "name", "start", "tensors")

    def __init__(self, name: str, start: float, line: int) -> None:
        self.name, self.start, self.line = name, start, line
        self.end: float = start
        self.bytes: int | None = None
        self.dtype: str | None = None
        self.tensors = 1


class _Wire:
    """The timeline's collectives: each backend activity (NCCL_ALLREDUCE, …) of a tensor, fused
    tensors (one activity, same begin and end) as one collective of their summed bytes."""

    def __init__(self) -> None:
        self.open: dict[object, _Activity] = {}  # tensor → its activity in progress
        self.waiting: dict[object, list[_Activity]] = {}  # tensor → activities whose size comes later
        self.done: list[_Activity] = []
        self.ranks: set[int] = set()

    def add(self, line: int, ph: str, name: object, pid: object, ts: float, args: object, depth: int) -> None:
        if ph == "X" and isinstance(name, str) and name.isdigit() and len(name) < 7:
            self.ranks.add(int(name))  # a rank's readiness tick during negotiation
        if not isinstance(name, str):
            return
        if ph == "B" and _WIRE.match(name):
            self.open[pid] = _Activity(name, ts, line)
        elif ph == "E" and pid in self.open and name in self.open[pid].name:
            act = self.open.pop(pid)
            act.end = ts
            self.done.append(act)
            self.waiting.setdefault(pid, []).append(act)
        elif ph == "E" and depth == 0:  # the tensor's operation ends: its size is written here
            size, dtype = _tensor_bytes(args)
            for act in self.waiting.pop(pid, []):
                act.bytes, act.dtype = size, dtype

    def tables(self, file: str, anchor_us: int | None, clock: Clock) -> dict:
        fused: dict[tuple, _Activity] = {}
        for act in self.done:
            key = (act.name, act.start, act.end)
            group = fused.get(key)
            if group is None:
                fused[key] = act
                continue
            group.tensors += 1
            known = group.bytes is not None and act.bytes is not None
            group.bytes = group.bytes + act.bytes if known else None

        def unix(us: float, line: int) -> int | None:
            return None if anchor_us is None else clock.check(round((anchor_us + us) * 1000), line)

        out = Columns(TABLES["collectives"])
        for seq, c in enumerate(sorted(fused.values(), key=lambda c: (c.start, c.line))):
            out.add(
                file=file,
                source="horovod_timeline",
                backend=c.name.split("_", 1)[0].lower(),
                rank=0,
                comm="horovod",
                comm_size=max(self.ranks) + 1 if self.ranks else None,
                op=op_name(c.name.split("_", 1)[1]),
                source_op=c.name,
                seq=seq,
                bytes=c.bytes,
                dtype=c.dtype,
                start_ns=unix(c.start, c.line),
                end_ns=unix(c.end, c.line),
                time_source="backend_work",
                line=c.line,
            )
        clocks = Columns(TABLES["collective_clocks"])
        clocks.add(
            file=file,
            source="horovod_timeline",
            rank=0,
            method=ANCHOR if anchor_us is not None else "none",
            offset_ns=anchor_us * 1000 if anchor_us is not None else None,
            error_ns=ERROR_NS,
            anchors=1 if anchor_us is not None else 0,
            collectives=out.rows,
        )
        return {"collectives": out.table(), "collective_clocks": clocks.table()}


PARSER = LogParser(table=TABLE, detect=detect, parse=parse, more_tables=("collectives", "collective_clocks"))
