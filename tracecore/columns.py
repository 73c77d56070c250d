"""A result's columns as a person reads them: which name a row, which hold the answer, and each in a
human unit (ms, MB, UTC time) with the unit in its title.

Why its own module: the view's header owns the facts (`Key:`, `Headline:`, the unit of each column in
`Columns:`, read by `tracecore.views`); turning them into an order and into text is the same for
every table a person reads, whoever prints it. CSV, JSON and Parquet keep the raw values.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

STARTS_BUSY = ("link_util", "congestion")  # zero-filled per-link bins: a table starts at the first busy one
RUN = "run"  # the column whose values are run names, shortened in a table (`short_run_column`)
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Layout:
    """What a view's header says about its columns: `key` names a row, `headline` is the answer (most
    important first), `units` gives each column's unit as the header writes it (None: a plain value)."""

    key: tuple[str, ...] = ()
    headline: tuple[str, ...] = ()
    units: dict[str, str | None] = field(default_factory=dict)

    def order(self, names: Sequence[str]) -> list[int]:
        """Positions of `names` with the key first, then the headline, then the rest in their order."""
        ranked = [*self.key, *(h for h in self.headline if h not in self.key)]
        first = [names.index(n) for n in ranked if n in names]
        return first + [i for i in range(len(names)) if i not in first]


def view_layout(name: str) -> Layout:
    """The layout view `name`'s header declares (a building block has no key or headline)."""
    from tracecore import views

    return Layout(
        views.view_header_list(name, "Key"),
        views.view_header_list(name, "Headline"),
        views.view_column_units(name),
    )


