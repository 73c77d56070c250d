"""Self-describing datasets: Parquet key-value metadata, a typed `ts` column, a versioned schema that a
later tracecore reads (older) or refuses in one line (newer)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tracecore
from tests import commands
from tests.test_ingest_support import copy_run
from tracecore.cli.app import app
from tracecore.errors import DatasetVersionError
from tracecore.ingest import ingest, lock, open_catalog
from tracecore.ingest.catalog import _meta_of
from tracecore.ingest.writer import DENSE_SCHEMA
from tracecore.sample import BOTH_DIRECTIONS_RUN, SAMPLE_RUN, both_directions_run, sample_run
from tracecore.schema import DATASET_SCHEMA, LAYER_COLUMNS, PACKET_SCHEMA, SCHEMA_VERSION, part_metadata
from tracecore.views import view_names


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    out = tmp_path / "data"
    summary = ingest([sample_run()], out, jobs=1)
    assert not summary.failed, summary.to_json()
    return out


def _set_meta(out: Path, key: str, value: str | None) -> None:
    con = duckdb.connect(str(out / "tracecore.duckdb"))
    try:
        con.execute("DELETE FROM _meta WHERE key = ?", [key])
        if value is not None:
            con.execute("INSERT INTO _meta VALUES (?, ?)", [key, value])
    finally:
        con.close()


def test_every_part_file_says_what_it_holds(sample: Path) -> None:
    parts = sorted((sample / "packets").rglob("*.parquet"))
    assert len(parts) == 2 * 4  # per capture a dense part and a nullable one (its 3 ARP frames)
    captures = set()
    for part in parts:
        meta = {k.decode(): v.decode() for k, v in pq.read_metadata(part).metadata.items()}
        assert meta["tracecore.version"] == tracecore.__version__ == "0.1.0"
        assert meta["tracecore.schema_version"] == str(SCHEMA_VERSION) == "6"
        assert meta["tracecore.run"] == SAMPLE_RUN
        assert meta["tracecore.ts_ns"].startswith("UTC nanoseconds since 1970-01-01T00:00:00Z")
        units = json.loads(meta["tracecore.units"])
        assert units["frame_len"] == "bytes (original length on the wire)"
        assert units["ts_ns"] == "ns since the Unix epoch, UTC"
        assert set(units) == set(PACKET_SCHEMA.names)
        captures.add((part.parent.name, meta["tracecore.capture"]))
    assert captures == {
        ("worker=W1", "worker-0-tcpdump.pcap"),
        ("worker=W2", "worker-1-tcpdump.pcap"),
        ("worker=W3", "worker-2-tcpdump.pcap"),
        ("worker=W4", "worker-3-tcpdump.pcap"),
    }


def test_packets_has_a_timestamp_column_next_to_ts_ns(sample: Path) -> None:
    con = open_catalog(sample)
    try:
        row = con.execute(
            "SELECT ts_ns, ts, typeof(ts), epoch_ns(ts) = ts_ns FROM packets ORDER BY ts_ns LIMIT 1"
        ).fetchall()[0]
        assert row[2] == "TIMESTAMP_NS"
        assert row[3] is True
        assert con.execute("SELECT count(*) FROM packets WHERE epoch_ns(ts) <> ts_ns").fetchall()[0] == (0,)
        first = dt.datetime.fromtimestamp(row[0] // 10**9, dt.UTC).replace(tzinfo=None)
        assert row[1].replace(microsecond=0) == first
        frame = con.sql("SELECT ts FROM packets LIMIT 3").pl()
        assert frame.schema["ts"] == pl.Datetime("ns")
        assert con.execute("SELECT value FROM _meta WHERE key = 'schema_version'").fetchall()[0] == ("6",)
    finally:
        con.close()


def test_a_dataset_from_a_future_tracecore_is_refused_in_one_line(sample: Path) -> None:
    _set_meta(sample, "schema_version", str(SCHEMA_VERSION + 1))
    before = sorted(p.relative_to(sample) for p in (sample / "packets").rglob("*.parquet"))
    expected = (
        f"{sample / 'tracecore.duckdb'}: dataset schema version 7 is newer than this tracecore 0.1.0 reads"
        " (versions 1 to 6); upgrade tracecore (pip install -U tracecore) or re-ingest the captures into"
        " a new --data folder"
    )
    with pytest.raises(DatasetVersionError) as err:
        open_catalog(sample)
    assert str(err.value) == expected
    with pytest.raises(DatasetVersionError):  # not even --force rewrites it
        ingest([both_directions_run()], sample, jobs=1, force=True)
    assert sorted(p.relative_to(sample) for p in (sample / "packets").rglob("*.parquet")) == before
    result = CliRunner().invoke(app, ["query", "run_summary", "--data", str(sample)])
    assert result.exit_code == 4
    assert result.output == f"Error: {expected}\n"


# The packet columns of schema versions 1 and 2 (version 3 added dscp, ecn, rdma_*, tunnel, vni, inner_*).
VERSION_2_COLUMNS = [n for n in PACKET_SCHEMA.names[: PACKET_SCHEMA.get_field_index("ip_fragment") + 1]
                     if not n.startswith("tcp_") or n == "tcp_flags"]  # fmt: skip
TCP_HEADER_COLUMNS = ["tcp_seq", "tcp_ack", "tcp_window", "tcp_window_scale"]  # schema version 5's


def _make_version_1(out: Path) -> None:
    """What tracecore 0.1.0 wrote: uint32 byte columns, no metadata, no schema_version in _meta."""
    for part in (out / "packets").rglob("*.parquet"):
        table = pq.read_table(part)
        schema = pa.schema(
            [
                PACKET_SCHEMA.field(f.name).with_nullable(f.nullable)
                for f in table.schema
                if f.name in VERSION_2_COLUMNS
            ]
        )
        pq.write_table(table.select(schema.names).cast(schema).replace_schema_metadata(None), part)
    _set_meta(out, "schema_version", None)
    _set_meta(out, "views_fingerprint", "tracecore 0.1.0")  # that tracecore's catalog format and queries/


def test_an_older_dataset_is_read_and_upgraded_by_the_next_ingest(tmp_path: Path, sample: Path) -> None:
    con = open_catalog(sample)
    want = con.execute("SELECT count(*), sum(frame_len), sum(l4_payload_len) FROM packets").fetchall()[0]
    con.close()
    _make_version_1(sample)
    part = next((sample / "packets").rglob("*.parquet"))
    assert pq.read_schema(part).field("frame_len").type == pa.uint32()
    con = open_catalog(sample)
    got = con.execute("SELECT count(*), sum(frame_len), sum(l4_payload_len), typeof(frame_len) FROM packets"
                  " GROUP BY ALL").fetchall()[0]  # fmt: skip
    con.close()
    assert got == (*want, "BIGINT")
    run = copy_run(tmp_path / "more", "both")
    summary = ingest([run], sample, jobs=1)
    assert not summary.failed
    for part in (sample / "packets").rglob("*.parquet"):
        meta = pq.read_metadata(part).metadata
        assert pq.read_schema(part).field("frame_len").type == pa.int64(), part
        assert meta[b"tracecore.schema_version"] == b"6", part
    con = open_catalog(sample)
    assert con.execute("SELECT value FROM _meta WHERE key = 'schema_version'").fetchall()[0] == ("6",)
    assert (
        con.execute(
            "SELECT count(*), sum(frame_len), sum(l4_payload_len) FROM packets WHERE run = ?",
            [SAMPLE_RUN],
        ).fetchall()[0]
        == want
    )
    assert con.execute("SELECT count(DISTINCT run) FROM packets").fetchall()[0] == (2,)
    assert con.execute("SELECT run FROM runs ORDER BY run").fetchall() == sorted(
        [(SAMPLE_RUN,), (BOTH_DIRECTIONS_RUN,)]
    )
    stored = con.execute("SELECT sum(frame_len) FROM packets_all").fetchall()[0][0]
    con.close()
    glob = str(sample / "packets" / "**" / "*.parquet")  # int64 everywhere: Polars scans every file
    lazy = pl.scan_parquet(
        glob, schema=pl.from_arrow(DATASET_SCHEMA.empty_table()).schema, missing_columns="insert"
    )
    assert lazy.select(pl.col("frame_len").sum()).collect().item() == stored > want[1]


def _make_version_2(out: Path) -> None:
    """What tracecore wrote before schema version 3: int64 byte columns, metadata, no dscp/ecn/RDMA/tunnel
    columns, `_files` with each part's size and checksum and without `layers`."""
    from tracecore.ingest import catalog, layout

    state = catalog.load_state(out)
    files = state.tables["_files"]
    rows = files.to_pylist()
    for row in rows:
        part = out / row["path"]
        old = pq.read_table(part)
        meta = dict(old.schema.metadata) | {b"tracecore.schema_version": b"2"}
        pq.write_table(old.select(VERSION_2_COLUMNS).replace_schema_metadata(meta), part)
        row["size"], row["checksum"] = layout.part_id(part)
        row["layers"] = None
    state.tables["_files"] = pa.Table.from_pylist(rows, schema=files.schema)
    state.schema_version = 2
    catalog.commit_catalog(out, state)
    _set_meta(out, "views_fingerprint", "an older tracecore")  # its catalog format and queries/


