"""The DuckDB catalog: `OUT/tracecore.duckdb` holds the small tables and views over the Parquet files.

Why it is rebuilt, not edited: every ingest writes a complete new catalog to a temporary file and
renames it over the old one. That rename is the commit point of the whole dataset: before it,
readers see the old state (whose Parquet files are not deleted until after it); after it, the new.
A SIGKILL anywhere leaves one or the other, never a mix.

Why each part file is named twice: DuckDB resolves a relative path against the process's cwd and then
the `file_search_path` setting, never against the database file, and a table function cannot compute
its path from the database's location. So `packets_all` names the absolute paths while
`file_search_path` is empty (plain `duckdb OUT/tracecore.duckdb` works from any directory) and the
paths relative to OUT once it is set (`SET file_search_path = 'OUT'` opens a moved or copied folder
in plain DuckDB). `_meta.root` records the root the absolute paths were made for, and `open_catalog`
rebuilds the views when the dataset has moved (or `queries/` changed).

Why a storage version: DuckDB writes files that only its own and later releases read, so the catalog
is written in the format of `STORAGE_VERSION`, which every DuckDB that pyproject allows reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tracecore import views
from tracecore.cache import cache_dir, store
from tracecore.errors import DatasetError, UsageError
from tracecore.ingest import interrupt, lock, testpause
from tracecore.ingest.layout import (
    CATALOG_NAME,
    FORMAT_VERSION,
    MARKER,
    PART_PATH,
    STATE_DIR,
    TABLES_DIR,
    TRACE_PART_PATH,
    LinkCheck,
    check_own,
    default_data_dir,
    foreign_refused,
    fsync_quietly,
    link_refused,
    read_own,
    readable_parts,
    refuse_links,
)
from tracecore.schema_version import SCHEMA_VERSION, check_schema_version
from tracecore.version import __version__

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.ingest.dataset_tables import State

# The file format of DuckDB 1.5, which every release from pyproject's floor (duckdb>=1.5.4, the oldest
# that runs every view: tests/test_dataset_portable.py) to today's 2.x reads.
STORAGE_VERSION = "v1.5.0"
_LAYOUT = (
    f"storage {STORAGE_VERSION}; part paths relative under file_search_path, else absolute where written"
)

_DUCK_TYPES = {  # by Arrow type name: pyarrow is imported only where a catalog is written
    "int64": "BIGINT",
    "uint32": "UINTEGER",
    "uint16": "USMALLINT",
    "uint8": "UTINYINT",
    "bool": "BOOLEAN",
    "int32": "INTEGER",
    "string": "VARCHAR",
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


_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _ident(name: str) -> str:
    """A table name as a quoted identifier; why checked: names reach SQL text, so only tracecore's own
    shape of name (lower-case word) passes, and the quotes keep it one identifier."""
    if not _IDENT.fullmatch(name):
        raise DatasetError(f"{name!r} is not a table name tracecore writes")
    return f'"{name}"'


def log_table_names() -> frozenset[str]:
    """Tables the log parsers may add beyond the base ones: the only names `extra_tables` may hold."""
    from tracecore import logs
    from tracecore.ingest.dataset_tables import BASE_SCHEMAS

    return frozenset(t for p in logs.parsers() for t in p.tables) - set(BASE_SCHEMAS)


def _extra_tables(meta: dict[str, str], path: Path) -> list[str]:
    """`_meta.extra_tables`, checked: why: a catalog may come from someone else, and these names are
    read as tables, so anything but a list of distinct log-parser table names is refused."""
    text = meta.get("extra_tables", "[]")
    try:
        names = json.loads(text)
    except ValueError:
        names = None
    known = log_table_names()
    if (
        not isinstance(names, list)
        or not all(isinstance(n, str) and n in known for n in names)
        or len(set(names)) != len(names)
    ):
        raise DatasetError(
            f"{path}: _meta.extra_tables {text[:200]!r} names something that is not a table tracecore "
            f"writes ({', '.join(sorted(known))}); this catalog was not written by tracecore: "
            "re-ingest the captures into a new --out"
        )
    return names


def _check_part_paths(
    paths: list[str], path: Path, pattern: re.Pattern[str] = PART_PATH, where: str = "_files names"
) -> None:
    """Why: the views read the files `_files` (and `_trace_parts`) name, so a received catalog may name
    only part files inside its own packets/ (and traces/) folder."""
    for rel in paths:
        if not isinstance(rel, str) or not pattern.fullmatch(rel) or "/../" in f"/{rel}/":
            under = "traces/" if pattern is TRACE_PART_PATH else "packets/"
            raise DatasetError(
                f"{path}: {where} {rel!r}, which is not a part file under {under}; this catalog "
                "was not written by tracecore: re-ingest the captures into a new --out"
            )


# either kind of part file (a retired one may be of either)
_ANY_PART = re.compile(f"(?:{PART_PATH.pattern})|(?:{TRACE_PART_PATH.pattern})")


def views_fingerprint() -> str:
    """Changes whenever a view file in queries/ or the catalog format changes."""
    h = hashlib.sha256(FORMAT_VERSION.encode() + b"\0" + _LAYOUT.encode())
    for name in views.view_names():
        h.update(name.encode() + b"\0" + views.view_sql(name).encode() + b"\0")
    return h.hexdigest()[:16]


def _null(field: pa.Field) -> str:
    """A NULL of the DuckDB type a field of DATASET_FIELDS reads as (dictionaries: VARCHAR)."""
    import pyarrow as pa

    return f"NULL::{'VARCHAR' if pa.types.is_dictionary(field.type) else _DUCK_TYPES[str(field.type)]}"


ROOT_VARIABLE = "tracecore_root"  # SET VARIABLE: the folder a connection reads as the dataset's


def written_here(root: Path) -> str:
    """SQL that is true when DuckDB reads the catalog as the file it was written as, ROOT/tracecore.duckdb.

    Why: the views name the part files by absolute path, so a copy of the folder whose original is
    still in place would answer from the original's files in silence (an edit or a re-ingest of the
    original changing what the copy answers). DuckDB started on a catalog file keeps its default
    `temp_directory` beside it (`FILE.tmp`, absolute), which says where the file is; a connection
    that attaches the catalog instead says so with `SET VARIABLE tracecore_root` (tracecore's own
    do: `open_catalog`). Both are settled when the query is bound, so no row pays for the check.
    """
    return (
        f"(current_setting('temp_directory') = {_lit(str(root / CATALOG_NAME) + '.tmp')}"
        f" OR getvariable({_lit(ROOT_VARIABLE)}) = {_lit(str(root))})"
    )


def not_here(root: Path) -> str:
    """The refusal `written_here` leads to, naming the settings that read a copy's own part files."""
    here = (
        "CASE WHEN ends_with(current_setting('temp_directory'), '/tracecore.duckdb.tmp') THEN "
        "left(current_setting('temp_directory'), -21) ELSE 'ITS FOLDER' END"
    )
    quote = "''''"  # SQL for a string of one quote
    return (
        f"'tracecore: this catalog was written in ' || {_lit(str(root))} || ' and this DuckDB was not "
        "started on its file there, so its views would read that folder''s part files. A copy or a "
        f"moved folder: SET file_search_path = ' || {quote} || {here} || {quote} || ' reads its own. "
        "The folder itself (attached, reached through a link, or with temp_directory set): SET VARIABLE "
        f"{ROOT_VARIABLE} = ' || {quote} || {_lit(str(root))} || {quote}"
    )


