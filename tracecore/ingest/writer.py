"""One capture → time-sorted Parquet part files in a staging folder (runs in a worker process).

Why this shape: a capture is streamed batch by batch (memory stays flat for a 10 GB file), each
reader batch becomes one row group (ROW_GROUP_ROWS), and a file is only ever appended in time order.
A batch that is out of order inside comes sorted from the reader (`sort_batches`: only the stretch
out of place moves); small disorder across batch boundaries is merged (TimeOrder); only disorder
deeper than a whole batch starts a new part file. So every file is sorted by `ts_ns` without holding
the capture in memory (in practice: one file per capture).

Encodings: ts_ns is DELTA_BINARY_PACKED (unique and increasing: deltas pack to a few bits), src_ip/dst_ip
keep Arrow's dictionaries (writing them plain would first expand every row to a string), the int64 byte
counts get dictionaries (DICT_COLUMNS), every other column is plain, zstd level 1 on top, statistics
only for ts_ns (row-group pruning on time), and a large `write_batch_size` cuts the per-mini-batch
overhead of the column writers. Why these and not dictionaries and statistics everywhere: they encode
faster for nearly the same size (bench/results/reader-notes.md, bench/results/int64-columns.md).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tracecore.arrow_rows import int64_array, numpy_values
from tracecore.errors import CaptureError
from tracecore.ingest.layout import fsync
from tracecore.ingest.link_bins import LinkBins
from tracecore.reader import CaptureReader
from tracecore.reader.batch import null_columns, zero_buffer
from tracecore.schema import BYTE_COLUMNS, DATASET_SCHEMA, LAYER_COLUMNS, PACKET_SCHEMA

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tracecore.ingest.control import TaskChannel

# Rows whose every field is set and whose layer columns (RDMA, tunnel) are null: TCP rows. Their part
# files store only the other columns, declared required (schema version 4; the catalog adds the rest).
DENSE_INDICES = [i for i, f in enumerate(DATASET_SCHEMA) if f.name not in LAYER_COLUMNS]
DENSE_SCHEMA = pa.schema([DATASET_SCHEMA.field(i).with_nullable(False) for i in DENSE_INDICES])
NULLABLE_INDICES = [i for i in DENSE_INDICES if DATASET_SCHEMA.field(i).nullable]
LAYER_INDICES = [i for i, f in enumerate(DATASET_SCHEMA) if f.name in LAYER_COLUMNS]
WIDENED_INDICES = [i for i, f in enumerate(PACKET_SCHEMA) if f.type != DATASET_SCHEMA.field(i).type]

# Rows per reader batch = per row group. 128 Ki rows is DuckDB's own row-group size (122 880), fine for
# scans and time pruning, and small enough that decoding batch k+1 overlaps encoding batch k (measured:
# 1.9 → 3.1 Mpkt/s on 130-byte records versus 1 Mi-row batches, which leave nothing to overlap).
ROW_GROUP_ROWS = 1 << 17
TOP_ADDRESSES = 64
# Byte counts too: int64 written plain was 1.5x the uint32 files; with dictionaries (a few distinct
# frame sizes per capture) they are smaller than before (bench/results/int64-columns.md). Every
# address-like column keeps its dictionary (tunnel, inner_*: plain, their all-null TCP chunks cost
# twice the encoding time, bench/results/rdma-tcp-ab.md).
DICT_COLUMNS = [*(f.name for f in DATASET_SCHEMA if pa.types.is_dictionary(f.type)), *BYTE_COLUMNS]
STATS_COLUMNS = ["ts_ns"]
# Delta-encoded: the timestamps, and the sequence numbers, which grow by a flow's payload between its
# packets (plain, they were 4 bytes a packet after zstd; bench/results/tcp-header-fields.md).
DELTA_COLUMNS = {"ts_ns": "DELTA_BINARY_PACKED", "tcp_seq": "DELTA_BINARY_PACKED"}
WRITE_BATCH_ROWS = 1 << 16


@dataclass
class CaptureTask:
    index: int
    src: str
    stage_dir: str
    batch_rows: int = ROW_GROUP_ROWS
    metadata: dict[str, str] = field(default_factory=dict)  # Parquet key-value metadata of its parts


@dataclass
class CaptureResult:
    index: int
    # (staged file, rows, whether it stores schema.LAYER_COLUMNS: false for a dense part)
    parts: list[tuple[str, int, bool]] = field(default_factory=list)
    packets: int = 0
    bytes: int = 0  # sum of frame_len: bytes on the wire
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    ip_counts: dict[str, list[int]] = field(default_factory=dict)  # ip → [as src, as dst]
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    link_bins: pa.Table | None = None  # bytes per address pair and millisecond (link_bins.BINS_SCHEMA)

    @property
    def status(self) -> str:
        if self.error is None:
            return "ok"
        return "partial" if self.packets else "failed"


def _open_writer(path: Path, schema: pa.Schema) -> pq.ParquetWriter:
    return pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        compression_level=1,
        use_dictionary=DICT_COLUMNS,
        column_encoding=DELTA_COLUMNS,
        write_statistics=STATS_COLUMNS,
        sorting_columns=[pq.SortingColumn(0)],
        data_page_size=1 << 20,
        write_batch_size=WRITE_BATCH_ROWS,
    )


def widen(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A reader batch (PACKET_SCHEMA) in the dataset's DATASET_SCHEMA: byte counts as int64.

    Why here and not in the reader: the kernels fill uint32 buffers (half the memory traffic), and
    widening a column costs one numpy copy on the writer thread (see bench/results/int64-columns.md).
    """
    columns = list(batch.columns)
    for i in WIDENED_INDICES:
        col = columns[i]
        if col.null_count == len(col):  # a layer column of a batch without that layer: no cast to run
            columns[i] = _all_null(pa.int64(), len(col))
        elif col.null_count:
            columns[i] = col.cast(pa.int64())
        else:
            columns[i] = int64_array(numpy_values(col, np.uint32).astype(np.int64))
    return pa.RecordBatch.from_arrays(columns, schema=DATASET_SCHEMA)


