"""Hypothesis strategies: random packets built with dpkt, written as pcap or pcapng.

Why: the corpus covers what other tools happened to record; these cover every combination
the reader claims (link types × VLAN stacks × IPv4/IPv6 with extension headers ×
transports × fragments × container formats and byte orders × timestamp resolutions ×
compression). Each packet carries the field values it was *built* from, so the test
compares the reader with the intent, not with another parser.
"""

from __future__ import annotations

import gzip
import ipaddress
import lzma
import struct
from dataclasses import dataclass, field

import dpkt
import zstandard
from hypothesis import strategies as st

from tracecore.reader.linktypes import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_PPP,
    LINKTYPE_RAW,
    LINKTYPE_RAW_BSD,
    LINKTYPE_RAW_OPENBSD,
)
from tracecore.schema import PACKET_SCHEMA

TRANSPORTS = (6, 17, 132, 1, 47, 58)
LINKS_ETH_LIKE = (LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2)
LINKS_RAW_IP = (LINKTYPE_RAW_BSD, LINKTYPE_RAW_OPENBSD, LINKTYPE_RAW)
LINKS_AF = (LINKTYPE_NULL, LINKTYPE_LOOP)  # a 4-byte address family before the IP header
LINK_UNDECODED = 147  # LINKTYPE_USER0: frames kept, network fields null
# Link types of one classic pcap file, and of a pcapng interface.
PCAP_LINKS = (
    *LINKS_ETH_LIKE,
    LINKTYPE_RAW,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    *LINKS_AF,
    LINKTYPE_PPP,
    LINK_UNDECODED,
)
PCAPNG_LINKS = tuple(link for link in PCAP_LINKS if link != LINKTYPE_IPV4)


@dataclass
class Packet:
    """One built frame and the PACKET_SCHEMA values the reader must give for it."""

    link_type: int
    data: bytes
    frame_len: int
    fields: dict = field(default_factory=dict)


def _none_fields() -> dict:
    """Every network column null (the frame columns come from the record)."""
    frame = ("ts_ns", "frame_len", "cap_len", "interface", "link_type")
    return dict.fromkeys(name for name in PACKET_SCHEMA.names if name not in frame)


# UDP destination ports the reader decodes further (RoCEv2, VXLAN, Geneve): the real corpus in
# ../shared/corpus-rdma tests those; generated UDP payloads are random bytes.
DECODED_UDP_PORTS = (4789, 4791, 6081, 8472)
# A later fragment's fields: its TCP header (if any) is in the first fragment.
NO_TCP_HEADER = dict.fromkeys(("tcp_seq", "tcp_ack", "tcp_window", "tcp_window_scale"))


@st.composite
def transport(draw: st.DrawFn, proto: int) -> tuple[bytes, dict]:
    """A transport header + payload, and the fields it implies (ports, flags, payload length)."""
    payload = draw(st.binary(max_size=40))
    sport = draw(st.integers(0, 65535))
    dport = draw(st.integers(0, 65535).filter(lambda port: proto != 17 or port not in DECODED_UDP_PORTS))
    if proto == 6:
        flags = draw(st.integers(0, 0x1FF))
        seq, ack, win = (
            draw(st.integers(0, 2**32 - 1)),
            draw(st.integers(0, 2**32 - 1)),
            draw(st.integers(0, 65535)),
        )
        shift = draw(st.none() | st.integers(0, 14))
        # NOP options (data offset 5..8), or a window scale option padded by a NOP
        opts = b"\x01" * (4 * draw(st.integers(0, 3))) if shift is None else b"\x01\x03\x03" + bytes([shift])
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, flags=flags & 0xFF, opts=opts, data=payload, seq=seq,
                           ack=ack, win=win)  # fmt: skip
        tcp.off = 5 + len(opts) // 4
        raw = bytearray(bytes(tcp))
        raw[12] = (raw[12] & 0xF0) | (flags >> 8)
        return bytes(raw), {
            "src_port": sport,
            "dst_port": dport,
            "tcp_flags": flags,
            "tcp_seq": seq,
            "tcp_ack": ack,
            "tcp_window": win,
            "tcp_window_scale": shift if flags & 0x002 else None,  # read from SYNs only
            "l4_payload_len": len(payload),
        }
    if proto == 17:
        udp = dpkt.udp.UDP(sport=sport, dport=dport, data=payload)
        udp.ulen = 8 + len(payload)
        return bytes(udp), {"src_port": sport, "dst_port": dport, "l4_payload_len": len(payload)}
    if proto == 132:
        raw = struct.pack(">HHII", sport, dport, 0, 0) + payload
        return raw, {"src_port": sport, "dst_port": dport, "l4_payload_len": len(payload)}
    return payload, {"l4_payload_len": len(payload)}