def root_variable(con: duckdb.DuckDBPyConnection) -> str | None:
    """The dataset folder an open catalog's connection reads (`written_here`), for its cursors."""
    # fetchall: a result left unfinished (fetchone) makes DuckDB 2 refuse the connection's next `sql()`
    return con.execute(f"SELECT getvariable({_lit(ROOT_VARIABLE)})").fetchall()[0][0]


def cursor(con: duckdb.DuckDBPyConnection, root: str | None) -> duckdb.DuckDBPyConnection:
    """A cursor of an open catalog's connection, for another thread, reading the folder `root`
    (`root_variable`, read once before the threads start: a connection serves one thread at a time).

    Why: a cursor is a DuckDB connection of its own, so the `SET VARIABLE` that tells the views where
    the dataset is does not reach it, and on a moved or copied folder they would refuse.
    """
    cur = con.cursor()
    if root is not None:
        cur.execute(f"SET VARIABLE {ROOT_VARIABLE} = $root", {"root": root})
    return cur


def packets_all_sql(
    root: Path,
    files: list[str],
    runs: list[str] | None = None,
    schema_version: int = SCHEMA_VERSION,
    dense: frozenset[str] = frozenset(),
) -> str:
    """Every stored packet row, with `run` and `worker` (hive keys) first and `ts` (ts_ns as a
    TIMESTAMP_NS, UTC, so tools show times) last; byte columns BIGINT whatever the file's version; the
    folder names of `runs` that were shortened to fit the file system (layout.partition_key) are
    mapped back to the names. `dense`: the files of `files` that omit schema.LAYER_COLUMNS (dense
    parts, `_files.layers` false): a scan of their own adds those columns as NULL of their type.
    Part files of an older `schema_version` may lack columns added since (version 3's dscp, ecn, RDMA
    and tunnel columns, version 5's TCP seq, ack and window): they read as NULL of their type, so
    every view runs on an older dataset before the next ingest upgrades its files (`upgrade.py`).

    Why two scans and not one `read_parquet(..., union_by_name = true)`: that reads the footer of
    every part file whenever a query is planned, even of the runs its filter prunes (measured in
    bench/results/rdma-reader.md), and without it DuckDB takes the columns of the first file and
    drops or refuses the others'."""
    from tracecore.schema import BYTE_COLUMNS, DATASET_FIELDS, LAYER_COLUMNS

    if not files:
        cols = ", ".join(f"{_null(f)} AS {f.name}" for f in DATASET_FIELDS)
        return (
            f"SELECT NULL::VARCHAR AS run, NULL::VARCHAR AS worker, {cols}, NULL::TIMESTAMP_NS AS ts"
            " WHERE false"
        )
    from tracecore.ingest.layout import shortened_keys

    long_names = sorted(shortened_keys(sorted(set(runs or ()))).items())
    run = "run"
    if long_names:
        whens = " ".join(f"WHEN {_lit(key)} THEN {_lit(name)}" for key, name in long_names)
        run = f"CASE run {whens} ELSE run END"

    def scan(paths: list[str], columns: str) -> str:
        absolute = ", ".join(_lit(str(root / f)) for f in paths)
        relative = ", ".join(_lit(f) for f in paths)
        return (
            f"SELECT {run} AS run, worker, {columns}, make_timestamp_ns(ts_ns) AS ts FROM read_parquet("
            f"CASE WHEN current_setting('file_search_path') <> '' THEN [{relative}] "
            f"WHEN {written_here(root)} THEN [{absolute}] ELSE error({not_here(root)}) END,"
            " hive_partitioning = true, hive_types = {'run': VARCHAR, 'worker': VARCHAR})"
        )

    full = [f for f in files if f not in dense]
    if schema_version < SCHEMA_VERSION:  # Today's columns in today's order and types, each filled
        # from the files where they have it: UNION BY NAME with an empty typed row set adds what the
        # files lack as NULL (whether or not they do). Each kind of part (version 4's dense parts
        # lack the layer columns) is a scan of its own, as below.
        widened = ", ".join(f"{c}::BIGINT AS {c}" for c in BYTE_COLUMNS)  # version 1 stored uint32
        kinds = [kind for kind in (full, sorted(dense)) if kind]
        stored = " UNION ALL BY NAME ".join(
            f"({scan(kind, f'* EXCLUDE (run, worker) REPLACE ({widened})')})" for kind in kinds
        )
        return f"SELECT * FROM ({packets_all_sql(root, [])}) UNION ALL BY NAME {stored}"
    every = ", ".join(f.name for f in DATASET_FIELDS)
    lean = ", ".join(f"{_null(f)} AS {f.name}" if f.name in LAYER_COLUMNS else f.name for f in DATASET_FIELDS)
    scans = ([scan(full, every)] if full else []) + ([scan(sorted(dense), lean)] if dense else [])
    return "\nUNION ALL\n".join(scans)


