"""The bins ingest keeps (bytes per address pair and millisecond, `_link_bins`) against the packets they sum:
per capture as the reader yields it, and in the catalog through incremental ingests, de-duplication and
datasets written before bins were kept. The link views' values over both are in tests/test_views.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tests.test_ingest_support import copy_run, records, write_pcap
from tracecore.ingest import ingest, link_bins, open_catalog
from tracecore.ingest.catalog import LINK_BINS_FROM_PACKETS, _meta_of
from tracecore.reader import CaptureReader
from tracecore.reader.batch import null_columns
from tracecore.sample import BOTH_DIRECTIONS_RUN, SAMPLE_RUN, both_directions_run, sample_run
from tracecore.schema import PACKET_SCHEMA

SHARED = Path(__file__).resolve().parents[2] / "shared"
CAPTURES = sorted(
    [p for p in (SHARED / "corpus").glob("*.pcap*") if "invalid" not in p.name]
    + list((SHARED / "corpus-rdma").glob("*.pcap"))
)
SUMS = """
SELECT src_ip::VARCHAR AS src_ip, dst_ip::VARCHAR AS dst_ip, ts_ns // 1000000 AS ms,
       sum(frame_len)::BIGINT AS bytes, min(ts_ns) AS first_ns
FROM packets GROUP BY ALL"""


def _read(path: Path) -> tuple[list[pa.RecordBatch], str | None]:
    """The batches the reader yields before any error, and the error."""
    batches = []
    try:
        for batch in CaptureReader(str(path), 1 << 12, sort_batches=True).batches():
            batches.append(batch)
    except Exception as err:  # a corrupt capture: its packets before the error count
        return batches, str(err)
    return batches, None


def _assert_same(bins: pa.Table, batches: list[pa.RecordBatch]) -> None:
    con = duckdb.connect()
    con.register("bins", bins)
    con.register("packets", pa.Table.from_batches(batches, schema=PACKET_SCHEMA))
    for a, b in (("bins", f"({SUMS})"), (f"({SUMS})", "bins")):
        extra = con.execute(
            f"SELECT * FROM {a} EXCEPT ALL SELECT src_ip, dst_ip, ms, bytes, first_ns FROM {b}"
        ).fetchall()
        assert extra == [], extra[:5]
    con.close()


def test_the_corpus_is_long_enough_to_matter() -> None:
    assert len(CAPTURES) >= 60, CAPTURES


@pytest.mark.parametrize("grouping", ["slots", "sorted"])
@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_bins_sum_every_packet_the_reader_yields(path: Path, grouping: str, monkeypatch) -> None:
    """Every corpus capture (IPv4, IPv6, non-IP frames without addresses, RoCE, tunnels, pcapng with
    several interfaces), in small batches so bins straddle them, by both of `add`'s ways."""
    if grouping == "sorted":
        monkeypatch.setattr(link_bins, "SLOTS_MAX", 0)
    batches, _ = _read(path)
    bins = link_bins.LinkBins()
    for batch in batches:
        bins.add(batch)
    table = bins.table()
    assert table.schema == link_bins.BINS_SCHEMA
    _assert_same(table, batches)
    assert sum(table["bytes"].to_pylist()) == sum(sum(b.column("frame_len").to_pylist()) for b in batches)


def _batch(ts: list[int], frame_len: list[int], src: list[str | None], dst: list[str]) -> pa.RecordBatch:
    """A reader batch with only the columns the bins read set."""
    n = len(ts)
    rest = [f for f in PACKET_SCHEMA if f.name not in ("ts_ns", "frame_len", "src_ip", "dst_ip")]
    given = {
        "ts_ns": pa.array(ts, pa.int64()),
        "frame_len": pa.array(frame_len, pa.uint32()),
        "src_ip": pa.array(src, pa.string()).dictionary_encode(),
        "dst_ip": pa.array(dst, pa.string()).dictionary_encode(),
        **dict(zip((f.name for f in rest), null_columns(rest, n), strict=True)),
    }
    return pa.RecordBatch.from_arrays([given[f.name] for f in PACKET_SCHEMA], schema=PACKET_SCHEMA)


def test_milliseconds_truncate_toward_zero_as_duckdb_divides() -> None:
    """Timestamps before 1970 (a pcapng's 64-bit ticks can wrap there): -1.5 ms is in bin -1, as
    DuckDB's `ts_ns // 1000000` puts it; nulls are the bins of frames without an address."""
    ts = [-2_000_001, -1_500_000, -1_000_000, -1, 0, 999_999, 1_000_000, 1_000_001]
    src = ["a", "a", None, "a", "a", "b", "a", "a"]
    batch = _batch(ts, [60, 70, 80, 90, 100, 110, 120, 130], src, ["b"] * 8)
    bins = link_bins.LinkBins()
    bins.add(batch)
    got = {(r["src_ip"], r["ms"]): (r["bytes"], r["first_ns"]) for r in bins.table().to_pylist()}
    assert got == {
        ("a", -2): (60, -2_000_001),
        ("a", -1): (70, -1_500_000),
        (None, -1): (80, -1_000_000),
        ("a", 0): (190, -1),
        ("b", 0): (110, 999_999),
        ("a", 1): (250, 1_000_000),
    }
    _assert_same(bins.table(), [batch])


