"""The packet table: one Arrow schema shared by the reader, ingest and the SQL views.

Why these types: timestamps are integer UTC nanoseconds (never float seconds, which lose
precision past microseconds); addresses are dictionary-encoded strings so SQL can say
`src_ip = '192.168.17.50'` while Parquet stores a few distinct values per file;
header fields are the narrowest unsigned ints that hold them, null where the layer is absent.
"""

from __future__ import annotations

import pyarrow as pa

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
    pa.field("l4_payload_len", pa.uint32()),  # transport payload bytes per IP lengths
    pa.field("ip_fragment", pa.bool_()),  # true for any IP fragment (first or later)
]

PACKET_SCHEMA = pa.schema(PACKET_FIELDS)
PACKET_COLUMNS = [f.name for f in PACKET_FIELDS]
