"""Bytes per millisecond per address pair, summed while a capture is read (the `_link_bins` table).

Why: the link views (`link_util`, `link_total` and what builds on them) sum packet bytes per time bin
and address pair; at 100 M packets that scan and grouping is most of their time, while a training
run's packets fall in ~100x fewer (pair, millisecond) bins. So ingest keeps those sums, and
`queries/link_series.sql` reads them whenever the bin width is whole milliseconds and no window is
asked for (the catalog's `link_bins` view applies the packets' de-duplication to them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from tracecore.arrow_rows import array, int64_array, numpy_values
from tracecore.schema import PACKET_SCHEMA

if TYPE_CHECKING:
    from collections.abc import Iterable

BIN_NS = 1_000_000
BINS_SCHEMA = pa.schema(
    [
        ("src_ip", pa.string()),
        ("dst_ip", pa.string()),
        ("ms", pa.int64()),  # ts_ns // BIN_NS, truncated toward zero as DuckDB's `//`
        ("bytes", pa.int64()),  # sum of frame_len
        ("first_ns", pa.int64()),  # the bin's earliest ts_ns
    ]
)
TABLE_SCHEMA = pa.schema([("run", pa.string()), ("file", pa.string()), *BINS_SCHEMA])  # `_link_bins`
_TS, _LEN = PACKET_SCHEMA.get_field_index("ts_ns"), PACKET_SCHEMA.get_field_index("frame_len")
_SRC, _DST = PACKET_SCHEMA.get_field_index("src_ip"), PACKET_SCHEMA.get_field_index("dst_ip")
# A batch is summed by the kernel, one slot per address pair (24 bytes each), while the pairs are at
# most SLOTS_MAX (256 addresses), else grouped by sorting (slower).
SLOTS_MAX = 1 << 16
# A capture whose bins outgrow both is not binned (traffic of many hosts at low rates: nearly a bin a
# packet, which would only hold its packets twice in memory); it keeps one row with a NULL `ms`
# (`dropped`), and while any capture has it the catalog's `link_bins` sums packets.
KEEP_MIN_BINS, KEEP_PACKETS_PER_BIN = 1 << 18, 16
_NO_BITS = np.empty(0, np.uint8)  # both bitmaps empty: every address valid, the kernel tests no bit
_EMPTY_SLOT = np.array([0, 0, np.iinfo(np.int64).max], np.int64)


class LinkBins:
    """The bins of one capture, added batch by batch; memory grows with its bins, not its packets."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}  # address text → id; id 0 is "no address" (non-IP frames)
        self._chunks: list[tuple[np.ndarray, ...]] = []
        self._rows = self._packets = 0
        self._acc = np.empty((0, 3), np.int64)  # the kernel's scratch (`_buffers`)
        self._touched = np.empty(0, np.int64)
        self._out = np.empty((5, 0), np.int64)
        self.dropped = False

    def add(self, batch: pa.RecordBatch) -> None:
        """Count a reader batch (PACKET_SCHEMA)."""
        n = batch.num_rows
        if n == 0 or self.dropped:
            return
        self._packets += n
        ts = numpy_values(batch.column(_TS), np.int64)
        src, dst = batch.column(_SRC), batch.column(_DST)
        sids, dids = self._address_ids(src), self._address_ids(dst)
        width = len(self._ids) + 1
        if width * width > SLOTS_MAX:  # many addresses: a slot per pair would be too large
            self._keep(_sorted_bins(batch, ts, sids, dids))
            return
        from tracecore.reader.compiled import kernels

        acc, touched, out = self._buffers(width * width, n)
        rows = kernels().bin_bytes(
            ts,
            numpy_values(batch.column(_LEN), np.uint32),
            numpy_values(src.indices, np.int32),
            numpy_values(dst.indices, np.int32),
            *(_bits(src) + _bits(dst) if src.null_count or dst.null_count else (_NO_BITS, 0, _NO_BITS, 0)),
            sids,
            dids,
            width,
            acc,
            touched,
            out,
        )
        self._keep(tuple(out[:, :rows].copy()))

    def _buffers(self, slots: int, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The kernel's scratch, reused batch after batch (fresh arrays a batch would be fresh pages
        to fault in): `slots` empty slots (the kernel leaves them empty), a list of as many, and room
        for `rows` bins."""
        if len(self._acc) < slots:
            self._acc = np.empty((slots, 3), np.int64)
            self._acc[:] = _EMPTY_SLOT
            self._touched = np.empty(slots, np.int64)
        if self._out.shape[1] < rows:
            self._out = np.empty((5, rows), np.int64)
        return self._acc[:slots], self._touched, self._out

    def _keep(self, chunk: tuple[np.ndarray, ...]) -> None:
        self._chunks.append(chunk)
        self._rows += len(chunk[0])
        if self._rows > max(KEEP_MIN_BINS, self._packets // KEEP_PACKETS_PER_BIN):
            self.dropped, self._chunks, self._ids = True, [], {}

    def table(self) -> pa.Table:
        """Every bin once (BINS_SCHEMA), sorted by source, destination and time; one row of nulls when
        the capture was not binned (`dropped`)."""
        if self.dropped:
            return pa.Table.from_arrays([pa.nulls(1, f.type) for f in BINS_SCHEMA], schema=BINS_SCHEMA)
        if not self._chunks:
            return pa.Table.from_batches([], schema=BINS_SCHEMA)
        s, d, ms, nbytes, first = (np.concatenate(c) for c in zip(*self._chunks, strict=True))
        s, d, ms, nbytes, first = _grouped(s, d, ms, nbytes, first)
        texts = [b"", *(t.encode() for t in self._ids)]
        return pa.Table.from_arrays(
            [_addresses(s, texts), _addresses(d, texts), *(int64_array(a) for a in (ms, nbytes, first))],
            schema=BINS_SCHEMA,
        )

    def _address_ids(self, column: pa.Array) -> np.ndarray:
        """The address id of each entry of a batch's dictionary, after a 0 (the id of no address)."""
        ids = self._ids
        return np.array(
            [0, *(ids.setdefault(t, len(ids) + 1) for t in column.dictionary.to_pylist())], np.int32
        )