def test_a_batch_out_of_time_order_sums_each_bin_once() -> None:
    """The kernel turns a millisecond's slots into rows when the millisecond changes: a batch not in
    time order (the reader's are; `add` takes any) revisits bins, whose rows `table` sums into one."""
    ts = [5_000_100, 3_000_000, 5_000_200, 3_000_001, 5_000_050, 4_000_000, 3_999_999, 5_000_300]
    src = ["a", "a", "a", "b", "a", None, "a", "a"]
    batch = _batch(ts, [10, 20, 30, 40, 50, 60, 70, 80], src, ["c"] * 8)
    bins = link_bins.LinkBins()
    bins.add(batch)
    bins.add(_batch([3_000_500, 5_000_000], [1, 2], ["a", "a"], ["c", "c"]))  # bins straddle batches
    got = {(r["src_ip"], r["ms"]): (r["bytes"], r["first_ns"]) for r in bins.table().to_pylist()}
    assert got == {
        ("a", 3): (20 + 70 + 1, 3_000_000),
        ("b", 3): (40, 3_000_001),
        ("a", 5): (10 + 30 + 50 + 80 + 2, 5_000_000),
        (None, 4): (60, 4_000_000),
    }
    assert bins.table().num_rows == 4


def _assert_catalog_bins(out: Path, stored: bool = True) -> None:
    """`link_bins` reads the stored bins (or, `stored` false, sums packets) and equals what packets sum."""
    con = open_catalog(out)
    try:
        (sql,) = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'link_bins'").fetchone()
        assert ("_link_bins" in sql) is stored, sql
        fly = LINK_BINS_FROM_PACKETS.split(" AS\n", 1)[1]
        for a, b in (("link_bins", f"({fly})"), (f"({fly})", "link_bins")):
            extra = con.execute(f"SELECT * FROM {a} EXCEPT ALL SELECT * FROM {b}").fetchall()
            assert extra == [], extra[:5]
        assert con.execute("SELECT count(*) FROM link_bins").fetchone()[0] > 0
        for width in (1_000_000, 10_000_000, 250_000_000):
            via_bins = con.execute("SELECT * FROM link_util(bin_ns := $w)", {"w": width}).fetchall()
            via_packets = con.execute(
                "SELECT * FROM link_util(bin_ns := $w, from_ns := 0)", {"w": width}
            ).fetchall()  # a window from the first packet: every packet, summed from packets
            assert via_bins == via_packets
    finally:
        con.close()


def test_ingest_keeps_the_bins_and_the_views_read_them(tmp_path: Path) -> None:
    """Both sample runs; the both-directions one has copies `packets` hides, and so does `link_bins`."""
    out = tmp_path / "out"
    assert not ingest([sample_run(), both_directions_run()], out, jobs=2).failed
    _assert_catalog_bins(out)
    con = open_catalog(out)
    try:
        hidden = con.execute(
            "SELECT (SELECT sum(bytes) FROM _link_bins WHERE run = $r) - (SELECT sum(bytes) FROM link_bins"
            " WHERE run = $r), (SELECT sum(frame_len) FROM packets_all WHERE run = $r) - (SELECT"
            " sum(frame_len) FROM packets WHERE run = $r)",
            {"r": BOTH_DIRECTIONS_RUN},
        ).fetchone()
        assert hidden[0] == hidden[1] > 0
    finally:
        con.close()


def test_incremental_ingests_keep_replace_and_drop_each_captures_bins(tmp_path: Path) -> None:
    run, out = copy_run(tmp_path / "in"), tmp_path / "out"
    ingest([run], out, jobs=1)
    header, recs = records(run / "worker-3-tcpdump.pcap")
    write_pcap(run / "worker-3-tcpdump.pcap", header, recs[:2000])  # changed: read again
    summary = ingest([run], out, jobs=1)
    assert sorted(c.status for c in summary.captures) == ["ingested", "unchanged", "unchanged", "unchanged"]
    _assert_catalog_bins(out)
    (run / "worker-2-tcpdump.pcap").unlink()  # removed: its bins go with its packets
    ingest([run], out, jobs=1)
    _assert_catalog_bins(out)
    con = open_catalog(out)
    try:
        files = {r[0] for r in con.execute("SELECT DISTINCT file FROM _link_bins").fetchall()}
        assert files == {"worker-0-tcpdump.pcap", "worker-1-tcpdump.pcap", "worker-3-tcpdump.pcap"}
    finally:
        con.close()


