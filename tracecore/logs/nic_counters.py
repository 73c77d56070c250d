"""The NIC counter sampler's file (`tracecore.runners.counters`) → tables `counters`, `counter_sources`.

Format (text, tab-separated, one sample per line; the sampler writes it, this module owns its reading):

    # tracecore counters 1                       the first line: how ingest recognises the file
    # host<TAB>NAME   # interface<TAB>IF   # interval_ns<TAB>N
    # columns<TAB>ts_ns<TAB>DEV/PORT/COUNTER …     PORT empty for the interface's /proc/net/dev fields
    # ethtool_columns<TAB>ts_ns<TAB>IF<TAB>NAME …  only where `ethtool -S` answered
    TS<TAB>V …                                    a sample: UTC ns of the host's clock, then each value
    e<TAB>TS<TAB>V …                              an `ethtool -S` sample
    # end<TAB>samples<TAB>N<TAB>missed<TAB>M<TAB>late_p50_us …   the sampler's own account, when it stopped
                                                  (its sample times are the middle of each sample's reads)

Each value becomes one row of `counters` with its change since the same counter's previous sample:
- units: InfiniBand's `port_xmit_data` and `port_rcv_data` count 4-byte words; they are multiplied by
  4 (value and delta in bytes, `unit` 'bytes'); other `*_bytes` counters are bytes, `*_packets` and
  `*_pkts` packets, the rest events ('count');
- a value below the previous one is a 32-bit wrap where the previous value fits 32 bits and the wrapped
  difference is below 2^31 (delta = value + 2^32 − previous, `event` 'wrap'); any other decrease is a
  reset (the driver or a user cleared it): delta = the value, `event` 'reset'. A 32-bit InfiniBand
  counter that saturated (stays at 2^32 − 1) shows deltas of 0, which nothing can tell from idle;
- an empty value (a read that failed) is NULL and the next value's delta is NULL;
- a sample more than 1.5 intervals after the previous one follows missed samples: its delta spans the
  gap (`dt_ns` says how long) and `event` is 'gap';
- a line with the wrong number of fields, a value that is not an integer, or a time not after the
  previous sample's is a bad line (named by line number); the lines around it are kept, so a file cut
  short by a killed sampler keeps every whole line.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, Rows, log_lines

MAGIC = "# tracecore counters 1"  # runners/counters.py writes it
WORD_COUNTERS = frozenset({"port_xmit_data", "port_rcv_data"})  # 4-byte words (IBTA PortCounters)
WRAP = 1 << 32
GAP = 1.5  # intervals between samples beyond which samples were missed

COUNTERS = pa.schema(
    [
        ("worker", pa.string()),  # the worker whose `worker-<i>` name the file shares (ingest fills it)
        ("host", pa.string()),  # the sampler's host name
        ("source", pa.string()),  # netdev | rdma | ethtool
        ("device", pa.string()),  # the interface (netdev, ethtool) or RDMA device
        ("port", pa.int16()),  # the RDMA port; NULL for netdev and ethtool
        ("counter", pa.string()),
        ("unit", pa.string()),  # bytes | packets | count
        ("ts_ns", pa.int64()),  # UTC ns, the host's clock (the captures' clock)
        ("value", pa.int64()),  # in `unit` (InfiniBand data words × 4)
        ("delta", pa.int64()),  # since the counter's previous sample; NULL for the first or after a NULL
        ("dt_ns", pa.int64()),  # since the counter's previous sample
        ("event", pa.string()),  # NULL | wrap | reset | gap
    ]
)
SOURCES = pa.schema(
    [
        ("worker", pa.string()),
        ("host", pa.string()),
        ("interface", pa.string()),
        ("interval_ns", pa.int64()),
        ("samples", pa.int64()),  # sample lines read
        ("first_ts_ns", pa.int64()),
        ("last_ts_ns", pa.int64()),
        ("gaps", pa.int64()),  # samples more than 1.5 intervals after the previous
        ("dt_p50_ns", pa.int64()),  # the time between samples, as read: the sampler's jitter
        ("dt_p99_ns", pa.int64()),
        ("dt_max_ns", pa.int64()),
        ("stopped", pa.bool_()),  # the sampler wrote its last line (false: killed, or still running)
        ("missed", pa.int64()),  # the sampler's own count of ticks it skipped; NULL without its last line
        ("late_p99_us", pa.int64()),  # how late its samples were against the schedule (its last line)
        ("read_p99_us", pa.int64()),  # how long a sample's reads took: its time is known to ± half of it
    ]
)


def detect(head: str) -> bool:
    return head.startswith((MAGIC + "\n", MAGIC + "\r\n"))


def unit_of(counter: str) -> str:
    if counter in WORD_COUNTERS or counter.endswith("_bytes"):
        return "bytes"
    return "packets" if counter.endswith(("_packets", "_pkts")) else "count"


@dataclass
class _Series:
    """One counter's identity and its previous sample."""

    source: str
    device: str
    port: int | None
    counter: str
    scale: int
    unit: str
    prev: int | None = None
    prev_ts: int | None = None


def _series(name: str) -> _Series:
    """A `# columns` name: IF//COUNTER (netdev) or DEV/PORT/COUNTER (rdma)."""
    device, port, counter = name.split("/", 2)
    if not device or not counter or "/" in counter or (port and not port.isdigit()):
        raise ValueError(f"column {name!r} is not DEVICE/PORT/COUNTER")
    scale = 4 if port and counter in WORD_COUNTERS else 1
    source = "rdma" if port else "netdev"
    return _Series(source, device, int(port) if port else None, counter, scale, unit_of(counter))


