"""A catalog received from someone else is untrusted input: nothing in it runs as SQL (issue 12, item 1),
on every path that reads its contents into SQL text (issue 25, item 2): the catalog rebuilt in place
or in memory by `open_catalog` when the dataset was moved, and by an ingest into it, also one that
upgrades an older dataset; with `_meta.state` (tables from ingest's own copy in .state/) and without
it (a dataset older than that copy: tables from the catalog itself).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.commands import tracecore
from tests.conftest import CORPUS
from tests.test_ingest_support import copy_run
from tracecore.errors import DatasetError
from tracecore.ingest import ingest, lock, open_catalog
from tracecore.ingest.catalog import load_state
from tracecore.ingest.layout import STATE_DIR
from tracecore.sample import SAMPLE_RUN

# A file name without a folder: DuckDB writes it in the current directory, the test's own tmp_path.
TARGET = "pwned.csv"
COPY = f"COPY (SELECT 42 AS a) TO '{TARGET}'"


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
    edited(copy, edit, params)
    return copy


def edited(copy: Path, edit: str, params: list | None = None) -> None:
    """The catalog of `copy` edited in plain DuckDB, as its sender could."""
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        con.execute(edit, params)
    finally:
        con.close()


def test_extra_tables_payload_runs_nothing(dataset: Path, tmp_path: Path) -> None:
    """Without `_meta.state` the tables are read from the catalog by the names extra_tables lists."""
    target = tmp_path / "pwned.csv"
    payload = f"runs\"; COPY (SELECT 42 AS a) TO '{target}'; SELECT * FROM \"runs"
    copy = received(
        dataset,
        tmp_path,
        "DELETE FROM _meta WHERE key = 'state'; UPDATE _meta SET value = ? WHERE key = 'extra_tables'",
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


# ---- every path that reads a catalog's contents into SQL, every place a payload can sit -------------
def _state_record(copy: Path) -> dict:
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        (record,) = con.execute("SELECT value FROM _meta WHERE key = 'state'").fetchone()
    finally:
        con.close()
    return json.loads(record)


def _put_state_table(copy: Path, name: str, table: pa.Table) -> None:
    """Ingest's own copy of the tables rewritten as a sender of the catalog could: the table file and
    its SHA-256 in `_meta.state` (a digest checks the file is the one recorded, not who recorded it)."""
    record = _state_record(copy)
    path = copy / STATE_DIR / record["generation"] / f"{name}.parquet"
    pq.write_table(table, path)
    record["tables"][name] = hashlib.sha256(path.read_bytes()).hexdigest()
    edited(copy, "UPDATE _meta SET value = ? WHERE key = 'state'", [json.dumps(record, sort_keys=True)])


# A worker address that ends the string literal it is pasted in, closes the dedup condition of
# `packets_sql` (`... src_ip IN ('<other ips>', '<this>'))` then `\n)`) and runs a statement of its own.
IP_PAYLOAD = f"x'))); {COPY}; SELECT ((('x"


def _table_name_in_catalog(copy: Path) -> None:
    """A dataset without `_meta.state`, whose extra_tables names a payload: read as a table name."""
    name = f'runs"; {COPY}; SELECT * FROM "runs'
    edited(copy, "DELETE FROM _meta WHERE key = 'state'")
    edited(copy, "UPDATE _meta SET value = ? WHERE key = 'extra_tables'", [json.dumps([name])])


def _table_name_in_state(copy: Path) -> None:
    """`_meta.state` records a table named by a payload, its file and digest in order: the catalog is
    rebuilt with a table of that name."""
    name = f'loss_curve" AS SELECT 1; {COPY}; CREATE TABLE "x'
    _put_state_table(copy, name, pa.table({"run": [SAMPLE_RUN], "loss": [0.5]}))


def _worker_ip_in_catalog(copy: Path) -> None:
    """Without `_meta.state`: W1's address (a text the packets view's dedup rule holds) is a payload."""
    edited(copy, "DELETE FROM _meta WHERE key = 'state'; UPDATE workers SET dup_rows = 1 WHERE worker = 'W2'")
    edited(copy, "UPDATE workers SET ip = ? WHERE worker = 'W1'", [IP_PAYLOAD])


def _worker_ip_in_state(copy: Path) -> None:
    """The same address in ingest's own copy of `workers` (with its digest)."""
    record = _state_record(copy)
    workers = pq.read_table(copy / STATE_DIR / record["generation"] / "workers.parquet").to_pylist()
    for w in workers:
        w["ip"] = IP_PAYLOAD if w["worker"] == "W1" else w["ip"]
        w["dup_rows"] = 1 if w["worker"] == "W2" else w["dup_rows"]
    schema = pq.read_schema(copy / STATE_DIR / record["generation"] / "workers.parquet")
    _put_state_table(copy, "workers", pa.Table.from_pylist(workers, schema=schema))