def pick(names: Sequence[str], wanted: Iterable[str], view: str) -> list[int]:
    """Positions of the `wanted` columns, in that order; an unknown name is a UsageError listing them."""
    wanted = [w.strip() for w in wanted if w.strip()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise UsageError(
            f"{view} has no column {', '.join(map(repr, unknown))}; its columns: {', '.join(names)}"
        )
    if not wanted:
        raise UsageError(f"--columns names no column; {view}'s columns: {', '.join(names)}")
    return [names.index(w) for w in dict.fromkeys(wanted)]


def short_run_column(runs: list, keep: bool = False) -> tuple[list | None, list[str]]:
    """The run column of a table on a terminal: each run's short label (the parts of the names that
    differ between the runs shown, as the figures label them: `figures.style.short_runs`, never two
    alike), or None for one run alone (unless `keep`), and the note lines naming them whole."""
    from tracecore.figures.style import short_runs
    from tracecore.terminal import safe

    names = [r for r in dict.fromkeys(runs) if r is not None]
    if len(names) == 1 and not keep:
        return None, [f"run: {safe(names[0])}"]
    labels = short_runs(names)
    if all(labels[r] == r for r in names):
        return runs, []
    pad = max(len(labels[r]) for r in names)
    lines = [safe(f"{labels[r]:<{pad}} = {r}") for r in names if labels[r] != r]
    lines = [f"runs: {lines[0]}", *(f"      {line}" for line in lines[1:])]  # one a line, lined up
    return [labels.get(r, r) for r in runs], lines


@dataclass(frozen=True)
class Column:
    """One column made readable: its title (with the unit), its cells as text, and a note for the
    table's foot (or "")."""

    title: str
    cells: list[str]
    numeric: bool  # right-aligned
    wraps: bool = False  # free text (words), which may wrap at a narrow width; never a number or a name
    note: str = ""


def readable(name: str, unit: str | None, values: list, numeric: bool) -> Column:
    """Column `name` of unit `unit` (a `views.UNITS` word) with `values` in a unit a person reads:
    durations in ms, UTC ns as UTC time, bytes in kB/MB/GB, rates and µs with fixed decimals."""
    values = [_number(v) for v in values]
    given = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if unit is None or not given or len(given) + values.count(None) < len(values):
        return plain(name, values, numeric)
    if unit == "UTC ns":
        return _utc(name, values)
    if unit == "ns":  # always ms, so durations side by side compare; 3 decimals show the µs
        whole = all(v % NS_PER_MS == 0 for v in given)
        return _scaled(name, values, NS_PER_MS, "_ns", "ms", 0 if whole else 3)
    if unit == "bytes":
        peak = max(abs(v) for v in given)
        for scale, suffix in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
            if peak >= scale:
                return _scaled(name, values, scale, "bytes", suffix, 3)
        return plain(name, values, numeric)
    digits = {"microseconds": 1, "Gbit/s": 3, "GB/s": 3, "seconds": 3, "MB": 3, "GB": 3}[unit]
    return Column(name, [_fixed(v, digits) for v in values], True)


def plain(name: str, values: list, numeric: bool) -> Column:
    """A column without a unit to convert: each value as `cell` writes it; text with words wraps."""
    cells = [cell(v) for v in values]
    return Column(name, cells, numeric, wraps=not numeric and any(" " in c.strip() for c in cells))


def _number(value: object) -> object:
    """A DECIMAL (DuckDB's sums of integers) as the int or float it holds; anything else as it is."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _scaled(name: str, values: list, scale: float, old: str, suffix: str, digits: int) -> Column:
    """`values` / `scale` to `digits` decimals, titled with `suffix` in place of the name's `old` end."""
    stem = name[: -len(old)].rstrip("_") if name.endswith(old) else name
    title = f"{stem}_{suffix}" if stem else suffix
    return Column(title, [_fixed(None if v is None else v / scale, digits) for v in values], True)


def _fixed(value: float | None, digits: int) -> str:
    """`value` to `digits` decimals; a value that would read 0 but is not says `<0.001`."""
    if value is None:
        return "NULL"
    if math.isnan(value) or math.isinf(value):
        return str(value)
    text = f"{value:.{digits}f}"
    if value != 0 and float(text) == 0 and digits:
        return ("-" if value < 0 else "") + "<0." + "0" * (digits - 1) + "1"
    return text


def _utc(name: str, values: list) -> Column:
    """UTC ns as UTC time of day to the µs (`12:39:14.083413`), with the date in the note; the whole
    date and time in each cell when the values span more than one day."""
    times = [None if v is None else _datetime(v) for v in values]
    days = sorted({t.date() for t in times if t is not None})
    stem = name[:-3] if name.endswith("_ns") else name
    form = "%H:%M:%S.%f" if len(days) == 1 else "%Y-%m-%d %H:%M:%S.%f"
    cells = ["NULL" if t is None else t.strftime(form) for t in times]
    note = f"times are UTC, on {days[0].isoformat()}" if len(days) == 1 else "times are UTC"
    return Column(f"{stem}_utc", cells, False, note=note)


def _datetime(ns: int | float) -> dt.datetime:
    whole = int(ns)
    seconds, rest = divmod(whole, 1_000_000_000)
    return dt.datetime.fromtimestamp(seconds, dt.UTC) + dt.timedelta(microseconds=rest // 1000)


def cell(value: object) -> str:
    """A plain value as text: floats to 6 decimals as papers print them (0.054068, 111.5), tiny or
    huge ones to 6 digits; None as NULL; bytes as hex (json_values.binary_text)."""
    from tracecore.json_values import binary_text, interval_text, is_interval

    if isinstance(value, bytes):
        return binary_text(value)
    if not isinstance(value, float):
        return "NULL" if value is None else interval_text(value) if is_interval(value) else str(value)
    return f"{value:.6f}".rstrip("0").rstrip(".") if 1e-3 <= abs(value) < 1e12 else f"{value:.6g}"


def skip_idle_start(table: pa.Table) -> tuple[pa.Table, int]:
    """`table` (rows ordered by run and link, then time) without each link's bins before its first
    with bytes: the set-up seconds would fill the screen with zeros. Returns the rows left out."""
    import numpy as np
    import pyarrow as pa

    if table.num_rows == 0:
        return table, 0
    keys = [c for c in ("run", "src_worker", "dst_worker") if c in table.column_names]
    series = list(zip(*(table.column(k).to_pylist() for k in keys), strict=True))
    busy = np.asarray(table.column("bytes").to_numpy(zero_copy_only=False)) > 0
    parts, start = [], 0
    for i in range(1, table.num_rows + 1):
        if i == table.num_rows or series[i] != series[start]:
            first = np.flatnonzero(busy[start:i])
            if first.size:
                parts.append(table.slice(start + first[0], i - start - first[0]))
            start = i
    kept = pa.concat_tables(parts) if parts else table.slice(0, 0)  # slices: no pyarrow.compute import
    return kept, table.num_rows - kept.num_rows
