"""Values made fit for JSON: NaN and infinity become null, decimals become numbers, bytes hex text.

Why one owner: the CLI's JSON output, the model tables and the charts' inline Vega-Lite data all meet
floats that a fit or a view leaves non-finite (JSON has no NaN) and DuckDB's 128-bit sums, which
arrive as `Decimal`; a BLOB (`from_hex('ff00fe')`) is `ff00fe` in CSV, JSON and tables alike, since
neither JSON nor Arrow's CSV writer has a form for bytes that are not UTF-8.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def is_interval(value: Any) -> bool:
    """Whether `value` is an interval as Arrow gives one (pyarrow.MonthDayNano, a struct sequence;
    checked by name, as pyarrow is imported only where such values exist)."""
    return isinstance(value, tuple) and type(value).__name__ == "MonthDayNano"


def interval_text(value: Any) -> str:
    """An interval as DuckDB writes one (`1 year 2 months 3 days 01:30:00.000001`), for text outputs:
    Arrow's CSV writer and Parquet have no form for Arrow's month-day-nano intervals."""
    years = int(value.months / 12)  # toward zero, as DuckDB: -14 months is -1 year -2 months
    parts = [
        f"{n} {unit}{'' if abs(n) == 1 else 's'}"
        for n, unit in ((years, "year"), (value.months - 12 * years, "month"), (value.days, "day"))
        if n
    ]
    ns = value.nanoseconds
    if ns or not parts:
        seconds, frac = divmod(abs(ns), 10**9)
        clock = f"{'-' if ns < 0 else ''}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if frac:  # as DuckDB: the fraction without trailing zeros
            clock += f".{frac:09d}".rstrip("0")
        parts.append(clock)
    return " ".join(parts)


def binary_text(value: bytes) -> str:
    """Bytes as text: their hex digits (`ff00fe`)."""
    return value.hex()


def json_value(value: Any) -> Any:
    """`value` with every non-finite float as None, every Decimal as an int or float and bytes as hex
    text, nested too."""
    if is_interval(value):
        return interval_text(value)
    if isinstance(value, bytes):
        return binary_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value


def json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Row dicts (e.g. a pyarrow Table's `to_pylist()`) with every value made JSON-safe."""
    return [{k: json_value(v) for k, v in row.items()} for row in rows]


def csv_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` as CSV can hold it: dictionary columns as their values, nested ones (lists, structs)
    as JSON text, intervals as DuckDB's text and binary ones as hex, since Arrow's CSV writer has no
    form for them."""
    import pyarrow as pa

    def flat(field: pa.Field) -> pa.Field:
        if pa.types.is_dictionary(field.type):
            return field.with_type(field.type.value_type)
        return field.with_type(pa.string()) if _as_text(field.type) else field

    return pa.schema([flat(f) for f in schema])


def _as_text(type_: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_nested(type_) or pa.types.is_interval(type_) or _is_binary(type_)


def _is_binary(type_: pa.DataType) -> bool:
    import pyarrow as pa

    return (
        pa.types.is_binary(type_)
        or pa.types.is_large_binary(type_)
        or pa.types.is_fixed_size_binary(type_)
        or pa.types.is_binary_view(type_)
    )


def _json_text(value: Any) -> str:
    import json

    return json.dumps(json_value(value), default=str)


def csv_ready(batch: pa.RecordBatch, plain: pa.Schema) -> pa.Table:
    """`batch` cast to `plain` (csv_schema of its schema), each nested value written as JSON text, each
    interval as DuckDB's text, each binary one as hex."""
    import pyarrow as pa

    from tracecore.arrow_rows import array  # not pa.array: it imports pandas

    table = pa.Table.from_batches([batch])
    for i, field in enumerate(batch.schema):
        if _as_text(field.type):
            text = interval_text if pa.types.is_interval(field.type) else _json_text
            text = binary_text if _is_binary(field.type) else text
            values = [None if v is None else text(v) for v in table.column(i).to_pylist()]
            table = table.set_column(i, field.name, array(values, pa.string()))
    # already plain (no dictionary column): as it is; a cast, even to its own types, imports
    # pyarrow.compute (60 ms of a `tracecore query --format csv`, bench/results/cli-startup.md)
    return table if table.schema.equals(plain) else table.cast(plain)
