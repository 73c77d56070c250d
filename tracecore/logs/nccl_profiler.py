"""NCCL's example profiler plugin (`NCCL_PROFILER_PLUGIN=…example.so`) → `collectives`, one file per rank.

The plugin (NCCL's `ext-profiler/example`) dumps `<NCCL_PROFILE_DUMP_FILE>_<commHash>_<rank>.json`: a
Chrome-trace array in which each event is printed as `b`, its children, then `e`, so nesting is the
order of the file, not of `ts`. What is read:

    COLL_API  AllReduce b   the user's call: `count`, `datatype` (the user's type), `root`
    COLL      AllReduce b   the collective NCCL ran: SeqNum (per operation), CommHash, Rank, Count and
                            Datatype (bytes as NCCL moves them), Algorithm, Protocol, nChannels
    P2P       Send/Recv b   CommHash, Rank, Peer, Count, Datatype
    GPU       KernelCh b    per channel: StartGpuClk, StopGpuClk (the GPU's global timer, Unix ns;
                            the plugin leaves StopGpuClk 0 when it never saw the stop)
    PROXY     ProgressSend/ProgressRecv b/e   the proxy thread moving the channel's data

A collective's start and end are its kernels' first StartGpuClk and last non-zero StopGpuClk
(`gpu_kernel`); without a kernel event, its COLL event's host time (`cpu_call`). The plugin's `ts` is
µs since the plugin started, on the TSC (NCCL's timer.h), not Unix time: the file's offset is the
largest StartGpuClk − ts over its kernel events (a kernel is seen by the host after it starts; the
tightest of these bounds wins), recorded in `collective_clocks`. NET step events are not read.
A GPU clock of 0 was never read; any other outside `PLAUSIBLE_NS` (2000-2200) makes its event a bad
line and is not used, so one bogus clock cannot move the file's times to 2262.
"""

from __future__ import annotations

from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._chrome import TraceRecords, each_record, int_or_none, preview, us_to_ns
from tracecore.logs._collectives import (
    DTYPE_BYTES,
    PLAUSIBLE_TEXT,
    TABLES,
    Clock,
    Columns,
    dtype_name,
    op_name,
    plausible,
    refused_clock,
)
from tracecore.logs._common import BadLines, note_empty

SOURCE = "nccl_profiler"
_MARKERS = ('"cat": "GROUP_API"', '"cat": "COLL"', '"cat": "P2P"', '"CommHash"', '"cat": "KERNEL_LAUNCH"')
# host times mapped through the GPU clock: a kernel's host event trails its start by the proxy's
# polling; the bound kept is the tightest, and what is left is stated as the mapping's error
ERROR_NS = 1_000_000


def detect(head: str) -> bool:
    """A Chrome-trace array with the example plugin's categories."""
    text = head.lstrip()
    return text.startswith("[") and '"ph"' in text and sum(m in text for m in _MARKERS) >= 2


def _hex_comm(value: object) -> str | None:
    """CommHash as NCCL's logs print commId: 0x + 16 hex digits."""
    number = int_or_none(value)
    if number is None or not 0 <= number < 2**64:
        return None
    return f"0x{number:016x}"