@pytest.mark.parametrize("cut_short", [False, True], ids=["upgrade committed", "upgrade cut short"])
def test_an_upgraded_part_file_is_recorded_as_it_was_rewritten(
    tmp_path: Path, sample: Path, cut_short: bool
) -> None:
    """The upgrade rewrites a version 2 dataset's part files: the catalog records their new size and
    checksum (and that they now store every column), so the next ingest of the same captures finds
    them unchanged instead of re-reading them all with a warning per file. An upgrade cut short after
    rewriting the files (the catalog still of version 2, with the old sizes) is finished the same way."""
    from tracecore.ingest import catalog
    from tracecore.ingest.upgrade import upgrade_parts

    _make_version_2(sample)
    if cut_short:
        assert upgrade_parts(sample, catalog.load_state(sample)) == 8  # rewritten; nothing committed
        assert _meta_of(sample / "tracecore.duckdb")["schema_version"] == "2"
    else:
        summary = ingest([copy_run(tmp_path / "more", "both")], sample, jobs=1)  # upgrades, adds a run
        assert not summary.failed
        assert not summary.warnings, summary.warnings
    again = ingest([sample_run()], sample, jobs=1)
    assert not again.warnings, again.warnings  # no part file "changed since it was written"
    assert [c.status for c in again.captures] == ["unchanged"] * 4
    con = open_catalog(sample)
    try:
        layers = con.execute("SELECT DISTINCT layers FROM _files WHERE run = ?", [SAMPLE_RUN]).fetchall()
    finally:
        con.close()
    assert layers == [(True,)]