@st.composite
def ipv4(draw: st.DrawFn) -> tuple[bytes, dict]:
    proto = draw(st.sampled_from(TRANSPORTS[:5]))
    src, dst = draw(st.binary(min_size=4, max_size=4)), draw(st.binary(min_size=4, max_size=4))
    body, tfields = draw(transport(proto))
    frag = draw(st.sampled_from(["none", "first", "later"]))
    tos = draw(st.integers(0, 255))
    ip = dpkt.ip.IP(src=src, dst=dst, p=proto, data=body, ttl=64, tos=tos)
    fields = {
        "dscp": tos >> 2,
        "ecn": tos & 3,
        "ip_version": 4,
        "src_ip": str(ipaddress.IPv4Address(src)),
        "dst_ip": str(ipaddress.IPv4Address(dst)),
        "ip_proto": proto,
        "ip_fragment": frag != "none",
        **tfields,
    }
    if frag == "first":
        ip.mf = 1
    elif frag == "later":
        ip.mf = draw(st.booleans())
        ip.offset = draw(st.integers(1, 0x1FFF))
        fields.update(src_port=None, dst_port=None, tcp_flags=None, l4_payload_len=len(body), **NO_TCP_HEADER)
    if draw(st.booleans()):  # IP options make the header longer than 20 bytes
        ip.opts = b"\x01\x01\x01\x00"
        ip.hl = 6
    return bytes(ip), fields


@st.composite
def ipv6(draw: st.DrawFn) -> tuple[bytes, dict]:
    proto = draw(st.sampled_from(TRANSPORTS))
    src, dst = draw(st.binary(min_size=16, max_size=16)), draw(st.binary(min_size=16, max_size=16))
    body, tfields = draw(transport(proto))
    exts = draw(st.lists(st.sampled_from([0, 43, 60, 51, 44]), max_size=3, unique=True))
    later_fragment = 44 in exts and draw(st.booleans())
    # Build the extension chain back to front so each header names the next one.
    built: list[bytes] = []
    nxt = proto
    for ext in reversed(exts):
        if ext == 44:
            off = draw(st.integers(1, 0x1FFF)) if later_fragment else 0
            hdr = struct.pack(">BBHI", nxt, 0, (off << 3) | draw(st.integers(0, 1)), 7)
        elif ext == 51:
            hdr = struct.pack(">BBHII", nxt, 2, 0, 1, 1) + b"\0" * 4  # AH: (2 + 2) * 4 = 16 bytes
        else:
            n = draw(st.integers(0, 1))
            hdr = struct.pack(">BB", nxt, n) + b"\x01\x04\0\0\0\0" + b"\0" * (8 * n)  # PadN: (n + 1) * 8
        built.insert(0, hdr)
        nxt = ext
    chain = b"".join(built)
    ip6 = dpkt.ip6.IP6(src=src, dst=dst, nxt=nxt, hlim=64, data=b"")
    ip6.plen = len(chain) + len(body)
    tclass = draw(st.integers(0, 255))
    ip6.fc = tclass
    raw = bytes(ip6)[:40] + chain + body
    fields = {
        "dscp": tclass >> 2,
        "ecn": tclass & 3,
        "ip_version": 6,
        "src_ip": str(ipaddress.IPv6Address(src)),
        "dst_ip": str(ipaddress.IPv6Address(dst)),
        "ip_proto": proto,
        "ip_fragment": 44 in exts,
        **tfields,
    }
    if later_fragment:
        # The walk stops at a non-first fragment: what follows is data, ip_proto its Next Header.
        k = exts.index(44)
        fields["ip_proto"] = exts[k + 1] if k + 1 < len(exts) else proto
        tail = b"".join(built[k + 1 :])
        fields.update(
            src_port=None,
            dst_port=None,
            tcp_flags=None,
            l4_payload_len=len(tail) + len(body),
            **NO_TCP_HEADER,
        )
    return raw, fields


@st.composite
def network(draw: st.DrawFn) -> tuple[int, bytes, dict]:
    """(ethertype, bytes, fields) for IPv4, IPv6 or a non-IP payload (ARP)."""
    kind = draw(st.sampled_from(["v4", "v6", "v6", "arp"]))
    if kind == "v4":
        raw, fields = draw(ipv4())
        return 0x0800, raw, fields
    if kind == "v6":
        raw, fields = draw(ipv6())
        return 0x86DD, raw, fields
    return 0x0806, bytes(dpkt.arp.ARP()), {}


