"""The streaming driver: format detection, buffer refills, pcapng metadata, errors.

Why split from the kernel: everything here happens once per batch, chunk, section or
interface, so it is plain Python and can afford clear error messages; the per-record work
is in `kernel.py`. Good packets are never lost: a batch is yielded before any error about
what follows it is raised, and a truncated tail is a warning, not an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from tracecore.errors import CaptureError, NotACaptureError, UsageError
from tracecore.reader import abi, formats
from tracecore.reader.batch import AddressTable, Columns, ColumnsPool
from tracecore.reader.compiled import kernels
from tracecore.reader.frames import FrameTap
from tracecore.reader.linktypes import DECODED, describe
from tracecore.reader.source import Window


@dataclass
class ReaderStats:
    """What a read found; complete once `batches()` is exhausted (or has raised)."""

    packets: int = 0
    bytes: int = 0  # captured bytes (sum of cap_len)
    file_bytes: int = 0  # container bytes walked (decompressed)
    undecoded_link_frames: dict[int, int] = field(default_factory=dict)  # link type → frames (null IP)
    simple_packet_blocks: int = 0  # pcapng SPBs: no timestamp (see CaptureReader)
    late_timestamps: int = 0  # pcapng packet blocks whose time lies past int64 ns (see CaptureReader)
    sections: int = 0
    interfaces: int = 0
    formats: set[str] = field(default_factory=set)  # e.g. {"pcap-le-us"} or {"pcapng-le", "gzip"}
    link_types: set[int] = field(default_factory=set)
    rdma_cut_short: int = 0  # RoCE packets whose BTH or extension header the capture cut (fields null)
    tunnel_cut_short: int = 0  # VXLAN/Geneve packets whose tunnel or inner headers the capture cut
    # with count_addresses: packets per address as outer source and destination, {address: [src, dst]}
    address_rows: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class _Section:
    order: str = "<"
    ifaces: list[formats.Interface] = field(default_factory=list)
    table: np.ndarray = field(default_factory=lambda: np.zeros((1, 6), dtype=np.int64))


class CaptureReader:
    """Streams a pcap/pcapng capture (plain, gzip, xz or zstd) as PACKET_SCHEMA batches.

    `batches()` yields RecordBatches of at most `batch_rows` rows (fewer when a batch holds
    more than 65536 distinct addresses). Afterwards `warnings` lists non-fatal problems
    (truncated tail, packets without timestamp, frames of unsupported link types) and
    `stats` counts what was read. A corrupt record raises `CaptureError` (with the byte
    offset and `packets_read`) after every batch before it has been yielded.

    pcapng Simple Packet Blocks carry no timestamp: they get the timestamp of the packet
    before them in the file (0 when there is none), so time stays monotone for analysis;
    `stats.simple_packet_blocks` counts them. Their interface is 0, as the format says. A packet
    block whose time lies past int64 nanoseconds (after 2262: a bogus clock, as in PcapPlusPlus'
    pcapng-example.pcapng) is kept the same way, with the previous packet's time, counted in
    `stats.late_timestamps` and one warning: it is a packet, and the ones after it are good.

    UDP destination port 4791 is RoCEv2 (whatever the source port), 6081 Geneve, and `vxlan_ports`
    (default 4789 and 8472) VXLAN; RoCE packets and tunnels whose headers the capture cut short
    keep null fields and are counted (`stats.rdma_cut_short`, `stats.tunnel_cut_short`) and warned of.

    Rows come in file order; `sort_batches` puts each batch's rows in time order (stable), as the
    ingest writer needs them: order across batches is the caller's (`tracecore.ingest.writer.TimeOrder`).
    `count_addresses` fills `stats.address_rows` (the kernel counts as it interns; off by default, so
    a plain read keeps no per-address state, whose size grows with the capture's distinct addresses).
    `frames`: a `FrameTap` given each packet record of a batch before the batch is yielded, in file
    order (so not with `sort_batches`); `tracecore read` takes an ARP or ICMP packet's Info from it.
    """

    def __init__(
        self,
        path: str | Path,
        batch_rows: int = abi.DEFAULT_BATCH_ROWS,
        vxlan_ports: Iterable[int] = abi.DEFAULT_VXLAN_PORTS,
        sort_batches: bool = False,
        count_addresses: bool = False,
        frames: FrameTap | None = None,
    ):
        if batch_rows < 1:
            raise UsageError(f"batch_rows must be at least 1, not {batch_rows}")
        ports = sorted(set(vxlan_ports))
        if any(not 0 < p < 65536 for p in ports) or {abi.ROCEV2_PORT, abi.GENEVE_PORT} & set(ports):
            raise UsageError(
                f"vxlan_ports must be UDP ports (1-65535) other than RoCEv2's {abi.ROCEV2_PORT} and"
                f" Geneve's {abi.GENEVE_PORT}, not {ports}"
            )
        self.path = Path(path)
        self.batch_rows = batch_rows
        self.vxlan_ports = np.array(ports, dtype=np.int64)
        self.sort_batches = sort_batches
        self.count_addresses = count_addresses
        if frames is not None and sort_batches:
            raise UsageError("frames come in file order: they cannot go with sort_batches")
        self.frames = frames
        self.warnings: list[str] = []
        self.stats = ReaderStats()

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.batches()

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.warnings.clear()
        self.stats = ReaderStats()
        if self.frames is not None:
            self.frames.clear()
        win = _open(self.path)
        try:
            if win.kind:
                self.stats.formats.add(win.kind)
            head = bytes(win.buf[:4])
            if len(head) < 4:
                raise NotACaptureError(
                    self.path, f"file of {len(head)} bytes: not a pcap or pcapng capture", 0
                )
            container = formats.container_of(head)
            if container == "pcap":
                yield from self._pcap(win)
            elif container == "pcapng":
                yield from self._pcapng(win)
            else:
                raise NotACaptureError(
                    self.path, f"not a pcap or pcapng capture (first bytes {head.hex(' ')})", 0
                )
        finally:  # also when a CaptureError stops the read or the caller stops early
            win.close()
            self._summarise()

    # -- shared loop -------------------------------------------------------------------------

    def _loop(self, win: Window, pos: int, call, meta=None, tap=None) -> Iterator[pa.RecordBatch]:
        """Run a kernel to the end of the file, yielding full batches and handling refills; `tap` is
        given the bytes of the records each kernel call consumed (`FrameTap`)."""
        rows = self.batch_rows
        table = AddressTable(rows)
        pool = ColumnsPool(rows)
        cols = pool.take()
        st = np.zeros(abi.NSTATE, dtype=np.int64)
        while True:
            start = pos
            status, pos = call(win.buf, pos, rows, table, cols, st)
            if tap is not None and pos > start:
                tap(win.buf, start, pos)
            if status == abi.ST_FULL:
                yield self._flush(cols, table, st)
                cols = pool.take()
                continue
            if status == abi.ST_META:
                try:
                    nxt = meta(win, pos)
                except CaptureError as exc:  # keep the packets before the bad header block
                    if st[abi.N]:
                        yield self._flush(cols, table, st)
                    self._count(st)
                    exc.packets_read = self.stats.packets
                    self.stats.file_bytes = win.base + pos
                    raise
                if nxt is not None:
                    pos = nxt
                    continue
            elif status == abi.ST_CORRUPT:
                offset = win.base + pos
                self.stats.file_bytes = offset
                if st[abi.N]:
                    yield self._flush(cols, table, st)
                msg = abi.ERR_MESSAGES[int(st[abi.ERR])].format(int(st[abi.ERR_VALUE]))
                if win.kind:  # the offset counts the decompressed bytes, not the file's
                    msg += f", in the decompressed {win.kind} stream"
                self._count(st)
                raise CaptureError(self.path, msg, offset, self.stats.packets)
            # ST_NEED, or a metadata block not wholly in the buffer
            if win.advance(pos):
                pos = 0
                continue
            self.stats.file_bytes = win.base + pos
            if pos < len(win.buf) and meta is not None and not self.stats.interfaces:
                # a pcapng cut before it could hold a packet: nothing in it is usable, an error
                message = "file cut short inside its first header blocks: no packet"
                raise CaptureError(self.path, message, win.base + pos)
            if pos < len(win.buf):
                self.warnings.append(
                    f"{self.path}: file cut short: incomplete record at byte offset {win.base + pos} "
                    f"({len(win.buf) - pos} bytes ignored); the {self.stats.packets + int(st[abi.N])} "
                    "complete packets before it are kept"
                )
            if win.error and not win.corrupt:
                self.warnings.append(f"{self.path}: {win.kind} stream stopped: {win.error}")
            break
        if st[abi.N]:
            yield self._flush(cols, table, st)
        self._count(st)
        if win.corrupt:
            end = win.base + len(win.buf)
            message = f"{win.kind} stream corrupt: {win.error} (after {end} decompressed bytes)"
            raise CaptureError(self.path, message, None, self.stats.packets)

    def _flush(self, cols: Columns, table: AddressTable, st: np.ndarray) -> pa.RecordBatch:
        n = int(st[abi.N])
        if st[abi.UNSUPPORTED]:  # rare: only then are the batch's link types counted
            self._count_undecoded(cols.link_types(n))
            st[abi.UNSUPPORTED] = 0
        if self.sort_batches:
            cols.sort_by_time(n)
        batch = cols.to_batch(n, table, st, self.stats.address_rows if self.count_addresses else None)
        rdma_short, tunnel_short = cols.cut_short(n)
        self.stats.rdma_cut_short += rdma_short
        self.stats.tunnel_cut_short += tunnel_short
        self.stats.packets += n
        st[abi.N] = 0
        return batch

    def _count_undecoded(self, link_types: np.ndarray) -> None:
        """Add a batch's frames of undecoded link types to `stats`, per link type."""
        counts = self.stats.undecoded_link_frames
        values, frames = np.unique(link_types, return_counts=True)
        for link, count in zip(values.tolist(), frames.tolist(), strict=True):
            if link not in DECODED:
                counts[link] = counts.get(link, 0) + count

    def _count(self, st: np.ndarray) -> None:
        """Move the kernel's per-file counters to `stats` (every batch has been flushed)."""
        self.stats.bytes += int(st[abi.CAPBYTES])
        self.stats.simple_packet_blocks += int(st[abi.SPB])
        self.stats.late_timestamps += int(st[abi.LATE])
        for slot in (abi.CAPBYTES, abi.SPB, abi.LATE):
            st[slot] = 0

    def _summarise(self) -> None:
        s = self.stats
        if s.undecoded_link_frames:
            counted = ", ".join(
                f"{count} frame{'s' if count > 1 else ''} of link type {describe(link)}"
                for link, count in sorted(s.undecoded_link_frames.items())
            )
            which = "that link type" if len(s.undecoded_link_frames) == 1 else "those link types"
            self.warnings.append(
                f"{self.path}: {counted} kept with null IP fields: tracecore has no network decoder "
                f"for {which}"
            )
        if s.rdma_cut_short:
            self.warnings.append(
                f"{self.path}: {s.rdma_cut_short} RoCE packet{'s' if s.rdma_cut_short > 1 else ''} cut short"
                " inside the BTH or an extension header: the RDMA fields the capture lacks are null"
            )
        if s.tunnel_cut_short:
            plural = "s" if s.tunnel_cut_short > 1 else ""
            self.warnings.append(
                f"{self.path}: {s.tunnel_cut_short} VXLAN/Geneve packet{plural}"
                " cut short inside the tunnel header or the inner headers: the inner fields the capture"
                " lacks are null"
            )
        if s.simple_packet_blocks:
            self.warnings.append(
                f"{self.path}: {s.simple_packet_blocks} pcapng simple packet blocks have no timestamp: "
                "they carry the previous packet's time"
            )
        if s.late_timestamps:
            self.warnings.append(
                f"{self.path}: {s.late_timestamps} pcapng packet block{'s' if s.late_timestamps > 1 else ''}"
                " with a time past 2262, beyond int64 nanoseconds (a bogus clock): kept with the previous"
                " packet's time"
            )

    # -- classic pcap ------------------------------------------------------------------------

    def _pcap(self, win: Window) -> Iterator[pa.RecordBatch]:
        hdr = formats.parse_pcap_header(bytes(win.buf[:24]), self.path)
        self.stats.formats.add(hdr.fmt)
        self.stats.link_types.add(hdr.link_type)
        limit = max(formats.MAX_PACKET, min(hdr.snaplen, 1 << 24))
        big = hdr.order == ">"
        pcap_records = kernels().pcap_records

        def call(buf, pos, rows, table, cols, st):
            return pcap_records(
                buf, pos, big, hdr.nanos, hdr.lengths_swapped, hdr.link_type, limit, rows, table.umax,
                self.vxlan_ports, *cols.kernel_args(), *table.kernel_args(), st,
            )  # fmt: skip

        tap = None
        if self.frames is not None:
            frames = self.frames

            def tap(buf, start, stop):
                frames.pcap(buf, start, stop, hdr.order, hdr.lengths_swapped, hdr.link_type)

        yield from self._loop(win, 24, call, tap=tap)

    # -- pcapng ------------------------------------------------------------------------------

    def _pcapng(self, win: Window) -> Iterator[pa.RecordBatch]:
        sec = _Section()
        pcapng_blocks = kernels().pcapng_blocks

        def call(buf, pos, rows, table, cols, st):
            return pcapng_blocks(
                buf, pos, sec.order == ">", sec.table, len(sec.ifaces), rows, table.umax, self.vxlan_ports,
                *cols.kernel_args(), *table.kernel_args(), st,
            )  # fmt: skip

        def meta(win: Window, pos: int) -> int | None:
            return self._meta(win, pos, sec)

        tap = None
        if self.frames is not None:
            frames = self.frames

            def tap(buf, start, stop):
                frames.pcapng(buf, start, stop, sec.order, sec.ifaces)

        yield from self._loop(win, 0, call, meta, tap)

    def _meta(self, win: Window, pos: int, sec: _Section) -> int | None:
        """Parse the SHB or IDB at `pos`; None when it is not wholly in the buffer yet."""
        buf = win.buf
        if pos + 12 > len(buf):
            return None
        head = bytes(buf[pos : pos + 12])
        offset = win.base + pos
        if head[:4] == formats.PCAPNG_MAGIC_BYTES:
            try:
                order = formats.shb_order(head)
            except ValueError as exc:
                raise CaptureError(self.path, str(exc), offset, self.stats.packets) from None
            (blen,) = struct.unpack_from(order + "I", head, 4)
            if blen < 28 or blen % 4 or blen > formats.MAX_BLOCK:
                raise CaptureError(
                    self.path, f"corrupt section header block: length {blen}", offset, self.stats.packets
                )
            if pos + blen > len(buf):
                return None
            block = bytes(buf[pos : pos + blen])
            (trail,) = struct.unpack_from(order + "I", block, blen - 4)
            if trail != blen:
                raise CaptureError(
                    self.path,
                    f"corrupt section header block: trailing length {trail} differs from {blen}",
                    offset,
                    self.stats.packets,
                )
            try:
                formats.check_shb(block, order)
            except ValueError as exc:
                raise CaptureError(
                    self.path, f"section header block: {exc}", offset, self.stats.packets
                ) from None
            sec.order = order
            sec.ifaces = []
            sec.table = np.zeros((1, 6), dtype=np.int64)
            self.stats.sections += 1
            self.stats.formats.add("pcapng-le" if order == "<" else "pcapng-be")
            return pos + blen
        (blen,) = struct.unpack_from(sec.order + "I", head, 4)  # the kernel checked length and trailer
        try:
            iface = formats.parse_idb(bytes(buf[pos + 8 : pos + blen - 4]), sec.order)
        except (ValueError, struct.error) as exc:
            raise CaptureError(
                self.path, f"corrupt interface description block: {exc}", offset, self.stats.packets
            ) from None
        sec.ifaces.append(iface)
        row = [iface.link_type, iface.snaplen, iface.tsres.kind, iface.tsres.factor, iface.tsres.offset_ns]
        rows = [*sec.table[: len(sec.ifaces) - 1].tolist(), [*row, iface.tsres.limit_bits]]
        sec.table = np.array(rows, dtype=np.int64)
        self.stats.interfaces += 1
        self.stats.link_types.add(iface.link_type)
        return pos + blen


def _open(path: Path) -> Window:
    try:
        return Window(path)
    except FileNotFoundError:
        raise CaptureError(path, "no such file") from None
    except IsADirectoryError:
        raise CaptureError(path, "is a directory, not a capture file") from None
    except PermissionError:
        raise CaptureError(path, "permission denied") from None