def test_a_version_2_dataset_gains_the_rdma_and_tunnel_columns_at_the_next_ingest(
    tmp_path: Path, sample: Path
) -> None:
    """Version 2 part files (int64 byte columns, no dscp/ecn/RDMA/tunnel columns) still read; the next
    ingest rewrites them with those columns null, beside the new run's files that have them."""
    _make_version_2(sample)
    con = open_catalog(sample)
    want = con.execute("SELECT count(*), sum(frame_len), count(DISTINCT src_ip) FROM packets").fetchall()[0]
    assert con.execute("SELECT count(dscp), typeof(any_value(dscp)) FROM packets").fetchall() == [
        (0, "UTINYINT")
    ]
    con.close()
    summary = ingest([copy_run(tmp_path / "more", "both")], sample, jobs=1)
    assert not summary.failed
    for part in (sample / "packets").rglob("*.parquet"):
        names = pq.read_schema(part).names
        if f"run={SAMPLE_RUN}" in str(part):  # rewritten: every column, the new ones null
            assert names == DATASET_SCHEMA.names, part
        else:  # the new run's: dense parts without the layer columns
            assert names in (DATASET_SCHEMA.names, DENSE_SCHEMA.names), part
        assert pq.read_metadata(part).metadata[b"tracecore.schema_version"] == b"6", part
    con = open_catalog(sample)
    rows = con.execute(
        "SELECT run = ? AS old, count(*), sum(frame_len), count(DISTINCT src_ip), count(ip_version),"
        " count(dscp), count(ecn), count(rdma_opcode), count(tunnel), count(inner_src_ip)"
        " FROM packets GROUP BY ALL ORDER BY old",
        [SAMPLE_RUN],
    ).fetchall()
    con.close()
    assert rows == [(False, 2930, 2414910, 4, 2906, 2906, 2906, 0, 0, 0), (True, *want, 17015, 0, 0, 0, 0, 0)]
    meta = _meta_of(sample / "tracecore.duckdb")
    assert meta["schema_version"] == "6"  # the files were upgraded: the catalog says so


