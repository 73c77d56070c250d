"""Speed of the two hot views on a 100 M-packet dataset: link_util (10 ms) ≤ 2 s, flow_matrix ≤ 1 s.

The dataset is written here in the dataset contract's layout (hive-partitioned Parquet per run
and worker, zstd, 128 Ki-row row groups, dictionary-encoded addresses, time-sorted, as ingest
writes it) with a catalog built by `tracecore.views.install`: 4 workers × 25 M packets over
600 s of a gloo-style ring (data to rank i−1, ACKs to rank i+1, ~1.3 Gbit/s per link), i.e. a
realistic rate rather than a realistic origin — generating 100 M real packets takes far longer
than the test. Set TRACECORE_PERF_PACKETS to try another size. The best of three runs counts
(the first warms the OS cache). The limit applies to the wall time or, when other tenants share
the cores, to the CPU seconds per DuckDB thread (the wall time the same work takes on idle
cores); both are printed (pytest -s).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tracecore import views
from tracecore.schema import PACKET_SCHEMA

pytestmark = pytest.mark.slow

PACKETS = int(float(os.environ.get("TRACECORE_PERF_PACKETS", "1e8")))
SECONDS = 600
IPS = [f"192.168.17.{50 + i}" for i in range(4)]
RUN = "perf-ring"
T0 = 1_795_000_000_000_000_000


def _write_worker(path: Path, i: int, n: int, rng: np.random.Generator) -> None:
    step = SECONDS * 1e9 / n
    chunk = 1 << 17  # 128 Ki-row row groups, as ingest writes them
    names = pa.array(IPS)
    with pq.ParquetWriter(
        path,
        PACKET_SCHEMA,
        compression="zstd",
        compression_level=1,
        use_dictionary=["src_ip", "dst_ip"],
        column_encoding={"ts_ns": "DELTA_BINARY_PACKED"},
        sorting_columns=[pq.SortingColumn(0)],
    ) as writer:
        for start in range(0, n, chunk):
            m = min(chunk, n - start)
            ts = (T0 + np.arange(start, start + m) * step + rng.integers(0, int(step), m)).astype(np.int64)
            ack = rng.random(m) < 0.3
            dst = np.where(ack, (i + 1) % 4, (i - 1) % 4).astype(np.int32)
            frame = np.where(ack, 66, 1514).astype(np.uint32)
            table = pa.table(
                {
                    "ts_ns": ts,
                    "frame_len": frame,
                    "cap_len": np.minimum(frame, 128).astype(np.uint32),
                    "interface": np.zeros(m, np.uint16),
                    "link_type": np.ones(m, np.uint16),
                    "ip_version": np.full(m, 4, np.uint8),
                    "src_ip": pa.DictionaryArray.from_arrays(pa.array(np.full(m, i, np.int32)), names),
                    "dst_ip": pa.DictionaryArray.from_arrays(pa.array(dst), names),
                    "ip_proto": np.full(m, 6, np.uint8),
                    "src_port": np.where(ack, 40000 + i, 50000 + i).astype(np.uint16),
                    "dst_port": np.where(ack, 50000 + (i + 1) % 4, 40000 + (i - 1) % 4).astype(np.uint16),
                    "tcp_flags": np.full(m, 0x10, np.uint16),
                    "l4_payload_len": (frame - 66).astype(np.uint32),
                    "ip_fragment": np.zeros(m, bool),
                }
            ).cast(PACKET_SCHEMA)
            writer.write_table(table, row_group_size=m)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("perf")
    rng = np.random.default_rng(7)
    for i in range(4):
        folder = root / "packets" / f"run={RUN}" / f"worker=W{i + 1}"
        folder.mkdir(parents=True)
        _write_worker(folder / "part-0.parquet", i, PACKETS // 4, rng)
    path = root / "tracecore.duckdb"
    con = duckdb.connect(str(path))
    glob = str(root / "packets" / "*" / "*" / "*.parquet")
    con.execute(
        "CREATE VIEW packets AS SELECT run, worker, * EXCLUDE (run, worker) FROM read_parquet("
        f"'{glob}', hive_partitioning = true, hive_types = {{'run': VARCHAR, 'worker': VARCHAR}})"
    )
    con.execute(
        "CREATE TABLE runs AS SELECT 'perf-ring' AS run, 'synthetic' AS framework, 'none' AS model,"
        " 'sgd' AS optimizer, 1 AS batch_size, 'gloo' AS backend, 0.0 AS loss_pct, 'ring' AS topology,"
        " 4 AS n_workers, '' AS path"
    )
    con.execute(
        "CREATE TABLE workers AS SELECT 'perf-ring' AS run, 'W' || (i + 1) AS worker, "
        "'192.168.17.' || (50 + i) AS ip FROM range(4) t(i)"
    )
    con.execute(
        "CREATE TABLE train_log (run VARCHAR, type VARCHAR, id INTEGER, ts_ns BIGINT,"
        " loss DOUBLE, accuracy DOUBLE)"
    )
    views.install(con)
    con.close()
    return path


def best_of_three(path: Path, sql: str) -> tuple[float, float, int]:
    """(best wall seconds, best CPU seconds per DuckDB thread, rows) over three runs.

    CPU seconds per thread is what the wall time is on an idle machine with perfect scaling; it
    stays put when other processes share the cores, which the wall time does not.
    """
    con = duckdb.connect(str(path), read_only=True)
    try:
        threads = int(con.sql("SELECT current_setting('threads')").fetchall()[0][0])
        walls, cpus, rows = [], [], 0
        for _ in range(3):
            r0, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            rows = con.sql(sql).to_arrow_table().num_rows
            walls.append(time.perf_counter() - start)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpus.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / threads)
        return min(walls), min(cpus), rows
    finally:
        con.close()


def test_dataset_size(catalog) -> None:
    con = duckdb.connect(str(catalog), read_only=True)
    assert con.sql("SELECT count(*) FROM packets").fetchall()[0][0] == PACKETS // 4 * 4
    con.close()
    assert PACKETS >= 100_000_000 or "TRACECORE_PERF_PACKETS" in os.environ


def test_link_util_10ms_within_2s(catalog) -> None:
    wall, cpu, rows = best_of_three(catalog, "SELECT * FROM link_util(bin_ns := 10000000)")
    print(
        f"link_util 10 ms on {PACKETS:,} packets: {wall:.2f} s wall, {cpu:.2f} CPU-s per core, {rows:,} rows"
    )
    assert rows == 8 * SECONDS * 100  # 8 directed ring pairs (data + ACK direction), every 10 ms bin
    assert min(wall, cpu) <= 2.0


def test_flow_matrix_within_1s(catalog) -> None:
    wall, cpu, rows = best_of_three(catalog, "SELECT * FROM flow_matrix")
    print(f"flow_matrix on {PACKETS:,} packets: {wall:.2f} s wall, {cpu:.2f} CPU-s per core, {rows} rows")
    assert rows == 8
    assert min(wall, cpu) <= 1.0
