"""Bad and unusual input: cut-off and corrupt files keep every good packet; limits hold."""

from __future__ import annotations

import gzip
import lzma
import struct
from pathlib import Path

import pyarrow as pa
import pytest
import zstandard

from tracecore.errors import CaptureError, NotACaptureError, UsageError
from tracecore.reader import CaptureReader, read_batches, read_capture, source
from tracecore.schema import PACKET_SCHEMA

HTTP = "dpkt__http.pcap"  # 43 Ethernet/IPv4/TCP packets, little-endian µs pcap
MULTI = "pcapplusplus__many_interfaces-1.pcapng"  # 64 EPBs on 11 interfaces


def record_offsets(data: bytes) -> list[int]:
    """Byte offset of each record of a little-endian classic pcap."""
    out, pos = [], 24
    while pos + 16 <= len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return out


def block_offsets(data: bytes) -> list[tuple[int, int]]:
    """(offset, type) of each block of a little-endian pcapng."""
    out, pos = [], 0
    while pos + 8 <= len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        out.append((pos, btype))
        pos += blen
    return out


def rows_of(batches: list[pa.RecordBatch]) -> list[dict]:
    """Rows as dicts: batches carry different address dictionaries, so compare values."""
    return pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist()


def collect(
    path: Path, batch_rows: int = 1 << 20
) -> tuple[list[pa.RecordBatch], CaptureReader, Exception | None]:
    reader = CaptureReader(path, batch_rows=batch_rows)
    got: list[pa.RecordBatch] = []
    try:
        for batch in reader.batches():
            got.append(batch)
    except CaptureError as exc:
        return got, reader, exc
    return got, reader, None


def test_corrupt_caplen_mid_file_raises_after_the_good_batches(tmp_path: Path, corpus_dir: Path) -> None:
    data = bytearray((corpus_dir / HTTP).read_bytes())
    offsets = record_offsets(bytes(data))
    struct.pack_into("<I", data, offsets[20] + 8, 0x7FFFFFFF)
    path = tmp_path / "corrupt.pcap"
    path.write_bytes(bytes(data))
    batches, _, error = collect(path, batch_rows=6)
    assert isinstance(error, CaptureError)
    assert (error.offset, error.packets_read) == (offsets[20], 20)
    assert str(error).startswith(f"{path}: corrupt record: captured length 2147483647")
    assert f"at byte offset {offsets[20]}" in str(error)
    assert [b.num_rows for b in batches] == [6, 6, 6, 2]
    assert rows_of(batches) == read_capture(corpus_dir / HTTP).slice(0, 20).to_pylist()


@pytest.mark.parametrize("cut", [1, 8, 15, 16, 40])
def test_truncated_last_record_keeps_complete_packets(tmp_path: Path, corpus_dir: Path, cut: int) -> None:
    data = (corpus_dir / HTTP).read_bytes()
    last = record_offsets(data)[-1]
    path = tmp_path / "cut.pcap"
    path.write_bytes(data[: last + cut])
    batches, reader, error = collect(path)
    assert error is None
    assert sum(b.num_rows for b in batches) == 42
    assert reader.warnings == [
        f"{path}: file cut short: incomplete record at byte offset {last} ({cut} bytes ignored); "
        "the 42 complete packets before it are kept"
    ]


def test_pcapng_trailer_mismatch_and_truncation(tmp_path: Path, corpus_dir: Path) -> None:
    data = bytearray((corpus_dir / MULTI).read_bytes())
    epbs = [off for off, btype in block_offsets(bytes(data)) if btype == 6]
    bad = epbs[30]
    blen = struct.unpack_from("<I", data, bad + 4)[0]
    struct.pack_into("<I", data, bad + blen - 4, blen + 4)
    path = tmp_path / "bad.pcapng"
    path.write_bytes(bytes(data))
    batches, _, error = collect(path, batch_rows=8)
    assert isinstance(error, CaptureError)
    assert (error.offset, error.packets_read) == (bad, 30)
    assert "trailing length" in str(error)
    assert sum(b.num_rows for b in batches) == 30

    cut = tmp_path / "cut.pcapng"
    cut.write_bytes((corpus_dir / MULTI).read_bytes()[: epbs[-1] + 20])
    batches, reader, error = collect(cut)
    assert error is None
    assert sum(b.num_rows for b in batches) == 63
    assert f"byte offset {epbs[-1]}" in reader.warnings[0]


