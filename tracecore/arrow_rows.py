"""Arrow arrays and tables from Python values, built from buffers for the plain types ingest stores.

Why: `pa.array` (and `from_pylist`, `from_pydict`, which call it) imports pandas on its first call
when pandas is installed (0.3 CPU-s, most of it holding the GIL), although no value here is a pandas
object. Ingest makes such arrays only for its small tables and logs, so a column whose every value
is certain (ints that fit, floats, bools, strings, lists of them) is built from numpy buffers here,
and any other column goes to `pa.array` as before: the same array, or the same error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_INTS = {pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}
_OFFSET_LIMIT = (1 << 31) - 1  # string and list offsets are int32


def array(values: Sequence[Any], typ: pa.DataType) -> pa.Array:
    """`pa.array(values, typ)`, without pandas for the types and values `_plain` takes."""
    built = _plain(values, typ)
    return built if built is not None else pa.array(values, typ)


def table(columns: Mapping[str, Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """`pa.Table.from_pydict(columns, schema=schema)`: one list of values per field, all as long."""
    return pa.Table.from_arrays([array(columns[f.name], f.type) for f in schema], schema=schema)


def table_from_rows(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """`pa.Table.from_pylist(rows, schema=schema)`: a key a row lacks is null, others are ignored."""
    return table({f.name: [row.get(f.name) for row in rows] for f in schema}, schema)


def _plain(values: Sequence[Any], typ: pa.DataType) -> pa.Array | None:
    """The array when every value is certain to convert as `pa.array` converts it, else None."""
    if not isinstance(values, list):
        return None
    if typ in _INTS:
        dtype = _INTS[typ]
        info = np.iinfo(dtype)
        if not all(v is None or (type(v) is int and info.min <= v <= info.max) for v in values):
            return None
        return _fixed(values, typ, dtype, 0)
    if typ == pa.float64():
        if not all(v is None or type(v) is float or (type(v) is int and abs(v) < 1 << 53) for v in values):
            return None
        return _fixed(values, typ, np.float64, 0.0)
    if typ == pa.bool_():
        if not all(v is None or type(v) is bool for v in values):
            return None
        bits = np.packbits(np.array([v is True for v in values], np.bool_), bitorder="little")
        return _with_validity(typ, values, pa.py_buffer(bits))
    if typ == pa.string():
        return _strings(values)
    if pa.types.is_list(typ):
        if not all(v is None or type(v) is list for v in values):
            return None
        items = _plain([x for v in values if v is not None for x in v], typ.value_type)
        if items is None:
            return None
        offsets = _offsets([0 if v is None else len(v) for v in values])
        if offsets is None:
            return None
        valid = _validity(values)
        return pa.Array.from_buffers(
            typ, len(values), [valid, offsets], children=[items],
            null_count=0 if valid is None else sum(v is None for v in values),
        )  # fmt: skip
    return None


def _fixed(values: list, typ: pa.DataType, dtype: type, zero: Any) -> pa.Array:
    data = np.array([zero if v is None else v for v in values], dtype)
    return _with_validity(typ, values, pa.py_buffer(data))


def _strings(values: list) -> pa.Array | None:
    if not all(v is None or type(v) is str for v in values):
        return None
    try:
        encoded = [b"" if v is None else v.encode("utf-8") for v in values]
    except UnicodeEncodeError:  # pa.array's own error, raised by it
        return None
    offsets = _offsets([len(b) for b in encoded])
    if offsets is None:
        return None
    return _with_validity(pa.string(), values, offsets, pa.py_buffer(b"".join(encoded)))


def string_array(encoded: list[bytes]) -> pa.Array:
    """A string array of UTF-8 bytes values, none null (the reader's address dictionaries)."""
    offsets = _offsets([len(b) for b in encoded])
    if offsets is None:
        return pa.array(encoded, pa.string())
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, offsets, pa.py_buffer(b"".join(encoded))])


def _offsets(lengths: list[int]) -> pa.Buffer | None:
    """The int32 offsets of values of these lengths; None past what int32 offsets hold."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return None if offsets[-1] > _OFFSET_LIMIT else pa.py_buffer(offsets.astype(np.int32))


def _with_validity(typ: pa.DataType, values: list, *buffers: pa.Buffer) -> pa.Array:
    valid = _validity(values)
    nulls = 0 if valid is None else sum(v is None for v in values)
    return pa.Array.from_buffers(typ, len(values), [valid, *buffers], null_count=nulls)


def _validity(values: list) -> pa.Buffer | None:
    """The validity bitmap (bit set: a value), or None when no value is null."""
    if all(v is not None for v in values):
        return None
    return pa.py_buffer(np.packbits(np.array([v is not None for v in values], np.bool_), bitorder="little"))


def numpy_values(arr: pa.Array, dtype: type) -> np.ndarray:
    """The values buffer of a primitive array as numpy, without a copy (nulls not masked). Not
    `to_numpy()`: its first call imports pandas (0.2 s, holding the GIL, on every capture thread)."""
    size = np.dtype(dtype).itemsize
    return np.frombuffer(arr.buffers()[1], dtype, count=len(arr), offset=arr.offset * size)


def int64_array(values: np.ndarray) -> pa.Array:
    """An int64 array over a numpy array's buffer. Not `pa.array(values)`: its first call imports
    pandas when it is installed, and a writer thread that meets the import the warm-up thread is
    running waits for all of it while its reader fills the queue and stops too."""
    values = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])
