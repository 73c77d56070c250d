"""Column checks shared by the models: inputs come from user CSVs, so a bad cell must become a clear
one-line error naming the column and the values, not a polars cast exception."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecore.errors import ModelFitError

if TYPE_CHECKING:
    import polars as pl

MAX_SHOWN = 3


def numeric(df: pl.DataFrame, columns: tuple[str, ...], *, what: str, integer: bool = False) -> pl.DataFrame:
    """`df` with each present column cast to Float64 (Int64 if `integer`); non-numbers are refused."""
    import polars as pl

    dtype = pl.Int64 if integer else pl.Float64
    for name in columns:
        if name not in df.columns:
            continue
        original = df[name]
        as_float = original.cast(pl.Float64, strict=False)
        bad = original.filter(as_float.is_null() & original.is_not_null())
        if integer:
            bad = pl.concat(
                [
                    bad.cast(pl.String),
                    original.filter(as_float.is_not_null() & (as_float.round() != as_float)).cast(pl.String),
                ]
            )
        if bad.len():
            shown = ", ".join(repr(v) for v in bad.head(MAX_SHOWN).cast(pl.String).to_list())
            kind = "whole numbers" if integer else "numbers"
            raise ModelFitError(f"{what}: column {name!r} must hold {kind}; found {shown}")
        df = df.with_columns(as_float.cast(dtype).alias(name))
    return df
