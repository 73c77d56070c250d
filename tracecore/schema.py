"""The packet table: one Arrow schema shared by the reader, ingest and the SQL views.

Why these types: timestamps are integer UTC nanoseconds (never float seconds, which lose
precision past microseconds); addresses are dictionary-encoded strings so SQL can say
`src_ip = '192.168.17.50'` while Parquet stores a few distinct values per file;
header fields are the narrowest unsigned ints that hold them, null where the layer is absent.
The dataset's Parquet files store byte counts as int64 instead (DATASET_SCHEMA: no reader can wrap
a sum past 4 GiB) and say so in their key-value metadata (`part_metadata`, SCHEMA_VERSION).
"""

from __future__ import annotations

import pyarrow as pa

from tracecore.schema_version import OLDEST_READABLE_SCHEMA as OLDEST_READABLE_SCHEMA
from tracecore.schema_version import SCHEMA_VERSION
from tracecore.schema_version import check_schema_version as check_schema_version

ADDRESS = pa.dictionary(pa.int32(), pa.string())

PACKET_FIELDS: list[pa.Field] = [
    pa.field("ts_ns", pa.int64(), nullable=False),  # UTC nanoseconds since the epoch
    pa.field("frame_len", pa.uint32(), nullable=False),  # original length on the wire, bytes
    pa.field("cap_len", pa.uint32(), nullable=False),  # bytes stored in the capture
    pa.field("interface", pa.uint16(), nullable=False),  # pcapng interface id; 0 for pcap
    pa.field("link_type", pa.uint16(), nullable=False),  # LINKTYPE_* of the frame
    pa.field("ip_version", pa.uint8()),  # 4 or 6 for the outermost IP header, null otherwise
    pa.field("src_ip", ADDRESS),
    pa.field("dst_ip", ADDRESS),
    pa.field("ip_proto", pa.uint8()),  # transport protocol after IPv6 extension headers
    pa.field("src_port", pa.uint16()),  # TCP/UDP/SCTP ports; null for non-first fragments
    pa.field("dst_port", pa.uint16()),
    pa.field("tcp_flags", pa.uint16()),  # 9 TCP flag bits (NS..FIN), null when not TCP
    pa.field("tcp_seq", pa.uint32()),  # TCP sequence number as sent (raw, not relative), null when not TCP
    pa.field("tcp_ack", pa.uint32()),  # TCP acknowledgment number field, whatever the ACK flag says
    pa.field("tcp_window", pa.uint16()),  # TCP window field, unscaled
    pa.field("tcp_window_scale", pa.uint8()),  # a SYN's window scale shift (option 3); null elsewhere
    pa.field("l4_payload_len", pa.uint32()),  # transport payload bytes per IP lengths
    pa.field("ip_fragment", pa.bool_()),  # true for any IP fragment (first or later)
    pa.field("dscp", pa.uint8()),  # outer IPv4/IPv6 header's DSCP (TOS / traffic class >> 2)
    pa.field("ecn", pa.uint8()),  # outer header's ECN bits: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE
    # RoCE (v2: UDP destination port 4791; v1: ethertype 0x8915; also inside a tunnel): the BTH ...
    pa.field("rdma_opcode", pa.uint8()),  # BTH opcode: transport (RC 0x00, UC 0x20, UD 0x60, CNP 0x80) | op
    pa.field("rdma_dest_qp", pa.uint32()),  # 24-bit destination queue pair
    pa.field("rdma_psn", pa.uint32()),  # 24-bit packet sequence number
    pa.field("rdma_flags", pa.uint8()),  # bits: 1 ack request, 2 solicited event, 4 FECN, 8 BECN
    pa.field(
        "rdma_payload_len", pa.uint32()
    ),  # message bytes: after BTH + extension headers, before pad + ICRC
    # ... and what its extension headers say (null where the opcode has no such header)
    pa.field("rdma_reth_dma_len", pa.uint32()),  # RETH DMA length (WRITE First/Only, READ Request)
    pa.field(
        "rdma_aeth_syndrome", pa.uint8()
    ),  # AETH syndrome: 0x00-0x1f ACK, 0x20-0x3f RNR NAK, 0x60-0x7f NAK
    pa.field("rdma_deth_src_qp", pa.uint32()),  # DETH source QP (UD)
    # VXLAN / Geneve: the outer columns stay what crossed the link; these describe the inner packet
    pa.field("tunnel", pa.dictionary(pa.int8(), pa.string())),  # 'vxlan' | 'geneve'
    pa.field("vni", pa.uint32()),  # 24-bit virtual network identifier
    pa.field("inner_src_ip", ADDRESS),
    pa.field("inner_dst_ip", ADDRESS),
    pa.field("inner_ip_proto", pa.uint8()),
    pa.field("inner_src_port", pa.uint16()),
    pa.field("inner_dst_port", pa.uint16()),
]

