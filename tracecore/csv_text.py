"""CSV lines of a DuckDB result, formatted by DuckDB itself, byte for byte as Arrow's CSV writer
(`cli.output`) writes the same columns.

Why: `tracecore query … --format csv` spent more on importing pyarrow and numpy than on its query
(bench/results/cli-startup.md); for columns of plain types DuckDB can write Arrow's text in the same
pass. Arrow's rules, checked against its writer by tests/test_csv_text.py: every string quoted (a
quote doubled), NULL as nothing, booleans `true`/`false`, integers in decimal, and a double as its
shortest round-trip digits in plain notation from 1e-6 up to 1e10 (`1`, not `1.0`; `0.000015`) and
as `1.5e+10`, `1e-7` outside it (DuckDB's own text of a double is Python's `repr`, which switches at
1e-4 and 1e16 and pads exponents: `1e-07`). 32-bit floats, decimals, times and nested types are
left to Arrow.
"""

from __future__ import annotations

INTEGER_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")
CSV_TYPES = frozenset({"VARCHAR", "BOOLEAN", "DOUBLE", *INTEGER_TYPES})  # DuckDB type names lines() covers


def _text(column: str, type_: str) -> str:
    """SQL for the CSV text of one column (NULL stays NULL)."""
    if type_ == "VARCHAR":
        return f"""('"' || replace({column}, '"', '""') || '"')"""
    if type_ == "BOOLEAN":
        return f"(CASE WHEN {column} THEN 'true' WHEN NOT {column} THEN 'false' END)"
    if type_ == "DOUBLE":
        return _double(column)
    return f"{column}::VARCHAR"


def _double(x: str) -> str:
    """Arrow's text of a double from DuckDB's (Python's repr): the same digits, other notation rules."""
    text, magnitude, sign = f"{x}::VARCHAR", f"abs({x})", f"(CASE WHEN {x} < 0 THEN '-' ELSE '' END)"
    # 1e10 <= |x| < 1e16: DuckDB writes `12345678901.5`; Arrow `1.23456789015e+10`
    whole = f"split_part(ltrim({text}, '-'), '.', 1)"
    digits = f"rtrim({whole} || split_part({text}, '.', 2), '0')"
    scientific = (
        f"{sign} || {digits}[1] || (CASE WHEN length({digits}) > 1 THEN '.' || {digits}[2:] ELSE '' END)"
        f" || 'e+' || (length({whole}) - 1)::VARCHAR"
    )
    # 1e-6 <= |x| < 1e-4: DuckDB writes `1.5e-05`; Arrow `0.000015`
    mantissa = f"split_part(ltrim({text}, '-'), 'e', 1)"
    small = (
        f"{sign} || '0.' || repeat('0', -1 - split_part({text}, 'e', 2)::INTEGER)"
        f" || replace({mantissa}, '.', '')"
    )
    return (
        f"(CASE WHEN isnan({x}) THEN 'nan'"  # DuckDB writes a negative NaN as -nan, Arrow as nan
        f" WHEN {x} = 0 OR ({magnitude} >= 1e-4 AND {magnitude} < 1e10)"
        f" THEN regexp_replace({text}, '\\.0$', '')"
        f" WHEN {magnitude} >= 1e10 AND {magnitude} < 1e16 THEN {scientific}"
        f" WHEN {magnitude} >= 1e-6 AND {magnitude} < 1e-4 THEN {small}"
        f" ELSE regexp_replace({text}, 'e([+-])0', 'e\\1') END)"  # `1e-07` → `1e-7`; inf stays
    )


def lines(types: list[str]) -> str | None:
    """SQL for one CSV line per row of a relation whose columns are named c0, c1, … and typed `types`
    (DuckDB's names); None when a type is not in CSV_TYPES."""
    if any(t not in CSV_TYPES for t in types):
        return None
    fields = [f"coalesce({_text(f'c{i}', t)}, '')" for i, t in enumerate(types)]
    return " || ',' || ".join(fields) if fields else None


def header(names: list[str]) -> str:
    """The header line, as Arrow writes it: every name quoted."""
    return ",".join('"' + name.replace('"', '""') + '"' for name in names) + "\n"