def test_pcapng_packet_for_undeclared_interface(tmp_path: Path, corpus_dir: Path) -> None:
    data = bytearray((corpus_dir / MULTI).read_bytes())
    epb = [off for off, btype in block_offsets(bytes(data)) if btype == 6][5]
    struct.pack_into("<I", data, epb + 8, 99)
    path = tmp_path / "iface.pcapng"
    path.write_bytes(bytes(data))
    _, _, error = collect(path)
    assert isinstance(error, CaptureError)
    assert "interface 99 not declared" in str(error)
    assert (error.offset, error.packets_read) == (epb, 5)


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [(".gz", gzip.compress), (".xz", lzma.compress), (".zst", zstandard.ZstdCompressor().compress)],
)
def test_compressed_same_as_plain_and_name_not_trusted(
    tmp_path: Path, corpus_dir: Path, suffix: str, compress
) -> None:
    plain = read_capture(corpus_dir / MULTI).to_pylist()
    blob = compress((corpus_dir / MULTI).read_bytes())
    named = tmp_path / f"capture.pcapng{suffix}"
    named.write_bytes(blob)
    misnamed = tmp_path / "capture.pcap0"  # a rotated file name; the magic bytes decide
    misnamed.write_bytes(blob)
    for path in (named, misnamed):
        reader = CaptureReader(path, batch_rows=10)
        assert rows_of(list(reader.batches())) == plain
        assert reader.stats.formats == {"pcapng-le", {".gz": "gzip", ".xz": "xz", ".zst": "zstd"}[suffix]}


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".xz", lzma.compress)])
def test_cut_compressed_stream_keeps_decoded_packets(
    tmp_path: Path, corpus_dir: Path, suffix: str, compress
) -> None:
    blob = compress((corpus_dir / HTTP).read_bytes())
    path = tmp_path / f"cut.pcap{suffix}"
    path.write_bytes(blob[: len(blob) * 2 // 3])
    batches, reader, error = collect(path)
    assert error is None
    rows = sum(b.num_rows for b in batches)
    assert 0 < rows < 43
    assert rows_of(batches) == read_capture(corpus_dir / HTTP).slice(0, rows).to_pylist()
    assert "file cut short" in reader.warnings[0]
    assert "stream stopped" in reader.warnings[1]


def test_rotated_file_name_is_just_a_pcap(tmp_path: Path, corpus_dir: Path) -> None:
    path = tmp_path / "x.pcap0"
    path.write_bytes((corpus_dir / HTTP).read_bytes())
    assert read_capture(path).to_pylist() == read_capture(corpus_dir / HTTP).to_pylist()


def test_gzip_of_garbage_is_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt.gz"
    path.write_bytes(gzip.compress(b"just some text, long enough to have a magic"))
    with pytest.raises(NotACaptureError, match=r"notes\.txt\.gz: not a pcap or pcapng capture"):
        list(read_batches(path))


def test_address_table_full_splits_batches(tmp_path: Path) -> None:
    """70 000 packets with distinct addresses: > 65 536 per batch forces an early batch end."""
    n = 70_000
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 228))
    for i in range(n):
        ip = struct.pack(">BBHHHBBHII", 0x45, 0, 20, 0, 0, 64, 17, 0, 0x0A000000 + i, 0xC0000000 + i)
        out += struct.pack("<IIII", i, 0, 20, 20) + ip
    path = tmp_path / "many.pcap"
    path.write_bytes(bytes(out))
    batches = list(read_batches(path))
    assert len(batches) == 3  # 32 767 packets fill 65 534 addresses; then again; then the rest
    assert sum(b.num_rows for b in batches) == n
    table = pa.Table.from_batches(batches)
    assert table.column("src_ip")[n - 1].as_py() == "10.1.17.111"  # 0x0A000000 + 69 999
    assert table.column("dst_ip")[40_000].as_py() == "192.0.156.64"
    assert table.column("ts_ns")[n - 1].as_py() == (n - 1) * 10**9


def test_batch_rows_must_be_positive(corpus_dir: Path) -> None:
    with pytest.raises(UsageError, match="batch_rows"):
        CaptureReader(corpus_dir / HTTP, batch_rows=0)