def _make_older(out: Path, version: int) -> None:
    """What tracecore wrote before schema version 5 (no TCP header columns): version 4's dense parts
    without the layer columns, `_files.layers` false for them; version 3's dense parts with every
    column (the layer columns nullable and null), `_files` without `layers` (read as NULL); neither
    has `_files.read_version` (read as the dataset's version)."""
    from tracecore.ingest import catalog, layout

    state = catalog.load_state(out)
    files = state.tables["_files"]
    rows = files.to_pylist()
    for row in rows:
        part = out / row["path"]
        table = pq.read_table(part)
        meta = part_metadata(row["run"], row["file"]) | {"tracecore.schema_version": str(version)}
        if row["layers"] is False and version == 3:
            for f in DATASET_SCHEMA:
                if f.name not in table.column_names:
                    table = table.append_column(f.name, pa.nulls(table.num_rows, f.type))
            schema = pa.schema([f.with_nullable(f.name in LAYER_COLUMNS) for f in DATASET_SCHEMA])
            table = table.select(schema.names).cast(schema)
        table = table.drop_columns([c for c in TCP_HEADER_COLUMNS if c in table.column_names])
        pq.write_table(table.replace_schema_metadata(meta), part)
        row["size"], row["checksum"] = layout.part_id(part)
        row["layers"] = row["layers"] if version == 4 else None
        row["read_version"] = None
    state.tables["_files"] = pa.Table.from_pylist(rows, schema=files.schema)
    state.schema_version = version
    catalog.commit_catalog(out, state)
    _set_meta(out, "views_fingerprint", "an older tracecore")  # its catalog format and queries/