def trace_parts_sql(root: Path, table: str, files: list[str], runs: list[str] | None = None) -> str:
    """Every row of trace table `table` (dataset_tables.SPILLED_SCHEMAS) from its part files, `run`
    (the hive key, shortened folder names mapped back as in `packets_all_sql`) first; read from the
    folder the catalog was written in, or a copy's own (`written_here`)."""
    from tracecore.ingest.dataset_tables import SPILLED_SCHEMAS

    schema = SPILLED_SCHEMAS[table]
    if not files:
        return "SELECT " + ", ".join(f"{_null(f)} AS {f.name}" for f in schema) + " WHERE false"
    from tracecore.ingest.layout import shortened_keys

    long_names = sorted(shortened_keys(sorted(set(runs or ()))).items())
    run = "run"
    if long_names:
        whens = " ".join(f"WHEN {_lit(key)} THEN {_lit(name)}" for key, name in long_names)
        run = f"CASE run {whens} ELSE run END"
    columns = ", ".join(f.name for f in schema if f.name != "run")
    absolute = ", ".join(_lit(str(root / f)) for f in files)
    relative = ", ".join(_lit(f) for f in files)
    return (
        f"SELECT {run} AS run, {columns} FROM read_parquet("
        f"CASE WHEN current_setting('file_search_path') <> '' THEN [{relative}] "
        f"WHEN {written_here(root)} THEN [{absolute}] ELSE error({not_here(root)}) END,"
        " hive_partitioning = true, hive_types = {'run': VARCHAR})"
    )


def packets_sql(workers: list[dict]) -> str:
    """The de-duplicated view (see DEDUP_RULE), with literal per-worker conditions for pruning."""
    return (
        DEDUP_RULE
        + "\nCREATE OR REPLACE VIEW packets AS\nSELECT * FROM packets_all"
        + _duplicates_hidden(workers)
    )


def _duplicates_hidden(workers: list[dict]) -> str:
    """The WHERE clause (or nothing) hiding the rows DEDUP_RULE hides, over columns run, worker and src_ip:
    one literal condition per worker whose capture holds such rows."""
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
                f"(run = {_lit(run)} AND worker = {_lit(w['worker'])} AND src_ip IS NOT NULL"
                f" AND src_ip IN ({', '.join(map(_lit, others))}))"
            )
    return ("\nWHERE NOT (\n" + "\n    OR ".join(conds) + "\n)") if conds else ""


# The sums of one bin, in SQL over packet rows (upgrade.add_link_bins, LINK_BINS_FROM_PACKETS).
SUMS_SQL = "ts_ns // 1000000 AS ms, sum(frame_len)::BIGINT AS bytes, min(ts_ns) AS first_ns"
# The part files' captures without stored bins (upgrade.add_link_bins sums them; `link_bins`
# sums packets while there are any), over the tables `_files` and `_link_bins`.
UNBINNED_SQL = (
    "FROM _files AS f WHERE rows > 0"
    " AND NOT EXISTS (SELECT 1 FROM _link_bins AS b WHERE b.run = f.run AND b.file = f.file)"
)
# `link_bins` where the stored bins do not cover every capture (a dataset ingested before they were
# kept, until its next ingest adds them): the same rows, summed from `packets` when queried.
LINK_BINS_FROM_PACKETS = f"""\
CREATE OR REPLACE VIEW link_bins AS
SELECT run, worker, src_ip, dst_ip, {SUMS_SQL}
FROM packets
GROUP BY run, worker, src_ip, dst_ip, ms"""


def link_bins_sql(con: duckdb.DuckDBPyConnection, workers: list[dict]) -> str:
    """The `link_bins` view: bytes per run, worker, address pair and millisecond of `packets` (its
    de-duplication applied), from the bins ingest stored (`_link_bins`) when they cover every part file
    and no capture was left unbinned."""
    ((uncovered,),) = con.execute(
        f"SELECT count(*) {UNBINNED_SQL}"
        " OR EXISTS (SELECT 1 FROM _link_bins WHERE ms IS NULL)"  # a capture not binned (link_bins.py)
    ).fetchall()
    if uncovered:
        return LINK_BINS_FROM_PACKETS
    return (
        "CREATE OR REPLACE VIEW link_bins AS\n"
        "SELECT * FROM (SELECT b.run, c.worker, b.src_ip, b.dst_ip, b.ms, b.bytes, b.first_ns\n"
        "FROM _link_bins AS b JOIN captures AS c ON c.run = b.run AND c.file = b.file)"
        + _duplicates_hidden(workers)
    )


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
    import pyarrow as pa

    from tracecore.ingest.dataset_tables import BASE_SCHEMAS, SPILLED_SCHEMAS

    for name, schema in BASE_SCHEMAS.items():
        con.register("_incoming", pa.Table.from_batches([], schema=schema))
        con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _incoming')
        con.unregister("_incoming")
    con.execute("CREATE OR REPLACE VIEW packets_all AS " + packets_all_sql(Path("/"), []))
    con.execute("CREATE OR REPLACE VIEW packets AS SELECT * FROM packets_all")
    for name in SPILLED_SCHEMAS:
        con.execute(f"CREATE OR REPLACE VIEW {_ident(name)} AS " + trace_parts_sql(Path("/"), name, []))
    con.execute(LINK_BINS_FROM_PACKETS)
    try:
        views.install(con)
    except UsageError as err:
        return [str(err)]
    return []