def split_dense(batch: pa.RecordBatch) -> tuple[pa.RecordBatch | None, pa.RecordBatch | None]:
    """(the rows whose every field is set and whose layer columns are null, as DENSE_SCHEMA: without
    the layer columns; the other rows, as DATASET_SCHEMA), None where empty.

    Why: a column declared nullable costs Parquet a definition level per value even when none is
    null (measured: 0.195 → 0.135 s of encoding per 3.5 M rows with the nine nullable columns
    declared required), and so does an all-null one: the fifteen layer columns (schema.LAYER_COLUMNS:
    RDMA, tunnels) cost TCP ingest most of what RDMA added to it (bench/results/rdma-reader.md). Training
    traffic is nearly all TCP over IP, whose rows set every field and no layer, so those rows go to
    part files of required columns without the layer columns; ARP, UDP (RoCE, tunnels), ICMP and
    fragments go to nullable ones with every column. The catalog reads both as one table.
    """
    columns = batch.columns
    nullable = [i for i in NULLABLE_INDICES if columns[i].null_count]
    layered = [i for i in LAYER_INDICES if columns[i].null_count < len(columns[i])]  # a batch with RoCE
    if not nullable and not layered:
        return pa.RecordBatch.from_arrays([columns[i] for i in DENSE_INDICES], schema=DENSE_SCHEMA), None
    import pyarrow.compute as pc

    dense = None
    for i in nullable:
        dense = pc.is_valid(columns[i]) if dense is None else pc.and_(dense, pc.is_valid(columns[i]))
    for i in layered:  # never true together with a TCP row today; checked so no value can be lost
        dense = pc.is_null(columns[i]) if dense is None else pc.and_(dense, pc.is_null(columns[i]))
    n_dense = pc.sum(dense).as_py() or 0
    if n_dense == 0:
        return None, batch
    rest = _rows(batch, pc.invert(dense), len(batch) - n_dense, range(batch.num_columns), DATASET_SCHEMA)
    return _rows(batch, dense, n_dense, DENSE_INDICES, DENSE_SCHEMA), rest


