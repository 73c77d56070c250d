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

# The dataset's packet files: the reader's columns, with every byte count widened to int64.
# Why: Polars sums a UInt32 column as UInt32 and wraps past 4 GiB (one benchmark capture is 2-8 GB);
# int64 makes the wrap impossible in every reader. The reader keeps uint32 (its kernels' buffers);
# the ingest writer widens each batch (`tracecore.ingest.writer.widen`).
BYTE_COLUMNS = ("frame_len", "cap_len", "l4_payload_len")
DATASET_FIELDS: list[pa.Field] = [
    f.with_type(pa.int64()) if f.name in BYTE_COLUMNS else f for f in PACKET_FIELDS
]
DATASET_SCHEMA = pa.schema(DATASET_FIELDS)

# The version of what a dataset stores (packet files, tables, views' columns), recorded in the
# catalog's `_meta.schema_version` and in every part file. 1: uint32 byte columns, no version recorded
# (tracecore 0.1.0); 2: int64 byte columns, Parquet key-value metadata.
SCHEMA_VERSION = 2
OLDEST_READABLE_SCHEMA = 1

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
    "l4_payload_len": "bytes (transport payload, from IP lengths)",
    "ip_fragment": "boolean",
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


def check_schema_version(recorded: str | None, where: object) -> int:
    """The dataset's schema version (None: 1, written before versions were recorded); a version this
    tracecore cannot read raises DatasetError saying why, so nothing misreads or rewrites it."""
    from tracecore.errors import DatasetVersionError
    from tracecore.version import __version__

    try:
        version = int(recorded) if recorded is not None else 1
    except ValueError:
        raise DatasetVersionError(f"{where}: schema_version {recorded!r} in _meta is not a number") from None
    if version > SCHEMA_VERSION:
        raise DatasetVersionError(
            f"{where}: dataset schema version {version} is newer than this tracecore {__version__} reads"
            f" (versions {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}); upgrade tracecore"
            " (pip install -U tracecore) or re-ingest the captures into a new --data folder"
        )
    if version < OLDEST_READABLE_SCHEMA:
        raise DatasetVersionError(
            f"{where}: dataset schema version {version} is older than this tracecore reads"
            f" (versions {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}); re-ingest the captures"
        )
    return version
