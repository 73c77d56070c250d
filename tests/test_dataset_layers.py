"""Dense part files (TCP rows) leave out the fifteen RDMA/tunnel columns (schema version 4); every
reader of the catalog still sees PACKET_SCHEMA's columns, order and types, NULL on TCP rows and the
reader's values on RoCE rows; a direct reader gets them with DATASET_SCHEMA, as the README shows."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.rdma_corpus import NCCL_FILES, RDMA_CORPUS
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.writer import DENSE_SCHEMA
from tracecore.reader import read_capture
from tracecore.sample import SAMPLE_RUN, sample_run
from tracecore.schema import DATASET_SCHEMA, LAYER_COLUMNS

NCCL = "nccl-allreduce-none-0-nccl-0-ring"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded TCP sample and the corpus's NCCL RoCE ring (3 workers) in one dataset."""
    root = tmp_path_factory.mktemp("layers")
    run = root / NCCL
    run.mkdir()
    for i, name in enumerate(NCCL_FILES):
        shutil.copyfile(RDMA_CORPUS / name, run / f"worker-{i}-tcpdump.pcap")
    summary = ingest([sample_run(), run], root / "data", jobs=1)
    assert not summary.failed, summary.to_json()
    return root / "data"


def _layers_of_parts(out: Path) -> dict[str, bool]:
    con = open_catalog(out)
    try:
        return dict(con.execute("SELECT path, layers FROM _files").fetchall())
    finally:
        con.close()


def test_dense_parts_store_no_layer_column(mixed: Path) -> None:
    layers = _layers_of_parts(mixed)
    assert sorted(layers.values()) == [False] * 7 + [True] * 7  # per capture a dense and a nullable part
    for path, full in layers.items():
        schema = pq.read_schema(mixed / path)
        if full:
            assert schema.names == DATASET_SCHEMA.names, path
        else:
            assert (
                schema.names
                == DENSE_SCHEMA.names
                == [n for n in DATASET_SCHEMA.names if n not in LAYER_COLUMNS]
            )
            assert not any(f.nullable for f in schema), path
            assert pq.read_metadata(mixed / path).metadata[b"tracecore.schema_version"] == b"6"


def test_packets_has_every_column_typed_with_nulls_on_tcp_rows(mixed: Path) -> None:
    """The layer columns come back as PACKET_SCHEMA's (via DATASET_SCHEMA) DuckDB types; their values
    are the reader's on RoCE rows and NULL on every TCP row."""
    expect = duckdb.from_arrow(pa.Table.from_batches([], schema=DATASET_SCHEMA))
    con = open_catalog(mixed)
    try:
        for view in ("packets_all", "packets"):
            got = con.execute(f"DESCRIBE {view}").fetchall()
            assert [(r[0], r[1]) for r in got] == [
                ("run", "VARCHAR"),
                ("worker", "VARCHAR"),
                *zip(expect.columns, map(str, expect.types), strict=True),
                ("ts", "TIMESTAMP_NS"),
            ], view
        rdma_tunnel = [c for c in LAYER_COLUMNS if c != "tcp_window_scale"]  # a SYN's: the only TCP one
        counts = ", ".join(f"count({c})" for c in rdma_tunnel)
        tcp = con.execute(
            f"SELECT count(*), count(tcp_window_scale), count(*) FILTER (tcp_flags & 2 = 2), {counts}"
            " FROM packets_all WHERE run = ? AND ip_proto = 6",
            [SAMPLE_RUN],
        ).fetchall()[0]
        assert tcp[0] > 16_000
        assert tcp[1] == tcp[2] > 0  # every SYN of Linux's handshakes carries its window scale
        assert tcp[3:] == (0,) * len(rdma_tunnel)
        sums = ", ".join(
            f"sum({c})" for c in rdma_tunnel if c not in ("tunnel", "inner_src_ip", "inner_dst_ip")
        )
        got = con.execute(
            f"SELECT count(*), count(rdma_opcode), {sums} FROM packets_all WHERE run = ?", [NCCL]
        ).fetchall()[0]
    finally:
        con.close()
    reader = duckdb.connect()
    reader.register("frames", pa.concat_tables([read_capture(RDMA_CORPUS / name) for name in NCCL_FILES]))
    assert got == reader.execute(f"SELECT count(*), count(rdma_opcode), {sums} FROM frames").fetchall()[0]
    assert got[1] > 500  # the ring's RoCE frames, with values


def test_direct_readers_with_the_dataset_schema_see_every_column(mixed: Path) -> None:
    """README's recipe: pyarrow datasets, pandas and Polars given DATASET_SCHEMA read the dense parts'
    missing columns as nulls and agree with the catalog."""
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as ds

    con = open_catalog(mixed)
    want = con.execute("SELECT count(*), count(rdma_opcode), count(tcp_flags) FROM packets_all").fetchall()[0]
    con.close()
    keys = [pa.field("run", pa.string()), pa.field("worker", pa.string())]
    schema = pa.schema([*DATASET_SCHEMA, *keys])
    table = ds.dataset(mixed / "packets", schema=schema, partitioning="hive").to_table()
    assert table.schema == schema
    counts = (len(table), *(len(table) - table[c].null_count for c in ("rdma_opcode", "tcp_flags")))
    assert counts == want
    frame = pd.read_parquet(mixed / "packets", schema=schema)
    assert (
        len(frame),
        int(frame["rdma_opcode"].notna().sum()),
        int(frame["tcp_flags"].notna().sum()),
    ) == want
    lazy = pl.scan_parquet(
        mixed / "packets" / "**" / "*.parquet",
        schema=pl.from_arrow(DATASET_SCHEMA.empty_table()).schema,
        missing_columns="insert",
        hive_partitioning=True,
    )
    got = lazy.select(pl.len(), pl.col("rdma_opcode").count(), pl.col("tcp_flags").count()).collect().row(0)
    assert got == want
    assert lazy.collect_schema().names() == [*DATASET_SCHEMA.names, "run", "worker"]