def _rows(
    batch: pa.RecordBatch, mask: pa.Array, count: int, indices: Iterable[int], schema: pa.Schema
) -> pa.RecordBatch:
    """Columns `indices` of the `count` rows of `batch` where `mask` is true; an all-null column is
    sliced, not filtered (a TCP batch's fifteen layer columns: filtering them was most of a split's time)."""
    columns = [batch.column(i) for i in indices]
    columns = [col.slice(0, count) if col.null_count == len(col) else col.filter(mask) for col in columns]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _all_null(typ: pa.DataType, n: int) -> pa.Array:
    """An all-null array of a fixed-width type over the reader's shared zero buffer (nothing written)."""
    return pa.Array.from_buffers(
        typ, n, [zero_buffer((n + 7) // 8), zero_buffer(n * typ.bit_width // 8)], null_count=n
    )


def _total(arr: pa.Array) -> int:
    """Sum of a uint32 column without nulls (numpy: pyarrow.compute costs 50 ms to import)."""
    return int(numpy_values(arr, np.uint32).sum(dtype=np.int64))


class PartSink:
    """Writes batches into sorted part files on a background thread.

    Why a thread: Parquet encoding and zstd run in Arrow's C++ without the GIL, so the next batch is
    decoded by the reader meanwhile. The queue holds at most two batches: memory stays bounded.
    Each batch is split (`split_dense`) between an open dense part file (without the layer columns)
    and an open sparse one (every column); a new part (after deep disorder) closes both.
    """

    def __init__(self, stage: Path, index: int, metadata: dict[str, str] | None = None):
        self.stage, self.index = stage, index
        self.metadata = metadata or {}
        self.parts: list[tuple[str, int, bool]] = []
        self.error: BaseException | None = None
        self._open: dict[bool, tuple[pq.ParquetWriter, int]] = {}  # dense? → (writer, index in parts)
        self._queue: queue.Queue = queue.Queue(maxsize=2)
        self._thread = threading.Thread(target=self._run, name=f"parquet-{index}", daemon=True)
        self._thread.start()

    def put(self, batch: pa.RecordBatch, new_part: bool) -> None:
        self._queue.put((batch, new_part))

    def close(self) -> list[tuple[str, int, bool]]:
        """Wait for every batch to be written; raises OSError when writing failed."""
        self._queue.put(None)
        self._thread.join()
        if self.error is not None:
            raise OSError(f"cannot write the Parquet part: {self.error}") from self.error
        return self.parts

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if self.error is not None:  # keep draining so the producer never blocks
                if item is None:
                    return
                continue
            try:
                if item is None or item[1]:
                    self._close_parts()
                    if item is None:
                        return
                for dense, part in zip((True, False), split_dense(widen(item[0])), strict=True):
                    if part is not None:
                        self._write(dense, part)
            except Exception as err:  # reported by close(); the capture is then dropped whole
                self.error = err
                self._abandon_parts()
                if item is None:
                    return

    def _write(self, dense: bool, batch: pa.RecordBatch) -> None:
        if dense not in self._open:
            path = self.stage / f"{self.index:06d}-{len(self.parts):04d}.parquet"
            self._open[dense] = (
                _open_writer(path, (DENSE_SCHEMA if dense else DATASET_SCHEMA).with_metadata(self.metadata)),
                len(self.parts),
            )
            self.parts.append((str(path), 0, not dense))
        writer, slot = self._open[dense]
        writer.write_batch(batch, row_group_size=max(batch.num_rows, 1))
        path, rows, layers = self.parts[slot]
        self.parts[slot] = (path, rows + batch.num_rows, layers)

    def _close_parts(self) -> None:
        for dense in list(self._open):
            self._open[dense][0].close()  # on failure it and the rest are left to `_abandon_parts`
            del self._open[dense]

    def _abandon_parts(self) -> None:
        """Close the open part files after a failed write, their own errors ignored (the capture is
        dropped whole). Why: a writer whose close failed stays open, and the garbage collector's
        second try prints "Exception ignored" lines beside the ingest's one-line error."""
        for writer, _ in self._open.values():
            with contextlib.suppress(Exception):
                writer.close()
            writer.is_open = False  # pyarrow's `__del__` closes a writer still marked open
        self._open.clear()


def _take(batch: pa.RecordBatch, order: np.ndarray) -> pa.RecordBatch:
    """`batch` in the row order `order` (a permutation); an all-null column is kept as it is.

    Why: a TCP batch's fifteen layer columns are all null, and Arrow's take checks the indices and
    gathers the values of every column (bench/results/rdma-reader.md)."""
    keep = [i for i, col in enumerate(batch.columns) if col.null_count < len(col)]
    if len(keep) == batch.num_columns:
        return batch.take(order)
    columns = list(batch.columns)
    for i, col in zip(keep, batch.select(keep).take(order).columns, strict=True):
        columns[i] = col
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _concat(first: pa.RecordBatch, second: pa.RecordBatch) -> pa.RecordBatch:
    """One batch of both (dictionaries unified); a column null in both is built over the shared
    zero buffer instead of copied."""
    n = first.num_rows + second.num_rows
    empty = [first.column(i).null_count == first.num_rows and second.column(i).null_count == second.num_rows
             for i in range(first.num_columns)]  # fmt: skip
    keep = [i for i, e in enumerate(empty) if not e]
    both = (
        pa.Table.from_batches([first.select(keep), second.select(keep)]).unify_dictionaries().combine_chunks()
    )
    columns = iter(both.columns)
    nulls = iter(null_columns([f for f, e in zip(first.schema, empty, strict=True) if e], n))
    arrays = [next(nulls) if e else next(columns).chunk(0) for e in empty]
    return pa.RecordBatch.from_arrays(arrays, schema=first.schema)


class TimeOrder:
    """Keeps part files sorted when packets are slightly out of order across batch boundaries.

    Real captures are not strictly monotone (multi-queue NICs, several interfaces): a packet may be
    stamped a few µs before one already read. One sorted batch is held back; when the next one starts
    before it ends, both are merged and only the lower half is written. Only disorder deeper than a
    whole batch starts a new part file.
    """

    def __init__(self, sink: PartSink):
        self.sink = sink
        self.pending: pa.RecordBatch | None = None
        self.last: int | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        """Take a batch that is sorted within itself."""
        if self.pending is None:
            self.pending = batch
            return
        if batch.column(0)[0].as_py() >= self.pending.column(0)[-1].as_py():
            self._emit(self.pending)
            self.pending = batch
            return
        merged = _concat(self.pending, batch)
        merged = _take(merged, np.argsort(numpy_values(merged.column(0), np.int64), kind="stable"))
        k = self.pending.num_rows
        self._emit(merged.slice(0, k))
        self.pending = merged.slice(k)

    def flush(self) -> None:
        if self.pending is not None:
            self._emit(self.pending)
            self.pending = None

    def _emit(self, batch: pa.RecordBatch) -> None:
        first = batch.column(0)[0].as_py()
        self.sink.put(batch, new_part=self.last is not None and first < self.last)
        self.last = batch.column(0)[-1].as_py()


def ingest_capture(task: CaptureTask, channel: TaskChannel) -> CaptureResult:
    """Read one capture into staged part files; errors are recorded, good rows are kept.

    `channel` is the task's ingest's own: progress goes there and a cancel is read from there.
    """
    start = time.perf_counter()
    res = CaptureResult(task.index)
    sink = PartSink(Path(task.stage_dir), task.index, task.metadata)
    reader = CaptureReader(task.src, task.batch_rows, sort_batches=True, count_addresses=True)
    order = TimeOrder(sink)
    bins = LinkBins()
    try:
        for batch in reader.batches():
            if channel.cancelled():
                res.error = "cancelled"
                break
            n = batch.num_rows
            if n == 0:
                continue
            ts = numpy_values(batch.column(0), np.int64)
            bins.add(batch)
            order.add(batch)
            res.packets += n
            res.bytes += _total(batch.column(1))
            lo, hi = int(ts[0]), int(ts[-1])
            res.first_ts_ns = lo if res.first_ts_ns is None else min(res.first_ts_ns, lo)
            res.last_ts_ns = hi if res.last_ts_ns is None else max(res.last_ts_ns, hi)
            channel.report(task.index, _total(batch.column(2)) + 16 * n, n)
    except CaptureError as err:
        res.error = f"{err.reason}" + (f" at byte offset {err.offset}" if err.offset is not None else "")
    except OSError as err:
        res.error = f"cannot read: {err.strerror or err}"
    order.flush()  # the packets read before an error are kept
    try:
        res.parts = sink.close()
        for path, _, _ in res.parts:
            fsync(path)
        res.link_bins = bins.table()
    except OSError as err:  # disk full, staging removed: nothing of this capture is kept
        res.error, res.parts, res.packets, res.bytes = str(err), [], 0, 0
    res.warnings = list(reader.warnings)
    res.ip_counts = reader.stats.address_rows  # the kernel counted them as it interned each address
    if len(res.ip_counts) > TOP_ADDRESSES:
        top = sorted(res.ip_counts.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:TOP_ADDRESSES]
        res.ip_counts = dict(top)
    res.seconds = time.perf_counter() - start
    return res
