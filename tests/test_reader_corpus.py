"""The reader against tshark's reading of every real capture in ../shared/corpus.

Every packet is compared: count, timestamp to the nanosecond, frame and captured length,
interface; for decoded link types also addresses (outermost IP header), protocol and ports.
Where tshark's answer differs on purpose or by bug, EXCEPTIONS names the file and packets,
says why, and the test asserts what tracecore gives instead. Fields tshark does not print
(tcp_flags, l4_payload_len, ip_fragment) are compared with the dpkt-based oracle. The TCP header
fields (tcp_seq, tcp_ack, tcp_window, tcp_window_scale) are compared with tshark run by the test
(expected/ predates them) and with the oracle.
"""

from __future__ import annotations

import csv
import struct
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from tests import oracle
from tests.conftest import CORPUS, require_tool
from tracecore.errors import CaptureError, NotACaptureError
from tracecore.reader import CaptureReader
from tracecore.reader.linktypes import DECODED
from tracecore.schema import PACKET_SCHEMA


def _manifest() -> list[str]:
    path = CORPUS / "MANIFEST.csv"
    if not path.is_file():
        return ["<corpus missing>"]  # the corpus_dir fixture then fails the test loudly
    with path.open(newline="") as f:
        return [row["file"] for row in csv.DictReader(f)]


FILES = _manifest()
# Captures of the corpus' sources that ../shared/corpus lacks, kept in tests/data/captures (README there):
# tshark's reading of them is made by the test, with the corpus README's command.
EXTRA = Path(__file__).resolve().parent / "data" / "captures"
EXTRA_FILES = ["pcapplusplus__pcapng-example.pcapng"]


def capture(corpus: Path, name: str) -> Path:
    """A capture of FILES (the shared corpus) or EXTRA_FILES."""
    return EXTRA / name if name in EXTRA_FILES else corpus / name


def _range(a: int, b: int) -> set[int]:
    return set(range(a, b + 1))


# Packets (1-based, as tshark numbers them) where tshark fills tcp/udp ports from the header
# quoted inside an ICMP error (or from the IPv6 packet inside a 6in4 tunnel, ip proto 41).
# tracecore reports ports of the outermost IP packet's own transport only: null for ICMP
# and for proto 41.
PORTS_FROM_INNER_HEADER: dict[str, set[int]] = {
    "dpkt__nb6-http.pcap": {34},  # ICMP port unreachable quoting UDP/DNS
    "pcapplusplus__IcmpPackets.pcap": {5, 6, 13},  # ICMP errors quoting UDP, UDP, TCP
    "tcpreplay__test.pcap": {51, 152, 154, 160, 162, 173},  # ICMP errors quoting UDP/DNS
    "zeek__icmp-destunreach-udp.pcap": {1},  # ICMP dest-unreachable quoting UDP/DNS
    # IPv6-in-IPv4: tshark's ports are those of the inner IPv6 packet's TCP/UDP (packet 3:
    # of the TCP header quoted inside an inner ICMPv6 error).
    "ndpi__6in4tunnel.pcap": {3}
    | _range(18, 55)
    | _range(62, 65)
    | _range(82, 85)
    | _range(87, 90)
    | _range(92, 121),
}

# tshark's ipv6.nxt is the first Next Header (0 hop-by-hop, 44 fragment); tracecore's
# ip_proto is the transport after walking the extension headers: {packet: ip_proto}.
IPV6_TRANSPORT_AFTER_EXT_HEADERS: dict[str, dict[int, int]] = {
    "arkime__v6-http.pcap": {4: 58, 14: 58},  # hop-by-hop, then ICMPv6 (MLD)
    "pcapplusplus__ip6_fragments.pcap": dict.fromkeys(range(1, 37), 17),  # fragment header, then UDP
}

# tshark bug: it computes usec * 1000 in 32 bits, so an out-of-range sub-second field wraps
# (1418145370 s + 2147483648 µs prints as 1418145370.000000000; 68157443 µs as a negative
# time). tracecore gives sec * 1e9 + usec * 1000 as the brief says: {packet: ts_ns}.
TSHARK_SUBSECOND_OVERFLOW: dict[str, dict[int, int]] = {
    "tcpdump__timestamp_invalid_micro.pcap": {3: 1418145370 * 10**9 + 2147483648 * 1000},
    "tcpdump__cfm_sender_id-oobr_pre-18d7f66.pcap": {1: 1398322701 * 10**9 + 68157443 * 1000},
}

