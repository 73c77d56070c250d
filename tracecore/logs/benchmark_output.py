"""kungfu-run / Horovod benchmark output → table `benchmark_output`, one row per recognised line.

Formats (KungFu `benchmarks/system/benchmark_kungfu.py`, `benchmark_horovod.py`, the adaptation
and scaling benchmarks; seed 004 prints them):

    [10.0.0.40.10000::stdout] Iter #9: 31.6 img/sec per /gpu:0
    Img/sec per /gpu:0: 30.5 +-2.2                 (mean ± 1.96·std over iterations, not an SE)
    RESULT: 43.429020 +-1.212320 {"framework":"kungfu","np":32,...}
    Total img/sec on 32 GPU(s): 406.5 +-22.7
    resize 1 -> 2 took 20.39s                      (old np, new np; ms / s / XmYs durations)
    [I] all 4/4 local peers finished, took 1m56.574329056s   (Go duration)

kungfu-run tags child lines `[<peer>::stdout] `, mpirun `[<job>,<rank>]<stdout>:`; the tag becomes
`peer`/`stream`. Each row keeps its message in `text`, so nothing is lost to the columns. Lines that
match no known format (TF warnings, tracebacks) are counted as bad lines and reported; the benchmark
prints no wall-clock time, so rows are ordered by `line`, not by timestamp.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, Rows, log_lines, note_empty, parsed_log, strip_tag

TABLE = "benchmark_output"
NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
TRAIN_HISTORY_HEADER = "Type,ID,Timestamp,Loss,Accuracy"
DETECT = re.compile(
    r"img/sec per |^(?:\[[^\]]*\] ?)?RESULT: |resize \d+ -> \d+ took "
    r"|::std(?:out|err)\] |local peers finished",
    re.MULTILINE,
)

COLUMNS = (
    "line", "peer", "stream", "kind", "step", "value", "error", "reference", "unit", "device",
    "np", "np_to", "took_s", "attrs", "text",
)  # fmt: skip

_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_GO_PART = re.compile(r"(\d+(?:\.\d*)?)(ns|us|µs|μs|ms|s|m|h)")


def duration_s(text: str) -> float:
    """Seconds in a Go duration (`1m56.57s`, `40.12ms`) or KungFu's show_duration (`20.39s`, `3m5s`)."""
    text = text.strip()
    parts = _GO_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def _img_sec(m: re.Match[str], **extra: Any) -> dict[str, Any]:
    """The columns every img/sec line has (rate `v` per device `d`), plus the line's own."""
    return {"value": float(m["v"]), "unit": "img/sec", "device": m["d"], **extra}


def _result_attrs(m: re.Match[str]) -> dict[str, Any]:
    attrs = json.loads(m["attrs"])
    if not isinstance(attrs, dict):
        raise ValueError("RESULT attributes are not a JSON object")
    np_ = attrs.get("np")
    return {
        "value": float(m["v"]),
        "error": float(m["e"]),
        "unit": "img/sec",
        "attrs": json.dumps(attrs, sort_keys=True, separators=(",", ":")),
        "np": int(np_) if isinstance(np_, int | float) else None,
    }


