"""Ingest notices a part file that no longer matches what it committed, and repairs it; a query names a
missing part file (issue 12, items 2 and 12)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.commands import tracecore
from tests.test_ingest_support import copy_run
from tracecore.errors import DatasetError
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.lock import dataset_lock

SAMPLE_PACKETS = 17027


@pytest.fixture
def src(tmp_path: Path) -> Path:
    copy_run(tmp_path / "src")
    return tmp_path / "src"


def parts(out: Path) -> list[tuple[str, str, int]]:
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        return con.execute("SELECT path, file, rows FROM _files ORDER BY path").fetchall()
    finally:
        con.close()


def stored_rows(out: Path) -> int:
    con = open_catalog(out)
    try:
        return con.execute("SELECT count(*) FROM packets_all").fetchone()[0]
    finally:
        con.close()


def statuses(summary) -> dict[str, str]:
    return {c.file: c.status for c in summary.captures}


def test_part_overwritten_by_hand_is_reread(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "data"
    ingest([src], out)
    (path, file, rows), *rest = parts(out)
    other = max(rest, key=lambda part: part[2])[0]
    sql = (
        f"COPY (SELECT * FROM read_parquet('{out / other}', hive_partitioning = false) LIMIT 10) "
        f"TO '{out / path}' (USE_TMP_FILE false)"
    )
    res = tracecore("sql", "--unsafe", sql, "--data", str(out))
    assert res.returncode == 0, res.stderr
    assert stored_rows(out) == SAMPLE_PACKETS - rows + 10
    summary = ingest([src], out)
    assert statuses(summary)[file] == "ingested"
    assert sorted(set(statuses(summary).values())) == ["ingested", "unchanged"]
    assert any(path in w and "re-read" in w for w in summary.warnings)
    assert stored_rows(out) == SAMPLE_PACKETS


def test_part_deleted_by_hand_is_repaired_by_ingest(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "data"
    ingest([src], out)
    path, file, _ = parts(out)[-1]
    (out / path).unlink()
    summary = ingest([src], out)
    assert statuses(summary)[file] == "ingested"
    assert stored_rows(out) == SAMPLE_PACKETS
    assert all((out / p).is_file() for p, _, _ in parts(out))


def test_query_names_the_missing_part(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "data"
    ingest([src], out)
    path, file, _ = parts(out)[0]
    (out / path).unlink()
    res = tracecore("query", "link_total", "--data", str(out))
    assert res.returncode == 4, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert str(out / path) in lines[0]
    assert "tracecore ingest" in lines[0]
    assert file in lines[0]


def test_moved_dataset_names_the_missing_part(src: Path, tmp_path: Path) -> None:
    """The same message when the views are rebuilt in memory (moved dataset, lock held elsewhere)."""
    out = tmp_path / "data"
    ingest([src], out)
    path, file, _ = parts(out)[0]
    moved = tmp_path / "moved"
    out.rename(moved)
    (moved / path).unlink()
    with dataset_lock(moved), pytest.raises(DatasetError, match="part file of the dataset is missing") as err:
        open_catalog(moved)
    assert str(moved / path) in str(err.value)
    assert file in str(err.value)
