"""`tracecore sql` is read-only in fact: the dataset's part files are readable, nothing else is reachable
(issue 12, item 2)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.commands import tracecore
from tests.test_ingest_support import copy_run
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.lock import dataset_lock
from tracecore.sample import SAMPLE_RUN

SAMPLE_PACKETS = 17027


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    copy_run(tmp_path / "src")
    out = tmp_path / "data"
    assert not ingest([tmp_path / "src"], out).failed
    return out


def first_part(out: Path) -> Path:
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        return out / con.execute("SELECT min(path) FROM _files").fetchone()[0]
    finally:
        con.close()


def one_line_refusal(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert res.stdout == ""
    return lines[0]


def test_packets_stay_readable(dataset: Path) -> None:
    res = tracecore("sql", "SELECT count(*) AS n FROM packets", "--format", "csv", "--data", str(dataset))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f'"n"\n{SAMPLE_PACKETS}\n'


def test_copy_over_a_part_file_is_refused(dataset: Path) -> None:
    part = first_part(dataset)
    before = part.read_bytes()
    sql = f"COPY (SELECT * FROM packets_all LIMIT 10) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)"
    line = one_line_refusal(tracecore("sql", sql, "--data", str(dataset)))
    assert "COPY" in line
    assert "--unsafe" in line
    assert part.read_bytes() == before


@pytest.mark.parametrize(
    "template",
    [
        "COPY (SELECT 1 AS a) TO '{target}'",
        "SELECT 1; COPY (SELECT 1 AS a) TO '{target}'",
        "ATTACH '{target}' AS other",
        "EXPORT DATABASE '{target}'",
    ],
)
def test_statements_that_write_are_refused(dataset: Path, tmp_path: Path, template: str) -> None:
    target = tmp_path / "written"
    one_line_refusal(tracecore("sql", template.format(target=target), "--data", str(dataset)))
    assert not target.exists()


@pytest.mark.parametrize(
    "sql", ["SET memory_limit = '100GB'", "INSTALL httpfs", "LOAD httpfs", "PRAGMA enable_profiling"]
)
def test_settings_and_extensions_are_refused(dataset: Path, sql: str) -> None:
    one_line_refusal(tracecore("sql", sql, "--data", str(dataset)))


def test_other_files_are_not_readable(dataset: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    line = one_line_refusal(tracecore("sql", f"SELECT * FROM read_csv('{secret}')", "--data", str(dataset)))
    assert "hunter2" not in line
    assert str(secret) in line


def test_a_received_view_cannot_read_other_files(dataset: Path, tmp_path: Path) -> None:
    """A view stored in someone else's catalog runs under the same lock-down as typed SQL."""
    secret = tmp_path / "secret.csv"
    secret.write_text("token\nhunter2\n")
    con = duckdb.connect(str(dataset / "tracecore.duckdb"))
    try:
        con.execute(f"CREATE VIEW evil AS SELECT * FROM read_csv('{secret}')")
    finally:
        con.close()
    res = tracecore("sql", "SELECT * FROM evil", "--data", str(dataset))
    assert "hunter2" not in res.stdout + res.stderr
    one_line_refusal(res)


def test_unsafe_gives_duckdb_its_full_power(dataset: Path, tmp_path: Path) -> None:
    target = tmp_path / "runs.csv"
    sql = f"COPY (SELECT run, n_workers FROM runs) TO '{target}'"
    res = tracecore("sql", "--unsafe", sql, "--data", str(dataset))
    assert res.returncode == 0, res.stderr
    assert target.read_text() == f"run,n_workers\n{SAMPLE_RUN},4\n"


def test_library_connection_is_locked_unless_unsafe(dataset: Path) -> None:
    con = open_catalog(dataset)
    try:
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET enable_external_access = true")
        assert con.execute("SELECT count(*) FROM packets").fetchone() == (SAMPLE_PACKETS,)
    finally:
        con.close()
    con = open_catalog(dataset, unsafe=True)
    try:
        con.execute("SET memory_limit = '1GB'")
        assert con.execute("SELECT current_setting('memory_limit')").fetchone() == ("953.6 MiB",)
    finally:
        con.close()


def test_moved_dataset_is_locked_too(dataset: Path, tmp_path: Path) -> None:
    """The views rebuilt in memory for a new root (another ingest holds the lock) read the moved
    files, and only them."""
    moved = tmp_path / "moved"
    shutil.move(dataset, moved)
    with dataset_lock(moved):
        con = open_catalog(moved)
        try:
            assert con.execute("SELECT current_database()").fetchone() == ("memory",)
            assert con.execute("SELECT count(*) FROM packets").fetchone() == (SAMPLE_PACKETS,)
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute("SET enable_external_access = true")
        finally:
            con.close()


def test_pivot_is_a_query(dataset: Path) -> None:
    """DuckDB parses PIVOT into several statements; one that starts as a query still runs."""
    sql = "PIVOT (SELECT worker, packets FROM workers) ON worker USING sum(packets)"
    res = tracecore("sql", sql, "--format", "csv", "--data", str(dataset))
    assert res.returncode == 0, res.stderr
    assert res.stdout == '"W1","W2","W3","W4"\n4531,4170,4216,4110\n'


def test_copy_of_a_pivot_over_a_part_file_is_refused(dataset: Path) -> None:
    part = first_part(dataset)
    before = part.read_bytes()
    sql = f"COPY (PIVOT (SELECT worker, packets FROM workers) ON worker USING sum(packets)) TO '{part}'"
    one_line_refusal(tracecore("sql", "/* PIVOT */ " + sql, "--data", str(dataset)))
    assert part.read_bytes() == before


@pytest.mark.parametrize(
    "template",
    [
        "EXPLAIN ANALYZE COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
        "explain /* x */ analyse COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
        "EXPLAIN (ANALYZE) COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
        "EXPLAIN (ANALYZE true, FORMAT json) COPY (SELECT 1 AS a) TO '{part}' (FORMAT parquet)",
    ],
)
def test_explain_analyze_of_a_copy_is_refused(dataset: Path, template: str) -> None:
    """EXPLAIN ANALYZE runs what it explains: before, its statement type (EXPLAIN) passed and the COPY
    shrank a part file to 195 bytes, after which every view failed (issue 25, item 10)."""
    part = first_part(dataset)
    before = part.read_bytes()
    line = one_line_refusal(tracecore("sql", template.format(part=part), "--data", str(dataset)))
    assert "--unsafe" in line
    assert part.read_bytes() == before
    res = tracecore("sql", "SELECT count(*) AS n FROM packets", "--format", "csv", "--data", str(dataset))
    assert res.stdout == f'"n"\n{SAMPLE_PACKETS}\n', res.stderr


@pytest.mark.parametrize(
    "sql",
    [
        "EXPLAIN SELECT count(*) FROM packets",
        "EXPLAIN ANALYZE SELECT count(*) FROM packets",
        "EXPLAIN (FORMAT json) SELECT count(*) FROM packets",
        "/* plan */\nexplain analyze (SELECT count(*) FROM packets);",
    ],
)
def test_explain_of_a_query_still_runs(dataset: Path, sql: str) -> None:
    res = tracecore("sql", sql, "--format", "csv", "--data", str(dataset))
    assert res.returncode == 0, res.stderr
    assert "explain_key" in res.stdout.splitlines()[0]