class _Plugin:
    """The collectives of one file as the plugin nests them."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.open: dict[object, dict] = {}  # pid → the COLL/P2P event being printed
        self.api: dict[object, dict] = {}  # pid → args of the last COLL_API b
        self.offsets: list[int] = []  # StartGpuClk − ts of each kernel event, ns

    def add(self, line: int, rec: dict, bad: BadLines) -> None:
        cat, ph, pid = rec.get("cat"), rec.get("ph"), rec.get("pid")
        if cat not in ("COLL_API", "COLL", "P2P", "GPU", "PROXY") or ph not in ("b", "e"):
            return
        ts = us_to_ns(rec.get("ts"))
        args = rec.get("args") if isinstance(rec.get("args"), dict) else {}
        if ts is None:
            bad.add(line, preview(rec), "event without a numeric ts")
            return
        if cat == "COLL_API" and ph == "b":
            self.api[pid] = args
        elif cat in ("COLL", "P2P") and ph == "b":
            self.open[pid] = self._collective(line, rec, args, ts, self.api.pop(pid, {}))
        elif cat in ("COLL", "P2P"):
            coll = self.open.pop(pid, None)
            if coll is not None:
                coll["call_end"] = ts
        elif (coll := self.open.get(pid)) is not None:
            self._child(coll, cat, ph, ts, args, line, bad)

    def _collective(self, line: int, rec: dict, args: dict, ts: int, api: dict) -> dict:
        count = int_or_none(args.get("Count"))
        moved = dtype_name(args.get("Datatype"))
        user = dtype_name(api.get("datatype"))
        peer = int_or_none(args.get("Peer")) if rec["cat"] == "P2P" else int_or_none(api.get("root"))
        row = {
            "op": op_name(rec.get("name")),
            "source_op": str(rec.get("name"))[:64],
            "source_seq": int_or_none(args.get("SeqNum")),
            "comm": _hex_comm(args.get("CommHash")),
            "rank": int_or_none(args.get("Rank")),
            "bytes": count * DTYPE_BYTES[moved] if count is not None and count >= 0 and moved else None,
            "dtype": user or moved,
            "peer": peer if rec["cat"] == "P2P" or rec.get("name") in ("Broadcast", "Reduce") else None,
            "algorithm": args["Algorithm"][:32] if isinstance(args.get("Algorithm"), str) else None,
            "protocol": args["Protocol"][:32] if isinstance(args.get("Protocol"), str) else None,
            "n_channels": int_or_none(args.get("nChannels")),
            "call_start": ts,
            "call_end": None,
            "gpu_start": None,
            "gpu_end": None,
            "proxy_end": None,
            "pid": rec.get("pid") if isinstance(rec.get("pid"), int) else None,
            "line": line,
        }
        self.rows.append(row)
        return row

    def _child(self, coll: dict, cat: str, ph: str, ts: int, args: dict, line: int, bad: BadLines) -> None:
        if cat == "GPU" and ph == "b":
            start, stop = int_or_none(args.get("StartGpuClk")), int_or_none(args.get("StopGpuClk"))
            wrong = [
                f"{k} {v}"
                for k, v in (("StartGpuClk", start), ("StopGpuClk", stop))
                if v and not plausible(v)
            ]
            if wrong:  # 0: never read (the plugin's StopGpuClk of a kernel it did not see end)
                bad.add(line, "", f"{', '.join(wrong)} is not a time in {PLAUSIBLE_TEXT}; not used")
                return
            if start:
                coll["gpu_start"] = start if coll["gpu_start"] is None else min(coll["gpu_start"], start)
                self.offsets.append(start - ts)
            if stop:
                coll["gpu_end"] = stop if coll["gpu_end"] is None else max(coll["gpu_end"], stop)
        elif cat == "PROXY" and ph == "e":
            coll["proxy_end"] = ts if coll["proxy_end"] is None else max(coll["proxy_end"], ts)


def parse(path: Path) -> ParsedLog:
    """Every collective and point-to-point operation of the file, streamed."""
    bad = BadLines()
    plugin = _Plugin()
    records = TraceRecords(path, bad)
    each_record(records, lambda line, rec: plugin.add(line, rec, bad))
    offset = max(plugin.offsets) if plugin.offsets else None
    warnings = []
    if offset is not None and not plausible(offset):  # kernel clocks fine, the host's ts not
        warnings.append(refused_clock(f"the offset max(StartGpuClk - ts) {offset}", offset))
        offset = None
    name = Path(path).name
    unix = Clock(offset)  # each time checked: one outside PLAUSIBLE_NS is not stored, and counted

    out = Columns(TABLES["collectives"])
    seqs: dict[object, int] = {}
    for row in plugin.rows:
        seq = seqs[row["comm"]] = seqs.get(row["comm"], -1) + 1
        on_gpu = row["gpu_start"] is not None
        line = row["line"]
        end = (
            row["gpu_end"] if row["gpu_end"] is not None else unix(row["proxy_end"] or row["call_end"], line)
        )
        out.add(
            file=name,
            source=SOURCE,
            backend="nccl",
            pid=row["pid"],
            rank=row["rank"],
            comm=row["comm"],
            op=row["op"],
            source_op=row["source_op"],
            seq=seq,
            source_seq=row["source_seq"],
            bytes=row["bytes"],
            dtype=row["dtype"],
            peer=row["peer"],
            algorithm=row["algorithm"],
            protocol=row["protocol"],
            n_channels=row["n_channels"],
            start_ns=row["gpu_start"] if on_gpu else unix(row["call_start"], line),
            end_ns=end if on_gpu else unix(row["call_end"], line),
            time_source="gpu_kernel" if on_gpu else "cpu_call",
            call_start_ns=unix(row["call_start"], line),
            call_end_ns=unix(row["call_end"], line),
            line=line,
        )
    note_empty(out.rows, bad, "NCCL profiler collective")
    clocks = Columns(TABLES["collective_clocks"])
    ranks = {r["rank"] for r in plugin.rows}
    clocks.add(
        file=name,
        source=SOURCE,
        pid=next((r["pid"] for r in plugin.rows if r["pid"] is not None), None),
        rank=ranks.pop() if len(ranks) == 1 else None,
        method="max(StartGpuClk - ts) over kernel events" if offset is not None else "none",
        offset_ns=offset,
        error_ns=ERROR_NS,
        anchors=len(plugin.offsets),
        collectives=out.rows,
    )
    unix.report(bad)
    more = {"collective_clocks": clocks.table()}
    return ParsedLog(out.table(), bad.count, bad.examples, more=more, warnings=warnings)


PARSER = LogParser(table="collectives", detect=detect, parse=parse, more_tables=("collective_clocks",))