# pcapng packet blocks whose time lies past int64 ns (an interface with a bogus clock: tshark prints
# 18446744073204.126329 s, the year 586524); tracecore gives them the previous packet's time, as a Simple
# Packet Block, where it stopped the read before and lost them: {file: packets}.
TIME_PAST_INT64_NS: dict[str, set[int]] = {"pcapplusplus__pcapng-example.pcapng": _range(60, 159)}

# Files with a corrupt header or record: (exception class, message part, byte offset, packets kept).
ERRORS: dict[str, tuple[type[CaptureError], str, int, int]] = {
    "libpcap__pcap-invalid-version-1.pcap": (CaptureError, "unsupported pcap version 1.4", 4, 0),
    "libpcap__pcapng-invalid-vers-1.pcapng": (CaptureError, "unsupported pcapng version 0.1", 0, 0),
    "libpcap__shb-option-too-long.pcapng": (CaptureError, "trailing length 808464432 differs from 52", 0, 0),
    "tcpdump__cfm_sender_id-oobr_pre-18d7f66.pcap": (CaptureError, "captured length 392950", 74, 1),
    "tcpdump__kday1_pre-eabcd87.pcap": (CaptureError, "captured length 138952731", 222, 1),
}

# Files cut short inside their last record: the byte offset of the incomplete record.
TRUNCATED: dict[str, int] = {
    "dpkt__truncated_dns_2.pcap": 240,
    "tcpdump__aoe-oobr-1_pre-18d7f66.pcap": 74,
    "tcpdump__kday2_pre-eabcd87.pcap": 897,
}

# Files whose frames have a link type tracecore does not decode (no IP layer: ip_version,
# addresses, protocol and ports are null): {file: link types}. Their frames are still compared
# with tshark, which finds no IP in them either, except where ADDRESSES_UNDER_UNDECODED_LINK says.
UNDECODED_LINK_TYPES: dict[str, set[int]] = {
    "libpcap__Network_Join_Nokia_Mobile.pcap": {105},  # IEEE 802.11: management/EAPOL frames
    "libpcap__wpa-Induction.pcap": {127},  # radiotap + 802.11: management/EAPOL frames
    "tcpdump__802_15_4-data.pcap": {195},  # IEEE 802.15.4 with 6LoWPAN
}

# Packets of an undecoded link type where tshark decodes an IP layer tracecore leaves null.
ADDRESSES_UNDER_UNDECODED_LINK: dict[str, set[int]] = {
    "tcpdump__802_15_4-data.pcap": {1},  # tshark decompresses the 6LoWPAN-compressed IPv6 header
}

# pcapng Custom Blocks that tshark 4.0 emits as frames of their own (no interface, 'data'):
# {file: how many}; tshark_rows drops them, and only from these files.
CUSTOM_BLOCK_FRAMES: dict[str, int] = {"pcapngtestgen__le-basic-test018.pcapng": 4}

EXCEPTION_TABLES = (
    PORTS_FROM_INNER_HEADER,
    IPV6_TRANSPORT_AFTER_EXT_HEADERS,
    TSHARK_SUBSECOND_OVERFLOW,
    TIME_PAST_INT64_NS,
    UNDECODED_LINK_TYPES,
    ADDRESSES_UNDER_UNDECODED_LINK,
    CUSTOM_BLOCK_FRAMES,
)


def read_all(path: Path, batch_rows: int = 7) -> tuple[list[dict], CaptureReader, CaptureError | None]:
    """Rows read (small batches, to cross batch boundaries), the reader, and any error."""
    reader = CaptureReader(path, batch_rows=batch_rows)
    batches: list[pa.RecordBatch] = []
    error = None
    try:
        for batch in reader.batches():
            assert batch.schema == PACKET_SCHEMA
            assert 0 < batch.num_rows <= batch_rows
            batches.append(batch)
    except CaptureError as exc:
        error = exc
    return pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist(), reader, error