def fill_catalog(
    con: duckdb.DuckDBPyConnection, state: State, root: Path, state_files: str | None = None
) -> None:
    """The tables, `_meta` and the packet views of `state` (over the part files under `root`);
    `state_files`: `write_state`'s record of ingest's own copy of the tables, kept in `_meta`."""
    from tracecore.ingest.dataset_tables import BASE_SCHEMAS, SPILLED_SCHEMAS

    for name, table in state.tables.items():
        if name in SPILLED_SCHEMAS:  # a dataset written before they were part files, until its next ingest
            con.execute(f"DROP VIEW IF EXISTS {_ident(name)}")
        con.register("_incoming", table)
        con.execute(f"CREATE OR REPLACE TABLE {_ident(name)} AS SELECT * FROM _incoming")
        con.unregister("_incoming")
    meta = {
        "format_version": FORMAT_VERSION,
        "schema_version": str(state.schema_version),  # what the part files are (pipeline upgrades them)
        "tracecore_version": __version__,
        "root": str(root),
        "views_fingerprint": views_fingerprint(),
        "next_part": str(state.next_part),
        "extra_tables": json.dumps(sorted(set(state.tables) - set(BASE_SCHEMAS))),
        "retired": json.dumps(sorted(state.retired)),
    }
    if state_files is not None:
        meta["state"] = state_files
    con.execute("CREATE OR REPLACE TABLE _meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.executemany("INSERT INTO _meta VALUES (?, ?)", list(meta.items()))
    parts = state.tables["_files"]
    files = sorted(parts["path"].to_pylist())
    runs = parts["run"].to_pylist()
    dense = frozenset(
        p
        for p, layers in zip(parts["path"].to_pylist(), parts["layers"].to_pylist(), strict=True)
        if layers is False
    )
    con.execute(f"SET VARIABLE {ROOT_VARIABLE} = $root", {"root": str(root)})  # the views bind here
    con.execute(
        "CREATE OR REPLACE VIEW packets_all AS "
        + packets_all_sql(root, files, runs, state.schema_version, dense)
    )
    workers = state.rows("workers")
    con.execute(packets_sql(workers))
    con.execute(link_bins_sql(con, workers))
    traces = state.tables["_trace_parts"]
    for name in SPILLED_SCHEMAS:
        if name in state.tables:
            continue
        rows = [r for r in traces.select(["path", "run", "table"]).to_pylist() if r["table"] == name]
        paths, runs = sorted(r["path"] for r in rows), [r["run"] for r in rows]
        con.execute(f"CREATE OR REPLACE VIEW {_ident(name)} AS " + trace_parts_sql(root, name, paths, runs))


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
        self.committed = False

    def prepare(self) -> CatalogDraft:
        """The views installed: copied from the template when there is one, else bound here."""
        template = template_path()
        if template is not None and template.is_file():
            try:
                shutil.copyfile(template, self.tmp)
                self.con = open_for_writing(self.tmp)
                self.from_template = True
                return self
            except (OSError, duckdb.Error):  # unreadable or damaged: rebuilt below, then replaced
                self.abandon()
        self.con = open_for_writing(self.tmp)
        self.problems = install_views(self.con)
        if template is not None and not self.problems:
            # CHECKPOINT raises where closing would not (a full disk): only a file that holds every
            # view, with no write-ahead log left beside it, may become the template of later drafts.
            self.con.execute("CHECKPOINT")
            self.con.close()
            if not self.tmp.with_name(self.tmp.name + ".wal").exists():
                _save_template(self.tmp, template)
            self.con = open_for_writing(self.tmp)
        return self

    def commit(self, state: State) -> list[str]:
        """Fill in `state`, make the file durable and rename it into place (the commit point)."""
        assert self.con is not None
        try:
            generation, record = write_state(self.root, state)
            # One transaction: each statement's own commit synced the draft's write-ahead log (27
            # fdatasyncs an ingest), though only the CHECKPOINT and fsync below make it durable.
            self.con.execute("BEGIN TRANSACTION")
            fill_catalog(self.con, state, self.root, record)
            self.con.execute("COMMIT")
            testpause.pause("filled")
            self.con.execute("CHECKPOINT")
        finally:
            self.con.close()
            self.con = None
        fsync_quietly(self.tmp)
        testpause.pause("draft")
        with interrupt.deferred():  # `committed` is true exactly when the rename happened
            os.replace(self.tmp, self.final)
            self.committed = True
        self.tmp.with_name(self.tmp.name + ".wal").unlink(missing_ok=True)
        fsync_quietly(self.root)
        _sweep_state(self.root, keep=generation)
        return self.problems

    def abandon(self) -> None:
        """Close and delete the draft (nothing to commit, or the ingest failed)."""
        if self.con is not None:
            with contextlib.suppress(duckdb.Error):
                self.con.close()
            self.con = None
        for path in (self.tmp, self.tmp.with_name(self.tmp.name + ".wal")):
            path.unlink(missing_ok=True)


def open_for_writing(path: Path) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB with the catalog file `path` attached read-write and selected, written
    in `STORAGE_VERSION`'s format: why: a file DuckDB writes in its own newest format does not open
    in the older releases users have (a file that exists keeps the format it was created with)."""
    con = duckdb.connect()
    try:
        con.execute(f"ATTACH {_lit(str(path))} AS draft (STORAGE_VERSION {_lit(STORAGE_VERSION)})")
        con.execute("USE draft")
    except duckdb.Error:
        con.close()
        raise
    return con


def template_path() -> Path | None:
    """Where the draft template for this version of queries/, the catalog format and DuckDB lives in
    the user's cache (`tracecore.cache`); None when the cache is off."""
    from tracecore.ingest.dataset_tables import BASE_SCHEMAS

    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(
        "\0".join(
            [views_fingerprint(), duckdb.__version__, STORAGE_VERSION, packets_all_sql(Path("/"), [])]
        ).encode()
        + b"".join(str(schema).encode() for schema in BASE_SCHEMAS.values())
    ).hexdigest()[:16]
    return folder / f"catalog-template-{key}.duckdb"


def _save_template(draft: Path, template: Path) -> None:
    """Copy a freshly prepared draft to the template path (written whole, then renamed)."""
    store(template, lambda partial: shutil.copyfile(draft, partial))


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
    import pyarrow.parquet as pq  # here: 11 ms that a query's open_catalog does not need

    from tracecore.ingest.dataset_tables import BASE_SCHEMAS, EXPORTED

    tdir = out / TABLES_DIR
    tdir.mkdir(exist_ok=True)
    for name, table in state.tables.items():
        if name.startswith("_") or (name not in EXPORTED and name in BASE_SCHEMAS):
            continue
        tmp = tdir / f".{name}.parquet.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, tdir / f"{name}.parquet")


_GENERATION = re.compile(r"[0-9a-f]{32}")


def write_state(root: Path, state: State) -> tuple[str, str]:
    """Ingest's own copy of the tables, `OUT/.state/<generation>/<table>.parquet`; returns the
    generation and the record `_meta.state` keeps (generation, SHA-256 of each file).

    Why: the catalog is a DuckDB file anyone can open read-write, so the next ingest reads the tables
    it carries forward from these files, checked against the digests, never from the catalog's tables:
    a row inserted by hand does not survive an ingest. A new folder per commit keeps the committed
    catalog's copy intact until the rename; older ones are swept after it (`_sweep_state`).
    """
    import uuid

    import pyarrow.parquet as pq

    generation = uuid.uuid4().hex
    folder = root / STATE_DIR / generation
    folder.mkdir(parents=True)
    digests = {}
    for name, table in sorted(state.tables.items()):
        _ident(name)  # a file name too: only tracecore's own table names
        path = folder / f"{name}.parquet"
        pq.write_table(table, path, compression="zstd")
        digests[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        fsync_quietly(path)
    fsync_quietly(folder)
    fsync_quietly(folder.parent)
    return generation, json.dumps({"generation": generation, "tables": digests}, sort_keys=True)


def _sweep_state(root: Path, keep: str) -> None:
    """Remove the state folders of earlier commits (and of commits a crash cut short)."""
    folder = root / STATE_DIR
    for gen in folder.iterdir() if folder.is_dir() else ():
        if gen.name != keep and _GENERATION.fullmatch(gen.name):
            shutil.rmtree(gen, ignore_errors=True)


def _read_state(out: Path, record: str, path: Path) -> dict[str, pa.Table]:
    """The tables of `_meta.state`, each checked against its digest (see `write_state`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq  # here: 11 ms that a query's open_catalog does not need

    from tracecore.ingest.dataset_tables import BASE_SCHEMAS, LATER_TABLES

    try:
        info = json.loads(record)
        generation, digests = info["generation"], info["tables"]
    except (ValueError, KeyError, TypeError):
        generation, digests = None, None
    if (
        not isinstance(generation, str)
        or not _GENERATION.fullmatch(generation)
        or not isinstance(digests, dict)
        or not set(BASE_SCHEMAS) - LATER_TABLES <= set(digests)
        or not set(digests) - set(BASE_SCHEMAS) <= log_table_names()
    ):
        raise DatasetError(
            f"{path}: _meta.state {record[:200]!r} is not a record tracecore writes; this catalog was "
            "not written by tracecore: re-ingest the captures into a new --out"
        )
    tables = {}
    links = LinkCheck(out)
    for name, digest in digests.items():
        file = out / STATE_DIR / generation / f"{name}.parquet"
        link = links.link(f"{STATE_DIR}/{generation}/{name}.parquet")
        if link is not None:
            raise link_refused(link, out)
        try:
            data = read_own(file, out)  # a hard link's file is someone else's: refused, not read
        except OSError as err:
            raise DatasetError(
                f"{file}: ingest's copy of table {name} is unreadable ({err.strerror}); "
                "run `tracecore ingest --force` with every run's captures to rebuild the dataset"
            ) from err
        if hashlib.sha256(data).hexdigest() != digest:
            raise DatasetError(
                f"{file}: changed since ingest wrote it; run `tracecore ingest --force` with every "
                "run's captures to rebuild the dataset"
            )
        tables[name] = pq.ParquetFile(pa.BufferReader(data)).read()  # read_table: pyarrow.dataset, pandas
    return tables


def load_state(out: Path) -> State:
    """The committed state of a dataset, or an empty one when there is no catalog yet.

    The catalog is read through a connection locked down before it is attached (`attach`), and only
    from base tables (`base_tables`): a view or macro of the sender's is never run here, and a number
    that names files (`_meta.next_part`, `_files.read_version`) is checked before it is used."""
    import pyarrow as pa

    from tracecore.ingest.dataset_tables import BASE_SCHEMAS, LATER_TABLES, State

    path = out / CATALOG_NAME
    if not path.is_file():
        return State()
    try:
        con = attach(path)
    except duckdb.Error as err:
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err
    try:
        meta = read_meta(con, path)
        version = check_schema_version(meta.get("schema_version"), path)
        extra = _extra_tables(meta, path)
        if "state" in meta:  # ingest's own copy: what it wrote, whatever was done to the catalog
            tables = _read_state(out, meta["state"], path)
        else:  # a dataset made before that copy existed: its catalog's tables, this once
            present = base_tables(con)
            names = [n for n in BASE_SCHEMAS if n not in LATER_TABLES or n in present] + extra
            _check_tables(con, path, names)
            tables = {
                name: con.sql(f"SELECT * FROM {_CATALOG}.main.{_ident(name)}").to_arrow_table()
                for name in names
            }
        for name, schema in BASE_SCHEMAS.items():  # a table added since the dataset was written: empty
            stored = tables[name] if name in tables else pa.Table.from_batches([], schema=schema)
            tables[name] = _conform(stored, schema)
        tables["_files"] = _with_read_version(tables["_files"], version)
        paths = tables["_files"]["path"].to_pylist()
        _check_part_paths(paths, path)
        trace_paths = tables["_trace_parts"]["path"].to_pylist()
        _check_part_paths(trace_paths, path, TRACE_PART_PATH, "_trace_parts names")
        _check_spilled(tables["_trace_parts"]["table"].to_pylist(), path)
        retired = json.loads(meta.get("retired", "[]"))
        retired = retired if isinstance(retired, list) else [retired]
        _check_part_paths(retired, path, _ANY_PART, "_meta.retired names")
        paths = paths + trace_paths
        _check_read_versions(tables["_files"]["read_version"].to_pylist(), path)
        return State(
            tables=tables,
            next_part=_next_part(meta.get("next_part"), paths + retired, path),
            schema_version=version,
            retired=retired,
        )
    except (duckdb.Error, pa.ArrowException, KeyError, ValueError) as err:
        raise DatasetError(
            f"{path}: the catalog is unreadable ({str(err).splitlines()[0]}); "
            "re-ingest into a new --out, or delete it and run `tracecore ingest --force`"
        ) from err
    finally:
        con.close()


def _check_spilled(names: list[object], path: Path) -> None:
    """`_trace_parts.table` names only the trace tables stored as part files: why: it names views."""
    from tracecore.ingest.dataset_tables import SPILLED_SCHEMAS

    for name in names:
        if name not in SPILLED_SCHEMAS:
            raise DatasetError(
                f"{path}: _trace_parts names table {str(name)[:60]!r}, which tracecore does not store as "
                "part files; this catalog was not written by tracecore: re-ingest into a new --out"
            )


_PART_NUMBER = re.compile(r"part-([0-9]+)\.parquet$")
_COUNT = re.compile(r"[0-9]{1,18}")  # a count or number of tracecore's: a whole number below 10^18


def _next_part(text: str | None, paths: list[str], path: Path) -> int:
    """`_meta.next_part` checked: a whole number, and never one a part file in use has: why: it names
    the next part files, so a sender's `-5` wrote `part--1.parquet`, and one in use would overwrite a
    part file the catalog names. A catalog without it (older) starts above the parts in use."""
    above = max((int(m.group(1)) + 1 for p in paths if (m := _PART_NUMBER.search(p))), default=0)
    if text is None:
        return above
    if not isinstance(text, str) or not _COUNT.fullmatch(text) or int(text) < above:
        raise DatasetError(
            f"{path}: _meta.next_part {str(text)[:40]!r} is not a part number above those in use "
            f"(at least {above}); this catalog was not written by tracecore: re-ingest the captures "
            "into a new --out"
        )
    return int(text)


def _check_read_versions(versions: list[int | None], path: Path) -> None:
    """Each part's `_files.read_version` is a schema version tracecore has had: why: it decides
    whether an ingest rewrites the part (`upgrade.py`) and how the views read it."""
    for v in versions:
        if not isinstance(v, int) or not 1 <= v <= SCHEMA_VERSION:
            raise DatasetError(
                f"{path}: _files.read_version {v!r} is not a schema version (1 to {SCHEMA_VERSION}); "
                "this catalog was not written by tracecore: re-ingest the captures into a new --out"
            )


def _with_read_version(files: pa.Table, version: int) -> pa.Table:
    """`_files` with each part's read_version; a dataset written before that column records its own
    schema version for each part (every part of it was read or upgraded as that version)."""
    import pyarrow as pa

    from tracecore.arrow_rows import array

    i = files.schema.get_field_index("read_version")
    filled = files.column(i).fill_null(array([version], pa.int32())[0])  # pa.scalar imports pandas
    return files.set_column(i, files.schema.field(i), filled)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A stored table in today's schema: columns added since it was written become NULL."""
    import pyarrow as pa

    for fld in schema:
        if fld.name not in table.column_names:
            table = table.append_column(fld.name, pa.nulls(table.num_rows, fld.type))
    return table.select(schema.names).cast(schema)


_CATALOG = "tracecore"  # the name the catalog file is attached as
_CATALOG_TABLES = ("_meta", "_files")  # what opening a catalog reads of it, before any query


def attach(
    path: Path, read_only: bool = True, readable: list[str] | tuple[str, ...] = (), *, unsafe: bool = False
) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB with the catalog file attached (as `tracecore`) and selected, locked
    down (`lock_down`) before the file is attached, so that no byte of a received catalog is read
    by a connection that could read another file: only the catalog and the files `readable`
    (absolute paths) can be read. `unsafe`: not locked down (DuckDB's full power, your own data).

    Why not `duckdb.connect(path)`: DuckDB keeps one instance per path per process, so a connection
    opened before an ingest replaced the file would keep handing out the old catalog, whose Parquet
    files are gone. Attaching opens the file as it is now, every time.
    """
    check_own(path, path.parent)  # a hard link's file is someone else's: never attached
    con = duckdb.connect()
    try:
        if not unsafe:
            lock_down(con, [str(path), f"{path}.wal", *readable])
        con.execute(f"ATTACH {_lit(str(path))} AS {_CATALOG}" + (" (READ_ONLY)" if read_only else ""))
        con.execute(f"USE {_CATALOG}")
    except BaseException:
        con.close()
        raise
    return con


def base_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The base tables of the attached catalog, from DuckDB's metadata (`system.main`, which the
    catalog cannot shadow with a macro of the same name), so nothing of the catalog runs."""
    rows = con.execute(
        "SELECT table_name FROM system.main.duckdb_tables()"
        " WHERE database_name = $db AND schema_name = 'main'",
        {"db": _CATALOG},
    ).fetchall()
    return {name for (name,) in rows}


def _check_tables(con: duckdb.DuckDBPyConnection, path: Path, names: list[str] | tuple[str, ...]) -> None:
    """Refuse unless each of `names` is a base table of the attached catalog. Why: a view or a macro
    of that name is SQL of the sender's, which reading it would run: `_meta` as a view over
    `read_text('/some/file')` printed that file's first line in the schema-version message."""
    tables = base_tables(con)
    for name in names:
        if name not in tables:
            raise DatasetError(
                f"{path}: {name} is not a table (a view, or missing); this catalog was not written by "
                "tracecore: re-ingest the captures into a new --out"
            )


def read_meta(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    """`_meta` of the attached catalog as text, once `_meta` and `_files` are known to be base tables."""
    _check_tables(con, path, _CATALOG_TABLES)
    rows = con.execute(f'SELECT "key"::VARCHAR, "value"::VARCHAR FROM {_CATALOG}.main."_meta"').fetchall()
    return dict(rows)


def _meta_of(path: Path) -> dict[str, str]:
    con = attach(path)
    try:
        return read_meta(con, path)
    finally:
        con.close()


def open_catalog(
    data_dir: Path | str | None = None, read_only: bool = True, *, unsafe: bool = False
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to a dataset with every view ready, from any cwd, even after a move.

    When the views were made for another root (the dataset was moved or copied) or an older
    queries/, they are rebuilt in place under the dataset lock; if that is not possible (another
    ingest is running, read-only media, a folder without the dataset marker) the catalog is rebuilt
    in memory instead. The connection is locked down (see `lock_down`) before the catalog is
    attached, unless `unsafe`: a dataset may come from someone else.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    if not (root / CATALOG_NAME).is_file():
        raise DatasetError(f"no dataset at {root}; run `tracecore ingest PCAPS` first or pass --data")
    root = root.resolve()
    refuse_links(root, deep=False)  # the catalog, packets/, .state/ (part files: `_part_files`)
    path = root / CATALOG_NAME
    parts = readable_parts(root)  # what the connection may read, found before the catalog is read
    readable = [str(root / rel) for rel, why in sorted(parts.items()) if why is None]
    con = _attached(path, read_only, readable, unsafe)
    try:
        meta = read_meta(con, path)
        check_schema_version(meta.get("schema_version"), path)
    except duckdb.Error as err:
        con.close()
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err
    except BaseException:
        con.close()
        raise
    rebuilt = False
    if meta.get("root") != str(root) or meta.get("views_fingerprint") != views_fingerprint():
        con.close()
        if _refresh_in_place(root):
            con = _attached(path, read_only, readable, unsafe)
        else:
            state = load_state(root)
            con, rebuilt = duckdb.connect(), True
            try:
                write_catalog(con, state, root)
            except duckdb.Error as err:
                con.close()
                _part_files_exist(state, root, parts)
                raise DatasetError(f"{path}: cannot rebuild the views: {_first(err)}") from err
    try:
        files = _part_files(con, root, parts)
        con.execute(f"SET VARIABLE {ROOT_VARIABLE} = $root", {"root": str(root)})  # see written_here
        if rebuilt and not unsafe:  # built here from checked tables, locked before it is handed out
            lock_down(con, [str(root / f) for f in files])
    except BaseException:
        con.close()
        raise
    return con


def _attached(path: Path, read_only: bool, readable: list[str], unsafe: bool) -> duckdb.DuckDBPyConnection:
    """`attach`, DuckDB's errors as the one line of a DatasetError."""
    try:
        return attach(path, read_only, readable, unsafe=unsafe)
    except duckdb.Error as err:
        raise DatasetError(f"{path}: cannot open the catalog: {str(err).splitlines()[0]}") from err


def _part_files_exist(state: State, root: Path, parts: dict[str, str | None]) -> None:
    """Raises `_part_files`'s message when a part file of `state` is missing or refused."""
    con = duckdb.connect()
    try:
        con.register("_files", state.tables["_files"])
        con.register("_incoming", state.tables["_trace_parts"])
        con.execute("CREATE TABLE _trace_parts AS SELECT * FROM _incoming")
        _part_files(con, root, parts)
    finally:
        con.close()


def _tables_of(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The base tables of the connection's current database (a catalog's view of a table's name is
    not one: it is not read)."""
    rows = con.execute(
        "SELECT table_name FROM system.main.duckdb_tables()"
        " WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()
    return {name for (name,) in rows}


def _part_files(con: duckdb.DuckDBPyConnection, root: Path, parts: dict[str, str | None]) -> list[str]:
    """The part files the catalog names, checked to lie under packets/, to exist, to be reached
    through no symbolic link and to be the dataset's own (`parts`: `layout.readable_parts`): why: a
    missing one otherwise surfaces as DuckDB's raw IO error in the middle of a query, and
    `allowed_paths` allows a path, not the file a link there leads to."""
    try:
        rows = con.execute("SELECT path, run, file FROM _files ORDER BY path").fetchall()
        traces = con.execute(
            "SELECT path, run, file FROM _trace_parts ORDER BY path"
            if "_trace_parts" in _tables_of(con)
            else "SELECT NULL, NULL, NULL WHERE false"
        ).fetchall()
    except duckdb.Error as err:
        raise DatasetError(f"{root / CATALOG_NAME}: the catalog is unreadable ({_first(err)})") from err
    _check_part_paths([path for path, _, _ in rows], root / CATALOG_NAME)
    where = root / CATALOG_NAME
    _check_part_paths([path for path, _, _ in traces], where, TRACE_PART_PATH, "_trace_parts names")
    rows += traces
    links = LinkCheck(root)
    for path, _, _ in rows:
        link = links.link(path)
        if link is not None:
            raise link_refused(link, root)
    missing = [(path, run, file) for path, run, file in rows if path not in parts]
    if missing:
        path, run, file = missing[0]
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise DatasetError(
            f"{root / path}: a part file of the dataset is missing{more}; `tracecore ingest` of run "
            f"{run!r} (capture {file}) into {root} reads that capture again"
        )
    for path, _, _ in rows:
        if parts[path] is not None:
            raise foreign_refused(root / path, parts[path], root)
    return [path for path, _, _ in rows]


def lock_down(con: duckdb.DuckDBPyConnection, readable: list[str]) -> None:
    """Only the files `readable` (absolute paths: the catalog, the dataset's own part files) can be
    read; nothing can be written, attached, installed or reconfigured. Why: the catalog's views and
    `tracecore sql` run SQL that may come from someone else, and a query must not be able to damage
    the dataset or reach other files or the network. Memory is bounded (`query_memory_limit`) and
    spills to a folder only this user can enter (`spill_dir`), up to half the free space there."""
    con.execute("SET allowed_paths = $paths", {"paths": readable})
    con.execute("SET memory_limit = $limit", {"limit": query_memory_limit()})
    spill = spill_dir()
    con.execute("SET temp_directory = $dir", {"dir": spill})  # "": no spilling
    if spill:  # DuckDB's default, 90 % of the free space, would let one query fill the disk
        with contextlib.suppress(OSError):
            half = shutil.disk_usage(os.path.dirname(spill)).free // 2
            con.execute("SET max_temp_directory_size = $size", {"size": f"{max(half >> 20, 1)}MiB"})
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    # DuckDB 2's projection pull-up pass costs seconds on a plan as large as `findings`' and speeds no
    # view up (bench/results/findings-plan.md); DuckDB 1.5 has no such pass
    with contextlib.suppress(duckdb.Error):
        con.execute("SET disabled_optimizers = 'projection_pullup'")
    con.execute("SET lock_configuration = true")


def query_memory_limit() -> str:
    """$TRACECORE_MEMORY_LIMIT (DuckDB's syntax, e.g. 4GB), else half the machine's memory: why: a
    query that needs more spills to disk or fails with a message, instead of swapping the machine."""
    limit = os.environ.get("TRACECORE_MEMORY_LIMIT")
    if limit:
        return limit
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return "4GB"
    return f"{max(total // 2, 256 << 20) >> 20}MiB"


_spill_lock = threading.Lock()
_spill: dict[int, str] = {}  # pid → the private folder this process's connections spill under
_spilled = itertools.count()


def spill_dir() -> str:
    """A folder for one connection's spill files, which DuckDB makes when it first spills and removes
    on close, inside a folder only this user can enter (`_private_temp`); "" (no spilling: a query
    over the memory limit fails with DuckDB's message) when none can be made. Why not DuckDB's
    default: that is `.tmp` in the current directory, which may not be writable; and not a name of
    the pid's under the temp directory: one planted there beforehand (a link, a folder anyone can
    write) received the spill files of a query over a dataset."""
    pid = os.getpid()
    with _spill_lock:
        if pid not in _spill:
            _spill[pid] = _private_temp()
        if not _spill[pid]:
            return ""
        return os.path.join(_spill[pid], f"spill-{pid}-{next(_spilled)}")


def _private_temp() -> str:
    """`tracecore-<uid>` under the system temp directory, made mode 0700, when it is this user's own
    folder that no one else can write; else (a link, another user's folder or one anyone can write
    took the name) a new folder of `tempfile.mkdtemp` (0700, a name no one can guess); "" when
    neither can be made (a read-only temp directory)."""
    import stat
    import tempfile

    base = os.path.join(tempfile.gettempdir(), f"tracecore-{os.getuid()}")
    with contextlib.suppress(OSError):
        os.mkdir(base, 0o700)
    try:
        st = os.lstat(base)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return base
        return tempfile.mkdtemp(prefix="tracecore-spill-")
    except OSError:
        return ""


def _first(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _refresh_in_place(root: Path) -> bool:
    """Rebuild the catalog file for this root; False when the lock or the directory is not ours, or
    the folder is not marked a dataset (`layout.claim`): nothing is written into one that is not."""
    if not os.access(root, os.W_OK) or not (root / MARKER).is_file():
        return False
    fd = lock.try_lock(root, lock.REFRESH)
    if fd is None:
        return False
    try:
        refuse_links(root)  # it writes .state/ and sweeps older state folders
        commit_catalog(root, load_state(root))
        return True
    except (OSError, duckdb.Error):
        return False
    finally:
        lock.release(fd)