@pytest.mark.parametrize(
    ("minor", "stored"), [(0, (1500, 60)), (2, (1500, 60)), (3, (1500, 60)), (4, (60, 1500))]
)
def test_pcap_lengths_swapped_before_v2_3(tmp_path: Path, minor: int, stored: tuple[int, int]) -> None:
    """pcap 2.0-2.2 store (len, caplen) in the (caplen, len) slots; 2.3 maybe (when caplen > len).
    Every variant here means a 60-byte capture of a 1500-byte frame."""
    frame = bytes(60)
    path = tmp_path / f"v2{minor}.pcap"
    path.write_bytes(
        struct.pack("<IHHiIII", 0xA1B2C3D4, 2, minor, 0, 0, 65535, 1)
        + struct.pack("<IIII", 1, 2, *stored)
        + frame
    )
    table = read_capture(path)
    assert (table.column("cap_len")[0].as_py(), table.column("frame_len")[0].as_py()) == (60, 1500)
    assert table.column("ts_ns")[0].as_py() == 1_000_002_000


@pytest.mark.parametrize("segment", [64, 1000, 4096])
def test_small_windows_give_the_same_rows(
    monkeypatch: pytest.MonkeyPatch, corpus_dir: Path, tmp_path: Path, segment: int
) -> None:
    """Records that straddle window ends (and windows smaller than a record) change nothing,
    for memory-mapped and for decompressed input."""
    for name in (HTTP, MULTI, "tcpdump__kday2_pre-eabcd87.pcap"):
        whole = CaptureReader(corpus_dir / name)
        want = rows_of(list(whole.batches()))
        packed = tmp_path / f"{name}.gz"
        packed.write_bytes(gzip.compress((corpus_dir / name).read_bytes()))
        monkeypatch.setattr(source, "SEGMENT", segment)
        monkeypatch.setattr(source, "CHUNK", segment)
        for path in (corpus_dir / name, packed):
            small = CaptureReader(path, batch_rows=5)
            assert rows_of(list(small.batches())) == want
            assert [w.replace(str(path), "F") for w in small.warnings] == [
                w.replace(str(corpus_dir / name), "F") for w in whole.warnings
            ]
        monkeypatch.undo()


def pcapng(tsresol: int | None, stamps: list[int], offset_s: int = 0) -> bytes:
    """A little-endian pcapng: SHB, one Ethernet IDB (with if_tsresol and if_tsoffset when given) and
    one EPB per raw 64-bit timestamp, each holding a 60-byte frame."""

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    options = b""
    if tsresol is not None:
        options += struct.pack("<HHB3x", 9, 1, tsresol)
    if offset_s:
        options += struct.pack("<HHq", 14, 8, offset_s)
    idb = block(
        1, struct.pack("<HHI", 1, 0, 65535) + options + (struct.pack("<HH", 0, 0) if options else b"")
    )
    frame = bytes(60)
    epbs = b"".join(
        block(6, struct.pack("<IIIII", 0, t >> 32, t & 0xFFFFFFFF, len(frame), len(frame)) + frame)
        for t in stamps
    )
    return shb + idb + epbs


