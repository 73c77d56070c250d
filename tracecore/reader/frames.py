"""Each packet's frame bytes, for `tracecore read`'s Info of the packets the table has no fields for.

Why: the packet table holds header fields, not frames, and the Info tshark gives an ARP or ICMP packet
("Who has 10.0.0.2? Tell 10.0.0.1", "Echo (ping) request id=…") needs fields the table does not keep
(ARP's addresses, ICMP's type, code, identifier and sequence number). The reader hands a `FrameTap`
the bytes each kernel call consumed, before the batch of those packets is yielded; the tap finds the
packet records in them, in file order, one per row. Plain Python, once per record, and only when a
`CaptureReader` is given a tap (`tracecore read`'s table): ingest passes none, so its kernels and
batches are untouched. Standard input works too: the bytes are the ones the reader already has.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np

    from tracecore.reader.formats import Interface

EPB, SPB, OBSOLETE_PB = 6, 3, 2  # the pcapng blocks that hold a packet (the kernel's rows)


class Frame(NamedTuple):
    """One packet record: where its captured bytes lie, their length, the length on the wire, the link
    type. `data` is the reader's buffer at the time (a view, not a copy)."""

    data: memoryview
    offset: int
    cap_len: int
    orig_len: int
    link_type: int

    def captured(self) -> bytes:
        return bytes(self.data[self.offset : self.offset + self.cap_len])


class FrameTap:
    """The records of the packets read so far and not yet taken, in file order."""

    def __init__(self) -> None:
        self._frames: deque[Frame] = deque()

    def clear(self) -> None:
        self._frames.clear()

    def take(self, rows: int) -> list[Frame | None]:
        """The next `rows` records (None past the last one seen: the rows stay without them)."""
        frames = self._frames
        return [frames.popleft() if frames else None for _ in range(rows)]

    def pcap(self, buf: np.ndarray, start: int, stop: int, order: str, swapped: int, link: int) -> None:
        """The classic pcap records in `buf[start:stop]` (whole records, as the kernel consumed them);
        `swapped` as `PcapHeader.lengths_swapped`."""
        view = memoryview(buf)
        lengths = struct.Struct(order + "8xII")
        pos = start
        while pos < stop:
            cap, orig = lengths.unpack_from(view, pos)
            if swapped == 1 or (swapped == 2 and cap > orig):
                cap, orig = orig, cap
            self._frames.append(Frame(view, pos + 16, cap, orig, link))
            pos += 16 + cap

    def pcapng(self, buf: np.ndarray, start: int, stop: int, order: str, interfaces: list[Interface]) -> None:
        """The packet blocks among the pcapng blocks in `buf[start:stop]` (the kernel stops before a
        section or interface block, so `interfaces` are those of the blocks' section)."""
        view = memoryview(buf)
        head = struct.Struct(order + "II")
        pos = start
        while pos < stop:
            kind, length = head.unpack_from(view, pos)
            if kind in (EPB, OBSOLETE_PB):
                if kind == EPB:
                    (interface,) = struct.unpack_from(order + "I", view, pos + 8)
                else:
                    (interface,) = struct.unpack_from(order + "H", view, pos + 8)
                cap, orig = head.unpack_from(view, pos + 20)
                self._frames.append(Frame(view, pos + 28, cap, orig, interfaces[interface].link_type))
            elif kind == SPB:
                (orig,) = struct.unpack_from(order + "I", view, pos + 8)
                cap = min(orig, length - 16)
                if interfaces[0].snaplen > 0:
                    cap = min(cap, interfaces[0].snaplen)
                self._frames.append(Frame(view, pos + 12, cap, orig, interfaces[0].link_type))
            pos += length
