"""A slow, independent reader: struct for the containers, dpkt for the packets.

Why it exists: it is the test oracle for the numba fast path (a second implementation
written differently, with dpkt's own header parsing), and it documents the semantics in
plain Python. It reads the whole file into memory, so it is only for small captures.
It shares with the reader only the facts of the formats (magic bytes, link-type numbers,
header parsing in formats.py) and the decompressors, never its decoding.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dpkt

from tracecore.errors import CaptureError, NotACaptureError
from tracecore.reader import formats as fm
from tracecore.reader import linktypes as lt
from tracecore.reader.source import CHUNK, DECOMPRESS_ERRORS, compression_of, open_decompressed

AF_INET6_VALUES = (10, 24, 28, 30)
ETH_VLAN = (0x8100, 0x88A8, 0x9100)
IP6_WALKED = (0, 43, 44, 51, 60)  # hop-by-hop, routing, fragment, AH, destination options
TRANSPORT_HEADER = {6: 20, 17: 8, 136: 8, 132: 12}
ROCE_V1_ETHERTYPE = 0x8915
VXLAN_PORTS = (4789, 8472)
# InfiniBand extension headers after the BTH (IBA vol. 1, 9.2-9.5) by the opcode's low five bits, for
# RC, UC (only up to 0x0B) and RD (which adds RDETH and DETH first); UD and the RoCEv2 CNP apart.
IB_HEADER_BYTES = {"RETH": 16, "AETH": 4, "ImmDt": 4, "IETH": 4, "AtomicETH": 28, "AtomicAckETH": 8}
IB_HEADER_BYTES |= {"DETH": 8, "RDETH": 4, "CNP": 16}
IB_OPERATION_HEADERS: dict[int, tuple[str, ...]] = {
    0x00: (), 0x01: (), 0x02: (), 0x03: ("ImmDt",), 0x04: (), 0x05: ("ImmDt",),  # SEND
    0x06: ("RETH",), 0x07: (), 0x08: (), 0x09: ("ImmDt",), 0x0A: ("RETH",), 0x0B: ("RETH", "ImmDt"),  # WRITE
    0x0C: ("RETH",), 0x0D: ("AETH",), 0x0E: (), 0x0F: ("AETH",), 0x10: ("AETH",),  # READ
    0x11: ("AETH",), 0x12: ("AETH", "AtomicAckETH"), 0x13: ("AtomicETH",), 0x14: ("AtomicETH",),
    0x16: ("IETH",), 0x17: ("IETH",),
}  # fmt: skip


def int64_ns(ns: int, previous: int) -> int:
    """A packet's time where it fits int64 ns, else the previous packet's (the reader's rule for a
    pcapng clock past 2262, as for a simple packet block)."""
    return ns if ns <= 2**63 - 1 else previous


@dataclass
class Record:
    """One packet record as stored in the container."""

    ts_ns: int
    frame_len: int
    cap_len: int
    interface: int
    link_type: int
    data: bytes
    offset: int


@dataclass
class OracleResult:
    records: list[Record]
    warnings: list[str]
    error: CaptureError | None


def decompress_all(path: str | Path) -> bytes:
    """The whole decompressed file; a decompression error ends it, as in the reader."""
    kind = compression_of(path)
    if kind is None:
        return Path(path).read_bytes()
    out = bytearray()
    with open_decompressed(path, kind) as f, contextlib.suppress(*DECOMPRESS_ERRORS):
        while chunk := f.read1(CHUNK):
            out += chunk
    return bytes(out)


def read_records(path: str | Path) -> OracleResult:
    """Every complete record of a capture; a corrupt record stops the walk with `error` set."""
    data = decompress_all(path)
    if not data:
        raise NotACaptureError(path, "empty file: not a pcap or pcapng capture", 0)
    (magic,) = struct.unpack_from("<I", data.ljust(4, b"\0"))
    (magic_be,) = struct.unpack_from(">I", data.ljust(4, b"\0"))
    out: list[Record] = []
    warnings: list[str] = []
    try:
        if magic in (fm.PCAP_MAGIC_US, fm.PCAP_MAGIC_NS) or magic_be in (fm.PCAP_MAGIC_US, fm.PCAP_MAGIC_NS):
            _walk_pcap(path, data, out, warnings)
        elif magic == fm.PCAPNG_SHB:
            _walk_pcapng(path, data, out, warnings)
        else:
            raise NotACaptureError(path, "not a pcap or pcapng capture (unknown magic)", 0)
    except NotACaptureError:
        raise
    except CaptureError as err:
        return OracleResult(out, warnings, err)
    return OracleResult(out, warnings, None)


def _walk_pcap(path: object, data: bytes, out: list[Record], warnings: list[str]) -> None:
    hdr = fm.parse_pcap_header(data[:24], path)
    limit = max(fm.MAX_PACKET, min(hdr.snaplen, 1 << 24))
    pos = 24
    while pos < len(data):
        if pos + 16 > len(data):
            warnings.append(f"{path}: truncated record header at byte offset {pos}")
            return
        sec, sub, cap, orig = struct.unpack_from(hdr.order + "IIII", data, pos)
        if hdr.lengths_swapped == 1 or (hdr.lengths_swapped == 2 and cap > orig):
            cap, orig = orig, cap
        if cap > limit:
            raise CaptureError(path, f"corrupt record: captured length {cap}", pos, len(out))
        if orig == 0:
            raise CaptureError(path, "corrupt record: original length 0", pos, len(out))
        if pos + 16 + cap > len(data):
            warnings.append(f"{path}: truncated record at byte offset {pos}")
            return
        ts = sec * 1_000_000_000 + (sub if hdr.nanos else sub * 1000)
        out.append(Record(ts, orig, cap, 0, hdr.link_type, data[pos + 16 : pos + 16 + cap], pos))
        pos += 16 + cap


def _cut_before_any_interface(path: object, pos: int, any_iface: bool) -> None:
    """A pcapng cut before any packet could be declared is an error, not a truncated tail."""
    if not any_iface:
        raise CaptureError(path, "cut short inside its first header blocks", pos, 0)


def _walk_pcapng(path: object, data: bytes, out: list[Record], warnings: list[str]) -> None:
    pos = 0
    order = "<"
    ifaces: list[fm.Interface] = []
    any_iface = False
    last_ts = 0
    while pos < len(data):
        if pos + 12 > len(data):
            _cut_before_any_interface(path, pos, any_iface)
            warnings.append(f"{path}: truncated block header at byte offset {pos}")
            return
        (btype,) = struct.unpack_from(order + "I", data, pos)
        if btype == fm.PCAPNG_SHB or struct.unpack_from("<I", data, pos)[0] == fm.PCAPNG_SHB:
            try:
                order = fm.shb_order(data[pos : pos + 12])
            except ValueError as exc:
                raise CaptureError(path, str(exc), pos, len(out)) from None
            btype = fm.PCAPNG_SHB
        (blen,) = struct.unpack_from(order + "I", data, pos + 4)
        if blen < 12 or blen % 4 or blen > fm.MAX_BLOCK:
            raise CaptureError(path, f"corrupt block length {blen}", pos, len(out))
        if pos + blen > len(data):
            _cut_before_any_interface(path, pos, any_iface)
            warnings.append(f"{path}: truncated block at byte offset {pos}")
            return
        (trail,) = struct.unpack_from(order + "I", data, pos + blen - 4)
        if trail != blen:
            raise CaptureError(path, f"block length {blen} and trailer {trail} differ", pos, len(out))
        body = data[pos + 8 : pos + blen - 4]
        try:
            if btype == fm.PCAPNG_SHB:
                fm.check_shb(data[pos : pos + blen], order)
                ifaces = []
            elif btype == 1:
                ifaces.append(fm.parse_idb(body, order))
                any_iface = True
            elif btype in (6, 2):
                if btype == 6:
                    ifid, hi, lo, cap, orig = struct.unpack_from(order + "IIIII", body)
                    start = 20
                else:
                    ifid, _drops, hi, lo, cap, orig = struct.unpack_from(order + "HHIIII", body)
                    start = 20
                if ifid >= len(ifaces):
                    raise ValueError(f"packet for undeclared interface {ifid}")
                if start + cap > len(body):
                    raise ValueError(f"captured length {cap} overruns its block")
                if orig == 0:
                    raise ValueError("original length 0")
                iface = ifaces[ifid]
                last_ts = int64_ns(iface.tsres.to_ns((hi << 32) | lo), last_ts)
                out.append(Record(last_ts, orig, cap, ifid, iface.link_type, body[start : start + cap], pos))
            elif btype == 3:
                if not ifaces:
                    raise ValueError("simple packet block before any interface")
                (orig,) = struct.unpack_from(order + "I", body)
                if orig == 0:
                    raise ValueError("original length 0")
                cap = min(orig, len(body) - 4)
                if ifaces[0].snaplen:
                    cap = min(cap, ifaces[0].snaplen)
                out.append(Record(last_ts, orig, cap, 0, ifaces[0].link_type, body[4 : 4 + cap], pos))
        except (ValueError, struct.error) as exc:
            raise CaptureError(path, f"corrupt block: {exc}", pos, len(out)) from None
        pos += blen


# -- packet decoding with dpkt -------------------------------------------------------------


@dataclass
class Fields:
    """The network columns of PACKET_SCHEMA for one packet (None = null)."""

    ip_version: int | None = None
    src_ip: str | None = None
    dst_ip: str | None = None
    ip_proto: int | None = None
    src_port: int | None = None
    dst_port: int | None = None
    tcp_flags: int | None = None
    tcp_seq: int | None = None
    tcp_ack: int | None = None
    tcp_window: int | None = None
    tcp_window_scale: int | None = None
    l4_payload_len: int | None = None
    ip_fragment: bool | None = None
    dscp: int | None = None
    ecn: int | None = None
    rdma_opcode: int | None = None
    rdma_dest_qp: int | None = None
    rdma_psn: int | None = None
    rdma_flags: int | None = None
    rdma_payload_len: int | None = None
    rdma_reth_dma_len: int | None = None
    rdma_aeth_syndrome: int | None = None
    rdma_deth_src_qp: int | None = None
    tunnel: str | None = None
    vni: int | None = None
    inner_src_ip: str | None = None
    inner_dst_ip: str | None = None
    inner_ip_proto: int | None = None
    inner_src_port: int | None = None
    inner_dst_port: int | None = None


def _ethernet(buf: bytes, depth: int = 0) -> tuple[int, bytes] | None:
    """Ethernet by hand (dpkt re-serialises PPPoE/PPP and drops 802.1Q frames with PCP bits)."""
    if len(buf) < 14:
        return None
    return _ethertype(struct.unpack_from(">H", buf, 12)[0], buf[14:], depth)


def _ethertype(etype: int, rest: bytes, depth: int = 0) -> tuple[int, bytes] | None:
    """VLAN tags, LLC/SNAP, PPPoE, MPLS (an Ethernet pseudowire once) after an ethertype."""
    while etype in ETH_VLAN and len(rest) >= 4:
        (etype,) = struct.unpack_from(">H", rest, 2)
        rest = rest[4:]
    if etype < 0x600:
        if rest[:3] != b"\xaa\xaa\x03" or len(rest) < 8:
            return None
        (etype,) = struct.unpack_from(">H", rest, 6)
        rest = rest[8:]
    if etype == 0x8864:
        if len(rest) < 8:
            return None
        proto = struct.unpack_from(">H", rest, 6)[0]
        etype = {0x21: 0x0800, 0x57: 0x86DD}.get(proto, -1)
        rest = rest[8:]
    elif etype in (0x8847, 0x8848):
        while len(rest) >= 4:  # the label stack, each entry decoded by dpkt
            label = dpkt.ethernet.MPLSlabel(rest[:4])
            rest = rest[4:]
            if label.s:
                break
        nibble = rest[0] >> 4 if rest else -1
        if nibble == 0 and depth == 0:
            return _ethernet(rest[4:], 1)
        etype = {4: 0x0800, 6: 0x86DD}.get(nibble, -1)
    if etype == 0x0800:
        return 4, rest
    if etype == 0x86DD:
        return 6, rest
    if etype == ROCE_V1_ETHERTYPE:
        return 0, rest
    return None


def _network_start(link: int, buf: bytes) -> tuple[int, bytes] | None:
    """(ip version, bytes from the IP header on), or None when the frame carries no IP."""
    etype: int | None = None
    rest = b""
    if link == lt.LINKTYPE_ETHERNET:
        return _ethernet(buf)
    if link == lt.LINKTYPE_LINUX_SLL:
        return _ethertype(struct.unpack_from(">H", buf, 14)[0], buf[16:]) if len(buf) >= 16 else None
    if link == lt.LINKTYPE_LINUX_SLL2:
        return _ethertype(struct.unpack_from(">H", buf, 0)[0], buf[20:]) if len(buf) >= 20 else None
    if link in (lt.LINKTYPE_RAW_BSD, lt.LINKTYPE_RAW_OPENBSD, lt.LINKTYPE_RAW) and buf:
        etype, rest = {4: 0x0800, 6: 0x86DD}.get(buf[0] >> 4), buf
    elif link == lt.LINKTYPE_IPV4:
        etype, rest = 0x0800, buf
    elif link == lt.LINKTYPE_IPV6:
        etype, rest = 0x86DD, buf
    elif link in (lt.LINKTYPE_NULL, lt.LINKTYPE_LOOP) and len(buf) >= 4:
        af = struct.unpack_from(">I" if link == lt.LINKTYPE_LOOP else "<I", buf)[0]
        if link == lt.LINKTYPE_NULL and af > 0xFFFF:
            af = struct.unpack_from(">I", buf)[0]
        etype = 0x0800 if af == 2 else (0x86DD if af in AF_INET6_VALUES else None)
        rest = buf[4:]
    elif link == lt.LINKTYPE_C_HDLC and len(buf) >= 4:
        etype, rest = struct.unpack_from(">H", buf, 2)[0], buf[4:]
    elif link == lt.LINKTYPE_IPOIB and len(buf) >= 44:  # 40 address bytes, ethertype, 2 reserved
        etype, rest = struct.unpack_from(">H", buf, 40)[0], buf[44:]
    elif link in (lt.LINKTYPE_PPP, lt.LINKTYPE_PPP_HDLC):
        body = buf[2:] if buf[:2] == b"\xff\x03" else buf
        if len(body) >= 2:
            ppp = dpkt.ppp.PPP(b"\xff\x03" + body[:2] + bytes(40))  # dpkt reads the protocol
            etype, rest = {0x21: 0x0800, 0x57: 0x86DD}.get(ppp.p), body[2:]
    if etype == 0x0800:
        return 4, rest
    if etype == 0x86DD:
        return 6, rest
    if etype == ROCE_V1_ETHERTYPE:  # a GRH, then a BTH (Cisco HDLC and IPoIB name it as Ethernet does)
        return 0, rest
    return None


def decode(link: int, buf: bytes, frame_len: int) -> Fields:
    """Network fields of one frame, decoded by dpkt; undecodable layers stay None."""
    start = _network_start(link, buf)
    if start is None:
        return Fields()
    version, raw = start
    if version == 0:
        return _roce_v1(raw)
    if version == 4 and raw and raw[0] >> 4 == 6:
        version = 6  # IPv4 ethertype carrying an IPv6 header: tshark decodes it as IPv6
    wire_extra = frame_len - len(buf)  # bytes cut by snaplen
    if version == 4:
        if len(raw) < 20 or raw[0] >> 4 != 4:
            return Fields()
        ip = dpkt.ip.IP.__new__(dpkt.ip.IP)
        dpkt.Packet.unpack(ip, raw)
        hl = (ip._v_hl & 0xF) * 4
        if hl < 20:
            return Fields()
        f = Fields(
            4, socket.inet_ntop(socket.AF_INET, ip.src), socket.inet_ntop(socket.AF_INET, ip.dst), ip.p
        )
        f.dscp, f.ecn = ip.tos >> 2, ip.tos & 3
        frag_off = ip._flags_offset & 0x1FFF
        f.ip_fragment = bool(ip._flags_offset & 0x2000) or frag_off != 0
        (total,) = struct.unpack_from(">H", raw, 2)
        total = total or len(raw) + wire_extra
        payload = total - hl if total >= hl else None
        transport = raw[hl:]
        proto = ip.p
    else:
        if len(raw) < 40 or raw[0] >> 4 != 6:
            return Fields()
        hdr = dpkt.ip6.IP6.__new__(dpkt.ip6.IP6)
        dpkt.Packet.unpack(hdr, raw[:40])
        f = Fields(6, socket.inet_ntop(socket.AF_INET6, hdr.src), socket.inet_ntop(socket.AF_INET6, hdr.dst))
        f.dscp, f.ecn = hdr.fc >> 2, hdr.fc & 3
        # Walk the extension headers with dpkt's own header classes.
        nxt, pos, frag_off, is_frag = hdr.nxt, 40, 0, False
        while nxt in IP6_WALKED:
            cls = dpkt.ip6.EXT_HDRS_CLS[nxt]
            try:
                ext = cls(raw[pos:])
            except (dpkt.NeedData, dpkt.UnpackError, struct.error):
                break
            if pos + ext.length > len(raw):
                break  # not wholly captured: its Next Header is not trusted
            if nxt == 44:
                is_frag = True
                frag_off = ext.frag_off
            pos += ext.length
            nxt = ext.nxt
            if frag_off:
                break  # what follows a non-first fragment header is data, not headers
        f.ip_proto, f.ip_fragment = nxt, is_frag
        total = hdr.plen + 40 if hdr.plen else len(raw) + wire_extra
        payload = total - pos if total >= pos else None
        transport = raw[pos:]
        proto = nxt
    if frag_off != 0:
        f.l4_payload_len = payload
        return f
    if proto in (6, 17, 136, 132) and len(transport) >= 4:
        f.src_port, f.dst_port = struct.unpack_from(">HH", transport)
    if proto == 6:
        tcp = dpkt.tcp.TCP.__new__(dpkt.tcp.TCP)
        dpkt.Packet.unpack(tcp, transport[:20].ljust(20, b"\0"))
        # each field once its bytes are captured: seq (4-8), ack (8-12), window (14-16)
        f.tcp_seq = tcp.seq if len(transport) >= 8 else None
        f.tcp_ack = tcp.ack if len(transport) >= 12 else None
        f.tcp_window = tcp.win if len(transport) >= 16 else None
        if len(transport) >= 14:
            f.tcp_flags = ((transport[12] & 1) << 8) | tcp.flags
            thl = (transport[12] >> 4) * 4
            f.l4_payload_len = payload - thl if payload is not None and payload >= thl else None
            if tcp.flags & dpkt.tcp.TH_SYN and thl > 20:
                f.tcp_window_scale = _window_scale(transport[20:thl])
    elif proto in TRANSPORT_HEADER:
        need = TRANSPORT_HEADER[proto]
        f.l4_payload_len = payload - need if payload is not None and payload >= need else None
    else:
        f.l4_payload_len = payload
    if proto == 17 and f.dst_port is not None:
        udp_payload = payload - 8 if payload is not None and payload >= 8 else None
        if f.dst_port == 4791:
            _rdma(f, transport[8:], udp_payload)
        elif f.dst_port == 6081:
            _tunnel(f, transport[8:], "geneve")
        elif f.dst_port in VXLAN_PORTS:
            _tunnel(f, transport[8:], "vxlan")
    return f


def _window_scale(options: bytes) -> int | None:
    """The shift of a window scale option (kind 3, length 3) among TCP options as captured, by dpkt's
    option walk; the walk ends at End of Option List or at an option whose length is below 2 or runs
    past the captured bytes (dpkt goes on after both; tshark stops, and so does the reader)."""
    rest = options
    while rest:
        kind = rest[0]
        if kind == dpkt.tcp.TCP_OPT_EOL:
            return None
        if kind == dpkt.tcp.TCP_OPT_NOP:
            rest = rest[1:]
            continue
        if len(rest) < 2 or rest[1] < 2 or rest[1] > len(rest):
            return None
        (opt,) = dpkt.tcp.parse_opts(rest[: rest[1]])  # dpkt reads this one option
        if opt[0] == dpkt.tcp.TCP_OPT_WSCALE and len(opt[1]) == 1:
            return opt[1][0]
        rest = rest[rest[1] :]
    return None


def _roce_v1(grh: bytes) -> Fields:
    """A RoCE v1 frame: the 40-byte GRH (next header 0x1B: BTH), then the BTH; no IP fields."""
    f = Fields()
    if len(grh) >= 40 and grh[6] == 0x1B:
        _rdma(f, grh[40:], struct.unpack_from(">H", grh, 4)[0])
    return f


def _ib_headers(opcode: int) -> tuple[str, ...] | None:
    """The extension headers of a BTH opcode, in order; None for an opcode without a layout."""
    transport, operation = opcode >> 5, opcode & 31
    if opcode == 0x81:
        return ("CNP",)
    if transport == 3:
        return {4: ("DETH",), 5: ("DETH", "ImmDt")}.get(operation)
    if transport > 3 or (transport == 1 and operation > 0x0B):
        return None
    headers = IB_OPERATION_HEADERS.get(operation)
    if headers is None:
        return None
    return ("RDETH", "DETH", *headers) if transport == 2 else headers


def _rdma(f: Fields, bth: bytes, length: int | None) -> None:
    """Fill the rdma_* fields from a BTH and what follows; `length`: bytes from the BTH through the
    ICRC per the IP (or GRH) lengths. A BTH not wholly captured leaves every field None."""
    if len(bth) < 12:
        return
    opcode, b1, _pkey, b4, qp_hi, qp_lo, b8, psn_hi, psn_lo = struct.unpack_from(">BBHBBHBBH", bth)
    f.rdma_opcode = opcode
    f.rdma_dest_qp = (qp_hi << 16) | qp_lo
    f.rdma_psn = (psn_hi << 16) | psn_lo
    f.rdma_flags = (b8 >> 7) | (b1 >> 7) << 1 | (b4 >> 7) << 2 | ((b4 >> 6) & 1) << 3
    headers = _ib_headers(opcode)
    if headers is None:
        return
    size = sum(IB_HEADER_BYTES[h] for h in headers)
    if length is not None and length - 12 - size - 4 - ((b1 >> 4) & 3) >= 0:
        f.rdma_payload_len = length - 12 - size - 4 - ((b1 >> 4) & 3)
    if len(bth) < 12 + size:
        return
    at = 12
    for h in headers:
        if h == "RETH":
            f.rdma_reth_dma_len = struct.unpack_from(">I", bth, at + 12)[0]
        elif h == "AETH":
            f.rdma_aeth_syndrome = bth[at]
        elif h == "DETH":
            f.rdma_deth_src_qp = int.from_bytes(bth[at + 5 : at + 8], "big")
        at += IB_HEADER_BYTES[h]


def _tunnel(f: Fields, head: bytes, kind: str) -> None:
    """Fill the tunnel fields from a VXLAN or Geneve header and the packet inside it (inner RoCEv2
    fills the rdma_* fields)."""
    if len(head) < 8:
        return
    if kind == "vxlan":
        if not head[0] & 0x08:
            return
        inner = _ethernet(head[8:])
    else:
        if head[0] >> 6:
            return
        rest = head[8 + (head[0] & 0x3F) * 4 :]
        (proto,) = struct.unpack_from(">H", head, 2)
        inner = _ethernet(rest) if proto == 0x6558 else {0x0800: (4, rest), 0x86DD: (6, rest)}.get(proto)
    f.tunnel, f.vni = kind, int.from_bytes(head[4:7], "big")
    if inner is None:
        return
    version, raw = inner
    first, pos = True, 0
    if version == 4 and len(raw) >= 20 and raw[0] >> 4 == 4 and raw[0] & 15 >= 5:
        proto, pos = raw[9], (raw[0] & 15) * 4
        f.inner_src_ip = socket.inet_ntop(socket.AF_INET, raw[12:16])
        f.inner_dst_ip = socket.inet_ntop(socket.AF_INET, raw[16:20])
        first = struct.unpack_from(">H", raw, 6)[0] & 0x1FFF == 0
        payload = struct.unpack_from(">H", raw, 2)[0] - pos
    elif version == 6 and len(raw) >= 40 and raw[0] >> 4 == 6:
        proto, pos = raw[6], 40
        f.inner_src_ip = socket.inet_ntop(socket.AF_INET6, raw[8:24])
        f.inner_dst_ip = socket.inet_ntop(socket.AF_INET6, raw[24:40])
        while proto in IP6_WALKED and len(raw) >= pos + 8:
            size = 8 if proto == 44 else (raw[pos + 1] + 2) * 4 if proto == 51 else (raw[pos + 1] + 1) * 8
            if proto == 44:
                first = struct.unpack_from(">H", raw, pos + 2)[0] & 0xFFF8 == 0
            if len(raw) < pos + size:
                break
            proto, pos = raw[pos], pos + size
            if not first:
                break
        payload = struct.unpack_from(">H", raw, 4)[0] + 40 - pos
    else:
        return
    f.inner_ip_proto = proto
    if first and proto in (6, 17, 132, 136) and len(raw) >= pos + 4:
        f.inner_src_port, f.inner_dst_port = struct.unpack_from(">HH", raw, pos)
        if proto == 17 and f.inner_dst_port == 4791:
            _rdma(f, raw[pos + 8 :], payload - 8 if payload >= 8 else None)


def iter_rows(path: str | Path) -> Iterator[dict]:
    """Every packet of a small capture as a dict with PACKET_SCHEMA names (for tests)."""
    res = read_records(path)
    for rec in res.records:
        f = decode(rec.link_type, rec.data, rec.frame_len)
        yield {
            "ts_ns": rec.ts_ns,
            "frame_len": rec.frame_len,
            "cap_len": rec.cap_len,
            "interface": rec.interface,
            "link_type": rec.link_type,
            **f.__dict__,
        }