def test_a_capture_cut_short_keeps_the_bins_of_the_packets_read(tmp_path: Path) -> None:
    run, out = copy_run(tmp_path / "in"), tmp_path / "out"
    header, recs = records(run / "worker-1-tcpdump.pcap")
    bad = struct.pack("<IIII", 0, 0, 1 << 30, 1 << 30)  # a record header claiming 1 GiB
    write_pcap(run / "worker-1-tcpdump.pcap", header, [*recs[:1500], bad])
    summary = ingest([run], out, jobs=1)
    assert [c.status for c in summary.captures if c.file == "worker-1-tcpdump.pcap"] == ["partial"]
    _assert_catalog_bins(out)


def test_a_dataset_from_before_the_bins_sums_packets_until_an_ingest_stores_them(tmp_path: Path) -> None:
    """What tracecore wrote before it kept bins: no `_link_bins` in the catalog nor in ingest's own copy
    of the tables. The views sum packets; the next ingest (of another run) stores every run's bins."""
    out = tmp_path / "out"
    ingest([sample_run()], out, jobs=1)
    catalog = out / "tracecore.duckdb"
    state = json.loads(_meta_of(catalog)["state"])
    del state["tables"]["_link_bins"]
    con = duckdb.connect(str(catalog))
    try:
        con.execute("DROP VIEW link_bins")
        con.execute("DROP TABLE _link_bins")
        con.execute("UPDATE _meta SET value = $v WHERE key = 'state'", {"v": json.dumps(state)})
        con.execute("UPDATE _meta SET value = 'an older queries/' WHERE key = 'views_fingerprint'")
    finally:
        con.close()
    _assert_catalog_bins(out, stored=False)  # rebuilt for today's views: the bins summed from packets
    assert not ingest([both_directions_run()], out, jobs=1).failed
    _assert_catalog_bins(out)
    con = open_catalog(out)
    try:
        runs = {r[0] for r in con.execute("SELECT DISTINCT run FROM _link_bins").fetchall()}
        assert runs == {SAMPLE_RUN, BOTH_DIRECTIONS_RUN}
    finally:
        con.close()


def test_a_capture_of_nearly_a_bin_a_packet_is_not_binned_and_the_views_sum_packets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bins that would not save memory are dropped for that capture (one row of nulls says so), the
    catalog's `link_bins` sums packets, and no later ingest computes them from the part files."""
    monkeypatch.setattr(link_bins, "KEEP_MIN_BINS", 100)
    monkeypatch.setattr(link_bins, "KEEP_PACKETS_PER_BIN", 1000)  # the sample has ~7 packets a bin
    out = tmp_path / "out"
    assert not ingest([sample_run()], out, jobs=1).failed
    _assert_catalog_bins(out, stored=False)
    monkeypatch.undo()
    assert not ingest([both_directions_run()], out, jobs=1).failed
    _assert_catalog_bins(out, stored=False)
    con = open_catalog(out)
    try:
        dropped = con.execute("SELECT run, count(*) FROM _link_bins WHERE ms IS NULL GROUP BY run").fetchall()
        assert dropped == [(SAMPLE_RUN, 4)]  # its 4 captures; the other run's are binned
        other = con.execute("SELECT count(*) FROM _link_bins WHERE run = $r", {"r": BOTH_DIRECTIONS_RUN})
        assert other.fetchone()[0] > 0
    finally:
        con.close()


@pytest.mark.parametrize("text", ["torch_ddp-resnet8w8-sgd-16-gloo-normal-ring", "", "run é∂ 名"])
@pytest.mark.parametrize("n", [0, 1, 3000])
def test_a_captures_run_and_file_repeat_on_every_bin(text: str, n: int) -> None:
    """`with_capture` puts the run and file (any text, empty too) in front of each of the bins."""
    addresses = pa.array([f"10.0.0.{i % 7}" for i in range(n)], pa.string())
    numbers = pa.array(range(n), pa.int64())
    bins = pa.Table.from_arrays([addresses] * 2 + [numbers] * 3, schema=link_bins.BINS_SCHEMA)
    table = link_bins.with_capture(bins, text, text[::-1])
    table.validate(full=True)
    assert table.schema == link_bins.TABLE_SCHEMA
    assert table["run"].to_pylist() == [text] * n
    assert table["file"].to_pylist() == [text[::-1]] * n
    assert table.drop_columns(["run", "file"]).equals(bins)