@dataclass
class _File:
    header: dict[str, list[str]] = field(default_factory=dict)
    series: list[_Series] = field(default_factory=list)
    ethtool: list[_Series] = field(default_factory=list)
    interval: int | None = None
    dts: array = field(default_factory=lambda: array("q"))  # 8 bytes a sample
    last_ts: int | None = None
    first_ts: int | None = None
    samples: int = 0
    gaps: int = 0


def _header(state: _File, fields: list[str]) -> None:
    key = fields[0][2:]
    state.header[key] = fields[1:]
    if key == "interval_ns":
        state.interval = int(fields[1])
    elif key == "columns":
        if fields[1:2] != ["ts_ns"]:
            raise ValueError("the columns line does not start with ts_ns")
        state.series = [_series(name) for name in fields[2:]]
    elif key == "ethtool_columns":
        if fields[1:2] != ["ts_ns"] or len(fields) < 3:
            raise ValueError("the ethtool_columns line is not ts_ns, IF, names")
        state.ethtool = [_Series("ethtool", fields[2], None, n, 1, unit_of(n)) for n in fields[3:]]


def _sample(state: _File, out: Rows, series: list[_Series], ts: int, values: list[int | None]) -> None:
    host = (state.header.get("host") or [None])[0]
    for s, raw in zip(series, values, strict=True):
        value = None if raw is None else raw * s.scale
        delta = event = None
        dt = None if s.prev_ts is None else ts - s.prev_ts
        if value is not None and s.prev is not None:
            delta = value - s.prev
            if delta < 0:
                wrapped = delta + WRAP * s.scale
                if s.prev < WRAP * s.scale and wrapped < (WRAP >> 1) * s.scale:
                    delta, event = wrapped, "wrap"
                else:
                    delta, event = value, "reset"
            elif dt is not None and state.interval and dt > GAP * state.interval:
                event = "gap"
        out.add(host=host, source=s.source, device=s.device, port=s.port, counter=s.counter, unit=s.unit,
                ts_ns=ts, value=value, delta=delta, dt_ns=dt, event=event)  # fmt: skip
        s.prev, s.prev_ts = value, ts


def parse(path: Path) -> ParsedLog:
    """Every sample of the file, streamed line by line; bad lines counted and named."""
    bad = BadLines()
    out = Rows(COUNTERS)
    state = _File()
    end: list[str] | None = None
    for lineno, line in log_lines(path, bad):
        fields = line.split("\t")
        try:
            if line.startswith("# "):
                if fields[0] == "# end":
                    end = fields[1:]
                elif lineno > 1:
                    _header(state, fields)
                continue
            ethtool = fields[0] == "e"
            series = state.ethtool if ethtool else state.series
            texts = fields[2:] if ethtool else fields[1:]
            if not series or len(texts) != len(series):
                raise ValueError(f"{len(texts)} values where the header names {len(series)}")
            ts = int(fields[1] if ethtool else fields[0])
            values = [None if t == "" else int(t) for t in texts]
            if not ethtool:
                if state.last_ts is not None and ts <= state.last_ts:
                    raise ValueError("a sample not after the one before it")
                if state.last_ts is not None:
                    dt = ts - state.last_ts
                    state.dts.append(dt)
                    state.gaps += bool(state.interval and dt > GAP * state.interval)
                state.first_ts = state.first_ts if state.first_ts is not None else ts
                state.last_ts = ts
                state.samples += 1
            _sample(state, out, series, ts, values)
        except (ValueError, IndexError) as err:
            bad.add(lineno, repr(line[:80]), str(err))
    if state.samples == 0 and bad.count == 0:
        bad.add(0, "", "no sample line")
    return ParsedLog(table=out.table(), bad_lines=bad.count, first_bad=bad.examples,
                     more={"counter_sources": _sources(state, end)})  # fmt: skip


def _sources(state: _File, end: list[str] | None) -> pa.Table:
    """The file's one row of `counter_sources`."""
    from tracecore.arrow_rows import table_from_rows

    dts = sorted(state.dts)

    def q(f: float) -> int | None:
        return dts[min(int(f * len(dts)), len(dts) - 1)] if dts else None

    closing = dict(zip(end[0::2], end[1::2], strict=False)) if end else {}

    def closing_int(key: str) -> int | None:
        return int(closing[key]) if closing.get(key, "").isdigit() else None

    row = {
        "host": (state.header.get("host") or [None])[0],
        "interface": (state.header.get("interface") or [None])[0],
        "interval_ns": state.interval, "samples": state.samples, "first_ts_ns": state.first_ts,
        "last_ts_ns": state.last_ts, "gaps": state.gaps, "dt_p50_ns": q(0.5), "dt_p99_ns": q(0.99),
        "dt_max_ns": dts[-1] if dts else None, "stopped": end is not None,
        "missed": closing_int("missed"), "late_p99_us": closing_int("late_p99_us"),
        "read_p99_us": closing_int("read_p99_us"),
    }  # fmt: skip
    return table_from_rows([row], SOURCES)


PARSER = LogParser(table="counters", detect=detect, parse=parse, more_tables=("counter_sources",))