@st.composite
def packets(draw: st.DrawFn, link_types: tuple[int, ...] | None = None) -> Packet:
    """A frame of a random link type around a random network packet."""
    link = draw(
        st.sampled_from(
            link_types
            or (
                LINKTYPE_ETHERNET,
                *LINKS_ETH_LIKE,
                *LINKS_RAW_IP,
                LINKTYPE_IPV4,
                LINKTYPE_IPV6,
                *LINKS_AF,
                LINKTYPE_PPP,
                LINK_UNDECODED,
            )
        )
    )
    etype, net, fields = draw(network())
    if link == LINKTYPE_IPV4 and etype != 0x0800:
        etype, net, fields = 0x0800, *draw(ipv4())
    if link == LINKTYPE_IPV6 and etype != 0x86DD:
        etype, net, fields = 0x86DD, *draw(ipv6())
    if link in (*LINKS_RAW_IP, *LINKS_AF, LINKTYPE_PPP) and etype == 0x0806:
        etype, net, fields = 0x0800, *draw(ipv4())
    if link in LINKS_ETH_LIKE:
        # 802.1Q / 802.1ad tags (QinQ) between the link header and the network packet.
        tags = draw(st.lists(st.sampled_from([0x8100, 0x88A8]), max_size=2))
        outer = tags[0] if tags else etype
        inner = (
            b"".join(struct.pack(">HH", draw(st.integers(0, 0xFFFF)), nxt) for nxt in [*tags[1:], etype])
            if tags
            else b""
        )
        if link == LINKTYPE_ETHERNET:
            frame = b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", outer) + inner + net
        elif link == LINKTYPE_LINUX_SLL:
            frame = bytes(dpkt.sll.SLL(ethtype=outer, hdr=b"\x02" * 8)) + inner + net
        else:
            frame = bytes(dpkt.sll2.SLL2(ethtype=outer, hdr=b"\x02" * 8, intindex=3)) + inner + net
    elif link in (*LINKS_RAW_IP, LINKTYPE_IPV4, LINKTYPE_IPV6):
        frame = net
    elif link == LINKTYPE_PPP:  # in HDLC-like framing
        frame = b"\xff\x03" + struct.pack(">H", 0x21 if etype == 0x0800 else 0x57) + net
    elif link in LINKS_AF:
        af = 2 if etype == 0x0800 else draw(st.sampled_from([10, 24, 28, 30]))
        frame = struct.pack("<I" if link == LINKTYPE_NULL else ">I", af) + net
    else:
        frame = b"\xff" * 4 + net
        fields = {}
    out = _none_fields()
    out.update(fields)
    # Sometimes cut the frame inside the transport payload, as a snaplen would: the IP
    # lengths still give the true payload length.
    cut = len(frame) - draw(st.integers(0, min(8, out["l4_payload_len"] or 0)))
    if link == LINK_UNDECODED:
        out = _none_fields()
    return Packet(link, frame[:cut], len(frame), out)


# -- containers -----------------------------------------------------------------------------


@dataclass
class Capture:
    """The bytes of a capture file and the rows the reader must produce from it."""

    data: bytes
    rows: list[dict]
    kind: str


def _row(pkt: Packet, ts_ns: int, interface: int, cap_len: int | None = None) -> dict:
    return {
        "ts_ns": ts_ns,
        "frame_len": pkt.frame_len,
        "cap_len": len(pkt.data) if cap_len is None else cap_len,
        "interface": interface,
        "link_type": pkt.link_type,
        **pkt.fields,
    }


@st.composite
def pcap_files(draw: st.DrawFn) -> Capture:
    """Classic pcap: either byte order, µs or ns magic, one link type."""
    big, nanos = draw(st.booleans()), draw(st.booleans())
    link = draw(st.sampled_from(PCAP_LINKS))
    pkts = draw(st.lists(packets((link,)), max_size=12))
    order = ">" if big else "<"
    out = struct.pack(order + "IHHiIII", 0xA1B23C4D if nanos else 0xA1B2C3D4, 2, 4, 0, 0, 262144, link)
    rows = []
    for pkt in pkts:
        sec = draw(st.integers(0, 2**32 - 1))
        sub = draw(st.integers(0, 999_999_999 if nanos else 999_999))
        out += struct.pack(order + "IIII", sec, sub, len(pkt.data), pkt.frame_len) + pkt.data
        rows.append(_row(pkt, sec * 10**9 + sub * (1 if nanos else 1000), 0))
    return Capture(out, rows, f"pcap-{'be' if big else 'le'}-{'ns' if nanos else 'us'}")