@pytest.mark.parametrize(
    ("tsresol", "last_good", "too_late", "unit"),
    [
        (0, (2**63 - 1) // 10**9, 2**64 - 1, 10**9),  # seconds: the ts_ns −1e9
        (6, (2**63 - 1) // 10**3, 2**64 - 1, 10**3),  # µs (the default): the issue's −1000
        (9, 2**63 - 1, 2**63, 1),  # ns: one past int64
        (0x80 | 10, ((2**63 - 1) // 10**9) << 10, 2**64 - 1, None),  # 2^-10 s units
    ],
)
def test_pcapng_timestamps_past_int64_ns_carry_the_previous_time(
    tmp_path: Path, tsresol: int, last_good: int, too_late: int, unit: int | None
) -> None:
    """Before: they wrapped silently (2^64−1 s became ts_ns −1e9, 1969); then they stopped the read,
    losing every packet after them. Now the packet is kept with the previous packet's time, as a simple
    packet block, counted in one warning, and the read goes on."""
    path = tmp_path / "late.pcapng"
    path.write_bytes(pcapng(tsresol, [1, last_good, too_late, too_late, 5]))
    batches, reader, error = collect(path)
    assert error is None, error
    stamps = [row["ts_ns"] for row in rows_of(batches)]
    assert len(stamps) == 5
    assert stamps[1] > 9_200_000_000_000_000_000  # the last representable second (or ns) is kept exact
    assert stamps[2] == stamps[3] == stamps[1]
    if unit:
        assert (stamps[0], stamps[4]) == (unit, 5 * unit)
    assert all(ts >= 0 for ts in stamps)
    assert reader.stats.late_timestamps == 2
    assert reader.warnings == [
        f"{path}: 2 pcapng packet blocks with a time past 2262, beyond int64 nanoseconds (a bogus clock): "
        "kept with the previous packet's time"
    ]


def test_an_interface_offset_past_int64_ns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "offset.pcapng"
    path.write_bytes(pcapng(6, [1], offset_s=2**62))
    _, _, error = collect(path)
    assert isinstance(error, CaptureError)
    assert "if_tsoffset 4611686018427387904 s is not representable" in str(error)


def test_read_keeps_a_packet_that_is_too_late_and_says_so(tmp_path: Path) -> None:
    from tests.commands import tracecore

    path = tmp_path / "late.pcapng"
    path.write_bytes(pcapng(0, [1_700_000_000, 2**64 - 1, 1_700_000_001]))
    res = tracecore("read", str(path), "--format", "csv")
    assert res.returncode == 0, res.stderr
    times = [line.split(",")[0] for line in res.stdout.splitlines()[1:]]
    assert times == ["1700000000000000000", "1700000000000000000", "1700000001000000000"]
    assert res.stderr.splitlines() == [
        f"Warning: {path}: 1 pcapng packet block with a time past 2262, beyond int64 nanoseconds (a bogus "
        "clock): kept with the previous packet's time"
    ]


def test_a_negative_offset_brings_a_late_counter_back(tmp_path: Path) -> None:
    """The check is on the time with the interface's if_tsoffset, exactly: a counter past 2262 that a
    negative offset brings back is read, not carried."""
    late = (2**63 - 1) // 10**9 + 5  # seconds: 5 s past int64 ns
    path = tmp_path / "offset.pcapng"
    path.write_bytes(pcapng(0, [late, late + 11], offset_s=-10))
    batches, reader, error = collect(path)
    assert error is None, error
    assert [row["ts_ns"] for row in rows_of(batches)] == [(late - 10) * 10**9] * 2
    assert reader.stats.late_timestamps == 1


def test_zero_filled_records_stop_the_read_as_corrupt(tmp_path: Path, corpus_dir: Path) -> None:
    """A record of original length 0 is no packet: zero-filled data (a sparse or wiped file) read as
    endless empty packets at ts 0 before. The packets before it are kept, the offset names it."""
    data = (corpus_dir / HTTP).read_bytes()
    path = tmp_path / "wiped.pcap"
    path.write_bytes(data + bytes(4096))
    batches, _, error = collect(path)
    assert isinstance(error, CaptureError)
    assert (error.offset, error.packets_read) == (len(data), 43)
    assert str(error) == (
        f"{path}: corrupt record: original length 0, which no real packet has (zero-filled or garbage "
        f"data) at byte offset {len(data)}"
    )
    assert rows_of(batches) == read_capture(corpus_dir / HTTP).to_pylist()


def test_read_refuses_a_gzip_bomb_of_zeros_in_one_line(tmp_path: Path, corpus_dir: Path) -> None:
    """Before: a 1 MB gzip expanding to 1 GiB of zeros behind a pcap header was accepted as 67 M
    zero-length packets at ts 0 without a warning (here 64 KiB → 64 MiB: 4 M such packets, exit 0)."""
    from tests.commands import tracecore

    data = (corpus_dir / HTTP).read_bytes()
    path = tmp_path / "bomb.pcap.gz"
    path.write_bytes(gzip.compress(data + bytes(64 << 20), compresslevel=9))
    assert path.stat().st_size < 100_000
    res = tracecore("read", str(path), "--format", "csv")
    assert res.returncode == 3, res.stderr
    assert res.stdout.count("\n") == 44  # the header and the 43 real packets
    assert res.stderr.splitlines() == [
        f"Error: {path}: corrupt record: original length 0, which no real packet has (zero-filled or "
        f"garbage data), in the decompressed gzip stream at byte offset {len(data)}"
    ]
