"""The packet reader: capture files → Arrow record batches with `PACKET_SCHEMA`.

Public API (the ingest stage and the CLI build on it):

* `read_batches(path, batch_rows=1 << 20)` — stream of bounded `pyarrow.RecordBatch`es;
* `read_capture(path)` — the whole capture as one `pyarrow.Table` (small files);
* `CaptureReader(path, batch_rows)` — the same stream via `.batches()`, plus `.warnings`
  (truncated tail, unsupported link types, timestamp-less blocks) and `.stats`.

Formats: classic pcap (either byte order, µs or ns), pcapng (sections of either byte
order, per-interface link type, if_tsresol, if_tsoffset; EPB, SPB, obsolete PB), each
plain or gzip/xz/zstd-compressed (detected by magic bytes). Errors are `CaptureError`s
naming the file and byte offset; see `capture.CaptureReader` for the exact contract.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from tracecore.reader.capture import DEFAULT_BATCH_ROWS, CaptureReader, ReaderStats
from tracecore.schema import PACKET_SCHEMA

__all__ = ["DEFAULT_BATCH_ROWS", "CaptureReader", "ReaderStats", "read_batches", "read_capture"]


def read_batches(path: str | Path, batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Stream a capture as RecordBatches of at most `batch_rows` packets (memory stays flat)."""
    return CaptureReader(path, batch_rows).batches()


def read_capture(path: str | Path) -> pa.Table:
    """The whole capture as one Table (for small files; use `read_batches` for big ones)."""
    return pa.Table.from_batches(list(read_batches(path)), schema=PACKET_SCHEMA)
