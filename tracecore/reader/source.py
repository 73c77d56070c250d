"""Bytes of a capture file, plain or compressed, detected by magic bytes.

Why two paths: a plain file is memory-mapped (the OS page cache is the buffer, nothing is
copied), while gzip/xz/zstd are decompressed chunk by chunk into a bounded window so a
10 GB compressed capture never sits in memory whole.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import lzma
import mmap
import sys
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np
import zstandard

from tracecore.errors import CaptureError, NotACaptureError

# A compressed file's first bytes, by compression.
COMPRESSION_MAGICS = {"gzip": b"\x1f\x8b", "xz": b"\xfd7zXZ\x00", "zstd": b"\x28\xb5\x2f\xfd"}
CHUNK = 8 << 20  # decompressed bytes per refill; > the largest record we accept
SEGMENT = 64 << 20  # mapped bytes per window of a plain file
MADV_POPULATE_READ = 22  # Linux >= 5.14; not in Python 3.11's mmap module
STDIN = "-"  # the path that means standard input: `tcpdump -w - | tracecore read -`
# How far a compressed input may expand: MAX_EXPANSION times its compressed size, and never less than
# EXPANSION_FLOOR (read by the logs' gzip streams, tracecore/logs/_text.py). Why: real traces and logs
# compress tens of times at most, while deflate packs a run of one byte a thousandfold, so a 2 MB file
# can hide 2 GB of white space. (A capture's zeros end at its first packet of length 0, a corrupt one.)
MAX_EXPANSION = 200
EXPANSION_FLOOR = 64 << 20


def expansion_limit(compressed_bytes: int) -> int:
    """The most decompressed bytes a compressed input of `compressed_bytes` is read to."""
    return max(EXPANSION_FLOOR, MAX_EXPANSION * compressed_bytes)


def compression_in(head: bytes) -> str | None:
    """'gzip', 'xz', 'zstd' or None, from a file's first bytes (the file name is not trusted)."""
    return next((kind for kind, magic in COMPRESSION_MAGICS.items() if head.startswith(magic)), None)


def compression_of(path: str | Path) -> str | None:
    """`compression_in` of the file at `path`."""
    with open(path, "rb") as f:
        return compression_in(f.read(6))


def open_decompressed(source: str | Path | BinaryIO, kind: str) -> BinaryIO:
    """A streaming reader of the decompressed bytes of a file, or of an open binary stream."""
    if kind == "gzip":
        return gzip.open(source, "rb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.open(source, "rb")  # type: ignore[return-value]
    raw = open(source, "rb") if isinstance(source, str | Path) else source  # noqa: SIM115 - closed below
    return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)  # type: ignore[return-value]


def open_stdin() -> tuple[str | None, BinaryIO]:
    """Standard input's compression and a reader of its (decompressed) bytes.

    Why: a pipe cannot be memory-mapped or reopened, so it takes the chunk path of compressed
    files; the bytes read to detect the compression are given back first.
    """
    head = sys.stdin.buffer.read(6)  # blocks until 6 bytes or the end: a pipe may deliver fewer per read
    stream = io.BufferedReader(_GivenBack(head, sys.stdin.buffer), CHUNK)
    kind = compression_in(head)
    return kind, stream if kind is None else open_decompressed(stream, kind)


class _GivenBack(io.RawIOBase):
    """`head`, then the rest of `rest`: a stream whose first bytes were already read."""

    def __init__(self, head: bytes, rest: BinaryIO):
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if not self._head:
            return self._rest.readinto1(buffer)  # type: ignore[attr-defined]
        n = min(len(buffer), len(self._head))
        buffer[:n] = self._head[:n]
        self._head = self._head[n:]
        return n


DECOMPRESS_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, zstandard.ZstdError)


