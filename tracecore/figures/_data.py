"""Helpers the chart builders share: view results → inline Vega-Lite data, and readable units.

Why inline `alt.Data(values=...)`: the figures must render offline and be self-contained (report,
PNG, SVG), and building the values here sidesteps Altair's global data-transformer settings (its
5 000-row limit) without changing them for a notebook user. Integer-ns columns are dropped or
turned into seconds first, since JavaScript numbers cannot hold them exactly.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pyarrow as pa

from tracecore.json_values import json_rows, json_value

WIDTH = 520
HEIGHT = 300
PAIR_SEP = "→"


def as_arrow(table: Any) -> pa.Table:
    """A pyarrow Table from a view result: pyarrow as is, polars via to_arrow, pandas via from_pandas."""
    if isinstance(table, pa.Table):
        return table
    if hasattr(table, "to_arrow"):
        return table.to_arrow()
    return pa.Table.from_pandas(table, preserve_index=False)


def rows(table: Any, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of `table` (optionally only `columns`) as JSON-safe dicts (NaN → None, Decimal → number).

    `table` is a view result as pyarrow (what `tracecore.query.run_view` returns), polars or pandas,
    or rows already as dicts.
    """
    if isinstance(table, list):
        return json_rows([{c: r.get(c) for c in columns} if columns is not None else r for r in table])
    table = as_arrow(table)
    if columns is not None:
        table = table.select(columns)
    out = table.to_pylist()
    # only the columns whose values json_value may change: it leaves the others as they are, and
    # called on every value it cost more than the rows themselves
    changed = [f.name for f in table.schema if not _json_as_is(f.type)]
    for row in out if changed else ():
        for name in changed:
            row[name] = json_value(row[name])
    return out


def _json_as_is(kind: pa.DataType) -> bool:
    """Whether every value of an Arrow type comes out of `to_pylist` as `json_value` leaves it."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    t = pa.types
    return any(
        check(kind)
        for check in (t.is_integer, t.is_boolean, t.is_string, t.is_large_string, t.is_null, t.is_temporal)
    ) and not t.is_interval(kind)


class _InlineRows(alt.Data):
    """Inline data whose rows (already JSON-safe dicts from `rows`) go into the spec as they are.

    Why: Altair converts every value of every row through `_todict`, whose protocol checks cost
    seconds on a report's tens of thousands of rows (bench/results/report-build.md)."""

    def to_dict(self, validate: bool = True, *, ignore: list[str] | None = None, context: Any = None) -> dict:
        return {"values": self._kwds["values"]}

    def __deepcopy__(self, memo: Any = None) -> _InlineRows:
        """A copy that shares the rows. Why: Altair deep-copies every part of a chart it layers or
        concatenates (and again in `to_dict`), rows included, value by value; the rows are never
        changed once inline, so one list serves every copy."""
        return _InlineRows(values=self._kwds["values"])


def inline(values: list[dict[str, Any]]) -> alt.Data:
    """The rows as inline data, not checked row by row as Altair checks every object it builds
    (its check goes through `to_dict`, which gives the rows as they are): `render.spec` checks the
    finished chart once."""
    return _InlineRows(values=values)


def byte_unit(max_bytes: float) -> tuple[str, float]:
    """('GB', 1e9) for volumes of a gigabyte or more, else MB or kB: axis numbers stay readable."""
    for name, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if max_bytes >= scale:
            return name, scale
    return "B", 1.0


def pair_label(src: str | None, dst: str | None) -> str:
    return f"{src}{PAIR_SEP}{dst}"


def empty_chart(title: str, message: str) -> alt.Chart:
    """A chart that says why there is nothing to draw (e.g. no training log for these runs)."""
    return (
        alt.Chart(inline([{"message": message}]))
        .mark_text(size=14, color="#555")
        .encode(text=alt.Text("message:N"))
        .properties(width=WIDTH, height=80, title=title)
    )
