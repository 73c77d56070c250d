"""Values made fit for JSON: NaN and infinity become null, decimals become numbers.

Why one owner: the CLI's JSON output, the model tables and the charts' inline Vega-Lite data all meet
floats that a fit or a view leaves non-finite (JSON has no NaN) and DuckDB's 128-bit sums, which
arrive as `Decimal`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def json_value(value: Any) -> Any:
    """`value` with every non-finite float as None and every Decimal as an int or float, nested too."""
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
    as JSON text, since Arrow's CSV writer has no form for them."""
    import pyarrow as pa

    def flat(field: pa.Field) -> pa.Field:
        if pa.types.is_dictionary(field.type):
            return field.with_type(field.type.value_type)
        return field.with_type(pa.string()) if pa.types.is_nested(field.type) else field

    return pa.schema([flat(f) for f in schema])


def csv_ready(batch: pa.RecordBatch, plain: pa.Schema) -> pa.Table:
    """`batch` cast to `plain` (csv_schema of its schema), each nested value written as JSON text."""
    import json

    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    for i, field in enumerate(batch.schema):
        if pa.types.is_nested(field.type):
            values = [
                None if v is None else json.dumps(json_value(v), default=str)
                for v in table.column(i).to_pylist()
            ]
            table = table.set_column(i, field.name, pa.array(values, pa.string()))
    # already plain (no dictionary column): as it is; a cast, even to its own types, imports
    # pyarrow.compute (60 ms of a `tracecore query --format csv`, bench/results/cli-startup.md)
    return table if table.schema.equals(plain) else table.cast(plain)
