"""`train_history.log` of the DML measurement scripts → the `train_log` table.

Format (original-semantics 1.5): header `Type,ID,Timestamp,Loss,Accuracy`, then `Batch,<i>,<unix s>,
<loss>,<acc>` per batch and `Epoch,<e>,…` per epoch, timestamps in Unix UTC seconds. The file is the
training process's stdout+stderr, so it also holds framework warnings, and under kungfu-run every line
may carry a `[<peer>::stdout] ` prefix: both are tolerated. Timestamps become int64 ns by exact decimal
arithmetic (no float rounding of the microseconds).
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pyarrow as pa

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, Rows, log_lines, parsed_log

HEADER = "Type,ID,Timestamp,Loss,Accuracy"
SCHEMA = pa.schema(
    [
        ("type", pa.string()),
        ("id", pa.int32()),
        ("ts_ns", pa.int64()),
        ("loss", pa.float64()),
        ("accuracy", pa.float64()),
    ]
)
# kungfu-run: `[127.0.0.1.10000::stdout] `; mpirun --tag-output: `[1,0]<stdout>:`.
_PREFIX = re.compile(r"^(?:\[[^\]]*::std(?:out|err)\]\s?|\[\d+,\d+\]<std(?:out|err)>:\s?)")
_ROW = re.compile(r"^(Batch|Epoch),")


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n")).strip()


def detect(head: str) -> bool:
    return any(_strip(line) == HEADER for line in head.splitlines()[:200])


def _ts_ns(text: str) -> int:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"timestamp {text!r} is not a number") from None
    if not value.is_finite() or value < 0 or value > 10**11:
        raise ValueError(f"timestamp {text!r} is not Unix seconds")
    return int(value * 1_000_000_000)


def _float(text: str) -> float:
    value = float(text)  # 'nan' is a legitimate Keras loss; accepted
    if math.isinf(value):
        raise ValueError(f"{text!r} is infinite")
    return value


def parse(path: Path) -> ParsedLog:
    """Every Batch/Epoch row; other lines before the header are noise, bad rows after it are counted.
    Streamed line by line (`log_lines`): memory follows the table, not the file."""
    bad = BadLines()
    out = Rows(SCHEMA)
    seen_header = False
    for lineno, raw in log_lines(path, bad):
        line = _strip(raw)
        if line == HEADER:
            seen_header = True
            continue
        if not _ROW.match(line):
            continue  # warnings, progress bars, framework chatter
        try:
            kind, ident, ts, loss, acc = line.split(",")
            row = (kind, int(ident), _ts_ns(ts), _float(loss), _float(acc))
        except ValueError as err:
            bad.add(lineno, repr(line[:80]), str(err))
            continue
        out.add(**dict(zip(SCHEMA.names, row, strict=True)))
    if not seen_header and not out.count:
        bad.count += 1
        bad.examples.append(f"no `{HEADER}` header and no rows")
    return parsed_log(out, SCHEMA, bad)


PARSER = LogParser(table="train_log", detect=detect, parse=parse)