def _grouped(s: np.ndarray, d: np.ndarray, ms: np.ndarray, nbytes: np.ndarray, first: np.ndarray) -> tuple:
    """Rows with equal (s, d, ms) summed (bytes) and folded (earliest first_ns), sorted by them."""
    order = np.lexsort((ms, d, s))
    s, d, ms, nbytes, first = s[order], d[order], ms[order], nbytes[order], first[order]
    new = (s[1:] != s[:-1]) | (d[1:] != d[:-1]) | (ms[1:] != ms[:-1])
    starts = np.flatnonzero(np.concatenate(([True], new)))
    return (
        s[starts],
        d[starts],
        ms[starts],
        np.add.reduceat(nbytes, starts),
        np.minimum.reduceat(first, starts),
    )


def with_capture(bins: pa.Table, run: str, file: str) -> pa.Table:
    """A capture's bins with its run and file (the capture's identity in `_files`) in front."""
    const = [_repeated(value, bins.num_rows) for value in (run, file)]
    return pa.Table.from_arrays([*const, *bins.columns], schema=TABLE_SCHEMA)


def _repeated(text: str, n: int) -> pa.Array:
    """A string array of `text` n times, from its buffers (`_addresses` gathers each row's bytes)."""
    data = text.encode()
    if len(data) * n > (1 << 31) - 1:  # past 32-bit offsets: Arrow's own builder errs as it would
        return array([text] * n, pa.string())
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(data))
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)])


def of_run(stored: pa.Table, run: str, captures: list[dict], new: dict[str, pa.Table | None]) -> pa.Table:
    """A run's `_link_bins` rows (TABLE_SCHEMA): those of the captures just read (`new`, by file) and the
    stored ones of the other `captures`, which it keeps."""
    tables = [with_capture(t, run, f) for f, t in sorted(new.items()) if t is not None]
    kept = sorted(row["file"] for row in captures if row["file"] not in new)
    if kept and stored.num_rows:
        import pyarrow.compute as pc

        mine = pc.is_in(stored["run"], value_set=array([run], pa.string()))
        tables.append(
            stored.filter(pc.and_(mine, pc.is_in(stored["file"], value_set=array(kept, pa.string()))))
        )
    return concat(tables)


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    """One TABLE_SCHEMA table of these (none: empty)."""
    tables = [t if t.schema == TABLE_SCHEMA else t.cast(TABLE_SCHEMA) for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else pa.Table.from_batches([], schema=TABLE_SCHEMA)


def _sorted_bins(batch: pa.RecordBatch, ts: np.ndarray, sids: np.ndarray, dids: np.ndarray) -> tuple:
    """A batch's bins by sorting (for batches whose slot space `add` would not allocate)."""
    src, dst = batch.column(_SRC), batch.column(_DST)
    s = sids[np.where(_valid(src), numpy_values(src.indices, np.int32) + 1, 0)]  # a null's index: any value
    d = dids[np.where(_valid(dst), numpy_values(dst.indices, np.int32) + 1, 0)]
    nbytes = numpy_values(batch.column(_LEN), np.uint32).astype(np.int64)
    return _grouped(s.astype(np.int64), d.astype(np.int64), _bin(ts), nbytes, ts.copy())


def _bits(column: pa.Array) -> tuple[np.ndarray, int]:
    """A column's validity bitmap and the bit its first row is at (all ones when it has no null)."""
    if column.null_count == 0 or column.buffers()[0] is None:
        return np.full((len(column) + 7) // 8 + 1, 255, np.uint8), 0
    return np.frombuffer(column.buffers()[0], np.uint8), column.offset


def _bin(ts: np.ndarray) -> np.ndarray:
    """ts_ns // BIN_NS truncated toward zero, as DuckDB divides integers (numpy floors)."""
    ms = ts // BIN_NS
    return ms + ((ts < 0) & (ms * BIN_NS != ts))


def _addresses(ids: np.ndarray, texts: list[bytes]) -> pa.Array:
    """A string array of `texts[id]` per id, null where the id is 0 (`texts[0]`, unused). Built from
    buffers: a dictionary's decode and `cast` import pyarrow.compute (0.1 s, holding the GIL)."""
    n = len(ids)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.array([len(t) for t in texts], np.int64)[ids], out=offsets[1:])
    data = b"".join([texts[i] for i in ids.tolist()])
    valid = ids != 0
    if offsets[-1] > (1 << 31) - 1:  # past 32-bit offsets: Arrow's own builder errs as it would
        return array([texts[i].decode() if i else None for i in ids.tolist()], pa.string())
    nulls = n - int(np.count_nonzero(valid))
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
        null_count=nulls,
    )


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0 or arr.buffers()[0] is None:
        return np.ones(len(arr), bool)
    bits = np.frombuffer(arr.buffers()[0], np.uint8)
    return np.unpackbits(bits, bitorder="little", count=arr.offset + len(arr))[arr.offset :].astype(bool)
