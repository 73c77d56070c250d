"""The DuckDB catalog: `OUT/tracecore.duckdb` holds the small tables and views over the Parquet files.

Why it is rebuilt, not edited: every ingest writes a complete new catalog to a temporary file and
renames it over the old one. That rename is the commit point of the whole dataset: before it,
readers see the old state (whose Parquet files are not deleted until after it); after it, the new.
A SIGKILL anywhere leaves one or the other, never a mix.

Why absolute paths: DuckDB resolves paths in a view against the process's cwd, and table functions
cannot compute their path from the database's own location. So views name absolute paths, which makes
plain `duckdb OUT/tracecore.duckdb` work from any directory; `_meta.root` records the root they were
made for, and `open_catalog` rebuilds the views when the dataset has moved (or `queries/` changed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracecore import views
from tracecore.errors import DatasetError, UsageError
from tracecore.ingest import lock
from tracecore.ingest.tables import BASE_SCHEMAS, EXPORTED, FORMAT_VERSION, State
from tracecore.schema import PACKET_FIELDS

CATALOG_NAME = "tracecore.duckdb"
PACKETS_DIR = "packets"
TABLES_DIR = "tables"

_DUCK_TYPES = {
    pa.int64(): "BIGINT",
    pa.uint32(): "UINTEGER",
    pa.uint16(): "USMALLINT",
    pa.uint8(): "UTINYINT",
    pa.bool_(): "BOOLEAN",
}

DEDUP_RULE = """\
-- packets: every captured packet once.
-- Rule: a worker's capture may hold packets it sent (src_ip = its own IP) and, in both-direction
-- captures, packets it received. A received row whose src_ip is the IP of ANOTHER worker captured in
-- the same run is a second copy of a row that worker's capture already holds as its sender, so it is
-- hidden here: the sender's copy (and the sender's timestamp and frame length) is the one counted.
-- Received rows from hosts that were not captured (and rows without an IP source, e.g. ARP) are kept.
-- Sender-only captures (tcpdump `src <own ip>`, the paper's) contain no such rows: nothing is hidden.
-- `packets_all` has every stored row; `workers.dup_rows` counts the rows hidden per worker."""


def default_data_dir() -> Path:
    """$TRACECORE_DATA or ./tracecore-data (the same rule as cli.common, without importing the CLI)."""
    return Path(os.environ.get("TRACECORE_DATA", "tracecore-data"))


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def views_fingerprint() -> str:
    """Changes whenever a view file in queries/ or the catalog format changes."""
    h = hashlib.sha256(FORMAT_VERSION.encode())
    for name in views.view_names():
        h.update(name.encode() + b"\0" + views.view_sql(name).encode() + b"\0")
    return h.hexdigest()[:16]


def packets_all_sql(root: Path, files: list[str]) -> str:
    """Every stored packet row, with `run` and `worker` (hive keys) first."""
    if not files:
        cols = ", ".join(
            f"NULL::{'VARCHAR' if pa.types.is_dictionary(f.type) else _DUCK_TYPES[f.type]} AS {f.name}"
            for f in PACKET_FIELDS
        )
        return f"SELECT NULL::VARCHAR AS run, NULL::VARCHAR AS worker, {cols} WHERE false"
    paths = ", ".join(_lit(str(root / f)) for f in files)
    return (
        "SELECT run, worker, * EXCLUDE (run, worker) FROM read_parquet(["
        + paths
        + "], hive_partitioning = true, hive_types = {'run': VARCHAR, 'worker': VARCHAR})"
    )


def packets_sql(workers: list[dict]) -> str:
    """The de-duplicated view (see DEDUP_RULE), with literal per-worker conditions for pruning."""
    by_run: dict[str, list[dict]] = {}
    for w in workers:
        by_run.setdefault(w["run"], []).append(w)
    conds = []
    for run, ws in sorted(by_run.items()):
        ips = {w["ip"] for w in ws if w["ip"]}
        for w in sorted(ws, key=lambda w: w["worker"]):
            others = sorted(ips - {w["ip"]})
            if not w["dup_rows"] or not others:
                continue
            conds.append(
                f"    (run = {_lit(run)} AND worker = {_lit(w['worker'])} AND src_ip IS NOT NULL"
                f" AND src_ip IN ({', '.join(map(_lit, others))}))"
            )
    body = "SELECT * FROM packets_all"
    if conds:
        body += "\nWHERE NOT (\n" + "\n    OR ".join(c.strip() for c in conds) + "\n)"
    return DEDUP_RULE + "\nCREATE OR REPLACE VIEW packets AS\n" + body


def write_catalog(con: duckdb.DuckDBPyConnection, state: State, root: Path) -> list[str]:
    """Fill an empty connection with the tables, the packet views and queries/; returns view problems."""
    for name, table in state.tables.items():
        con.register("_incoming", table)
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _incoming')
        con.unregister("_incoming")
    meta = {
        "format_version": FORMAT_VERSION,
        "root": str(root),
        "views_fingerprint": views_fingerprint(),
        "next_part": str(state.next_part),
        "extra_tables": json.dumps(sorted(set(state.tables) - set(BASE_SCHEMAS))),
    }
    con.execute("CREATE OR REPLACE TABLE _meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.executemany("INSERT INTO _meta VALUES (?, ?)", list(meta.items()))
    files = sorted(state.tables["_files"]["path"].to_pylist())
    con.execute("CREATE OR REPLACE VIEW packets_all AS " + packets_all_sql(root, files))
    con.execute(packets_sql(state.rows("workers")))
    try:
        views.install(con)
    except UsageError as err:
        return [str(err)]
    return []


def commit_catalog(out: Path, state: State) -> list[str]:
    """Write the whole catalog to a temporary file, then rename it into place (the commit point)."""
    root = out.resolve()
    final = root / CATALOG_NAME
    tmp = root / f".{CATALOG_NAME}.tmp-{os.getpid()}"
    for stale in (tmp, tmp.with_name(tmp.name + ".wal")):
        stale.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        problems = write_catalog(con, state, root)
        con.execute("CHECKPOINT")
    finally:
        con.close()
    _fsync(tmp)
    os.replace(tmp, final)
    tmp.with_name(tmp.name + ".wal").unlink(missing_ok=True)
    _fsync(root)
    return problems


def export_tables(out: Path, state: State) -> None:
    """OUT/tables/<name>.parquet for Polars and pandas users (each written then renamed)."""
    tdir = out / TABLES_DIR
    tdir.mkdir(exist_ok=True)
    for name, table in state.tables.items():
        if name.startswith("_") or (name not in EXPORTED and name in BASE_SCHEMAS):
            continue
        tmp = tdir / f".{name}.parquet.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, tdir / f"{name}.parquet")


def load_state(out: Path) -> State:
    """The committed state of a dataset, or an empty one when there is no catalog yet."""
    path = out / CATALOG_NAME
    if not path.is_file():
        return State()
    try:
        con = attach(path)
    except duckdb.Error as err:
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err
    try:
        meta = dict(con.execute("SELECT key, value FROM _meta").fetchall())
        names = [*BASE_SCHEMAS, *json.loads(meta.get("extra_tables", "[]"))]
        tables = {}
        for name in names:
            table = con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
            schema = BASE_SCHEMAS.get(name)
            tables[name] = _conform(table, schema) if schema is not None else table
        return State(tables=tables, next_part=int(meta.get("next_part", "0")))
    except (duckdb.Error, KeyError, ValueError) as err:
        raise DatasetError(
            f"{path}: the catalog is unreadable ({str(err).splitlines()[0]}); "
            "re-ingest into a new --out, or delete it and run `tracecore ingest --force`"
        ) from err
    finally:
        con.close()


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A stored table in today's schema: columns added since it was written become NULL."""
    for fld in schema:
        if fld.name not in table.column_names:
            table = table.append_column(fld.name, pa.nulls(table.num_rows, fld.type))
    return table.select(schema.names).cast(schema)


def attach(path: Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB with the catalog file attached (as `tracecore`) and selected.

    Why not `duckdb.connect(path)`: DuckDB keeps one instance per path per process, so a connection
    opened before an ingest replaced the file would keep handing out the old catalog, whose Parquet
    files are gone. Attaching opens the file as it is now, every time.
    """
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {_lit(str(path))} AS tracecore" + (" (READ_ONLY)" if read_only else ""))
        con.execute("USE tracecore")
    except duckdb.Error:
        con.close()
        raise
    return con


def _meta_of(path: Path) -> dict[str, str]:
    con = attach(path)
    try:
        return dict(con.execute("SELECT key, value FROM _meta").fetchall())
    finally:
        con.close()


def open_catalog(data_dir: Path | str | None = None, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to a dataset with every view ready, from any cwd, even after a move.

    When the views were made for another root (the dataset was moved or copied) or an older
    queries/, they are rebuilt in place under the dataset lock; if that is not possible (another
    ingest is running, read-only media) the catalog is rebuilt in memory instead.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    path = root / CATALOG_NAME
    if not path.is_file():
        raise DatasetError(f"no dataset at {root}; run `tracecore ingest PCAPS` first or pass --data")
    root = root.resolve()
    try:
        meta = _meta_of(path)
    except duckdb.Error as err:
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err
    stale = meta.get("root") != str(root) or meta.get("views_fingerprint") != views_fingerprint()
    if stale and not _refresh_in_place(root):
        con = duckdb.connect()
        write_catalog(con, load_state(root), root)
        return con
    try:
        return attach(path, read_only)
    except duckdb.Error as err:
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err


def _refresh_in_place(root: Path) -> bool:
    """Rebuild the catalog file for this root; False when the lock or the directory is not ours."""
    if not os.access(root, os.W_OK):
        return False
    fd = lock.try_lock(root)
    if fd is None:
        return False
    try:
        commit_catalog(root, load_state(root))
        return True
    except (OSError, duckdb.Error):
        return False
    finally:
        lock.release(fd)


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
