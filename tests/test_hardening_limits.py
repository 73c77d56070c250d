"""A received catalog cannot exhaust the machine (issue 36, item 2): a row holding more than 1 MiB of text
is refused inside DuckDB before it reaches Python, a whole result larger than the memory limit is
refused in one line, `sql` and `query` stop at their time limit (`--timeout`), and every number read
from the catalog that names a file is checked before it is used.

Everything runs through the installed console script, on copies of the sample run's dataset.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import CORPUS
from tracecore.ingest import ingest
from tracecore.sample import sample_run

SCRIPT = Path(sys.executable).with_name("tracecore")

# The console script under a wrapper that reports its peak RSS: a process of its own, so nothing but
# the command counts
MEASURED = """\
import json, resource, subprocess, sys, time
start = time.monotonic()
res = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": res.returncode, "stderr": res.stderr, "stdout": len(res.stdout),
                  "s": time.monotonic() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measured(*args: str, env: dict | None = None) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", MEASURED, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def one_line(got: dict, code: int) -> str:
    assert got["rc"] == code, got
    (line,) = got["stderr"].splitlines()
    assert got["stdout"] == 0, got
    return line


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sample") / "ds"
    assert not ingest([sample_run()], out, jobs=1).failed
    return out


def planted(sample: Path, copy: Path, *views: str) -> Path:
    """A copy of the sample whose catalog the sender gave views of its own, once the copy's catalog was
    made for its folder (so that they are kept, as in a dataset received that way)."""
    shutil.copytree(sample, copy)
    res = subprocess.run([SCRIPT, "sql", "SELECT 1", "--data", str(copy)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        for view in views:
            con.execute(view)
    finally:
        con.close()
    return copy


HUGE = "CREATE VIEW huge AS SELECT repeat('x', 50000000) AS s FROM range(30)"
FOREVER = (
    "CREATE VIEW forever AS WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
    "SELECT count(*) AS n FROM r"
)


@pytest.fixture(scope="module")
def crafted(sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A huge row, an endless one, and `run_meta` (which `tracecore query` runs) redefined as the huge."""
    copy = tmp_path_factory.mktemp("crafted") / "ds"
    return planted(sample, copy, HUGE, FOREVER, "CREATE OR REPLACE VIEW run_meta AS SELECT * FROM huge")


@pytest.mark.parametrize(
    "args",
    [
        ("sql", "SELECT * FROM huge"),
        ("sql", "SELECT * FROM huge", "-f", "csv"),
        ("sql", "SELECT * FROM huge", "-f", "json"),
        ("query", "run_meta"),
        ("query", "run_meta", "-f", "csv"),
    ],
)
def test_a_huge_row_is_refused_before_it_leaves_duckdb(crafted: Path, args: tuple[str, ...]) -> None:
    """Before: 100 rows of 100 MB (one constant to DuckDB) took `tracecore sql` to 23.8 GB: each row was
    copied out; here 30 rows of 50 MB, 1.5 GB once copied."""
    got = measured(*args, "--data", str(crafted))
    line = one_line(got, 2)
    assert "tracecore: a result row holds more than 1 MiB of text" in line, line
    assert got["rss_mb"] < 800, got


def test_a_result_over_the_memory_limit_is_one_line(sample: Path) -> None:
    """Rows under the row limit, 200 MB of them, with a 64 MB memory limit: refused while read."""
    sql = "SELECT i, repeat('y', 1000) AS s FROM range(200000) t(i)"
    got = measured("sql", sql, "-f", "json", "--data", str(sample), env={"TRACECORE_MEMORY_LIMIT": "64MB"})
    line = one_line(got, 2)
    assert line.startswith("Error: the result is larger than the memory limit (61 MiB,"), line
    assert got["rss_mb"] < 800, got


def test_long_values_under_the_row_limit_still_come_back(sample: Path) -> None:
    got = subprocess.run(
        [SCRIPT, "sql", "SELECT repeat('z', 500000) AS s, 7 AS n", "-f", "csv", "--data", str(sample)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[1] == '"' + "z" * 500000 + '",7'


ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"


@pytest.mark.parametrize(
    "args",
    [
        ("sql", ENDLESS),
        ("sql", ENDLESS, "-f", "csv"),
        ("sql", "SELECT * FROM forever"),
        ("query", "run_meta"),
    ],
)
def test_an_endless_query_stops_at_its_time_limit(
    crafted: Path, sample: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Before: an unbounded WITH RECURSIVE ran until killed; there was no --timeout."""
    data = crafted
    if args[0] == "query":  # run_meta redefined as endless
        endless = "CREATE OR REPLACE VIEW run_meta AS SELECT * FROM forever"
        data = planted(sample, tmp_path / "ds", FOREVER, endless)
    got = measured(*args, "--timeout", "1s", "--data", str(data))
    line = one_line(got, 2)
    assert line.startswith("Error: the query ran longer than its time limit (1 s) and was stopped"), line
    assert got["s"] < 30, got


def test_the_time_limit_has_a_default() -> None:
    for command in ("sql", "query"):
        res = subprocess.run([SCRIPT, command, "--help"], capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr
        assert "--timeout" in res.stdout
        assert "10min" in res.stdout


@pytest.mark.parametrize("value", ["-5", "0", "1e3", "x"])
def test_next_part_from_the_catalog_is_checked(sample: Path, tmp_path: Path, value: str) -> None:
    """Before: `next_part = -5` in `_meta` made the next ingest write `part--1.parquet`; 0 (in use) would
    overwrite a part file the catalog names."""
    copy = tmp_path / "ds"
    line = ingest_into_edited_copy(
        sample, copy, ("UPDATE _meta SET value = ? WHERE key = 'next_part'", [value])
    )
    assert f"_meta.next_part '{value}' is not a part number above those in use" in line, line
    assert not [p for p in (copy / "packets").rglob("*") if "--" in p.name or "dpkt" in str(p)]


def test_a_read_version_from_the_catalog_is_checked(sample: Path, tmp_path: Path) -> None:
    """A dataset without ingest's own copy of the tables (older) has `_files` read from its catalog."""
    line = ingest_into_edited_copy(
        sample,
        tmp_path / "ds",
        ("DELETE FROM _meta WHERE key = 'state'", []),
        ("UPDATE _files SET read_version = 99", []),
    )
    assert "_files.read_version 99 is not a schema version" in line, line


def ingest_into_edited_copy(sample: Path, copy: Path, *edits: tuple[str, list]) -> str:
    """A copy of the dataset with its catalog edited by `edits`, then an ingest into it: it exits 4 with
    one line, which is returned."""
    shutil.copytree(sample, copy)
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        for sql, values in edits:
            con.execute(sql, values)
    finally:
        con.close()
    res = subprocess.run(
        [SCRIPT, "ingest", str(CORPUS / "dpkt__http.pcap"), "--out", str(copy)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 4, res.stdout + res.stderr
    (line,) = res.stderr.splitlines()
    return line