class Window:
    """A sliding window of the (decompressed) file: `buf[0]` is byte `base` of the capture.

    `advance(pos)` drops `buf[:pos]` and appends the next chunk. For a plain file the window
    is a view of SEGMENT bytes of the memory map: each new segment is pre-faulted in one
    call (MADV_POPULATE_READ: per-page faults cost more than parsing), and the pages left
    behind are unmapped (MADV_DONTNEED), so resident memory stays flat on a 10 GB file; the
    page cache keeps the data. A decompression error after some data is kept as `error`: a stream
    cut short is reported like a truncated file (what came before is good), a `corrupt` one as a
    corrupt record after the packets decoded before it.
    """

    def __init__(self, path: str | Path):
        self.path = path
        self.base = 0
        self.error: str | None = None
        # The error is corruption (a failed CRC, bad data), not a stream cut short: why told apart: a
        # cut stream is a capture stopped while written (a warning), a corrupt one cannot be trusted.
        self.corrupt = False
        self._stream: BinaryIO | None = None
        self._mmap: mmap.mmap | None = None
        self._whole = np.empty(0, dtype=np.uint8)
        if str(path) == STDIN:
            self.kind, self._stream = open_stdin()
            self._fill()
            return
        self.kind = compression_of(path)
        if self.kind is None:
            size = Path(path).stat().st_size
            if size == 0:
                raise NotACaptureError(path, "empty file: not a pcap or pcapng capture", 0)
            with open(path, "rb") as f:
                self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            self._size = size
            self._whole = np.frombuffer(self._mmap, dtype=np.uint8)
            self._map_segment(0)
        else:
            self._stream = open_decompressed(path, self.kind)
            self._fill()

    def _fill(self) -> None:
        """Read the first chunk of a stream; one that gives nothing is no capture."""
        self.buf = np.empty(0, dtype=np.uint8)
        self.eof = False
        self.advance(0)
        if self.eof and len(self.buf) == 0:
            if self.error:
                raise CaptureError(self.path, f"{self.kind} stream unreadable: {self.error}", 0)
            empty = "empty input"
            if self.kind:
                empty = f"{self.kind} stream decompresses to nothing (empty or cut short)"
            raise NotACaptureError(self.path, f"{empty}: no capture", 0)

    def _map_segment(self, start: int, min_stop: int = 0) -> None:
        """Make buf the mapped bytes [start, start + SEGMENT) (at least up to min_stop),
        populated in one call."""
        assert self._mmap is not None
        stop = min(self._size, max(start + SEGMENT, min_stop))
        self._madvise(MADV_POPULATE_READ, start, stop)
        self.buf = self._whole[start:stop]
        self.base = start
        self.eof = stop == self._size

    def _madvise(self, option: int, start: int, stop: int) -> None:
        assert self._mmap is not None
        first = start - start % mmap.PAGESIZE
        if stop > first:
            # Advice only: an old kernel without MADV_POPULATE_READ just faults page by page.
            with contextlib.suppress(OSError, ValueError):
                self._mmap.madvise(option, first, stop - first)

    def advance(self, pos: int) -> bool:
        """Drop the first `pos` bytes and read more; False (buffer untouched) when nothing comes."""
        if self._mmap is not None:
            if self.eof:
                return False
            start = self.base + pos
            old_stop = self.base + len(self.buf)
            self._madvise(mmap.MADV_DONTNEED, self.base, start - start % mmap.PAGESIZE)
            # No progress means a record longer than the window: grow it, never spin.
            self._map_segment(start, old_stop + SEGMENT if pos == 0 else 0)
            return True
        if self.eof or self._stream is None:
            return False
        chunk = self._read_chunk()
        if not chunk:
            self.eof = True
            return False
        tail = self.buf[pos:]
        new = np.empty(len(tail) + len(chunk), dtype=np.uint8)
        new[: len(tail)] = tail
        new[len(tail) :] = np.frombuffer(chunk, dtype=np.uint8)
        self.buf = new
        self.base += pos
        return True

    def _read_chunk(self) -> bytes:
        """Up to CHUNK decompressed bytes. read1 pieces, so the bytes decoded before a
        corrupt or cut-off spot are kept; the error then ends the stream."""
        assert self._stream is not None
        parts: list[bytes] = []
        size = 0
        while size < CHUNK and self.error is None:
            try:
                piece = self._stream.read1(CHUNK - size)
            except DECOMPRESS_ERRORS as exc:
                self.error = str(exc) or type(exc).__name__
                self.corrupt = not isinstance(exc, EOFError)  # EOFError: a stream cut short
                break
            if not piece:
                break
            parts.append(piece)
            size += len(piece)
        return b"".join(parts)

    def close(self) -> None:
        self.buf = self._whole = np.empty(0, dtype=np.uint8)
        if self._stream is not None:
            self._stream.close()
        if self._mmap is not None:
            # A caller may still hold a view; then the map closes when that is collected.
            with contextlib.suppress(BufferError):
                self._mmap.close()
