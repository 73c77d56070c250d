"""One batch's arrays that the kernel fills (columns, address table), and their zero-copy conversion
to an Arrow RecordBatch.

Why fresh arrays per batch: Arrow wraps the numpy buffers without copying, so a batch
handed to the caller must own its memory; allocation is once per batch, never per packet.
Validity is kept as one uint8 per row (cheap to write in numba) and packed into Arrow's
little-endian bitmaps here.
"""

from __future__ import annotations

import socket
import sys

import numpy as np
import pyarrow as pa

from tracecore.arrow_rows import string_array  # not pa.array: it imports pandas
from tracecore.reader import abi
from tracecore.reader.abi import (
    INNER_DST_PORT,
    INNER_PROTO,
    INNER_SRC_PORT,
    INNER_VERSION,
    IP_PROTO,
    IP_VERSION,
    TOS,
    TUNNEL,
    TUNNEL_VALID,
    V_FLAGS,
    V_FRAGMENT,
    V_L4,
    V_PORTS,
    V_RDMA,
    V_RDMA_SHORT,
    V_TUNNEL,
    V_TUNNEL_SHORT,
    VALID,
)
from tracecore.reader.compiled import kernels
from tracecore.schema import PACKET_SCHEMA

RDMA_FIELDS = [PACKET_SCHEMA.field(name) for name in PACKET_SCHEMA.names if name.startswith("rdma_")]
WSCALE_FIELDS = [PACKET_SCHEMA.field("tcp_window_scale")]
TUNNEL_FIELDS = [
    PACKET_SCHEMA.field(name) for name in PACKET_SCHEMA.names[PACKET_SCHEMA.get_field_index("tunnel") :]
]


TUNNEL_DICTIONARY = string_array([name.encode() for name in abi.TUNNEL_NAMES])
NO_STRINGS = string_array([])

CHUNK_ROWS = 2048  # rows parsed before their addresses are interned (kernel._intern_rows)


class AddressTable:
    """The open-addressing table of one batch's distinct addresses (reset per batch), the rows that
    have each as outer source and destination, and the scratch rows of address keys a chunk is parsed
    into."""

    def __init__(self, batch_rows: int):
        self.umax = min(4 * batch_rows + 4, 1 << 16)  # up to four addresses a row (tunnels)
        size = 1 << int(2 * self.umax - 1).bit_length()
        self.tab = np.zeros((size, 3), dtype=np.uint64)
        self.u_key = np.zeros((self.umax, 2), dtype=np.uint64)
        self.u_kind = np.zeros(self.umax, dtype=np.uint8)
        self.u_rows = np.zeros((self.umax, 2), dtype=np.int64)
        # rows 0-3 outer address keys, 4-7 inner (tunnel) ones, 8-12 the chunk's RoCE/tunnel rows
        self.keys = np.zeros((13, CHUNK_ROWS), dtype=np.uint64)

    def kernel_args(self) -> tuple:
        return (self.keys, self.tab, self.u_key, self.u_kind, self.u_rows)

    def texts(self, count: int) -> list[str]:
        """The distinct addresses as text, formatted like tshark (inet_ntop, RFC 5952)."""
        out = []
        for (hi, lo), kind in zip(self.u_key[:count].tolist(), self.u_kind[:count].tolist(), strict=True):
            if kind == 4:
                out.append(socket.inet_ntop(socket.AF_INET, lo.to_bytes(4, "big")))
            else:
                out.append(socket.inet_ntop(socket.AF_INET6, hi.to_bytes(8, "big") + lo.to_bytes(8, "big")))
        return out

    def add_rows(self, texts: list[str], into: dict[str, list[int]]) -> None:
        """Add the rows with each address as outer source and destination to `into[address]`."""
        rows = self.u_rows[: len(texts)]
        for j in np.flatnonzero(rows.any(axis=1)).tolist():
            counts = into.setdefault(texts[j], [0, 0])
            counts[0] += int(rows[j, 0])
            counts[1] += int(rows[j, 1])

    def reset(self, st: np.ndarray) -> None:
        kernels().reset_table(self.tab, self.u_key, self.u_kind, self.u_rows, st)