# (kind, pattern, builder) — builders turn a match into column values; a ValueError makes the line bad.
RULES: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], dict[str, Any]]]] = [
    (
        "warmup",
        re.compile(rf"^Warmup Step #(?P<s>\d+): (?P<v>{NUM}) img/sec per (?P<d>\S+), took (?P<t>{NUM})s$"),
        lambda m: _img_sec(m, step=int(m["s"]), took_s=float(m["t"])),
    ),
    (
        "iter",
        re.compile(rf"^(?:Cluster response )?Iter #(?P<s>\d+): (?P<v>{NUM}) img/sec per (?P<d>\S+)$"),
        lambda m: _img_sec(m, step=int(m["s"])),
    ),
    (
        "img_sec_mean",
        re.compile(rf"^Img/sec per (?P<d>\S+): (?P<v>{NUM}) \+-(?P<e>{NUM})$"),
        lambda m: _img_sec(m, error=float(m["e"])),
    ),
    (
        "total_img_sec",
        re.compile(rf"^Total img/sec on (?P<n>\d+) (?P<d>\S+?)\(s\): (?P<v>{NUM}) \+-(?P<e>{NUM})$"),
        lambda m: _img_sec(m, error=float(m["e"]), np=int(m["n"])),
    ),
    ("result", re.compile(rf"^RESULT: (?P<v>{NUM}) \+-(?P<e>{NUM}) (?P<attrs>\{{.*\}})$"), _result_attrs),
    (
        "result",
        re.compile(rf"^RESULT: (?P<v>{NUM}) samples / sec, batch size: (?P<b>\d+), cluster size (?P<n>\d+)$"),
        lambda m: {
            "value": float(m["v"]),
            "unit": "samples/sec",
            "np": int(m["n"]),
            "attrs": json.dumps({"bs": int(m["b"])}),
        },
    ),
    (
        "resize",
        re.compile(r"^resize (?P<a>\d+) -> (?P<b>\d+) took (?P<t>\S+)$"),
        lambda m: {"np": int(m["a"]), "np_to": int(m["b"]), "took_s": duration_s(m["t"])},
    ),
    (
        "peers_finished",
        re.compile(r"^\[I\] all (?P<a>\d+)/(?P<b>\d+) local peers finished, took (?P<t>\S+)$"),
        lambda m: {"value": float(m["a"]), "np": int(m["b"]), "took_s": duration_s(m["t"])},
    ),
    ("model", re.compile(r"^Model: (?P<x>\S+)$"), lambda m: {"attrs": json.dumps({"model": m["x"]})}),
    ("batch_size", re.compile(r"^Batch size: (?P<v>\d+)$"), lambda m: {"value": float(m["v"])}),
    ("init_took", re.compile(rf"^init took (?P<t>{NUM})s$"), lambda m: {"took_s": float(m["t"])}),
    ("bcast_took", re.compile(rf"^bcast_op took (?P<t>{NUM})s$"), lambda m: {"took_s": float(m["t"])}),
    (
        "monitor_throughput",
        re.compile(
            rf"^(?:\[I\] )?MonitorStrategy:: Checking Throughput = (?P<v>{NUM}) MiB/s, "
            rf"reff= (?P<r>{NUM}) MiB/s$"
        ),
        lambda m: {"value": float(m["v"]), "reference": float(m["r"]), "unit": "MiB/s"},
    ),
    (
        "cluster_response",
        re.compile(r"^(?:\[I\] )?AP:: cluster response -> (?P<v>\d+)$"),
        lambda m: {"value": float(m["v"])},
    ),
    ("noise_scale", re.compile(rf"^Gradient Noise Scale: (?P<v>{NUM})$"), lambda m: {"value": float(m["v"])}),
    ("variance", re.compile(rf"^Variance: (?P<v>{NUM})$"), lambda m: {"value": float(m["v"])}),
    (
        "sync_step",
        re.compile(r"^sync step: (?P<a>\d+) -> (?P<b>\d+)$"),
        lambda m: {"step": int(m["a"]), "value": float(m["b"])},
    ),
    (
        "step_result",
        re.compile(r"^step (?P<s>\d+), result: (?P<v>\d+), np=(?P<n>\d+), took (?P<t>\S+)$"),
        lambda m: {
            "step": int(m["s"]),
            "value": float(m["v"]),
            "np": int(m["n"]),
            "took_s": duration_s(m["t"]),
        },
    ),
    ("propose_np", re.compile(r"^TODO: propose new np: (?P<n>\d+)$"), lambda m: {"np": int(m["n"])}),
    (
        "tf_rate",
        re.compile(
            r"^(?:INFO:tensorflow:|[IWE]\d{4} [\d:.]+ +\d+ \S+\] )"
            rf"(?P<u>global_step/sec|examples/sec): (?P<v>{NUM})$"
        ),
        lambda m: {"value": float(m["v"]), "unit": m["u"]},
    ),
    (
        "info",
        re.compile(
            r"^(?:Running warmup\.\.\.|Running benchmark\.\.\.|Cluster response|\.\.\.|"
            r"(?:\[I\] )?AP:: Taking reff window snapshot|(?:\[I\] )?AP:: cluster reached consensus.*)$"
        ),
        lambda m: {},
    ),
    (
        "interference",
        re.compile(r"^Interference detected\. Changing to alternative comm strategy !?$"),
        lambda m: {},
    ),
]


def detect(head: str) -> bool:
    """Benchmark throughput/RESULT/resize lines or kungfu-run peer tags, and not a DML train_history.log."""
    return TRAIN_HISTORY_HEADER not in head and DETECT.search(head) is not None


def parse_line(message: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, columns) for one untagged message; None if nothing matches; ValueError if a match is broken."""
    text = message.strip()
    for kind, pattern, build in RULES:
        match = pattern.match(text)
        if match:
            return kind, build(match)
    return None


def parse(path: Path) -> ParsedLog:
    """Streamed line by line (`log_lines`): memory follows the table, not the file."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("line", pa.int64()),
            ("peer", pa.string()),
            ("stream", pa.string()),
            ("kind", pa.string()),
            ("step", pa.int64()),
            ("value", pa.float64()),
            ("error", pa.float64()),
            ("reference", pa.float64()),
            ("unit", pa.string()),
            ("device", pa.string()),
            ("np", pa.int64()),
            ("np_to", pa.int64()),
            ("took_s", pa.float64()),
            ("attrs", pa.string()),
            ("text", pa.string()),
        ]
    )
    bad = BadLines()
    out = Rows(schema)
    for line_no, line in log_lines(path, bad):
        if not line.strip():
            continue
        peer, stream, message = strip_tag(line)
        try:
            parsed = parse_line(message)
        except (ValueError, ArithmeticError) as err:  # JSONDecodeError is a ValueError
            bad.add(line_no, line, str(err))
            continue
        except RecursionError:
            bad.add(line_no, line, "RESULT attributes nested too deep")
            continue
        if parsed is None:
            bad.add(line_no, line)
            continue
        kind, values = parsed
        out.add(line=line_no, peer=peer, stream=stream, kind=kind, text=message.strip(), **values)
    note_empty(out.count, bad, "benchmark output")
    return parsed_log(out, schema, bad)


PARSER = LogParser(table=TABLE, detect=detect, parse=parse)
