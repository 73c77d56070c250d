"""A dataset whose byte totals pass 4 GiB sums exactly in DuckDB, Polars, pandas and pyarrow.

The capture is generated (70 000 TCP frames of 65 535 bytes on the wire, 54 captured): the record
header's orig_len is what `frame_len` stores, so 4.6 GB of traffic takes 4.9 MB of pcap.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tracecore.ingest import ingest, open_catalog

N = 70_000
WIRE = 65_535  # frame_len of every record
IP_LEN = WIRE - 14  # IPv4 total length after the Ethernet header
PAYLOAD = IP_LEN - 20 - 20  # l4_payload_len: IP length minus IPv4 and TCP headers
CAPTURED = 14 + 20 + 20
FRAME_TOTAL = N * WIRE  # 4 587 450 000 > 2**32
PAYLOAD_TOTAL = N * PAYLOAD
CAP_TOTAL = N * CAPTURED
RUN = "gen-bigframes-sgd-8-gloo-normal-ring"


def write_big_frames_pcap(path: Path, n: int = N, src: str = "10.0.0.1", dst: str = "10.0.0.2") -> None:
    """A little-endian µs pcap of `n` Ethernet/IPv4/TCP frames, each 65 535 bytes on the wire."""
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + b"\x08\x00"
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, IP_LEN, 0, 0x4000, 64, 6, 0, bytes(map(int, src.split("."))),
        bytes(map(int, dst.split("."))),
    )  # fmt: skip
    tcp = struct.pack(">HHIIBBHHH", 40000, 29500, 1, 0, 5 << 4, 0x10, 65535, 0, 0)
    frame = eth + ip + tcp
    assert len(frame) == CAPTURED
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 1)]
    for i in range(n):
        out.append(struct.pack("<IIII", 1_700_000_000 + i // 1000, (i % 1000) * 1000, CAPTURED, WIRE))
        out.append(frame)
    path.write_bytes(b"".join(out))


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    run = root / "pcaps" / RUN
    run.mkdir(parents=True)
    write_big_frames_pcap(run / "worker-0-tcpdump.pcap")
    summary = ingest([run], root / "data", jobs=1)
    assert not summary.failed, summary.to_json()
    return root / "data"


def test_duckdb_sums_pass_4_gib(big: Path) -> None:
    con = open_catalog(big)
    got = con.execute(
        "SELECT count(*), sum(frame_len), sum(cap_len), sum(l4_payload_len), typeof(frame_len) FROM packets"
        " GROUP BY ALL"
    ).fetchall()[0]
    assert got == (N, FRAME_TOTAL, CAP_TOTAL, PAYLOAD_TOTAL, "BIGINT")
    assert con.execute("SELECT packets, bytes FROM workers").fetchall()[0] == (N, FRAME_TOTAL)
    assert con.execute("SELECT packets, bytes FROM captures").fetchall()[0] == (N, FRAME_TOTAL)
    con.close()


def test_polars_sums_pass_4_gib_eager_and_lazy(big: Path) -> None:
    glob = str(big / "packets" / "**" / "*.parquet")
    cols = [pl.col("frame_len").sum(), pl.col("cap_len").sum(), pl.col("l4_payload_len").sum()]
    lazy = pl.scan_parquet(glob).select(cols).collect().row(0)
    eager = pl.read_parquet(glob).select(cols).row(0)
    assert lazy == eager == (FRAME_TOTAL, CAP_TOTAL, PAYLOAD_TOTAL)
    workers = pl.read_parquet(big / "tables" / "workers.parquet")
    assert workers["bytes"].sum() == FRAME_TOTAL


def test_pandas_and_pyarrow_sums_pass_4_gib(big: Path) -> None:
    frame = pd.read_parquet(big / "packets")
    assert int(frame["frame_len"].sum()) == FRAME_TOTAL
    assert int(frame["l4_payload_len"].sum()) == PAYLOAD_TOTAL
    import pyarrow.compute as pc

    table = ds.dataset(big / "packets", format="parquet", partitioning="hive").to_table()
    assert pc.sum(table["frame_len"]).as_py() == FRAME_TOTAL
    assert pc.sum(table["l4_payload_len"]).as_py() == PAYLOAD_TOTAL


def test_stored_byte_columns_are_int64(big: Path) -> None:
    """The wrap is impossible for any reader, not only for the four above: the files say int64."""
    for part in sorted((big / "packets").rglob("*.parquet")):
        schema = pq.read_schema(part)
        for name in ("frame_len", "cap_len", "l4_payload_len"):
            assert schema.field(name).type == pa.int64(), (part, name)


SUMS = "SELECT sum(frame_len) AS bytes, sum(frame_len)::HUGEINT * 4000000000 AS beyond_int64 FROM packets"


def test_ad_hoc_sums_come_back_as_int64(big: Path, tmp_path: Path) -> None:
    """`sum` of a BIGINT is DuckDB's HUGEINT: before, `tracecore sql` wrote it as decimal128(38, 0), pandas
    got Decimal objects and Polars a Decimal column (issue 25, item 8). A total past int64 stays whole."""
    import tracecore
    from tests.commands import tracecore as cli

    out = tmp_path / "sums.parquet"
    res = cli("sql", SUMS, "--data", str(big), "--format", "parquet", "--out", str(out))
    assert res.returncode == 0, res.stderr
    table = pq.read_table(out)
    assert table.schema.field("bytes").type == pa.int64()
    assert table.schema.field("beyond_int64").type == pa.decimal128(38, 0)
    assert table.to_pylist() == [{"bytes": FRAME_TOTAL, "beyond_int64": FRAME_TOTAL * 4_000_000_000}]
    with tracecore.open(big) as dataset:
        frame = dataset.sql(SUMS, as_="pandas")
        assert str(frame["bytes"].dtype) == "int64"
        assert frame["bytes"].tolist() == [FRAME_TOTAL]
        assert dataset.sql(SUMS, as_="polars").schema["bytes"] == pl.Int64
