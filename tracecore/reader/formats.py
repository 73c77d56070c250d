"""Capture container headers: the magic bytes, classic pcap file header, pcapng SHB and IDB.

Why in plain Python: these headers occur once per file (or per section/interface), so
struct is fast enough and far easier to make strict than a numba kernel. The per-record
loop lives in `kernel.py`; it hands control back here at every SHB/IDB.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tracecore.errors import CaptureError

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A  # block type of a Section Header Block: the same bytes in either byte order
PCAPNG_BOM = 0x1A2B3C4D

# The first four bytes of a capture file, as they lie on disk.
PCAP_MAGIC_BYTES = frozenset(
    magic.to_bytes(4, order) for magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS) for order in ("little", "big")
)
PCAPNG_MAGIC_BYTES = PCAPNG_SHB.to_bytes(4, "little")

# Largest record tshark accepts (WTAP_MAX_PACKET_SIZE_STANDARD); a bigger caplen is corruption.
MAX_PACKET = 262144
# Largest pcapng block we accept: a packet of MAX_PACKET plus generous room for options.
MAX_BLOCK = MAX_PACKET + 65536

# Timestamp conversion kinds (see `TsRes`): multiply, divide, or binary fraction.
TS_MUL = 0
TS_DIV = 1
TS_BIN = 2


def container_of(head: bytes) -> str | None:
    """'pcap', 'pcapng' or None, from a file's first four bytes."""
    if head[:4] in PCAP_MAGIC_BYTES:
        return "pcap"
    if head[:4] == PCAPNG_MAGIC_BYTES:
        return "pcapng"
    return None


@dataclass(frozen=True)
class PcapHeader:
    """The 24-byte classic pcap file header."""

    order: str  # struct byte-order prefix: "<" or ">"
    nanos: bool
    version: tuple[int, int]
    snaplen: int
    link_type: int
    lengths_swapped: int  # 0 never, 1 always (v2.0-2.2), 2 when caplen > len (v2.3)

    @property
    def fmt(self) -> str:
        return f"pcap-{'le' if self.order == '<' else 'be'}-{'ns' if self.nanos else 'us'}"


@dataclass(frozen=True)
class TsRes:
    """How an interface's 64-bit timestamp counter becomes nanoseconds."""

    kind: int = TS_MUL
    factor: int = 1000  # multiplier, divisor, or number of fraction bits
    offset_ns: int = 0  # if_tsoffset, in ns

    def to_ns(self, ts: int) -> int:
        if self.kind == TS_MUL:
            ns = ts * self.factor
        elif self.kind == TS_DIV:
            ns = ts // self.factor
        else:
            ns = (ts >> self.factor) * 1_000_000_000 + (
                ((ts & ((1 << self.factor) - 1)) * 10**9) >> self.factor
            )
        return ns + self.offset_ns

    @property
    def max_units(self) -> int:
        """The largest counter (0 to 2^64 − 1) whose time fits int64 ns; why: the kernel multiplies in
        int64, so a later one (past 2262) would wrap to a time in the past: it gives those the previous
        packet's time instead."""
        lo, hi = -1, 2**64 - 1  # to_ns is monotone: the last counter at or below the limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.to_ns(mid) <= 2**63 - 1:
                lo = mid
            else:
                hi = mid - 1
        return lo

    @property
    def limit_bits(self) -> int:
        """`max_units` as the int64 of the same bits (the kernel's table is int64; it compares unsigned)."""
        units = self.max_units
        return units - 2**64 if units >= 2**63 else units


@dataclass(frozen=True)
class Interface:
    """One pcapng Interface Description Block."""

    link_type: int
    snaplen: int
    tsres: TsRes


def parse_pcap_header(head: bytes, path: object) -> PcapHeader:
    """Parse the 24-byte pcap header; `head` starts with a known pcap magic."""
    if len(head) < 24:
        raise CaptureError(path, f"pcap file header cut short ({len(head)} of 24 bytes)", 0)
    (magic,) = struct.unpack_from("<I", head)
    if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        order = "<"
    else:
        order = ">"
        (magic,) = struct.unpack_from(">I", head)
    major, minor, _zone, _sigfigs, snaplen, link = struct.unpack_from(order + "HHiIII", head, 4)
    if major != 2:
        raise CaptureError(path, f"unsupported pcap version {major}.{minor} (only 2.x exists)", 4)
    swapped = 1 if minor < 3 else (2 if minor == 3 else 0)
    return PcapHeader(order, magic == PCAP_MAGIC_NS, (major, minor), snaplen, link & 0xFFFF, swapped)


def iter_options(body: bytes, start: int, order: str) -> list[tuple[int, bytes]]:
    """pcapng options from `start` to the end of `body`; stops at opt_endofopt or a short tail."""
    out = []
    pos = start
    while pos + 4 <= len(body):
        code, length = struct.unpack_from(order + "HH", body, pos)
        pos += 4
        if code == 0:
            break
        if pos + length > len(body):
            raise ValueError(f"option {code} of length {length} overruns its block")
        out.append((code, body[pos : pos + length]))
        pos += (length + 3) & ~3
    return out


def parse_tsresol(value: int) -> TsRes:
    """if_tsresol: high bit clear = 10^-n s units, set = 2^-n s units."""
    n = value & 0x7F
    if value & 0x80:
        return TsRes(TS_BIN, n)
    if n <= 9:
        return TsRes(TS_MUL, 10 ** (9 - n))
    return TsRes(TS_DIV, 10 ** (n - 9))


def parse_idb(body: bytes, order: str) -> Interface:
    """An IDB body (after type and length): link type, snaplen, if_tsresol, if_tsoffset."""
    if len(body) < 8:
        raise ValueError("interface description block too short")
    link, _res, snaplen = struct.unpack_from(order + "HHI", body)
    tsres = TsRes()
    offset_s = 0
    for code, value in iter_options(body, 8, order):
        if code == 9 and len(value) >= 1:
            tsres = parse_tsresol(value[0])
        elif code == 14 and len(value) >= 8:
            (offset_s,) = struct.unpack_from(order + "q", value)
    if tsres.kind == TS_BIN and tsres.factor > 62:
        raise ValueError(f"if_tsresol 2^-{tsres.factor} is not representable")
    if tsres.kind == TS_DIV and tsres.factor > 10**18:
        raise ValueError("if_tsresol finer than 10^-27 s is not representable")
    if abs(offset_s) > (2**63 - 1) // 1_000_000_000:  # the kernel adds it to int64 ns
        raise ValueError(f"if_tsoffset {offset_s} s is not representable in int64 nanoseconds")
    return Interface(link, snaplen, TsRes(tsres.kind, tsres.factor, offset_s * 1_000_000_000))


def shb_order(head: bytes) -> str:
    """Byte order of a Section Header Block from its byte-order magic (bytes 8..12)."""
    if len(head) < 12:
        raise ValueError("section header block cut short")
    if struct.unpack_from("<I", head, 8)[0] == PCAPNG_BOM:
        return "<"
    if struct.unpack_from(">I", head, 8)[0] == PCAPNG_BOM:
        return ">"
    raise ValueError("section header block has no valid byte-order magic")


def check_shb(block: bytes, order: str) -> None:
    """Validate an SHB (the full block): version 1.x and well-formed options."""
    major, minor = struct.unpack_from(order + "HH", block, 12)
    if major != 1:
        raise ValueError(f"unsupported pcapng version {major}.{minor}")
    iter_options(block[:-4], 24, order)