class Columns:
    """Preallocated arrays for one batch of up to `rows` packets (rows of c8, c16, c32: abi's names).

    The RDMA and tunnel rows are written only for packets with that layer, so a TCP capture never
    touches their pages, and its batches get those columns as all-null arrays without a scan.
    """

    def __init__(self, rows: int):
        self.rows = rows
        self.ts = np.empty(rows, dtype=np.int64)
        self.c32f = np.empty((2, rows), dtype=np.uint32)  # frame_len, cap_len
        self.c16f = np.empty((2, rows), dtype=np.uint16)  # interface, link_type
        self.c8 = np.empty((abi.C8_ROWS, rows), dtype=np.uint8)
        self.c16 = np.empty((abi.C16_ROWS, rows), dtype=np.uint16)
        self.c32 = np.empty((abi.C32_ROWS, rows), dtype=np.uint32)
        self.cidx = np.empty((4, rows), dtype=np.int32)  # src_ip, dst_ip, inner src, inner dst indices
        self.layers = 0  # the V_* bits of the batch's RoCE and tunnel rows (kernel: st[LAYERS])
        self._idle_refs = self._refs()

    def kernel_args(self) -> tuple:
        return (self.ts, self.c32f, self.c16f, self.c8, self.c16, self.c32, self.cidx)

    def _refs(self) -> list[int]:
        return [sys.getrefcount(array) for array in self.kernel_args()]

    def in_use(self) -> bool:
        """Whether anything besides this object still refers to its arrays (a batch made from them
        that the caller has not dropped: Arrow's buffers hold the arrays they wrap)."""
        return self._refs() != self._idle_refs

    def sort_by_time(self, n: int) -> None:
        """Put the first `n` rows in time order (stable), moving only the stretch that is out of place.

        Why here, before Arrow wraps the arrays: real captures are nearly sorted (now and then a
        packet stamped a few µs before the one read before it), and permuting that stretch of every
        row costs a fraction of an Arrow take over the whole batch (bench/results/rdma-reader.md).
        Rows before the stretch are no later than any row in it, rows after it no earlier, and equal
        timestamps keep their file order on both sides.
        """
        ts = self.ts[:n]
        drops = np.flatnonzero(ts[1:] < ts[:-1])  # row i + 1 is earlier than row i
        if not len(drops):
            return
        first, last = int(drops[0]) + 1, int(drops[-1]) + 1  # ts[:first] and ts[last:] are sorted
        lo = int(np.searchsorted(ts[:first], ts[first:].min(), side="right"))
        hi = last + int(np.searchsorted(ts[last:], ts[:last].max(), side="left"))
        order = lo + np.argsort(ts[lo:hi], kind="stable")
        for array in self.kernel_args():
            array[..., lo:hi] = array[..., order]

    def link_types(self, n: int) -> np.ndarray:
        """The link type of each of the first `n` rows."""
        return self.c16f[1, :n]

    def cut_short(self, n: int) -> tuple[int, int]:
        """(RoCE packets, tunnel packets) among the first `n` rows whose headers the capture cut; call
        after `to_batch`."""
        if not self.layers & (V_RDMA_SHORT | V_TUNNEL_SHORT):
            return 0, 0
        valid = self.c8[VALID, :n]
        return int(np.count_nonzero(valid & V_RDMA_SHORT)), int(np.count_nonzero(valid & V_TUNNEL_SHORT))

    def to_batch(
        self, n: int, table: AddressTable, st: np.ndarray, address_rows: dict[str, list[int]] | None = None
    ) -> pa.RecordBatch:
        """The first `n` rows as a RecordBatch with PACKET_SCHEMA; adds the batch's rows per outer
        source and destination address to `address_rows` (when given) and resets the address table."""
        texts = table.texts(int(st[abi.NUNIQ]))
        if address_rows is not None:
            table.add_rows(texts, address_rows)
        table.reset(st)
        dictionary = string_array([t.encode() for t in texts])
        valid = self.c8[VALID, :n]
        present = self.layers = int(st[abi.LAYERS])  # which RoCE/tunnel bits the batch has: no scan
        st[abi.LAYERS] = 0
        v_ip = _bitmap(self.c8[IP_VERSION, :n] != 0)
        ports = _bitmap(valid & V_PORTS)
        tos = self.c8[TOS, :n]
        arrays = [
            _prim(pa.int64(), self.ts, n),
            _prim(pa.uint32(), self.c32f[0], n),
            _prim(pa.uint32(), self.c32f[1], n),
            _prim(pa.uint16(), self.c16f[0], n),
            _prim(pa.uint16(), self.c16f[1], n),
            _prim(pa.uint8(), self.c8[IP_VERSION], n, v_ip),
            _dict(self.cidx[0], n, v_ip, dictionary),
            _dict(self.cidx[1], n, v_ip, dictionary),
            _prim(pa.uint8(), self.c8[IP_PROTO], n, v_ip),
            _prim(pa.uint16(), self.c16[abi.SRC_PORT], n, ports),
            _prim(pa.uint16(), self.c16[abi.DST_PORT], n, ports),
            _prim(pa.uint16(), self.c16[abi.TCP_FLAGS], n, _bitmap(valid & V_FLAGS)),
            *self._tcp(n, present),
            _prim(pa.uint32(), self.c32[abi.L4_LEN], n, _bitmap(valid & V_L4)),
            pa.Array.from_buffers(
                pa.bool_(), n, [v_ip, pa.py_buffer(np.packbits(valid >= V_FRAGMENT, bitorder="little"))]
            ),
            _prim(pa.uint8(), tos >> 2, n, v_ip),
            _prim(pa.uint8(), tos & 3, n, v_ip),
            *(self._rdma(n, valid) if present & V_RDMA else null_columns(RDMA_FIELDS, n)),
            *(self._tunnel(n, valid, dictionary) if present & V_TUNNEL else null_columns(TUNNEL_FIELDS, n)),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=PACKET_SCHEMA)

    def _tcp(self, n: int, present: int) -> list[pa.Array]:
        """tcp_seq, tcp_ack, tcp_window and tcp_window_scale: each set where the capture holds it (the
        window scale: SYNs with the option; an all-null column over the shared zeros in other batches)."""
        tv = self.c8[abi.TCP_VALID, :n]
        c16, c32 = self.c16, self.c32
        if present & abi.L_WSCALE:
            scale = _prim(pa.uint8(), self.c8[abi.TCP_WSCALE], n, _bitmap(tv & abi.TV_WSCALE))
        else:
            scale = null_columns(WSCALE_FIELDS, n)[0]
        return [
            _prim(pa.uint32(), c32[abi.TCP_SEQ], n, _bitmap(tv & abi.TV_SEQ)),
            _prim(pa.uint32(), c32[abi.TCP_ACK], n, _bitmap(tv & abi.TV_ACK)),
            _prim(pa.uint16(), c16[abi.TCP_WINDOW], n, _bitmap(tv & abi.TV_WINDOW)),
            scale,
        ]

    def _rdma(self, n: int, valid: np.ndarray) -> list[pa.Array]:
        """The rdma_* columns, in PACKET_SCHEMA's order: set where the row has a whole BTH."""
        has = (valid & V_RDMA) != 0
        rv = np.where(has, self.c8[abi.RDMA_VALID, :n], 0)
        v_bth = _bitmap(has)
        c8, c32 = self.c8, self.c32
        return [
            _prim(pa.uint8(), c8[abi.RDMA_OPCODE], n, v_bth),
            _prim(pa.uint32(), c32[abi.RDMA_DEST_QP], n, v_bth),
            _prim(pa.uint32(), c32[abi.RDMA_PSN], n, v_bth),
            _prim(pa.uint8(), c8[abi.RDMA_FLAGS], n, v_bth),
            _prim(pa.uint32(), c32[abi.RDMA_PAYLOAD_LEN], n, _bitmap(rv & abi.R_PAYLOAD_LEN)),
            _prim(pa.uint32(), c32[abi.RDMA_RETH_DMA_LEN], n, _bitmap(rv & abi.R_RETH)),
            _prim(pa.uint8(), c8[abi.RDMA_SYNDROME], n, _bitmap(rv & abi.R_AETH)),
            _prim(pa.uint32(), c32[abi.RDMA_DETH_SRC_QP], n, _bitmap(rv & abi.R_DETH)),
        ]

    def _tunnel(self, n: int, valid: np.ndarray, dictionary: pa.Array) -> list[pa.Array]:
        """The tunnel, vni and inner_* columns, in PACKET_SCHEMA's order: set where the row has a
        VXLAN or Geneve header (the inner ones where the inner packet's headers are there)."""
        has = (valid & V_TUNNEL) != 0
        inner = has & (self.c8[INNER_VERSION, :n] != 0)
        v_inner = _bitmap(inner)
        v_ports = _bitmap(np.where(has, self.c8[TUNNEL_VALID, :n], 0) & abi.T_INNER_PORTS)
        kind = np.where(has, self.c8[TUNNEL, :n].astype(np.int8) - 1, 0).astype(np.int8)
        return [
            pa.DictionaryArray.from_arrays(_prim(pa.int8(), kind, n, _bitmap(has)), TUNNEL_DICTIONARY),
            _prim(pa.uint32(), self.c32[abi.VNI], n, _bitmap(has)),
            _dict(np.where(inner, self.cidx[2, :n], 0).astype(np.int32), n, v_inner, dictionary),
            _dict(np.where(inner, self.cidx[3, :n], 0).astype(np.int32), n, v_inner, dictionary),
            _prim(pa.uint8(), self.c8[INNER_PROTO], n, v_inner),
            _prim(pa.uint16(), self.c16[INNER_SRC_PORT], n, v_ports),
            _prim(pa.uint16(), self.c16[INNER_DST_PORT], n, v_ports),
        ]


