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
`ts_us` (µs since the timeline start, steady clock) still orders events.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, note_empty, parsed_log

TABLE = "horovod_timeline"
ANCHOR = "start_time_since_epoch_in_micros"
MARKERS = ('"process_name"', ANCHOR, '"NEGOTIATE_', '"ALLREDUCE"')


def detect(head: str) -> bool:
    """A JSON array of Chrome-trace records with Horovod's metadata or operation names."""
    text = head.lstrip()
    return text.startswith("[") and '"ph"' in text and any(m in text for m in MARKERS)


def _records(text: str, bad: BadLines):
    """Yield the JSON objects of a possibly unterminated or damaged array, counting broken ones."""
    decoder = json.JSONDecoder()
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(newlines, offset - 1) + 1

    pos = text.find("[") + 1
    end = len(text)
    while pos < end:
        ch = text[pos]
        if ch in " \t\r\n,":
            pos += 1
            continue
        if ch == "]":
            pos += 1
            continue
        if ch != "{":
            line_end = text.find("\n", pos)
            line_end = end if line_end < 0 else line_end
            bad.add(line_of(pos), text[pos:line_end], "not a JSON object")
            pos = line_end + 1
            continue
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            line_end = text.find("\n", pos)
            line_end = end if line_end < 0 else line_end
            bad.add(line_of(pos), text[pos:line_end], err.msg)
            nxt = text.find("{", pos + 1)
            pos = end if nxt < 0 else nxt
            continue
        if isinstance(record, dict):
            yield line_of(pos), record
        else:
            bad.add(line_of(pos), str(record)[:80], "not a JSON object")


def parse(path: Path) -> ParsedLog:
    import pyarrow as pa

    text = Path(path).read_bytes().decode("utf-8", errors="replace")
    bad = BadLines()
    anchor_us: int | None = None
    tensors: dict[int, str] = {}
    open_names: dict[object, list[str]] = {}
    events: list[dict] = []
    for line_no, rec in _records(text, bad):
        ph = rec.get("ph")
        if ph == "M":
            args = rec.get("args") or {}
            if ANCHOR in args and anchor_us is None:
                anchor_us = int(args[ANCHOR])
            elif rec.get("name") == "process_name" and "name" in args and isinstance(rec.get("pid"), int):
                tensors[rec["pid"]] = str(args["name"])
            continue
        ts = rec.get("ts")
        if not isinstance(ph, str) or not isinstance(ts, int | float) or isinstance(ts, bool):
            bad.add(line_no, json.dumps(rec)[:160], "event without ph or numeric ts")
            continue
        pid = rec.get("pid")
        name = rec.get("name")
        stack = open_names.setdefault(pid, [])
        if ph == "B":
            stack.append(str(name))
        elif ph == "E" and name is None:
            name = stack.pop() if stack else None
        elif ph == "E" and stack:
            stack.pop()
        events.append({"rec": rec, "name": name, "pid": pid, "ts": ts, "ph": ph})
    note_empty(len(events), bad, "Horovod timeline event")

    cols: dict[str, list] = {
        k: [] for k in ("tensor_id", "tensor", "ph", "name", "ts_us", "ts_ns", "dur_us", "args")
    }
    for ev in events:
        rec, pid = ev["rec"], ev["pid"]
        args = rec.get("args")
        cols["tensor_id"].append(pid if isinstance(pid, int) else None)
        cols["tensor"].append(tensors.get(pid) if isinstance(pid, int) else None)
        cols["ph"].append(ev["ph"])
        cols["name"].append(None if ev["name"] is None else str(ev["name"]))
        cols["ts_us"].append(float(ev["ts"]))
        cols["ts_ns"].append(None if anchor_us is None else round((anchor_us + ev["ts"]) * 1000))
        dur = rec.get("dur")
        cols["dur_us"].append(float(dur) if isinstance(dur, int | float) else None)
        cols["args"].append(json.dumps(args, sort_keys=True) if args else None)
    schema = pa.schema(
        [
            ("tensor_id", pa.int64()),
            ("tensor", pa.string()),
            ("ph", pa.string()),
            ("name", pa.string()),
            ("ts_us", pa.float64()),
            ("ts_ns", pa.int64()),
            ("dur_us", pa.float64()),
            ("args", pa.string()),
        ]
    )
    return parsed_log(cols, schema, bad)


PARSER = LogParser(table=TABLE, detect=detect, parse=parse)