@pytest.mark.parametrize("version", [3, 4])
def test_a_dataset_without_tcp_header_columns_reads_them_null_and_gains_them_at_the_next_ingest(
    tmp_path: Path, sample: Path, version: int
) -> None:
    """Version 3 and 4 part files lack version 5's TCP header columns: the dataset reads the same with
    those columns NULL of their type, and the next ingest rewrites each old file with them null (the
    captures' values are not in the files), records version 5 and every old file as storing every
    column, without a warning; the new run's files carry the values. tcp_health refuses the old run
    in one line naming `ingest --force` (before and after the upgrade: `_files.read_version` keeps
    what the files hold) instead of answering no flows, and answers it again once re-read."""
    con = open_catalog(sample)
    fresh = con.execute("SELECT * FROM tcp_health").fetchall()
    assert len(fresh) == 22
    without_tcp_header = "SELECT * EXCLUDE (tcp_seq, tcp_ack, tcp_window, tcp_window_scale) FROM packets"
    want = con.execute(f"{without_tcp_header} ORDER BY worker, ts_ns").fetchall()
    types = con.execute("DESCRIBE packets").fetchall()
    assert con.execute("SELECT count(tcp_seq), count(tcp_window_scale) FROM packets").fetchall()[0][0] > 0
    con.close()
    _make_older(sample, version)
    old = {p: p.stat().st_mtime_ns for p in (sample / "packets").rglob("*.parquet")}
    assert not any("tcp_seq" in pq.read_schema(p).names for p in old)
    assert _meta_of(sample / "tracecore.duckdb")["schema_version"] == str(version)
    con = open_catalog(sample)
    assert con.execute("DESCRIBE packets").fetchall() == types
    assert con.execute("SELECT count(tcp_seq), count(tcp_window_scale) FROM packets").fetchall() == [(0, 0)]
    con.close()
    refused = (
        f"Error: Invalid Input Error: tracecore: run {SAMPLE_RUN} was ingested before tracecore read TCP"
        f" sequence numbers (8 part files of schema version {version}): tcp_health would find no flows"
        " there; re-read its captures with `tracecore ingest --force`, or ask for other runs"
        " (runs := [...])\n"
    )
    res = commands.tracecore("query", "tcp_health", "--data", str(sample))
    assert (res.returncode, res.stdout, res.stderr) == (2, "", refused)
    summary = ingest([copy_run(tmp_path / "more", "both")], sample, jobs=1)
    assert not summary.failed
    assert not summary.warnings, summary.warnings  # no part file "changed since it was written"
    assert all(p.stat().st_mtime_ns != t for p, t in old.items())  # each rewritten
    assert {tuple(pq.read_schema(p).names) for p in old} == {tuple(DATASET_SCHEMA.names)}
    assert _meta_of(sample / "tracecore.duckdb")["schema_version"] == "6"
    con = open_catalog(sample)
    try:
        layers = con.execute("SELECT DISTINCT layers FROM _files WHERE run = ?", [SAMPLE_RUN]).fetchall()
        assert layers == [(True,)]
        assert con.execute("DESCRIBE packets").fetchall() == types
        got = con.execute(
            f"{without_tcp_header} WHERE run = ? ORDER BY worker, ts_ns", [SAMPLE_RUN]
        ).fetchall()
        assert got == want
        counts = con.execute(
            "SELECT run = ? AS old, count(*), count(tcp_flags), count(tcp_seq), count(tcp_window)"
            " FROM packets GROUP BY ALL ORDER BY old",
            [SAMPLE_RUN],
        ).fetchall()
        assert counts == [(False, 2930, 2906, 2906, 2906), (True, 17027, 17015, 0, 0)]
        read = "SELECT run, read_version, count(*) FROM _files GROUP BY ALL ORDER BY ALL"
        expected = sorted([(SAMPLE_RUN, version, 8), (BOTH_DIRECTIONS_RUN, SCHEMA_VERSION, 8)])
        assert con.execute(read).fetchall() == expected
    finally:
        con.close()
    res = commands.tracecore("query", "tcp_health", "--data", str(sample), "--run", SAMPLE_RUN)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", refused)
    both = ("--run", BOTH_DIRECTIONS_RUN, "-f", "csv")
    res = commands.tracecore("query", "tcp_health", "--data", str(sample), *both)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == 1 + 18
    summary = ingest([sample_run()], sample, jobs=1, force=True)
    assert not summary.failed
    con = open_catalog(sample)
    try:
        assert con.execute("SELECT * FROM tcp_health(runs := [?])", [SAMPLE_RUN]).fetchall() == fresh
        assert con.execute("SELECT DISTINCT read_version FROM _files").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        con.close()


