"""tracecore.arrow_rows builds what pa.array builds, or leaves the values to it, and imports no pandas."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracecore.arrow_rows import _plain, array, table, table_from_rows

TYPES = [
    pa.int32(),
    pa.int64(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.list_(pa.string()),
    pa.list_(pa.int32()),
]
ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers(-(1 << 33), 1 << 33)), max_size=3),
    st.tuples(st.text(max_size=2)),
)


def _outcome(build, values, typ):
    try:
        got = build(values, typ)
    except Exception as err:  # the same error as pa.array's, when it raises
        return ("error", type(err), str(err))
    got.validate(full=True)
    return ("array", got.type, got.null_count, repr(got.to_pylist()))  # repr: nan == nan


@settings(max_examples=300, deadline=None)
@given(typ=st.sampled_from(TYPES), values=st.lists(ANY, max_size=12))
def test_array_is_pa_array(typ: pa.DataType, values: list) -> None:
    assert _outcome(array, values, typ) == _outcome(pa.array, values, typ)


@settings(max_examples=200, deadline=None)
@given(typ=st.sampled_from(TYPES), values=st.lists(ANY, max_size=12))
def test_values_of_the_type_are_built_without_pa_array(typ: pa.DataType, values: list) -> None:
    """Values pa.array takes as they are (well-typed, in range) never go to it."""
    try:
        pa.array(values, typ)
    except Exception:
        return
    certain = {
        "int32": lambda v: type(v) is int and -(1 << 31) <= v < 1 << 31,
        "int64": lambda v: type(v) is int and -(1 << 63) <= v < 1 << 63,
        "double": lambda v: type(v) is float,
        "bool": lambda v: type(v) is bool,
        "string": lambda v: type(v) is str and not any("\ud800" <= c <= "\udfff" for c in v),
    }.get(str(typ))
    if certain is not None and all(v is None or certain(v) for v in values):
        assert _plain(values, typ) is not None


@pytest.mark.parametrize(
    ("values", "typ"),
    [
        ([1, None, -(1 << 63), (1 << 63) - 1], pa.int64()),
        ([1 << 63], pa.int64()),  # OverflowError, from pa.array
        ([1 << 31], pa.int32()),
        ([True, 2], pa.int64()),
        ([1, 2.5, None, float("nan"), float("-inf")], pa.float64()),
        ([1 << 60], pa.float64()),
        ([True, None, False], pa.bool_()),
        (["a", None, "ünï", ""], pa.string()),
        (["\ud800"], pa.string()),
        ([["a", None], None, [], ["b"]], pa.list_(pa.string())),
        ([("a",)], pa.list_(pa.string())),
        ([[1, 2], None], pa.list_(pa.int32())),
        ([], pa.string()),
        ([None, None], pa.int32()),
    ],
)
def test_edge_values(values: list, typ: pa.DataType) -> None:
    assert _outcome(array, values, typ) == _outcome(pa.array, values, typ)


def test_tables_as_from_pylist_and_from_pydict() -> None:
    schema = pa.schema([("run", pa.string()), ("n", pa.int32()), ("w", pa.list_(pa.string()))])
    rows = [{"run": "a", "n": 1, "w": ["x"], "extra": 5}, {"run": None}, {"n": 3, "w": []}]
    assert table_from_rows(rows, schema).equals(pa.Table.from_pylist(rows, schema=schema))
    columns = {"run": ["a", "b"], "n": [None, 2], "w": [None, ["y", "z"]]}
    assert table(columns, schema).equals(pa.Table.from_pydict(columns, schema=schema))
    assert table_from_rows([], schema).equals(pa.Table.from_pylist([], schema=schema))


def test_building_imports_no_pandas() -> None:
    script = (
        "import sys, pyarrow as pa\n"
        "from tracecore.arrow_rows import table_from_rows\n"
        "schema = pa.schema([('a', pa.string()), ('b', pa.int64()), ('c', pa.list_(pa.string()))])\n"
        "table_from_rows([{'a': 'x', 'b': 1, 'c': ['y']}, {}], schema)\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