PACKET_SCHEMA = pa.schema(PACKET_FIELDS)
PACKET_COLUMNS = [f.name for f in PACKET_FIELDS]

# The dataset's packet files: the reader's columns, with every byte count widened to int64.
# Why: Polars sums a UInt32 column as UInt32 and wraps past 4 GiB (one benchmark capture is 2-8 GB);
# int64 makes the wrap impossible in every reader. The reader keeps uint32 (its kernels' buffers);
# the ingest writer widens each batch (`tracecore.ingest.writer.widen`).
# BYTE_COLUMNS: those schema version 1 stored as uint32 (the catalog casts them when it reads such files);
# INT64_COLUMNS: every byte count, BYTE_COLUMNS and those of version 3's RDMA columns.
BYTE_COLUMNS = ("frame_len", "cap_len", "l4_payload_len")
INT64_COLUMNS = (*BYTE_COLUMNS, "rdma_payload_len", "rdma_reth_dma_len")
# The columns of a layer most packets lack (RDMA, tunnels, a SYN's window scale option): null on
# nearly all TCP rows, so the ingest writer's part files of fully set rows (`writer.split_dense`:
# "dense" parts) leave them out, and the catalog's packets views add them back as typed NULLs
# (`catalog.packets_all_sql`).
LAYER_COLUMNS = tuple(
    f.name
    for f in PACKET_FIELDS
    if f.name.startswith(("rdma_", "inner_", "tunnel", "vni")) or f.name == "tcp_window_scale"
)
DATASET_FIELDS: list[pa.Field] = [
    f.with_type(pa.int64()) if f.name in INT64_COLUMNS else f for f in PACKET_FIELDS
]
DATASET_SCHEMA = pa.schema(DATASET_FIELDS)

TS_NS_MEANING = "UTC nanoseconds since 1970-01-01T00:00:00Z (Unix epoch), from the capture's record"
UNITS: dict[str, str] = {
    "ts_ns": "ns since the Unix epoch, UTC",
    "frame_len": "bytes (original length on the wire)",
    "cap_len": "bytes (stored in the capture)",
    "interface": "pcapng interface id (0 for pcap)",
    "link_type": "LINKTYPE_* number",
    "ip_version": "4 | 6",
    "src_ip": "address text",
    "dst_ip": "address text",
    "ip_proto": "IANA protocol number",
    "src_port": "port number",
    "dst_port": "port number",
    "tcp_flags": "bit set, NS..FIN (9 bits)",
    "tcp_seq": "TCP sequence number (32 bit, as sent)",
    "tcp_ack": "TCP acknowledgment number (32 bit, as sent; meaningful when tcp_flags has ACK, 0x010)",
    "tcp_window": "TCP window field (16 bit, before scaling)",
    "tcp_window_scale": "shift count of the SYN's window scale option (the window is tcp_window << it)",
    "l4_payload_len": "bytes (transport payload, from IP lengths)",
    "ip_fragment": "boolean",
    "dscp": "DSCP code point (0-63)",
    "ecn": "ECN codepoint (0-3; 3 = CE)",
    "rdma_opcode": "InfiniBand BTH opcode (0-255)",
    "rdma_dest_qp": "queue pair number (24 bit)",
    "rdma_psn": "packet sequence number (24 bit)",
    "rdma_flags": "bit set: 1 ack request, 2 solicited event, 4 FECN, 8 BECN",
    "rdma_payload_len": "bytes (message payload: UDP payload less BTH, extension headers, pad and ICRC)",
    "rdma_reth_dma_len": "bytes (RETH DMA length)",
    "rdma_aeth_syndrome": "AETH syndrome byte",
    "rdma_deth_src_qp": "queue pair number (24 bit)",
    "tunnel": "vxlan | geneve",
    "vni": "virtual network identifier (24 bit)",
    "inner_src_ip": "address text",
    "inner_dst_ip": "address text",
    "inner_ip_proto": "IANA protocol number",
    "inner_src_port": "port number",
    "inner_dst_port": "port number",
}


def part_metadata(run: str, capture: str) -> dict[str, str]:
    """The key-value metadata of a packet part file: what the file is, without the catalog."""
    import json

    from tracecore.version import __version__

    return {
        "tracecore.version": __version__,
        "tracecore.schema_version": str(SCHEMA_VERSION),
        "tracecore.run": run,
        "tracecore.capture": capture,  # relative to the run folder
        "tracecore.ts_ns": TS_NS_MEANING,
        "tracecore.units": json.dumps(UNITS, ensure_ascii=False),
    }
