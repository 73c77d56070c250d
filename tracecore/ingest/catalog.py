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
import shutil
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracecore import __version__, views
from tracecore.errors import DatasetError, UsageError
from tracecore.ingest import lock
from tracecore.ingest.dataset_tables import BASE_SCHEMAS, EXPORTED, FORMAT_VERSION, State
from tracecore.ingest.layout import CATALOG_NAME, TABLES_DIR, default_data_dir
from tracecore.schema import BYTE_COLUMNS, DATASET_FIELDS, SCHEMA_VERSION, check_schema_version

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


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def views_fingerprint() -> str:
    """Changes whenever a view file in queries/ or the catalog format changes."""
    h = hashlib.sha256(FORMAT_VERSION.encode())
    for name in views.view_names():
        h.update(name.encode() + b"\0" + views.view_sql(name).encode() + b"\0")
    return h.hexdigest()[:16]


def packets_all_sql(root: Path, files: list[str]) -> str:
    """Every stored packet row, with `run` and `worker` (hive keys) first and `ts` (ts_ns as a
    TIMESTAMP_NS, UTC, so tools show times) last; byte columns BIGINT whatever the file's version."""
    if not files:
        cols = ", ".join(
            f"NULL::{'VARCHAR' if pa.types.is_dictionary(f.type) else _DUCK_TYPES[f.type]} AS {f.name}"
            for f in DATASET_FIELDS
        )
        return (
            f"SELECT NULL::VARCHAR AS run, NULL::VARCHAR AS worker, {cols}, NULL::TIMESTAMP_NS AS ts"
            " WHERE false"
        )
    paths = ", ".join(_lit(str(root / f)) for f in files)
    widened = ", ".join(f"{c}::BIGINT AS {c}" for c in BYTE_COLUMNS)  # schema version 1 stored uint32
    return (
        f"SELECT run, worker, * EXCLUDE (run, worker) REPLACE ({widened}), make_timestamp_ns(ts_ns) AS ts"
        " FROM read_parquet(["
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
    problems = install_views(con)
    fill_catalog(con, state, root)
    return problems


def install_views(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every view of queries/, bound against empty stand-ins of the tables and packet views.

    Why stand-ins: DuckDB binds a view when it is created (~5 ms each here), which needs only the
    names and types of what it reads. So the views can be installed before the captures are read
    (see CatalogDraft) and the stand-ins replaced afterwards; views are rebound when queried.
    """
    for name, schema in BASE_SCHEMAS.items():
        con.register("_incoming", pa.Table.from_batches([], schema=schema))
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _incoming')
        con.unregister("_incoming")
    con.execute("CREATE OR REPLACE VIEW packets_all AS " + packets_all_sql(Path("/"), []))
    con.execute("CREATE OR REPLACE VIEW packets AS SELECT * FROM packets_all")
    try:
        views.install(con)
    except UsageError as err:
        return [str(err)]
    return []


def fill_catalog(con: duckdb.DuckDBPyConnection, state: State, root: Path) -> None:
    """The tables, `_meta` and the packet views of `state` (over the part files under `root`)."""
    for name, table in state.tables.items():
        con.register("_incoming", table)
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _incoming')
        con.unregister("_incoming")
    meta = {
        "format_version": FORMAT_VERSION,
        "schema_version": str(SCHEMA_VERSION),
        "tracecore_version": __version__,
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


class CatalogDraft:
    """A new catalog file written beside the committed one, renamed over it by `commit`.

    Why a draft: installing the views is the slow part of a commit (~0.2 s), and it does not
    depend on what the captures hold (see `install_views`), so an ingest prepares the draft on a
    thread while it reads captures and only fills in the tables when it commits. A draft with
    only the views installed is the same file for every dataset, so it is kept as a template in
    the user's cache (`template_path`) and later drafts start as a copy of it.
    """

    def __init__(self, out: Path):
        self.root = out.resolve()
        self.final = self.root / CATALOG_NAME
        self.tmp = self.root / f".{CATALOG_NAME}.tmp-{os.getpid()}-{threading.get_ident()}"
        for stale in (self.tmp, self.tmp.with_name(self.tmp.name + ".wal")):
            stale.unlink(missing_ok=True)
        self.con: duckdb.DuckDBPyConnection | None = None
        self.problems: list[str] = []
        self.from_template = False

    def prepare(self) -> CatalogDraft:
        """The views installed: copied from the template when there is one, else bound here."""
        template = template_path()
        if template is not None and template.is_file():
            try:
                shutil.copyfile(template, self.tmp)
                self.con = duckdb.connect(str(self.tmp))
                self.from_template = True
                return self
            except (OSError, duckdb.Error):  # unreadable or damaged: rebuilt below, then replaced
                self.abandon()
        self.con = duckdb.connect(str(self.tmp))
        self.problems = install_views(self.con)
        if template is not None and not self.problems:
            self.con.close()  # a closed file is complete: copy it, then go on writing the draft
            _save_template(self.tmp, template)
            self.con = duckdb.connect(str(self.tmp))
        return self

    def commit(self, state: State) -> list[str]:
        """Fill in `state`, make the file durable and rename it into place (the commit point)."""
        assert self.con is not None
        try:
            fill_catalog(self.con, state, self.root)
            self.con.execute("CHECKPOINT")
        finally:
            self.con.close()
            self.con = None
        _fsync(self.tmp)
        os.replace(self.tmp, self.final)
        self.tmp.with_name(self.tmp.name + ".wal").unlink(missing_ok=True)
        _fsync(self.root)
        return self.problems

    def abandon(self) -> None:
        """Close and delete the draft (nothing to commit, or the ingest failed)."""
        if self.con is not None:
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            self.con = None
        for path in (self.tmp, self.tmp.with_name(self.tmp.name + ".wal")):
            path.unlink(missing_ok=True)


def template_path() -> Path | None:
    """Where the draft template for this version of queries/, the catalog format and DuckDB lives:
    `$TRACECORE_CACHE_DIR` (an empty value turns the cache off), else `$XDG_CACHE_HOME/tracecore`
    or `~/.cache/tracecore`."""
    folder = os.environ.get("TRACECORE_CACHE_DIR")
    if folder is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(xdg, "tracecore")
    if not folder:
        return None
    key = hashlib.sha256(
        "\0".join([views_fingerprint(), duckdb.__version__, packets_all_sql(Path("/"), [])]).encode()
        + b"".join(str(schema).encode() for schema in BASE_SCHEMAS.values())
    ).hexdigest()[:16]
    return Path(folder) / f"catalog-template-{key}.duckdb"


def _save_template(draft: Path, template: Path) -> None:
    """Copy a freshly prepared draft to the template path (written whole, then renamed); a cache
    that cannot be written is not an error."""
    with contextlib.suppress(OSError):
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f".{template.name}.{os.getpid()}-{threading.get_ident()}")
        shutil.copyfile(draft, partial)
        os.replace(partial, template)


def commit_catalog(out: Path, state: State) -> list[str]:
    """Write the whole catalog to a temporary file, then rename it into place (the commit point)."""
    draft = CatalogDraft(out)
    try:
        return draft.prepare().commit(state)
    except BaseException:
        draft.abandon()
        raise


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
        version = check_schema_version(meta.get("schema_version"), path)
        names = [*BASE_SCHEMAS, *json.loads(meta.get("extra_tables", "[]"))]
        tables = {}
        for name in names:
            table = con.sql(f'SELECT * FROM "{name}"').to_arrow_table()
            schema = BASE_SCHEMAS.get(name)
            tables[name] = _conform(table, schema) if schema is not None else table
        return State(tables=tables, next_part=int(meta.get("next_part", "0")), schema_version=version)
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
    check_schema_version(meta.get("schema_version"), path)
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