# the corpus README's tshark command (expected/<file>.tsv)
TSHARK_FIELDS = ("frame.number", "frame.time_epoch", "frame.len", "frame.cap_len", "ip.src", "ipv6.src",
                 "ip.dst", "ipv6.dst", "ip.proto", "ipv6.nxt", "tcp.srcport", "udp.srcport", "tcp.dstport",
                 "udp.dstport", "frame.interface_id", "frame.protocols")  # fmt: skip


def tshark_rows(corpus: Path, name: str) -> list[dict]:
    if name in EXTRA_FILES:
        argv = [require_tool("tshark"), "-n", "-r", str(EXTRA / name), "-o", "ip.defragment:FALSE", "-o",
                "ipv6.defragment:FALSE", "-T", "fields", "-E", "header=y", "-E", "separator=/t", "-E",
                "occurrence=f", "-E", "quote=n",
                *(arg for f in TSHARK_FIELDS for arg in ("-e", f))]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        rows = list(csv.DictReader(out.splitlines(), delimiter="\t"))
    else:
        with (corpus / "expected" / f"{name}.tsv").open(newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    # tshark 4.0 emits pcapng Custom Blocks as frames of their own (no interface, 'data').
    kept = [r for r in rows if not (r["frame.interface_id"] == "" and r["frame.protocols"] == "data")]
    assert len(rows) - len(kept) == CUSTOM_BLOCK_FRAMES.get(name, 0), name
    return kept


def tshark_ns(text: str) -> int:
    """frame.time_epoch as ns; the fraction is tshark's unnormalised nanosecond field."""
    sign = -1 if text.startswith("-") else 1
    sec, frac = text.lstrip("-").split(".")
    return sign * (int(sec) * 10**9 + int(frac))


def _int(text: str) -> int | None:
    return int(text) if text else None


@pytest.mark.parametrize("name", FILES + EXTRA_FILES)
def test_matches_tshark(corpus_dir: Path, name: str) -> None:
    rows, reader, error = read_all(capture(corpus_dir, name))
    expected = tshark_rows(corpus_dir, name)
    if name in ERRORS:
        cls, text, offset, kept = ERRORS[name]
        assert isinstance(error, cls), error
        assert text in str(error)
        assert name in str(error)
        assert (error.offset, error.packets_read, len(rows)) == (offset, kept, kept)
    else:
        assert error is None, error
    if name in TRUNCATED:
        assert len(reader.warnings) == 1
        assert f"byte offset {TRUNCATED[name]}" in reader.warnings[0]
    late = TIME_PAST_INT64_NS.get(name, set())
    assert reader.stats.late_timestamps == len(late), name
    if late:
        assert reader.warnings == [
            f"{capture(corpus_dir, name)}: {len(late)} pcapng packet blocks with a time past 2262, beyond "
            "int64 nanoseconds (a bogus clock): kept with the previous packet's time"
        ]
    # tshark rejects the files with a bad version outright; it reads the other corrupt ones
    # up to the error, like tracecore.
    expected_count = 0 if name.startswith("libpcap__") and name in ERRORS else len(expected)
    assert len(rows) == expected_count
    assert len(rows) == reader.stats.packets

    previous_ts = 0
    undecoded: set[int] = set()
    for number, (got, exp) in enumerate(zip(rows, expected, strict=False), start=1):
        where = f"{name} packet {number}"
        if number in late:  # tracecore carries the previous packet's time
            assert tshark_ns(exp["frame.time_epoch"]) > 2**63 - 1, f"{where}: exception no longer needed"
            want_ts = previous_ts
        elif exp["frame.time_epoch"]:
            want_ts = TSHARK_SUBSECOND_OVERFLOW.get(name, {}).get(number, tshark_ns(exp["frame.time_epoch"]))
            if number in TSHARK_SUBSECOND_OVERFLOW.get(name, {}):
                assert want_ts != tshark_ns(exp["frame.time_epoch"]), f"{where}: exception no longer needed"
        else:  # Simple Packet Block: no timestamp; tracecore carries the previous one
            want_ts = previous_ts
        assert got["ts_ns"] == want_ts, where
        previous_ts = got["ts_ns"]
        assert (got["frame_len"], got["cap_len"]) == (int(exp["frame.len"]), int(exp["frame.cap_len"])), where
        assert got["interface"] == int(exp["frame.interface_id"] or 0), where
        src = exp["ip.src"] or exp["ipv6.src"] or None
        if got["link_type"] not in DECODED:
            assert got["link_type"] in UNDECODED_LINK_TYPES.get(name, set()), where
            undecoded.add(got["link_type"])
            nulls = ("ip_version", "src_ip", "dst_ip", "ip_proto", "src_port", "dst_port", "tcp_flags")
            assert [got[k] for k in nulls] == [None] * len(nulls), where
            if number in ADDRESSES_UNDER_UNDECODED_LINK.get(name, set()):
                assert src is not None, f"{where}: exception no longer needed"
                continue
        dst = exp["ip.dst"] or exp["ipv6.dst"] or None
        assert (got["src_ip"], got["dst_ip"]) == (src, dst), where
        assert got["ip_version"] == (None if src is None else (4 if exp["ip.src"] else 6)), where
        proto = _int(exp["ip.proto"] or exp["ipv6.nxt"])
        if number in IPV6_TRANSPORT_AFTER_EXT_HEADERS.get(name, {}):
            assert proto != IPV6_TRANSPORT_AFTER_EXT_HEADERS[name][number], (
                f"{where}: exception no longer needed"
            )
            proto = IPV6_TRANSPORT_AFTER_EXT_HEADERS[name][number]
        assert got["ip_proto"] == proto, where
        # tshark prints both tcp.* and udp.* (e.g. UDP outside, TCP inside an L2TP tunnel):
        # the outermost transport is the one named by ip_proto.
        layer = "udp" if got["ip_proto"] == 17 else "tcp"
        other = "tcp" if layer == "udp" else "udp"
        ports = (
            _int(exp[f"{layer}.srcport"] or exp[f"{other}.srcport"]),
            _int(exp[f"{layer}.dstport"] or exp[f"{other}.dstport"]),
        )
        if number in PORTS_FROM_INNER_HEADER.get(name, set()):
            assert ports != (None, None), f"{where}: exception no longer needed"
            ports = (None, None)
        assert (got["src_port"], got["dst_port"]) == ports, where
    assert undecoded == UNDECODED_LINK_TYPES.get(name, set()), f"{name}: undecoded link types"


TCP_FIELDS = ("tcp.seq_raw", "tcp.ack_raw", "tcp.window_size_value", "tcp.options.wscale.shift")


def tshark_tcp(path: Path) -> list[dict]:
    """tshark's TCP header fields of every frame (its outermost TCP header: occurrence=f), read now."""
    argv = [require_tool("tshark"), "-n", "-r", str(path), "-o", "ip.defragment:FALSE", "-o",
            "ipv6.defragment:FALSE", "-T", "fields", "-E", "header=y", "-E", "separator=/t",
            "-E", "occurrence=f", "-e", "frame.interface_id", "-e", "frame.protocols",
            *(arg for f in TCP_FIELDS for arg in ("-e", f))]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    rows = list(csv.DictReader(out.splitlines(), delimiter="\t"))
    return [r for r in rows if not (r["frame.interface_id"] == "" and r["frame.protocols"] == "data")]


@pytest.mark.parametrize("name", [n for n in FILES if n not in ERRORS] + EXTRA_FILES)
def test_tcp_header_fields_match_tshark(corpus_dir: Path, name: str) -> None:
    """tcp_seq, tcp_ack, tcp_window and tcp_window_scale of every TCP packet as tshark reads them.

    Both give the acknowledgment field as sent whatever the ACK flag says (tshark's tcp.ack_raw), and
    a window scale for every SYN whose option they see. Where the outer packet is not TCP (ICMP
    errors quoting a TCP header, 6in4 and L2TP tunnels: PORTS_FROM_INNER_HEADER's packets and
    others), tshark's first tcp.* occurrence is the inner header's; tracecore's fields are null there."""
    rows, _, _ = read_all(capture(corpus_dir, name), batch_rows=1 << 20)
    shark = tshark_tcp(capture(corpus_dir, name))
    assert len(shark) == len(rows), name
    compared = 0
    for number, (got, exp) in enumerate(zip(rows, shark, strict=True), start=1):
        where = f"{name} packet {number}"
        ours = (got["tcp_seq"], got["tcp_ack"], got["tcp_window"], got["tcp_window_scale"])
        if got["ip_proto"] != 6 or got["src_port"] is None:
            assert ours == (None,) * 4, where
            continue
        if not exp["tcp.seq_raw"]:  # a header cut before its sequence number: tshark shows no TCP
            assert got["tcp_window"] is None, where
            continue
        seq, ack, window, shift = (_int(exp[f]) for f in TCP_FIELDS)
        assert (got["tcp_seq"], got["tcp_ack"]) == (seq, ack), where
        assert got["tcp_window"] == window, where
        assert got["tcp_window_scale"] == shift, where
        compared += 1
    assert compared == TCP_PACKETS_COMPARED.get(name, 0), name


# The packets compared above, so no comparison is vacuous: every file whose outermost transport is TCP
# in some packet, behind VLAN tags (zeek: 802.1Q and QinQ), PPPoE (nb6-http's 20 of its 30 TCP
# packets; the other 10 are inside L2TP, like 6in4tunnel's 77 inside IPv4: null in tracecore),
# loopback, raw IP and Linux cooked captures.
TCP_PACKETS_COMPARED = {
    "arkime__ssl-selfsign.pcap": 20,
    "arkime__v6-http.pcap": 10,
    "dpkt__http.pcap": 41,
    "dpkt__nb6-http.pcap": 20,
    "gopacket__test_loopback.pcap": 24,
    "ndpi__dns2tcp_tunnel.pcap": 50,
    "pcapplusplus__many_interfaces-1.pcapng": 32,
    "pcapplusplus__nanosecs_big_endian.pcap": 10,
    "pcapplusplus__pcapng-example.pcapng": 159,  # 100 of them on the interface with a bogus clock
    "pcapplusplus__raw_ip.pcap": 92,
    "tcpdump__kday2_pre-eabcd87.pcap": 4,
    "tcpdump__pptp.pcap": 22,
    "tcpdump__tcp-handshake-nano.pcap": 3,
    "tcpdump__tcp_rst_data-trunc.pcap": 1,
    "tcpdump__timestamp_invalid_micro.pcap": 3,
    "tcpreplay__test.pcap": 116,
    "zeek__fragmented-syn.pcap": 1,
    "zeek__vlan-pcp-dei.pcapng": 9,
}


def test_window_scale_real_values(corpus_dir: Path) -> None:
    """The SYN and SYN+ACK of real handshakes carry their window scale; no other packet has one."""
    scaled = {}
    for name in FILES:
        if name in ERRORS:
            continue
        rows, _, _ = read_all(corpus_dir / name, batch_rows=1 << 20)
        for r in rows:
            if r["tcp_window_scale"] is not None:
                assert r["tcp_flags"] & 0x002, name
                scaled[name] = scaled.get(name, 0) + 1
    assert len(scaled) >= 3, scaled


def test_exception_tables_name_real_files(corpus_dir: Path) -> None:
    for table in (*EXCEPTION_TABLES, ERRORS, TRUNCATED, TCP_PACKETS_COMPARED):
        for name in table:
            assert capture(corpus_dir, name).is_file(), name


@pytest.mark.parametrize("name", FILES + EXTRA_FILES)
def test_agrees_with_dpkt_oracle(corpus_dir: Path, name: str) -> None:
    """Every column, including those tshark does not print, equals the dpkt-based oracle."""
    path = capture(corpus_dir, name)
    rows, _, error = read_all(path, batch_rows=1 << 20)
    result = oracle.read_records(path)
    assert (None if error is None else error.offset) == (
        None if result.error is None else result.error.offset
    )
    assert len(reader_warnings := result.warnings) == (1 if name in TRUNCATED else 0), reader_warnings
    assert rows == list(oracle.iter_rows(path))


def test_fragments_and_flags_real_values(corpus_dir: Path) -> None:
    rows, _, _ = read_all(corpus_dir / "zeek__fragmented-syn.pcap")
    assert [r["ip_fragment"] for r in rows] == [True, True]
    assert (rows[0]["src_port"], rows[0]["dst_port"]) == (12345, 80)  # tshark: first fragment's ports
    assert rows[1]["src_port"] is None
    rows, _, _ = read_all(corpus_dir / "dpkt__http.pcap")
    assert [r["tcp_flags"] for r in rows[:3]] == [0x002, 0x012, 0x010]  # SYN, SYN+ACK, ACK
    assert rows[3]["l4_payload_len"] == 479
    assert rows[3]["frame_len"] == 533
    assert rows[0]["ip_fragment"] is False


@pytest.mark.parametrize(
    ("name", "index", "tcp_at"), [("dpkt__http.pcap", 3, 34), ("arkime__v6-http.pcap", 48, 54)]
)
def test_tcp_header_cut_at_every_length(
    corpus_dir: Path, tmp_path: Path, name: str, index: int, tcp_at: int
) -> None:
    """A real TCP data frame (IPv4, IPv6) captured to every length, as a small snap length does: ports
    once 4 TCP bytes are there, flags and l4_payload_len (from the IP lengths) once its 14 bytes up to the
    flags are; before that both null, never a length guessed without the TCP header's own."""
    rec = oracle.read_records(corpus_dir / name).records[index]
    cut = tmp_path / "cut.pcap"
    records = [struct.pack("<IIII", 1, 0, n, len(rec.data)) + rec.data[:n] for n in range(len(rec.data) + 1)]
    cut.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, rec.link_type) + b"".join(records))
    rows, _, error = read_all(cut)
    assert error is None
    assert rows == list(oracle.iter_rows(cut))
    full = rows[-1]
    assert (full["ip_proto"], full["tcp_flags"], full["l4_payload_len"]) == (
        6,
        0x018,
        len(rec.data) - tcp_at - 20,
    )
    ports = [n for n, r in enumerate(rows) if r["src_port"] is not None]
    flags = [n for n, r in enumerate(rows) if r["tcp_flags"] is not None]
    lengths = [n for n, r in enumerate(rows) if r["l4_payload_len"] is not None]
    assert ports == list(range(tcp_at + 4, len(rows)))
    assert flags == lengths == list(range(tcp_at + 14, len(rows)))
    assert all(r["l4_payload_len"] == full["l4_payload_len"] for r in rows[tcp_at + 14 :])


