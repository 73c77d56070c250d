"""One batch's arrays that the kernel fills (columns, address table), and their zero-copy conversion
to an Arrow RecordBatch.

Why fresh arrays per batch: Arrow wraps the numpy buffers without copying, so a batch
handed to the caller must own its memory; allocation is once per batch, never per packet.
Validity is kept as one uint8 per row (cheap to write in numba) and packed into Arrow's
little-endian bitmaps here.
"""

from __future__ import annotations

import socket

import numpy as np
import pyarrow as pa

from tracecore.reader import abi
from tracecore.reader.compiled import kernels
from tracecore.schema import PACKET_SCHEMA

# c8 rows (see kernel._store); VALID holds bits V_PORTS | V_FLAGS | V_L4
IP_VERSION, IP_PROTO, IP_FRAGMENT, VALID = range(4)
V_PORTS, V_FLAGS, V_L4 = 1, 2, 4


CHUNK_ROWS = 2048  # rows parsed before their addresses are interned (kernel._intern_rows)


class AddressTable:
    """The open-addressing table of one batch's distinct addresses (reset per batch), and the
    scratch rows of address keys a chunk is parsed into."""

    def __init__(self, batch_rows: int):
        self.umax = min(2 * batch_rows + 2, 1 << 16)
        size = 1 << int(2 * self.umax - 1).bit_length()
        self.tab = np.zeros((size, 3), dtype=np.uint64)
        self.u_key = np.zeros((self.umax, 2), dtype=np.uint64)
        self.u_kind = np.zeros(self.umax, dtype=np.uint8)
        self.keys = np.zeros((4, CHUNK_ROWS), dtype=np.uint64)

    def kernel_args(self) -> tuple:
        return (self.keys, self.tab, self.u_key, self.u_kind)

    def strings(self, count: int) -> pa.Array:
        """The distinct addresses as text, formatted like tshark (inet_ntop, RFC 5952)."""
        out = []
        for (hi, lo), kind in zip(self.u_key[:count].tolist(), self.u_kind[:count].tolist(), strict=True):
            if kind == 4:
                out.append(socket.inet_ntop(socket.AF_INET, lo.to_bytes(4, "big")).encode())
            else:
                addr = hi.to_bytes(8, "big") + lo.to_bytes(8, "big")
                out.append(socket.inet_ntop(socket.AF_INET6, addr).encode())
        # From buffers, not pa.array(list): that imports pandas on first use, holding the GIL.
        offsets = np.zeros(count + 1, dtype=np.int32)
        np.cumsum([len(b) for b in out], out=offsets[1:])
        return pa.Array.from_buffers(
            pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(out))]
        )


class Columns:
    """Preallocated arrays for one batch of up to `rows` packets."""

    def __init__(self, rows: int):
        self.rows = rows
        self.ts = np.empty(rows, dtype=np.int64)
        self.c32f = np.empty((2, rows), dtype=np.uint32)  # frame_len, cap_len
        self.c16f = np.empty((2, rows), dtype=np.uint16)  # interface, link_type
        self.c8 = np.empty((4, rows), dtype=np.uint8)
        self.c16 = np.empty((3, rows), dtype=np.uint16)  # src_port, dst_port, tcp_flags
        self.c32 = np.empty(rows, dtype=np.uint32)  # l4_payload_len
        self.cidx = np.empty((2, rows), dtype=np.int32)  # src_ip, dst_ip dictionary indices

    def kernel_args(self) -> tuple:
        return (self.ts, self.c32f, self.c16f, self.c8, self.c16, self.c32, self.cidx)

    def link_types(self, n: int) -> np.ndarray:
        """The link type of each of the first `n` rows."""
        return self.c16f[1, :n]

    def to_batch(self, n: int, table: AddressTable, st: np.ndarray) -> pa.RecordBatch:
        """The first `n` rows as a RecordBatch with PACKET_SCHEMA; resets the address table."""
        dictionary = table.strings(int(st[abi.NUNIQ]))
        kernels().reset_table(table.tab, table.u_key, table.u_kind, st)
        valid = self.c8[VALID, :n]
        v_ip = _bitmap(self.c8[IP_VERSION, :n] != 0)
        ports = _bitmap(valid & V_PORTS)
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
            _prim(pa.uint16(), self.c16[0], n, ports),
            _prim(pa.uint16(), self.c16[1], n, ports),
            _prim(pa.uint16(), self.c16[2], n, _bitmap(valid & V_FLAGS)),
            _prim(pa.uint32(), self.c32, n, _bitmap(valid & V_L4)),
            pa.Array.from_buffers(
                pa.bool_(), n, [v_ip, pa.py_buffer(np.packbits(self.c8[IP_FRAGMENT, :n], bitorder="little"))]
            ),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=PACKET_SCHEMA)


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
    return pa.DictionaryArray.from_arrays(idx, dictionary)
