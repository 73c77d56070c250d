"""A log file as text, plain or gzip-compressed: the one place that looks at its first bytes.

Not a parser (registers nothing) and imports nothing of tracecore, so `detect_parser` and the
parsers can both use it.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: Path) -> io.TextIOBase:
    """The file as text, through gzip when its first bytes say so; undecodable bytes become U+FFFD."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def read_head(path: Path, size: int) -> str:
    """The first `size` characters of the (possibly gzip-compressed) file; '' when unreadable."""
    try:
        with open_text(path) as fh:
            return fh.read(size)
    except (OSError, EOFError, zlib.error):
        return ""
