"""Chrome-trace JSON read record by record, in bounded memory, plain or gzip-compressed.

Not a parser itself (registers nothing). PyTorch's profiler (Kineto) writes one object,
`{"schemaVersion": 1, …, "baseTimeNanoseconds": …, "traceEvents": [ {…}, … ], "traceName": …}`;
NCCL's example profiler plugin and Horovod write a bare array `[ {…}, … ]`, which a killed job leaves
unterminated. `TraceRecords` yields each event object with the line it starts on and keeps the
object's other top-level values (`meta`), so a trace of any size costs one read window: the text is
decoded in `CHUNK` pieces and each record must fit in `MAX_RECORD` characters. A record that does not
decode is one bad line, and reading resumes at the next record (a `{` after a `,` or at the start of a
line: not one nested in the bad record); a damaged gzip stream ends the file
there, counted once, with the records before it kept.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from tracecore.logs._common import BadLines
from tracecore.logs._text import open_text

CHUNK = 1 << 20  # characters kept before the window moves on
READ = 1 << 16  # characters read at a time (a damaged gzip stream loses at most the piece being read)
MAX_RECORD = 1 << 20  # the longest record (or top-level value) decoded; longer ones are bad lines
MAX_META_KEYS = 64  # top-level values kept beside the events


class TraceRecords:
    """Iterate (line number, event object) over a Chrome-trace file; `meta` holds the other
    top-level values of an object-form trace once iteration has passed them."""

    def __init__(self, path: Path, bad: BadLines, max_record: int = MAX_RECORD) -> None:
        self.path = Path(path)
        self.bad = bad
        self.max_record = max_record
        self.meta: dict[str, object] = {}
        self._decoder = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._fh: io.TextIOBase | None = None
        self._line_at_buf = 1  # line number of self._buf[0]
        self._counted = (0, 1)  # (offset in buf, its line number): line numbers advance incrementally

    # --- the read window ------------------------------------------------------------------------

    def _fill(self, need: int) -> None:
        """Make at least `need` characters from the cursor available, unless the file ends first."""
        while not self._eof and len(self._buf) - self._pos < need:
            if self._pos > CHUNK:  # drop what has been read, keeping line numbers right
                self._line_at_buf = self._line(self._pos)
                self._buf = self._buf[self._pos :]
                self._pos = 0
                self._counted = (0, self._line_at_buf)
            try:
                piece = self._fh.read(READ) if self._fh is not None else ""
            except (EOFError, zlib.error, gzip.BadGzipFile) as err:
                self.bad.add(self._line(len(self._buf)), "", f"compressed stream damaged: {err}")
                piece = ""
            if not piece:
                self._eof = True
            self._buf += piece

    def _line(self, offset: int) -> int:
        """Line number of buffer offset `offset` (offsets asked for only grow between compactions)."""
        at, line = self._counted
        if offset < at:
            at, line = 0, self._line_at_buf
        line += self._buf.count("\n", at, offset)
        self._counted = (offset, line)
        return line

    def _skip_space(self, chars: str = " \t\r\n") -> str:
        """The next character that is not in `chars` ('' at the end of the file)."""
        while True:
            self._fill(1)
            if self._pos >= len(self._buf):
                return ""
            ch = self._buf[self._pos]
            if ch not in chars:
                return ch
            self._pos += 1

    def _rest_of_line(self) -> str:
        end = self._buf.find("\n", self._pos, self._pos + 200)
        return self._buf[self._pos : end if end >= 0 else self._pos + 200]

    def _decode(self) -> tuple[bool, object]:
        """Decode one JSON value at the cursor: (True, value), or (False, None) after counting it bad
        and moving the cursor to the next `{`."""
        self._skip_space()
        self._fill(self.max_record)
        line = self._line(self._pos)
        try:
            value, end = self._decoder.raw_decode(self._buf, self._pos)
        except json.JSONDecodeError as err:
            too_long = not self._eof and len(self._buf) - self._pos >= self.max_record
            why = f"a record longer than {self.max_record} characters" if too_long else err.msg
            self.bad.add(line, self._rest_of_line(), why)
            self._skip_to_next_object()
            return False, None
        if end - self._pos > self.max_record:  # decoded whole from a short file; still over the limit
            self.bad.add(line, self._rest_of_line(), f"a record longer than {self.max_record} characters")
            self._pos = end
            return False, None
        self._pos = end
        return True, value

    def _skip_to_next_object(self) -> None:
        """Move past the current (bad) record to the next `{` that starts a record: one after a `,` or
        at the start of a line (a `{` after `:` opens an object inside the bad record)."""
        self._pos += 1
        while True:
            self._fill(1)
            at = self._buf.find("{", self._pos)
            if at < 0:
                self._pos = len(self._buf)
                if self._eof:
                    return
                continue
            before = self._buf[max(0, at - 64) : at].rstrip(" \t\r")
            if at == 0 or not before or before[-1] in ",\n":
                self._pos = at
                return
            self._pos = at + 1

    # --- the grammar ----------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[int, dict]]:
        with open_text(self.path) as fh:
            self._fh = fh
            first = self._skip_space()
            if first == "[":
                self._pos += 1
                yield from self._array(top_level=True)
            elif first == "{":
                self._pos += 1
                yield from self._object()
            elif first:
                self.bad.add(self._line(self._pos), self._rest_of_line(), "not a JSON array or object")
            self._fh = None

    def _array(self, top_level: bool) -> Iterator[tuple[int, dict]]:
        """Records of an array up to its `]`; at the top level, a `]` is passed over (Horovod closes
        the array after each record and reopens it), so records after one are still read."""
        while True:
            ch = self._skip_space(" \t\r\n,")
            if not ch:
                return
            if ch == "]":
                self._pos += 1
                if top_level:
                    continue
                return
            if ch != "{":
                self.bad.add(self._line(self._pos), self._rest_of_line(), "not a JSON object")
                self._skip_to_next_object()
                continue
            line = self._line(self._pos)
            ok, record = self._decode()
            if ok:
                yield line, record  # type: ignore[misc]

    def _object(self) -> Iterator[tuple[int, dict]]:
        """The top-level object: `traceEvents` streamed, every other value kept in `meta`."""
        while True:
            ch = self._skip_space(" \t\r\n,")
            if not ch or ch == "}":
                return
            line = self._line(self._pos)
            ok, key = self._decode() if ch == '"' else (False, None)
            if not ok or not isinstance(key, str):
                if ch != '"':
                    self.bad.add(line, self._rest_of_line(), "not a key of the trace object")
                    self._skip_to_next_object()
                continue
            if self._skip_space() != ":":
                self.bad.add(line, self._rest_of_line(), f"no ':' after key {key[:40]!r}")
                continue
            self._pos += 1
            if key == "traceEvents" and self._skip_space() == "[":
                self._pos += 1
                yield from self._array(top_level=False)
                continue
            ok, value = self._decode()
            if ok and len(self.meta) < MAX_META_KEYS:
                self.meta[key] = value


def int_or_none(value: object) -> int | None:
    """An integer field of a record (bools and non-finite floats are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value and abs(value) < 2**63:
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def us_to_ns(value: object) -> int | None:
    """A Chrome-trace time or duration in µs (float, 3 decimals) → int ns; None if not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or abs(value) > 9e15:
        return None
    return round(value * 1000)