def test_not_a_capture_and_empty(tmp_path: Path, corpus_dir: Path) -> None:
    text = tmp_path / "notes.pcap"
    text.write_text("hello, this is not a capture\n")
    with pytest.raises(NotACaptureError, match=r"notes\.pcap: not a pcap or pcapng capture"):
        list(CaptureReader(text).batches())
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    with pytest.raises(NotACaptureError, match=r"empty\.pcap: empty file"):
        list(CaptureReader(empty).batches())
    with pytest.raises(CaptureError, match="no such file"):
        list(CaptureReader(tmp_path / "missing.pcap").batches())
    short = tmp_path / "short.pcap"
    short.write_bytes((corpus_dir / "dpkt__http.pcap").read_bytes()[:10])
    with pytest.raises(CaptureError, match=r"short\.pcap: pcap file header cut short"):
        list(CaptureReader(short).batches())


def test_stats_and_warnings(corpus_dir: Path) -> None:
    radiotap = corpus_dir / "libpcap__wpa-Induction.pcap"
    _, reader, _ = read_all(radiotap)
    assert reader.stats.undecoded_link_frames == {127: 10}
    assert reader.stats.link_types == {127}
    assert reader.warnings == [
        f"{radiotap}: 10 frames of link type IEEE802_11_RADIOTAP (127) kept with null IP fields: "
        "tracecore has no network decoder for that link type"
    ]
    _, reader, _ = read_all(corpus_dir / "pcapngtestgen__le-difficult-test201.pcapng")
    assert reader.stats.undecoded_link_frames == {}
    assert (reader.stats.sections, reader.stats.interfaces, reader.stats.simple_packet_blocks) == (3, 5, 1)
    assert reader.stats.formats == {"pcapng-le"}
    _, reader, _ = read_all(corpus_dir / "ndpi__nfsv3.pcap")
    assert reader.stats.formats == {"pcap-be-us"}
    assert reader.stats.packets == 128
    assert reader.stats.bytes == sum(r["cap_len"] for r in read_all(corpus_dir / "ndpi__nfsv3.pcap")[0])
