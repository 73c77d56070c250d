"""The packet reader: capture files → Arrow record batches with `PACKET_SCHEMA`.

Public API (the ingest stage and the CLI build on it):

* `read_batches(path, batch_rows=1 << 20)` — stream of bounded `pyarrow.RecordBatch`es;
* `read_capture(path)` — the whole capture as one `pyarrow.Table` (small files);
* `CaptureReader(path, batch_rows)` — the same stream via `.batches()`, plus `.warnings`
  (truncated tail, unsupported link types, timestamp-less blocks) and `.stats`.

Formats: classic pcap (either byte order, µs or ns, v2.0-2.2 swapped lengths), pcapng
(sections of either byte order, per-interface link type, if_tsresol incl. 2^-n,
if_tsoffset; EPB, SPB, obsolete PB; other blocks skipped), each plain (memory-mapped) or
gzip/xz/zstd-compressed (detected by magic bytes, decompressed in bounded chunks).

Semantics, where a choice had to be made:

* Network fields describe the *outermost* IP header (tunnels: the outer packet; ICMP
  errors: no ports, the quoted header is not used); `dscp` and `ecn` are its TOS / traffic class.
  A VXLAN (UDP 4789, 8472 or `vxlan_ports`) or Geneve (6081) packet also gets `tunnel`, `vni`
  and the inner packet's `inner_*` addresses, protocol and ports.
* RoCE: UDP destination port 4791 (RoCEv2, whatever the source port, also inside a tunnel) and
  ethertype 0x8915 (RoCE v1, GRH) give the BTH's `rdma_opcode`, `rdma_dest_qp`, `rdma_psn`,
  `rdma_flags`, the message bytes `rdma_payload_len` (UDP payload less BTH, extension headers,
  pad and ICRC) and the RETH DMA length, AETH syndrome and DETH source QP where the opcode has
  them. Headers the capture cut short give nulls, counted in `stats` and one warning.
* `ip_proto` is the transport after the IPv6 extension headers (hop-by-hop, routing, destination
  options, fragment, AH).
* Decoded link types: Ethernet (802.1Q/802.1ad tags, LLC/SNAP, PPPoE session, MPLS incl.
  an Ethernet pseudowire), Linux SLL/SLL2, raw IP (12, 14, 101, 228, 229), NULL/LOOP,
  Cisco HDLC, PPP, IP over InfiniBand (242) (`linktypes.DECODED`). Other link types keep every
  frame with null network fields, counted per link type (`stats.undecoded_link_frames`) and
  named in a warning; there is no slower decoder of last resort (see linktypes.py).
* `l4_payload_len` comes from the IP lengths (not cap_len, which a snaplen cuts): bytes
  after the TCP/UDP/SCTP header, or after the IP headers for other protocols and for
  non-first fragments (whose ports and flags are null). An IP length of 0 (TSO captures)
  falls back to the frame length on the wire.
* Timestamps: sec * 1e9 + subsec * (1000 or 1) even when the sub-second field is out of
  range (tshark wraps such values in 32 bits). pcapng Simple Packet Blocks have no
  timestamp: they carry the previous packet's, and so do pcapng packet blocks whose time lies past
  int64 ns (after 2262; counted in `stats.late_timestamps` and one warning).
* Errors are `CaptureError`s naming the file and byte offset, raised after every batch of
  good packets before the problem; a cut-off last record is a warning.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.reader.abi import DEFAULT_BATCH_ROWS, DEFAULT_VXLAN_PORTS

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.reader.capture import CaptureReader, ReaderStats

__all__ = ["DEFAULT_BATCH_ROWS", "CaptureReader", "ReaderStats", "read_batches", "read_capture"]


def __getattr__(name: str) -> object:
    """`CaptureReader` and `ReaderStats` on first use: importing this package stays light (no
    pyarrow), so the kernel sources can be compiled where only numba is installed (the wheel build)."""
    if name in ("CaptureReader", "ReaderStats"):
        from tracecore.reader import capture

        return getattr(capture, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_batches(
    path: str | Path,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    vxlan_ports: Iterable[int] = DEFAULT_VXLAN_PORTS,
) -> Iterator[pa.RecordBatch]:
    """Stream a capture as RecordBatches of at most `batch_rows` packets (memory stays flat).

    Lazy: nothing is opened until the first batch is asked for, so `NotACaptureError` and
    every other `CaptureError` surface while iterating (after the good batches before them).
    Use `CaptureReader` to see warnings and stats as well. `vxlan_ports`: the UDP destination
    ports decoded as VXLAN (default 4789 and 8472; Geneve is 6081, RoCEv2 4791).
    """
    from tracecore.reader.capture import CaptureReader

    return CaptureReader(path, batch_rows, vxlan_ports).batches()


def read_capture(path: str | Path) -> pa.Table:
    """The whole capture as one Table (for small files; use `read_batches` for big ones)."""
    import pyarrow as pa

    from tracecore.schema import PACKET_SCHEMA

    return pa.Table.from_batches(list(read_batches(path)), schema=PACKET_SCHEMA)
