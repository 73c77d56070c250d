"""A catalog received from someone else is untrusted input: nothing in it runs as SQL (issue 12, item 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.commands import tracecore
from tests.test_ingest_support import copy_run
from tracecore.errors import DatasetError
from tracecore.ingest import ingest
from tracecore.ingest.catalog import load_state
from tracecore.sample import SAMPLE_RUN


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample run ingested once; tests work on copies of it."""
    root = tmp_path_factory.mktemp("src")
    copy_run(root)
    out = tmp_path_factory.mktemp("ds") / "data"
    assert not ingest([root], out).failed
    return out


def received(dataset: Path, tmp_path: Path, edit: str, params: list | None = None) -> Path:
    """A copy of the dataset (so its views were made for another root) whose catalog was edited."""
    copy = tmp_path / "received"
    shutil.copytree(dataset, copy)
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        con.execute(edit, params)
    finally:
        con.close()
    return copy


def test_extra_tables_payload_runs_nothing(dataset: Path, tmp_path: Path) -> None:
    target = tmp_path / "pwned.csv"
    payload = f"runs\"; COPY (SELECT 42 AS a) TO '{target}'; SELECT * FROM \"runs"
    copy = received(
        dataset,
        tmp_path,
        "UPDATE _meta SET value = ? WHERE key = 'extra_tables'",
        [json.dumps([payload])],
    )
    res = tracecore("query", "run_meta", "--data", str(copy))
    assert not target.exists()
    assert res.returncode == 4, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "extra_tables" in lines[0]
    assert "not a table tracecore writes" in lines[0]
    assert res.stdout == ""


@pytest.mark.parametrize(
    "value",
    [
        '"train_log"',  # not a list
        '["runs"]',  # a base table named again
        '["loss_curve", "loss_curve"]',  # twice
        '["Loss_Curve"]',  # not a parser's table
        "[1]",
        "{",
    ],
)
def test_extra_tables_must_be_known_parser_tables(dataset: Path, tmp_path: Path, value: str) -> None:
    copy = received(dataset, tmp_path, "UPDATE _meta SET value = ? WHERE key = 'extra_tables'", [value])
    with pytest.raises(DatasetError, match=r"_meta\.extra_tables .* not a table tracecore writes"):
        load_state(copy)


def test_part_paths_outside_packets_are_refused(dataset: Path, tmp_path: Path) -> None:
    """`_files` names the part files the views read: a path leaving packets/ is refused, not read."""
    copy = received(
        dataset,
        tmp_path,
        "UPDATE _files SET path = '../../../etc/passwd' WHERE rowid = 0;"
        "DELETE FROM _meta WHERE key = 'state'",  # the older datasets' path: tables from the catalog
    )
    res = tracecore("sql", "SELECT count(*) AS n FROM runs", "--data", str(copy))
    assert res.returncode == 4, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "../../../etc/passwd" in res.stderr
    assert "_files" in res.stderr


def test_received_dataset_still_queries(dataset: Path, tmp_path: Path) -> None:
    """The checks refuse only what tracecore never writes: an untouched copy answers queries."""
    copy = received(dataset, tmp_path, "SELECT 1")
    res = tracecore("sql", "SELECT run, n_workers FROM runs", "--format", "csv", "--data", str(copy))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f'"run","n_workers"\n"{SAMPLE_RUN}",4\n'
