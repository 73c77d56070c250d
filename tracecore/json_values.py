"""Values made fit for JSON: NaN and infinity become null, decimals become numbers.

Why one owner: the CLI's JSON output, the model tables and the charts' inline Vega-Lite data all meet
floats that a fit or a view leaves non-finite (JSON has no NaN) and DuckDB's 128-bit sums, which
arrive as `Decimal`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any


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
