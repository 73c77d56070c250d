"""Bring the part files of an older dataset to today's schema before an ingest adds to it.

Why: an ingest into a dataset of schema version 1 (uint32 byte columns, no metadata) would otherwise
leave a mix of uint32 and int64 files, which DuckDB reads (the packets view casts) but Polars and
Arrow datasets refuse or wrap; one of version 2 lacks the columns of version 3 (dscp, ecn, RDMA,
tunnels), which one read_parquet over old and new files would not see. Each file is rewritten beside
itself and renamed over itself: its rows are unchanged, the columns it lacks are added null (the file
is then of the nullable kind: its old rows have no DSCP to give), so a crash between two files
leaves a readable dataset the next ingest finishes. Version 3 files are version 4 files as they
are (version 4 only lets dense parts omit the layer columns): nothing to rewrite. Version 4 files lack
version 5's TCP columns (tcp_seq, tcp_ack, tcp_window, tcp_window_scale) and are rewritten with them
null: the captures' values are not in the files, and the views that need them (`tcp_health`) give
nothing for such rows until the captures are ingested again (`--force`). `_files` records
each rewritten file's new size and checksum, so the next ingest does not take it for a file someone
changed; so does a file an interrupted upgrade already rewrote (its own metadata is of today's version).
"""

from __future__ import annotations

import os
from pathlib import Path

from tracecore.arrow_rows import table_from_rows
from tracecore.ingest import link_bins
from tracecore.ingest.dataset_tables import State
from tracecore.ingest.layout import part_id
from tracecore.schema import BYTE_COLUMNS, DATASET_SCHEMA, LAYER_COLUMNS, SCHEMA_VERSION, part_metadata


def upgrade_parts(out: Path, state: State) -> int:
    """Rewrite every part file of `state` whose byte columns are not int64 or that lacks a column of
    DATASET_SCHEMA (a dense part, `_files.layers` false, may lack schema.LAYER_COLUMNS); returns how
    many."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tracecore.ingest.writer import ROW_GROUP_ROWS, _open_writer

    done = recorded = 0
    rows = state.rows("_files")
    for row in rows:
        path = out / row["path"]
        if not path.is_file():
            continue
        old = pq.read_schema(path)
        lean = row.get("layers") is False
        missing = [
            f for f in DATASET_SCHEMA if f.name not in old.names and not (lean and f.name in LAYER_COLUMNS)
        ]
        if not missing and all(old.field(c).type == pa.int64() for c in BYTE_COLUMNS):
            ours = (old.metadata or {}).get(b"tracecore.schema_version") == str(SCHEMA_VERSION).encode()
            if ours and old.names == DATASET_SCHEMA.names:  # rewritten by an upgrade cut short
                _record(row, path)
                recorded += 1
            continue
        table = pq.read_table(path)
        for f in DATASET_SCHEMA:  # what it lacks, null (a dense part rewritten stores every column)
            if f.name not in table.column_names:
                table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
        dense = not missing and not any(f.nullable for f in old if f.name not in LAYER_COLUMNS)
        schema = pa.schema(
            [f.with_nullable(f.nullable and (not dense or f.name in LAYER_COLUMNS)) for f in DATASET_SCHEMA]
        )
        table = table.select(schema.names).cast(schema)
        tmp = path.with_name(f".{path.name}.upgrade.parquet")  # a crash's leftover: swept by recover()
        writer = _open_writer(tmp, schema.with_metadata(part_metadata(row["run"], row["file"])))
        try:
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        finally:
            writer.close()
        os.replace(tmp, path)
        _record(row, path)
        done += 1
    if done or recorded:
        state.tables["_files"] = table_from_rows(rows, state.tables["_files"].schema)  # no pandas
    return done


def _record(row: dict, path: Path) -> None:
    """What `_files` says of a file the upgrade wrote: its size and checksum, every column stored."""
    row["size"], row["checksum"] = part_id(path)
    row["layers"] = True


def add_link_bins(out: Path, state: State) -> int:
    """Add to `state` the bins of every capture whose part files have rows but that has none stored (a
    dataset ingested before bins were kept), summed from its part files; returns how many captures.

    Why at ingest: the catalog's `link_bins` reads the stored bins only when they cover every part file
    (else it sums `packets` at each query), and an ingest that adds a run should not leave the others'
    views slow."""
    files, stored = state.tables["_files"], state.tables["_link_bins"]
    if files.num_rows == 0:  # a new dataset: nothing stored yet
        return 0
    import duckdb  # here: an ingest into a new dataset imports DuckDB on the draft's thread only

    from tracecore.ingest.catalog import SUMS_SQL, UNBINNED_SQL

    summed = (
        f"SELECT $run AS run, $file AS file, src_ip::VARCHAR AS src_ip, dst_ip::VARCHAR AS dst_ip, {SUMS_SQL}"
        " FROM read_parquet($paths, union_by_name = true) GROUP BY ALL"
    )
    con = duckdb.connect()
    try:
        con.register("_files", files)
        con.register("_link_bins", stored)
        missing = con.execute(
            f"SELECT run, file, list(path ORDER BY path) {UNBINNED_SQL} GROUP BY run, file ORDER BY run, file"
        ).fetchall()
        tables, added = [stored], 0
        for run, file, parts in missing:
            params = {"run": run, "file": file, "paths": [str(out / p) for p in parts]}
            try:
                tables.append(con.sql(summed, params=params).to_arrow_table())
                added += 1
            except duckdb.Error:  # a part file gone or damaged: the ingest reads its capture again
                continue  # (`_plan`); until then the catalog sums `packets` for the link views
    finally:
        con.close()
    if added:
        state.tables["_link_bins"] = link_bins.concat(tables)
    return added