@pytest.mark.parametrize("with_state", [True, False], ids=["state copy", "catalog only"])
def test_a_dataset_from_before_the_nccl_tables_opens_and_gains_them(
    tmp_path: Path, sample: Path, with_state: bool
) -> None:
    """What tracecore wrote before it read NCCL logs: no nccl_* tables in the catalog nor in ingest's
    own copy of the tables (nor that copy at all, before it existed): read as empty, then written."""
    from tracecore.ingest.dataset_tables import NCCL_SCHEMAS

    con = duckdb.connect(str(sample / "tracecore.duckdb"))
    try:
        meta = dict(con.execute("SELECT key, value FROM _meta").fetchall())
        state = json.loads(meta["state"])
        for name in NCCL_SCHEMAS:
            con.execute(f'DROP TABLE "{name}"')
            del state["tables"][name]
        con.execute("DROP VIEW nccl_topology")  # the older queries/ had no such view
    finally:
        con.close()
    _set_meta(sample, "state", json.dumps(state) if with_state else None)
    _set_meta(sample, "views_fingerprint", "an older queries/")
    con = open_catalog(sample)  # rebuilt for today's views, the missing tables empty
    try:
        assert con.execute("SELECT count(*) FROM nccl_topology").fetchall() == [(0,)]
        assert con.execute("SELECT count(*) FROM nccl_ranks").fetchall() == [(0,)]
        assert con.execute("SELECT run FROM runs").fetchall() == [(SAMPLE_RUN,)]
    finally:
        con.close()
    summary = ingest([copy_run(tmp_path / "more", "both")], sample, jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    con = open_catalog(sample)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(2,)]
        assert {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()} >= set(
            NCCL_SCHEMAS
        )
    finally:
        con.close()


def _drop_in_state(out: Path, table: str, columns: list[str], keep: str | None = None) -> None:
    """Ingest's own copy of `table` (OUT/.state) as an older tracecore wrote it: without `columns`,
    only the rows where `keep` holds; its digest in `_meta.state` follows."""
    import hashlib

    import pyarrow.compute as pc

    from tracecore.ingest.layout import STATE_DIR

    record = json.loads(_meta_of(out / "tracecore.duckdb")["state"])
    path = out / STATE_DIR / record["generation"] / f"{table}.parquet"
    data = pq.read_table(path)
    if keep is not None:
        data = data.filter(pc.field(keep).is_null() | (pc.field(keep) != "Tree"))
    pq.write_table(data.drop_columns(columns), path)
    record["tables"][table] = hashlib.sha256(path.read_bytes()).hexdigest()
    _set_meta(out, "state", json.dumps(record, sort_keys=True))


@pytest.mark.parametrize("with_state", [True, False], ids=["state copy", "catalog only"])
def test_nccl_tables_from_before_tree_lines_and_unknown_lines_were_read(
    tmp_path: Path, with_state: bool
) -> None:
    """What tracecore wrote before it read NCCL's `Tree c : …` lines and counted unknown ones:
    nccl_trees without `source` (and without those rows), nccl_ranks without `unknown_lines` and
    `first_unknown`. The views, rebuilt for today's queries/, give the rows they give today; the new
    columns read as NULL."""
    from tests.test_views_nccl import RING, nccl_run_folder

    nccl_run_folder(tmp_path / "runs", RING, {0: 0, 1: 1, 2: 2})
    out = tmp_path / "data"
    assert not ingest([tmp_path / "runs"], out, jobs=1).failed
    views = ("nccl_topology", "nccl_edges", "nccl_rank_workers", "topology_check")
    con = open_catalog(out)
    try:
        before = {name: con.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in views}
        assert con.sql("SELECT count(*) FROM nccl_trees WHERE source = 'Tree'").fetchall() == [(6,)]
    finally:
        con.close()
    con = duckdb.connect(str(out / "tracecore.duckdb"))
    try:
        con.execute("DELETE FROM nccl_trees WHERE source = 'Tree'")
        con.execute("ALTER TABLE nccl_trees DROP COLUMN source")
        con.execute("ALTER TABLE nccl_ranks DROP COLUMN unknown_lines")
        con.execute("ALTER TABLE nccl_ranks DROP COLUMN first_unknown")
    finally:
        con.close()
    if with_state:
        _drop_in_state(out, "nccl_trees", ["source"], keep="source")
        _drop_in_state(out, "nccl_ranks", ["unknown_lines", "first_unknown"])
    else:
        _set_meta(out, "state", None)
    _set_meta(out, "views_fingerprint", "an older queries/")
    con = open_catalog(out)
    try:
        after = {name: con.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in views}
        assert con.sql("SELECT DISTINCT source FROM nccl_trees").fetchall() == [(None,)]
        assert con.sql("SELECT DISTINCT unknown_lines, first_unknown FROM nccl_ranks").fetchall() == [
            (None, None)
        ]
    finally:
        con.close()
    assert after == before
    assert {row[2] for row in after["nccl_topology"]} == {True}


