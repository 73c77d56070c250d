"""A log file as text, plain or gzip-compressed, in UTF-8, UTF-16 or UTF-32: the one place that looks
at its first bytes.

Why: a log is read whatever wrote it: a UTF-8 byte-order mark (Windows editors) is dropped, UTF-16 or
UTF-32 (PowerShell's `>`) is decoded as such, NUL bytes (the blocks a crash leaves in a file being
written) do not make a log pass for a binary file, and a gzip stream is read no further than the
expansion the captures are allowed (`tracecore.reader.source.expansion_limit`).
Not a parser (registers nothing) and imports nothing of `tracecore.logs`, so `detect_parser` and the
parsers can both use it.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
HEAD_BYTES = 8192  # what detection reads of a file

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32LE"),
    (b"\x00\x00\xfe\xff", "UTF-32BE"),
    (b"\xff\xfe", "UTF-16LE"),
    (b"\xfe\xff", "UTF-16BE"),
)
# characters no text log holds (C0 controls but tab, line ends and ESC of coloured logs; U+FFFD where
# bytes did not decode): more than one in a hundred of the others makes a head binary
_NOT_TEXT = re.compile(r"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


class ExpansionError(ValueError):
    """A compressed log that expands past `expansion_limit` of its size: read no further."""


# what ends a compressed log early (the records read before it are kept)
STREAM_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile, ExpansionError)


def wide_encoding(head: bytes) -> str | None:
    """'UTF-16LE' (…) when the first bytes of a file are text in UTF-16 or UTF-32, else None.

    Known by its byte-order mark, or without one by ASCII text with a NUL after (or before) each byte.
    """
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    pairs = len(head) // 2
    if pairs < 8:
        return None
    even, odd = head[0 : 2 * pairs : 2], head[1 : 2 * pairs : 2]
    for text, zeros, name in ((even, odd, "UTF-16LE"), (odd, even, "UTF-16BE")):
        if zeros.count(0) == pairs and 0 not in text and all(9 <= b < 127 for b in text):
            return name
    return None


def text_encoding(head: bytes) -> str:
    """The codec that reads a file whose first bytes are `head`: UTF-16/32 (by its byte-order mark,
    which the codec then drops, or by its NULs), else UTF-8 with any byte-order mark dropped."""
    wide = wide_encoding(head)
    if wide is None:
        return "utf-8-sig"
    if any(head.startswith(bom) for bom, _ in _BOMS):
        return wide[:6].lower()  # 'utf-16': the mark says the byte order
    return wide.lower()


def looks_like_text(text: str) -> bool:
    """Whether decoded text is text, its NULs aside: something besides white space and NULs, and
    almost no other control character or undecodable byte."""
    rest = text.replace("\x00", "")
    return bool(rest.strip()) and len(_NOT_TEXT.findall(rest)) * 100 <= len(rest)


def open_text(path: Path) -> io.TextIOBase:
    """The file as text in its encoding (`text_encoding`), through gzip when its first bytes say so;
    undecodable bytes become U+FFFD."""
    with _open_binary(path) as fh:
        try:
            head = fh.read(HEAD_BYTES)
        except STREAM_ERRORS:
            head = b""  # a damaged stream: the parser reports it where it breaks off
    encoding = text_encoding(head)
    return io.TextIOWrapper(_open_binary(path), encoding=encoding, errors="replace", newline="")


def read_head(path: Path, size: int) -> str:
    """The first `size` characters of the (possibly gzip-compressed) file; '' when unreadable."""
    try:
        with open_text(path) as fh:
            return fh.read(size)
    except (OSError, *STREAM_ERRORS):
        return ""


def _open_binary(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip, no further than its expansion limit."""
    raw = open(path, "rb")  # noqa: SIM115 - the caller closes what is returned
    if raw.read(2) != GZIP_MAGIC:
        raw.seek(0)
        return raw
    raw.seek(0)
    from tracecore.reader.source import expansion_limit

    size = Path(path).stat().st_size
    capped = _Capped(gzip.GzipFile(fileobj=raw, mode="rb"), raw, expansion_limit(size), size)
    return io.BufferedReader(capped)


class _Capped(io.RawIOBase):
    """A decompressed stream that raises ExpansionError once it has given more than `limit` bytes."""

    def __init__(self, stream: gzip.GzipFile, raw: BinaryIO, limit: int, size: int) -> None:
        self._stream, self._raw, self._limit, self._size = stream, raw, limit, size
        self._given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._given > self._limit:
            raise ExpansionError(self._why())
        n = self._stream.readinto(buffer)
        self._given += n
        if self._given > self._limit:
            raise ExpansionError(self._why())
        return n

    def _why(self) -> str:
        return (
            f"the gzip stream expands past {self._limit:,} bytes (its {self._size:,} bytes may expand"
            " that far at most); not read further"
        )

    def close(self) -> None:
        try:
            self._stream.close()
            self._raw.close()
        finally:
            super().close()
