"""wandb history CSV exports → table `wandb_history`, one row per (history row, metric).

Two shapes exist (seed 002):
- a run's history export: `_step,_runtime,_timestamp,epoch,train_loss_step,...`, one run per file;
- a chart/workspace export with column groups per run: `Relative Time (Wall),<run> - _step,
  <run> - _step__MIN, <run> - _timestamp, ...`; each group becomes its own `wandb_run`.

Metrics differ between runs, so the table is long: `wandb_run, row, step, ts_ns, runtime_s, key,
value, text`. `_timestamp` (Unix seconds, int in old clients, float in new) becomes `ts_ns` (UTC ns);
empty cells are wandb's sparse logging (epoch rows carry no step metrics) and are skipped, non-numeric
cells keep their text. A row with the wrong field count or an unreadable `_step`/`_timestamp` is a
bad line.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, Rows, log_lines, note_empty, parsed_log, seconds_to_ns

TABLE = "wandb_history"
SPECIAL = ("_step", "_timestamp", "_runtime")
GROUP_SEP = " - "
MISSING = {"", "nan", "NaN", "None", "null"}


def _header(head: str) -> list[str] | None:
    for line in head.splitlines():
        if line.strip():
            try:
                return next(csv.reader([line]))
            except csv.Error:
                return None
    return None


def detect(head: str) -> bool:
    """A CSV header naming wandb's `_step`/`_timestamp`/`_runtime`, plain or as `<run> - _step`."""
    fields = _header(head)
    if not fields or len(fields) < 2:
        return False
    names = {f.strip().rsplit(GROUP_SEP, 1)[-1] for f in fields}
    return bool(names & set(SPECIAL)) and ("_step" in names or "_timestamp" in names)


def _groups(fields: list[str]) -> dict[str | None, dict[str, int]]:
    """Column index per (run, key); plain exports have the single run None."""
    groups: dict[str | None, dict[str, int]] = {}
    for i, name in enumerate(fields):
        name = name.strip()
        if GROUP_SEP in name:
            run, key = name.rsplit(GROUP_SEP, 1)
        elif any(GROUP_SEP in f for f in fields):
            continue  # `Relative Time (Wall)`, `Step`: shared axis columns of a grouped export
        else:
            run, key = None, name
        groups.setdefault(run, {})[key] = i
    return groups


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def parse(path: Path) -> ParsedLog:
    """Streamed line by line (`log_lines`): memory follows the table, not the file."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("wandb_run", pa.string()),
            ("row", pa.int64()),
            ("step", pa.float64()),  # grouped exports average steps per bucket (7.5)
            ("ts_ns", pa.int64()),
            ("runtime_s", pa.float64()),
            ("key", pa.string()),
            ("value", pa.float64()),
            ("text", pa.string()),
        ]
    )
    bad = BadLines()
    out = Rows(schema)
    fields: list[str] | None = None
    groups: dict[str | None, dict[str, int]] = {}
    rows = 0
    for line_no, line in log_lines(path, bad):
        if not line.strip():
            continue
        try:
            record = next(csv.reader([line]))
        except csv.Error as err:
            bad.add(line_no, line, str(err))
            continue
        if fields is None:  # the first line that is not blank names the columns
            fields, groups = record, _groups(record)
            continue
        if len(record) != len(fields):
            bad.add(line_no, ",".join(record), f"{len(record)} fields, header has {len(fields)}")
            continue
        parsed = _parse_row(record, groups)
        if parsed is None:
            bad.add(line_no, ",".join(record), "unreadable _step or _timestamp")
            continue
        for run, step, ts_ns, runtime, metrics in parsed:
            # A row with no metric still marks a time; keep it as one row with key null.
            for key, raw in metrics or [(None, None)]:
                value = _number(raw) if raw is not None else None
                number = value is not None and not math.isnan(value)
                out.add(
                    wandb_run=run,
                    row=rows,
                    step=step,
                    ts_ns=ts_ns,
                    runtime_s=runtime,
                    key=key,
                    value=value if number else None,
                    text=raw if value is None else None,
                )
        rows += 1
    note_empty(rows, bad, "wandb history")
    return parsed_log(out, schema, bad)


def _parse_row(record: list[str], groups: dict[str | None, dict[str, int]]):
    """Per run group: (run, step, ts_ns, runtime_s, [(key, raw)]); None if a special value is broken."""
    out = []
    for run, columns in groups.items():
        raw = {key: record[i].strip() for key, i in columns.items()}
        if all(v in MISSING for v in raw.values()):
            continue  # this run has no point on this row of a grouped export
        try:
            step = raw.get("_step", "")
            step_value = None if step in MISSING else float(step)
            ts = raw.get("_timestamp", "")
            ts_ns = None if ts in MISSING else seconds_to_ns(ts)
            runtime = raw.get("_runtime", "")
            runtime_s = None if runtime in MISSING else float(runtime)
        except ValueError:
            return None
        metrics = [(k, v) for k, v in raw.items() if k not in SPECIAL and v not in MISSING]
        out.append((run, step_value, ts_ns, runtime_s, metrics))
    return out


PARSER = LogParser(table=TABLE, detect=detect, parse=parse)