PAYLOADS = {  # where the payload sits → the message that refuses it (None: read as data, harmlessly)
    "table_name_in_catalog": (_table_name_in_catalog, r"_meta\.extra_tables .* not a table tracecore writes"),
    "table_name_in_state": (_table_name_in_state, r"_meta\.state .* not a record tracecore writes"),
    "worker_ip_in_catalog": (_worker_ip_in_catalog, None),
    "worker_ip_in_state": (_worker_ip_in_state, None),
}


def _open_moved(copy: Path) -> None:
    """A query on the moved dataset: `open_catalog` rebuilds the catalog file in place."""
    con = open_catalog(copy)
    try:
        assert con.execute("SELECT count(*) FROM packets").fetchone()[0] > 0
    finally:
        con.close()


def _open_moved_while_locked(copy: Path) -> None:
    """The same while an ingest holds the dataset's lock: the catalog is rebuilt in memory."""
    before = (copy / "tracecore.duckdb").read_bytes()
    fd = lock.try_lock(copy)
    assert fd is not None
    try:
        _open_moved(copy)
    finally:
        lock.release(fd)
    assert (copy / "tracecore.duckdb").read_bytes() == before  # not rebuilt in place


def _ingest(copy: Path) -> None:
    """An ingest of another capture into the received dataset: the received runs are carried forward
    (their tables as the catalog or ingest's copy holds them) into the new catalog."""
    summary = ingest([CORPUS / "dpkt__http.pcap"], copy)
    assert [c.status for c in summary.captures] == ["ingested"]


def _ingest_older(copy: Path) -> None:
    """The same into a dataset of schema version 3, which the ingest upgrades before its commit."""
    edited(copy, "UPDATE _meta SET value = '3' WHERE key = 'schema_version'")
    _ingest(copy)


PATHS = {
    "open_moved": _open_moved,
    "open_moved_while_locked": _open_moved_while_locked,
    "ingest": _ingest,
    "ingest_older": _ingest_older,
}


@pytest.mark.parametrize("where", PAYLOADS)
@pytest.mark.parametrize("path", PATHS)
def test_no_payload_in_a_catalog_runs_on_any_path_that_reads_it(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, where: str
) -> None:
    monkeypatch.chdir(tmp_path)  # where a payload's COPY would write its file
    copy = tmp_path / "received"
    shutil.copytree(dataset, copy)
    plant, refusal = PAYLOADS[where]
    plant(copy)
    try:
        if refusal is None:
            PATHS[path](copy)
        else:
            with pytest.raises(DatasetError, match=refusal):
                PATHS[path](copy)
    finally:
        assert not (tmp_path / TARGET).exists(), f"the payload in {where} ran on path {path}"
    if refusal is None:  # read as an address: the rebuilt catalog holds it as data
        con = open_catalog(copy)
        try:
            assert con.execute("SELECT ip FROM workers WHERE worker = 'W1'").fetchone() == (IP_PAYLOAD,)
        finally:
            con.close()