def _block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def _option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


@st.composite
def tsresol(draw: st.DrawFn) -> int | None:
    """An if_tsresol byte (None = option absent = µs): 10^-n or 2^-n."""
    return draw(st.sampled_from([None, 0, 3, 6, 9, 12, 0x80 | 8, 0x80 | 20, 0x80 | 40]))


def ts_to_ns(units: int, resol: int | None, offset_s: int) -> int:
    """The reference conversion, in exact integer arithmetic."""
    if resol is None:
        resol = 6
    n = resol & 0x7F
    if resol & 0x80:
        ns = (units * 10**9) >> n
    elif n <= 9:
        ns = units * 10 ** (9 - n)
    else:
        ns = units // 10 ** (n - 9)
    return ns + offset_s * 10**9


def max_units(resol: int | None, offset_s: int) -> int:
    """The largest timestamp counter whose time fits int64 ns (before the year 2262)."""
    hi, lo = 2**64 - 1, 0
    while lo < hi:  # binary search on the monotone reference conversion
        mid = (lo + hi + 1) // 2
        if ts_to_ns(mid, resol, offset_s) < 2**63:
            lo = mid
        else:
            hi = mid - 1
    return lo


@st.composite
def pcapng_files(draw: st.DrawFn) -> Capture:
    """pcapng: 1-3 sections of either byte order, several interfaces each, EPB/PB/SPB and
    blocks to skip (NRB, ISB, custom)."""
    out = b""
    rows: list[dict] = []
    last_ts = 0
    for _ in range(draw(st.integers(1, 3))):
        order = draw(st.sampled_from("<>"))
        out += _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))
        ifaces = []
        for _ in range(draw(st.integers(1, 3))):
            link = draw(st.sampled_from(PCAPNG_LINKS))
            resol, offset = draw(tsresol()), draw(st.sampled_from([0, 0, 7, -3]))
            opts = b""
            if resol is not None:
                opts += _option(order, 9, bytes([resol]))
            if offset:
                opts += _option(order, 14, struct.pack(order + "q", offset))
            if opts:
                opts += _option(order, 0, b"")
            out += _block(order, 1, struct.pack(order + "HHI", link, 0, 0) + opts)
            ifaces.append((link, resol, offset))
        for _ in range(draw(st.integers(0, 8))):
            kind = draw(st.sampled_from(["epb", "epb", "pb", "spb", "skip"]))
            if kind == "skip":
                btype = draw(st.sampled_from([4, 5, 0xBAD, 0x40000BAD, 0x80000001]))
                out += _block(order, btype, draw(st.binary(max_size=12)))
                continue
            ifid = 0 if kind == "spb" else draw(st.integers(0, len(ifaces) - 1))
            link, resol, offset = ifaces[ifid]
            pkt = draw(packets((link,)))
            if kind == "spb":
                full = draw(packets((link,)).filter(lambda p: len(p.data) == p.frame_len))
                out += _block(order, 3, struct.pack(order + "I", full.frame_len) + full.data)
                rows.append(_row(full, last_ts, 0))
                continue
            units = draw(st.integers(0, max_units(resol, offset)))
            hi, lo = units >> 32, units & 0xFFFFFFFF
            head = (
                struct.pack(order + "I", ifid) if kind == "epb" else struct.pack(order + "HH", ifid, 0)
            ) + struct.pack(order + "IIII", hi, lo, len(pkt.data), pkt.frame_len)
            opts = _option(order, 1, b"comment") + _option(order, 0, b"") if draw(st.booleans()) else b""
            pad = b"\0" * (-len(pkt.data) % 4)
            out += _block(order, 6 if kind == "epb" else 2, head + pkt.data + pad + opts)
            last_ts = ts_to_ns(units, resol, offset)
            rows.append(_row(pkt, last_ts, ifid))
    return Capture(out, rows, "pcapng")


def captures() -> st.SearchStrategy[Capture]:
    return st.one_of(pcap_files(), pcapng_files())


COMPRESSORS = {
    "": lambda b: b,
    ".gz": lambda b: gzip.compress(b, compresslevel=1),
    ".xz": lambda b: lzma.compress(b, preset=0),
    ".zst": lambda b: zstandard.ZstdCompressor(level=1).compress(b),
}
