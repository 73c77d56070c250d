"""NCCL Inspector output (`NCCL_INSPECTOR_ENABLE=1`, JSON lines per process) → `collectives`.

NCCL's Inspector profiler plugin (`ext-profiler/inspector`) writes `<host>-pid<pid>.log` into its dump
folder (a subfolder of the run folder: ingest offers such files to this parser), one JSON object a
line per completed collective (messages under 8192 B are skipped by default):

    {"header": {"id": "0x45c2…", "rank": 0, "n_ranks": 2, "nnodes": 2},
     "metadata": {"inspector_output_format_version": "v4.0", "hostname": "vm", "pid": 974, …},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 3, "coll_msg_size_bytes": 50429992,
                   "coll_exec_time_us": 41947, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 1.20, "coll_busbw_gbs": 1.20,
                   "event_trace_ts": {"coll_start_ts": …, "coll_stop_ts": …,
                                      "kernel_events": [{"channel_id": 0, "kernel_start_ts": …,
                                                         "kernel_stop_ts": …}, …]}}}

Times are Unix µs of the host (gettimeofday). A collective's start/end are its channels' first kernel
start and last kernel stop as the host saw them (`kernel_host`, when the timing source is a kernel),
else coll_start_ts/coll_stop_ts (`cpu_call`); the
algorithm and bus bandwidths are the Inspector's own. `header.id` is NCCL's commId with its last
byte dropped (v4.0 prints 14 of its 16 hex digits); the views match it to the NCCL logs by prefix.
Each line is read on its own (at most `MAX_LINE` characters), so a damaged line is one bad line, as is
one nested too deep to decode or with a time outside `PLAUSIBLE_NS` (2000-2200: a timer read as 0).
"""

from __future__ import annotations

import json
from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._chrome import RECORD_ERRORS, int_or_none
from tracecore.logs._collectives import PLAUSIBLE_TEXT, TABLES, Columns, op_name, plausible
from tracecore.logs._common import BadLines, note_empty, read_lines

SOURCE = "nccl_inspector"
MAX_LINE = 1 << 20
ERROR_NS = 1_000_000  # Unix µs from the host and the GPU timer: the clock check allows this
_US = 1000


def detect(head: str) -> bool:
    """JSON lines whose first object has the Inspector's header and coll_perf."""
    first = head.lstrip().split("\n", 1)[0]
    return first.startswith("{") and '"coll_perf"' in head and '"header"' in first


class ImplausibleTimeError(ValueError):
    """A record's time that lies outside PLAUSIBLE_NS: the record is a bad line."""


def _us(value: object, what: str) -> int | None:
    """Unix µs as ns; None when not a number; ImplausibleTimeError when outside PLAUSIBLE_NS."""
    number = int_or_none(value)
    if number is None:
        return None
    if not plausible(number * _US):
        raise ImplausibleTimeError(f"{what} {number} µs is not a time in {PLAUSIBLE_TEXT}")
    return number * _US


def _gbs(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def _row(record: dict) -> dict | None:
    """The collective of one line, or None when it lacks what makes it one."""
    header, meta, perf = (record.get(k) for k in ("header", "metadata", "coll_perf"))
    if not all(isinstance(x, dict) for x in (header, perf)):
        return None
    meta = meta if isinstance(meta, dict) else {}
    trace = perf.get("event_trace_ts") if isinstance(perf.get("event_trace_ts"), dict) else {}
    kernels = [k for k in trace.get("kernel_events") or [] if isinstance(k, dict)]
    starts = [t for k in kernels if (t := _us(k.get("kernel_start_ts"), "kernel_start_ts")) is not None]
    stops = [t for k in kernels if (t := _us(k.get("kernel_stop_ts"), "kernel_stop_ts")) is not None]
    op = op_name(perf.get("coll"))
    if op is None:
        return None
    on_gpu = str(perf.get("coll_timing_source", "")).startswith("kernel") and starts and stops
    call_start, call_stop = (
        _us(trace.get("coll_start_ts"), "coll_start_ts"),
        _us(trace.get("coll_stop_ts"), "coll_stop_ts"),
    )
    size = int_or_none(perf.get("coll_msg_size_bytes"))
    return {
        "host": meta["hostname"][:255] if isinstance(meta.get("hostname"), str) else None,
        "pid": int_or_none(meta.get("pid")),
        "rank": int_or_none(header.get("rank")),
        "comm": str(header["id"])[:64] if "id" in header else None,
        "comm_size": int_or_none(header.get("n_ranks")),
        "op": op,
        "source_op": str(perf.get("coll"))[:64],
        "source_seq": int_or_none(perf.get("coll_sn")),
        "bytes": size if size is not None and size >= 0 else None,
        "algorithm": perf["coll_algo"][:32] if isinstance(perf.get("coll_algo"), str) else None,
        "protocol": perf["coll_proto"][:32] if isinstance(perf.get("coll_proto"), str) else None,
        "n_channels": len(kernels) or None,
        "start_ns": min(starts) if on_gpu else call_start,
        "end_ns": max(stops) if on_gpu else call_stop,
        "time_source": "kernel_host" if on_gpu else "cpu_call",
        "call_start_ns": call_start,
        "call_end_ns": call_stop,
        "algbw_gbs": _gbs(perf.get("coll_algobw_gbs")),
        "busbw_gbs": _gbs(perf.get("coll_busbw_gbs")),
    }


def parse(path: Path) -> ParsedLog:
    """Every collective line of the file, streamed."""
    bad = BadLines()
    out = Columns(TABLES["collectives"])
    name = Path(path).name
    seqs: dict[object, int] = {}
    procs: set[tuple] = set()
    for line_no, text, cut in read_lines(path, MAX_LINE, bad):
        if not text.strip():
            continue
        if cut:
            bad.add(line_no, text, f"a line longer than {MAX_LINE} characters")
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            bad.add(line_no, text, err.msg)
            continue
        except RecursionError:
            bad.add(line_no, text, "nested too deep")
            continue
        try:
            row = _row(record) if isinstance(record, dict) else None
        except ImplausibleTimeError as err:
            bad.add(line_no, text, str(err))
            continue
        except RECORD_ERRORS as err:
            bad.add(line_no, text, f"cannot read the record: {type(err).__name__}: {str(err)[:120]}")
            continue
        if row is None:
            bad.add(line_no, text, "not an Inspector collective record (header, coll_perf.coll)")
            continue
        seq = seqs[row["comm"]] = seqs.get(row["comm"], -1) + 1
        procs.add((row["host"], row["pid"], row["rank"]))
        out.add(file=name, source=SOURCE, backend="nccl", seq=seq, line=line_no, **row)
    note_empty(out.rows, bad, "NCCL Inspector record")
    clocks = Columns(TABLES["collective_clocks"])
    host, pid, rank = procs.pop() if len(procs) == 1 else (None, None, None)
    clocks.add(
        file=name,
        source=SOURCE,
        host=host,
        pid=pid,
        rank=rank,
        method="unix_us",
        offset_ns=0,
        error_ns=ERROR_NS,
        anchors=None,
        collectives=out.rows,
    )
    return ParsedLog(out.table(), bad.count, bad.examples, more={"collective_clocks": clocks.table()})


PARSER = LogParser(table="collectives", detect=detect, parse=parse, more_tables=("collective_clocks",))
