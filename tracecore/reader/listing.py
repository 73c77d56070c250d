"""`tracecore read`'s packet list: one tshark-like line per packet, with tshark's Info for TCP, UDP,
ARP, ICMP and ICMPv6.

Why here and not in the CLI: the Info of a TCP packet needs state across packets (tshark's relative
sequence numbers count from each direction's first sequence number; its window is scaled by the
shift the direction's SYN offered), and the line's layout is decided once from the first batch.

TCP Info follows tshark 4.0 with its defaults: `sport → dport [flags] Seq=… Ack=… Win=… Len=…`, Seq and
Ack relative to the first sequence number seen in each direction (a SYN's own number, else one
before the first segment's; the other direction's from the first Ack when its own segments are not
seen yet), a new SYN with another sequence number starting the connection over; the window scaled
when the direction's SYN offered a scale and the other side's SYN did not refuse it. The raw numbers
are the `tcp_seq` and `tcp_ack` columns (`--format csv`). tshark's own additions (TCP options other
than WS, analysis flags, application protocols) are not repeated. ARP, ICMP and ICMPv6 packets get
theirs from their frame bytes when the reader was given a `FrameTap` (`arp_icmp.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracecore.reader.arp_icmp import ArpIcmpInfo
from tracecore.reader.names import protocol, summary

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.reader.frames import Frame, FrameTap

PROTOCOLS = {
    1: "ICMP",
    2: "IGMP",
    6: "TCP",
    17: "UDP",
    41: "IPv6",
    47: "GRE",
    50: "ESP",
    58: "ICMPv6",
    132: "SCTP",
}
# tshark's names of the TCP flag bits, lowest bit first, in the order its Info lists them
TCP_FLAGS = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR", "NS")
SYN, ACK = 0x02, 0x10
TCP_COLUMNS = ("src_ip", "src_port", "dst_ip", "dst_port", "tcp_flags", "tcp_seq", "tcp_ack", "tcp_window")
TCP_COLUMNS += ("tcp_window_scale", "l4_payload_len", "ip_fragment")
LISTED = ("ts_ns", "frame_len", "link_type", "ip_version", "ip_proto", *TCP_COLUMNS, "rdma_opcode", "tunnel")
ICMP_PROTOCOLS = (1, 58)  # ICMP, ICMPv6: Info from the frame
MASK32 = 0xFFFFFFFF
MAX_SHIFT = 14  # RFC 7323: a larger window scale shift is taken as 14 (tshark does the same)
NO_SCALE = -1  # a direction whose SYN (or the other side's) offered no window scale
# a fragment of a datagram not reassembled (the first one's Len is its own, not the datagram's)
FRAGMENT = "[IP fragment]"


@functools.cache
def tcp_flags(bits: int) -> str:
    """'SYN, ACK' for 0x12, as tshark writes the flags in its Info; '<None>' for none."""
    names = [name for i, name in enumerate(TCP_FLAGS) if bits >> i & 1]
    if bits & 0xE00:
        names.append("Reserved")
    return ", ".join(names) or "<None>"


@dataclass
class TcpState:
    """Per direction of each TCP connection seen so far: the base of its relative sequence numbers and
    its window scale shift (NO_SCALE when refused; absent while its SYN was not seen)."""

    base: dict[tuple, int] = field(default_factory=dict)
    shift: dict[tuple, int] = field(default_factory=dict)

    def info(self, row: dict) -> str:
        """tshark's Info of one TCP packet (`row`: the packet's columns)."""
        fwd = (row["src_ip"], row["src_port"], row["dst_ip"], row["dst_port"])
        rev = (fwd[2], fwd[3], fwd[0], fwd[1])
        flags, seq, ack = row["tcp_flags"] or 0, row["tcp_seq"], row["tcp_ack"]
        syn = flags & SYN
        if syn and seq is not None and not row["ip_fragment"]:
            self._syn(fwd, rev, flags, seq, row["tcp_window_scale"])
        words = [f"{row['src_port']} → {row['dst_port']}", f"[{tcp_flags(flags)}]"]
        fragment = row["ip_fragment"]  # tshark does not analyse a fragment it did not reassemble: raw numbers
        if seq is not None:
            base = 0 if fragment else self.base.setdefault(fwd, seq if syn else (seq - 1) & MASK32)
            words.append(f"Seq={(seq - base) & MASK32}")
        if flags & ACK and ack is not None:
            base = 0 if fragment else self.base.setdefault(rev, (ack - 1) & MASK32)
            words.append(f"Ack={(ack - base) & MASK32}")
        if row["tcp_window"] is not None:
            shift = NO_SCALE if syn else self.shift.get(fwd, NO_SCALE)
            words.append(f"Win={row['tcp_window'] << max(shift, 0)}")
        if row["l4_payload_len"] is not None:
            words.append(f"Len={row['l4_payload_len']}")
        if syn and row["tcp_window_scale"] is not None:
            words.append(f"WS={1 << min(row['tcp_window_scale'], MAX_SHIFT)}")
        if fragment:
            words.append(FRAGMENT)
        return " ".join(words)

    def _syn(self, fwd: tuple, rev: tuple, flags: int, seq: int, scale: int | None) -> None:
        """A SYN: a new connection when its number differs from the direction's base (the ports are
        used again); its window scale offer, cancelled for both directions when either side made none."""
        if not flags & ACK and fwd in self.base and self.base[fwd] != seq:
            for key in (fwd, rev):
                self.base.pop(key, None)
                self.shift.pop(key, None)
        self.shift[fwd] = NO_SCALE if scale is None else min(scale, MAX_SHIFT)
        if flags & ACK and NO_SCALE in (self.shift[fwd], self.shift.get(rev)):
            self.shift[fwd] = NO_SCALE
            if rev in self.shift:
                self.shift[rev] = NO_SCALE


@dataclass(frozen=True)
class Layout:
    """Column widths, from the first batch: each column as wide as its widest cell there (or its
    heading); later wider cells push the line right. `decimals`: 9 when a time has nanoseconds."""

    number: int
    time: int
    source: int
    destination: int
    protocol: int
    length: int
    decimals: int

    def header(self) -> str:
        return (
            f"{'No.':>{self.number}} {'Time':>{self.time}} {'Source':>{self.source}}   "
            f"{'Destination':<{self.destination}} {'Proto':<{self.protocol}} {'Length':>{self.length}} Info"
        )

    def line(
        self, number: int, seconds: float, src: str, dst: str, proto: str, length: int, info: str
    ) -> str:
        arrow = "→" if src or dst else " "
        return (
            f"{number:>{self.number}} {seconds:>{self.time}.{self.decimals}f} {src:>{self.source}} {arrow} "
            f"{dst:<{self.destination}} {proto:<{self.protocol}} {length:>{self.length}} {info}"
        ).rstrip()


def _layout(cols: dict, first_ts: int) -> Layout:
    decimals = 9 if any(ts % 1000 for ts in cols["ts_ns"]) else 6
    last = (max(cols["ts_ns"]) - first_ts) / 1e9
    names = {_protocol_name(cols["ip_proto"][i], cols["link_type"][i]) for i in range(len(cols["ts_ns"]))}
    return Layout(
        number=max(3, len(str(len(cols["ts_ns"])))),
        time=max(4, len(f"{last:.{decimals}f}")),
        source=max([6, *(len(a) for a in cols["src_ip"] if a)]),
        destination=max([11, *(len(a) for a in cols["dst_ip"] if a)]),
        protocol=max(5, *(len(n) for n in names)),
        length=max(6, len(str(max(cols["frame_len"])))),
        decimals=decimals,
    )


def _protocol_name(proto: int | None, link: int) -> str:
    return f"link {link}" if proto is None else PROTOCOLS.get(proto, str(proto))


def _arp_icmp(
    control: ArpIcmpInfo, number: int, frame: Frame | None, cols: dict, i: int
) -> tuple[str, str] | None:
    """(protocol, Info) of an ARP, ICMP or ICMPv6 packet from its frame; None for other packets, and
    when the frame is not the row's (the reader's records and rows disagree: never expected)."""
    if frame is None or frame.orig_len != cols["frame_len"][i]:
        return None
    proto = cols["ip_proto"][i]
    if proto is None:
        return control.arp(number, frame.captured(), frame.orig_len, frame.link_type)
    src, dst = cols["src_ip"][i], cols["dst_ip"][i]
    if src is None or dst is None:
        return None
    info = control.icmp(number, frame.captured(), frame.orig_len, cols["ip_version"][i], src, dst, proto)
    return None if info is None else (PROTOCOLS[proto], info)


def fitted(line: str, width: int | None) -> str:
    """`line` cut to `width` characters with '…' as the last (None: whole)."""
    if width is None or len(line) <= width:
        return line
    return line[: max(width - 1, 0)] + "…"


def packet_lines(
    batches: Iterable[pa.RecordBatch], width: int | None = None, frames: FrameTap | None = None
) -> Iterator[str]:
    """The header, then one line per packet: number, seconds since the first packet, source →
    destination, protocol, frame length and Info; each cut to `width` with '…' when given. `frames`:
    the tap the batches' reader fills, for the Info of ARP and ICMP packets (without it, none)."""
    tcp = TcpState()
    control = ArpIcmpInfo()
    number = 0
    first_ts: int | None = None
    layout: Layout | None = None
    for batch in batches:
        if not batch.num_rows:
            continue
        layered = any(batch.column(c).null_count < batch.num_rows for c in ("rdma_opcode", "tunnel"))
        cols = (batch if layered else batch.select(LISTED)).to_pydict()  # every column for summary()
        if layout is None:
            first_ts = cols["ts_ns"][0]
            layout = _layout(cols, first_ts)
            yield fitted(layout.header(), width)
        tcp_cols = [(key, cols[key]) for key in TCP_COLUMNS]
        records = frames.take(batch.num_rows) if frames is not None else None
        for i in range(batch.num_rows):
            number += 1
            proto, sport = cols["ip_proto"][i], cols["src_port"][i]
            name, info = _protocol_name(proto, cols["link_type"][i]), ""
            if cols["rdma_opcode"][i] is not None or cols["tunnel"][i] is not None:
                row = {key: values[i] for key, values in cols.items()}
                name, info = protocol(row) or name, summary(row)
            elif proto == 6 and sport is not None:
                info = tcp.info({key: column[i] for key, column in tcp_cols})
            elif proto == 17 and sport is not None:
                info = f"{sport} → {cols['dst_port'][i]} Len={cols['l4_payload_len'][i]}"
                info += f" {FRAGMENT}" if cols["ip_fragment"][i] else ""
            elif records is not None and (proto is None or proto in ICMP_PROTOCOLS):
                name, info = _arp_icmp(control, number, records[i], cols, i) or (name, info)
                if cols["ip_fragment"][i]:  # a first fragment has the ICMP header (tshark reads it)
                    info = f"{info} {FRAGMENT}" if info else FRAGMENT
            elif cols["ip_fragment"][i]:
                info = FRAGMENT
            seconds = (cols["ts_ns"][i] - first_ts) / 1e9
            src, dst = cols["src_ip"][i] or "", cols["dst_ip"][i] or ""
            yield fitted(layout.line(number, seconds, src, dst, name, cols["frame_len"][i], info), width)