class ColumnsPool:
    """Hands out Columns for the next batch, reusing those whose earlier batch nobody holds any more.

    Why: each batch's arrays are wrapped by Arrow without a copy, so they cannot be rewritten while
    the caller (the ingest writer's queue) holds the batch; but fresh arrays for every batch fault
    in new pages, which cost more than the decode itself on some machines
    (bench/results/rdma-reader.md). At most `keep` sets are kept for reuse.
    """

    def __init__(self, rows: int, keep: int = 6):
        self.rows, self.keep = rows, keep
        self._spare: list[Columns] = []

    def take(self) -> Columns:
        for cols in self._spare:
            if not cols.in_use():
                return cols
        cols = Columns(self.rows)
        if len(self._spare) < self.keep:
            self._spare.append(cols)
        return cols


def null_columns(fields: list[pa.Field], n: int) -> list[pa.Array]:
    """All-null columns whose validity and values are slices of one shared zero buffer (`zeros`)."""
    zeros = zero_buffer(n * 4)  # enough for the widest, 32-bit, values
    validity = zero_buffer((n + 7) // 8)
    out = []
    for f in fields:
        if pa.types.is_dictionary(f.type):
            idx = pa.Array.from_buffers(f.type.index_type, n, [validity, zeros], null_count=n)
            # safe=False: no index to check, and checking would read (fault in) every zero page
            out.append(pa.DictionaryArray.from_arrays(idx, NO_STRINGS, safe=False))
        else:
            out.append(pa.Array.from_buffers(f.type, n, [validity, zeros], null_count=n))
    return out


_ZEROS = [pa.py_buffer(b"")]


def zero_buffer(nbytes: int) -> pa.Buffer:
    """`nbytes` zero bytes for all-null columns: a slice of one read-only buffer that only grows.

    Why shared: TCP batches get fifteen all-null layer columns. A fresh zeroed buffer per batch is
    calloc'd from the heap once glibc's mmap threshold has grown past it, so every batch wrote its
    zeros and the peak RSS grew with them (bench/results/rdma-tcp-ab.md); a shared buffer is
    allocated once and never written.
    """
    buf = _ZEROS[0]
    if buf.size < nbytes:
        zeros = np.zeros(max(nbytes, 2 * buf.size), np.uint8)
        zeros.flags.writeable = False
        buf = _ZEROS[0] = pa.py_buffer(zeros)
    return buf.slice(0, nbytes)


def _bitmap(valid: np.ndarray) -> pa.Buffer | None:
    """Arrow validity bitmap of a bool or 0/1-bit uint8 array (nonzero = valid); None when every
    row is valid."""
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid != 0, bitorder="little"))


def _prim(typ: pa.DataType, values: np.ndarray, n: int, validity: pa.Buffer | None = None) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(np.ascontiguousarray(values[:n]))])


def _dict(indices: np.ndarray, n: int, validity: pa.Buffer | None, dictionary: pa.Array) -> pa.Array:
    idx = _prim(pa.int32(), indices, n, validity)
    # safe=False: the kernel's interning gave every index, each below the dictionary's length (a
    # null row's is 0); checking them cost 0.1 ms per column of 128 Ki rows
    return pa.DictionaryArray.from_arrays(idx, dictionary, safe=False)