# packets_window passes the packets through: their DSCP and ECN were read from version 3 files only
ALL_ROWS = {
    "packets_window": "SELECT * EXCLUDE (dscp, ecn, tcp_seq, tcp_ack, tcp_window, tcp_window_scale)"
    " FROM packets_window"
}


@pytest.mark.parametrize("rebuilt", ["in place", "in memory"])
def test_a_version_2_dataset_runs_every_view_before_any_re_ingest(sample: Path, rebuilt: str) -> None:
    """An older tracecore's dataset (version 2 part files, that tracecore's views) opened by this one:
    the catalog is rebuilt with version 3's columns as NULL of their type, so the RDMA views run and
    are empty, and every view gives the rows it gave on the version 3 files. The catalog still says
    version 2, so the next ingest upgrades the files (test above). In memory: when the dataset lock
    is taken (another ingest), the rebuilt catalog is not written."""
    con = open_catalog(sample)
    before = {name: con.sql(ALL_ROWS.get(name, f"SELECT * FROM {name}")).fetchall() for name in view_names()}
    con.close()
    assert before["rdma_flows"] == []
    assert len(before["congestion"]) == len(before["link_util"]) > 0
    _make_version_2(sample)
    _set_meta(sample, "views_fingerprint", "0123456789abcdef")  # an older tracecore's queries/
    fd = lock.try_lock(sample) if rebuilt == "in memory" else None
    try:
        con = open_catalog(sample)
        try:
            columns = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE packets)").fetchall())
            assert list(columns) == ["run", "worker", *DATASET_SCHEMA.names, "ts"]
            assert (columns["rdma_opcode"], columns["rdma_payload_len"], columns["tunnel"]) == (
                "UTINYINT",
                "BIGINT",
                "VARCHAR",
            )
            nulls = con.execute(
                "SELECT count(*), count(dscp), count(rdma_opcode), count(inner_src_ip) FROM packets"
            )
            assert nulls.fetchall() == [(17027, 0, 0, 0)]
            after = {
                name: con.sql(ALL_ROWS.get(name, f"SELECT * FROM {name}")).fetchall() for name in view_names()
            }
        finally:
            con.close()
    finally:
        if fd is not None:
            lock.release(fd)
    assert (len(before["tcp_health"]), after.pop("tcp_health")) == (22, [])  # no TCP header fields before 5
    assert (len(before["tcp_segments"]), after.pop("tcp_segments")) == (17015, [])  # its packets, one by one
    for name in after:
        assert sorted(after[name], key=repr) == sorted(before[name], key=repr), name
    meta = _meta_of(sample / "tracecore.duckdb")
    assert meta["schema_version"] == "2"
    assert (meta["views_fingerprint"] == "0123456789abcdef") == (rebuilt == "in memory")
