"""Optimus-style loss curves (`step,loss` CSV, seed 003's `optimus_<depth>_<gpu>.csv`) → table `loss_curve`.

The header must name `loss` and `step` or `epoch` as whole fields (a pandas index column in front is
fine). That keeps this parser off the DML `train_history.log` (`Type,ID,Timestamp,Loss,Accuracy`) and
off wandb exports (`_step`, `train_loss_step`). Columns: `line, step, epoch, loss`, plus `ts_ns` when the
file has a `timestamp` column (Unix seconds → UTC ns). Other columns are not read. A row whose loss or
step/epoch is not a number, or with the wrong field count, is a bad line.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, Rows, log_lines, note_empty, parsed_log, seconds_to_ns

TABLE = "loss_curve"
AXES = ("step", "epoch")


def _fields(line: str) -> list[str]:
    try:
        return [f.strip().lower() for f in next(csv.reader([line]))]
    except (csv.Error, StopIteration):
        return []


def _integer(text: str) -> int:
    value = float(text)
    if not value.is_integer():
        raise ValueError(f"step {text!r} is not a whole number")
    return int(value)


def detect(head: str) -> bool:
    """First non-blank line is a CSV header with a `loss` field and a `step` or `epoch` field."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    fields = _fields(first)
    if "type" in fields or any(f.startswith("_") or " - " in f for f in fields):
        return False
    return "loss" in fields and any(a in fields for a in AXES)


def parse(path: Path) -> ParsedLog:
    """Streamed line by line (`log_lines`): memory follows the table, not the file."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("line", pa.int64()),
            ("step", pa.int64()),
            ("epoch", pa.float64()),
            ("loss", pa.float64()),
            ("ts_ns", pa.int64()),
        ]
    )
    bad = BadLines()
    out = Rows(schema)
    fields: list[str] | None = None
    index: dict[str, int] = {}
    for line_no, line in log_lines(path, bad):
        if not line.strip():
            continue
        if fields is None:  # the first line that is not blank names the columns
            fields = _fields(line)
            index = {name: i for i, name in enumerate(fields)}
            continue
        try:
            record = next(csv.reader([line]))
        except csv.Error as err:
            bad.add(line_no, line, str(err))
            continue
        if len(record) != len(fields):
            bad.add(line_no, line, f"{len(record)} fields, header has {len(fields)}")
            continue
        try:
            step = _integer(record[index["step"]]) if "step" in index else None
            epoch = float(record[index["epoch"]]) if "epoch" in index else None
            loss = float(record[index["loss"]])
            ts_ns = seconds_to_ns(record[index["timestamp"]]) if "timestamp" in index else None
        except ValueError as err:
            bad.add(line_no, line, str(err))
            continue
        out.add(line=line_no, step=step, epoch=epoch, loss=loss, ts_ns=ts_ns)
    note_empty(out.count, bad, "loss curve")
    return parsed_log(out, schema, bad)


PARSER = LogParser(table=TABLE, detect=detect, parse=parse)
