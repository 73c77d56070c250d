"""CSV written from DuckDB's lines (tracecore.csv_text) is Arrow's CSV byte for byte (issue 27,
target 2: `tracecore query --format csv` without importing pyarrow and numpy)."""

from __future__ import annotations

import io
import random
import struct
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from typer.testing import CliRunner

from tracecore import csv_text
from tracecore.cli.app import app
from tracecore.cli.output import Format, write_batches
from tracecore.query import query_dataset, query_dataset_csv, view_listing, view_params

from .test_cli_startup import _console, _main_loads


def _arrow_csv(table: pa.Table) -> str:
    buf = io.BytesIO()
    pacsv.write_csv(table, buf)
    return buf.getvalue().decode("utf-8")


def _duckdb_csv(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    rel = con.sql(sql)
    types = [str(t) for t in rel.types]
    line = csv_text.lines(types)
    assert line is not None, types
    columns = ", ".join(f"c{i}" for i in range(len(types)))
    rows = con.execute(f"SELECT {line} FROM ({sql}) AS t({columns})").fetchall()
    return csv_text.header(list(rel.columns)) + "".join(row[0] + "\n" for row in rows)


def _doubles() -> list[float]:
    """Edge values, every decade from 1e-12 to 1e20 (round and not), and random bit patterns
    (subnormals, huge exponents, NaNs of either sign)."""
    rng = random.Random(27)
    values = [0.0, -0.0, 1.0, -1.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 5e-324]
    values += [1e-4, 1e-5, 1e-6, 1e-7, 9.999999999999999e-5, 9.99999999999e-7, 1e10, 9999999999.999998]
    values += [1e15, 1e16, 9999999999999998.0, 1.7976931348623157e308, 0.30000000000000004, -0.003275]
    for k in range(-12, 21):
        values += [rng.uniform(-1, 1) * 10.0**k for _ in range(40)]
        values += [round(rng.uniform(-1000, 1000)) * 10.0**k for _ in range(40)]
    values += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    return values


def test_doubles_are_written_as_arrow_writes_them() -> None:
    """Shortest digits, plain from 1e-6 to 1e10 (`1`, `0.000015`), else `1e+10`/`1e-7`, `nan`, `-inf`."""
    table = pa.table({"x": pa.array(_doubles(), pa.float64())})
    con = duckdb.connect()
    con.register("doubles", table)
    want, got = _arrow_csv(table).splitlines(), _duckdb_csv(con, "SELECT x FROM doubles").splitlines()
    assert len(got) == len(want) == table.num_rows + 1
    wrong = [(w, g) for w, g in zip(want, got, strict=True) if w != g]
    assert wrong == []
    assert {"0", "-0", "1", "nan", "-inf", "0.000001", "1e-7", "1e+10", "5e-324"} <= set(got)


def test_strings_integers_and_booleans_are_written_as_arrow_writes_them() -> None:
    """Quotes doubled (in names too), newlines kept inside quotes, NULL as nothing, every integer width."""
    sql = (
        "SELECT * FROM (VALUES"
        " ('a\"b', true, (-128)::TINYINT, 255::UTINYINT, (-9223372036854775808)::BIGINT,"
        " 18446744073709551615::UBIGINT, 1.5::DOUBLE, (-32768)::SMALLINT, 4294967295::UINTEGER,"
        " 65535::USMALLINT, (-2147483648)::INTEGER),"
        " (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
        " ('', false, 0, 0, 0, 0, 0, 0, 0, 0, 0),"
        " (e'x\\ny\\r,z', true, 1, 1, 1, 1, 1, 1, 1, 1, 1),"
        " ('ünï 🙂', false, 1, 1, 1, 1, 1, 1, 1, 1, 1))"
        ' AS v("q""x", b, ti, ut, bi, ub, d, si, ui, us, i)'
    )
    con = duckdb.connect()
    got = _duckdb_csv(con, sql)
    assert got == _arrow_csv(con.sql(sql).to_arrow_table())
    assert got.splitlines()[2] == ",,,,,,,,,,"


def test_other_types_are_left_to_arrow() -> None:
    """32-bit floats (Arrow prints their own shortest digits), decimals, times, lists: no lines."""
    for types in (["FLOAT"], ["VARCHAR", "DECIMAL(10,2)"], ["TIMESTAMP"], ["INTEGER[]"], ["HUGEINT"]):
        assert csv_text.lines(types) is None


def _views_without_required_params() -> list[str]:
    return [v.name for v in view_listing() if v.kind == "answer" and v.name != "compare"]


def test_every_view_as_csv_is_what_arrow_wrote(sample_dataset: Path) -> None:
    """Each answer view on the sample: DuckDB's lines where its columns allow (link_util among them),
    Arrow's writer otherwise, the same text as the Arrow path gives."""
    fast = []
    for name in _views_without_required_params():
        if "bin_ns" in {p.name for p in view_params(name)}:
            params: dict = {"bin_ns": 100_000_000}
        else:
            params = {}
        got: list[str] = []

        def write(names: list[str], chunks, got=got) -> None:
            got.append(csv_text.header(names) + "".join(line + "\n" for chunk in chunks for line in chunk))

        table = query_dataset_csv(sample_dataset, name, write, params=params)
        want = io.StringIO()
        write_batches_to(want, query_dataset(sample_dataset, name, params=params))
        if table is None:
            fast.append(name)
            assert got == [want.getvalue()], name
        else:
            assert got == [], name
    assert {"link_util", "link_total", "flow_matrix"} <= set(fast)


def write_batches_to(text: io.StringIO, table: pa.Table) -> None:
    """cli.output's CSV of `table` (what `--format csv` wrote before DuckDB's lines) into `text`."""
    real = sys.stdout
    sys.stdout = text
    try:
        write_batches(table.schema, table.to_batches(), Format.csv, None)
    finally:
        sys.stdout = real


def test_query_csv_limit_and_rows_message(sample_dataset: Path, tmp_path: Path) -> None:
    """--limit keeps the first rows; the message counts the rows written."""
    out = tmp_path / "five.csv"
    runner = CliRunner()
    args = ["query", "link_util", "--data", str(sample_dataset), "-f", "csv"]
    full = runner.invoke(app, args)
    five = runner.invoke(app, [*args, "--limit", "5", "-o", str(out)])
    assert full.exit_code == five.exit_code == 0, five.output
    assert out.read_text(encoding="utf-8").splitlines() == full.stdout.splitlines()[:6]
    assert "wrote 5 rows to" in five.stderr


def test_query_csv_error_leaves_the_destination_untouched(sample_dataset: Path, tmp_path: Path) -> None:
    """An error raised while the view runs (link_util_ci's method check, in SQL) is one line, exit 2,
    and the --out file keeps its old content: the lines are all made before anything is written."""
    out = tmp_path / "old.csv"
    out.write_text("old\n", encoding="utf-8")
    args = ["--data", str(sample_dataset), "-p", "method=bogus", "-f", "csv", "-o", str(out)]
    done = _console("query", "link_util_ci", *args)
    assert done.returncode == 2
    assert "method must be t, normal or bootstrap, not bogus" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert out.read_text(encoding="utf-8") == "old\n"


@pytest.mark.parametrize("view", ["link_util", "flow_matrix"])
def test_query_csv_imports_no_arrow(sample_dataset: Path, view: str) -> None:
    """The shortcut is taken through the console script: neither pyarrow nor numpy is loaded."""
    out, loaded = _main_loads("query", view, "--data", str(sample_dataset), "--format", "csv")
    assert out.startswith('"run",')
    assert {"pyarrow", "numpy", "pandas"} & loaded == set()
