"""Chrome-trace JSON read record by record, in bounded memory, plain or gzip-compressed.

Not a parser itself (registers nothing). PyTorch's profiler (Kineto) writes one object,
`{"schemaVersion": 1, …, "baseTimeNanoseconds": …, "traceEvents": [ {…}, … ], "traceName": …}`;
NCCL's example profiler plugin and Horovod write a bare array `[ {…}, … ]`, which a killed job leaves
unterminated. `TraceRecords` yields each event object with the line it starts on and keeps the
object's other top-level values (`meta`), so a trace of any size costs one read window: the text is
decoded in `CHUNK` pieces and each record must fit in `MAX_RECORD` characters. A record that does not
decode (invalid, nested deeper than Python's decoder goes, too long) is one bad line, and reading
resumes after it: past its brackets when they close within `MAX_RECORD`, else at the next record (a `{`
after a `,` or at the start of a line: not one nested in the bad record). NUL bytes between records
(the blocks a crash leaves) are white space. A damaged gzip stream, or one that expands past its limit
(`_text.open_text`), ends the file there, counted once, with the records before it kept. A parser that
cannot use a record it was given counts it as a bad line too (`each_record`).

A parser that reads few of a file's records passes `skip`: a pattern matched at the `{` of each record
of the event array; a record it matches is passed over unread (not decoded, so not checked either), its
end found by `skippable_record`'s brackets and strings. Kineto writes `"ph"`, `"cat"` and `"name"`
first, so most of a trace (host operators, runtime calls) is decided by its first 60 characters.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from tracecore.logs._common import BadLines
from tracecore.logs._text import STREAM_ERRORS, ExpansionError, open_text

CHUNK = 1 << 20  # characters kept before the window moves on
READ = 1 << 16  # characters read at a time (a damaged gzip stream loses at most the piece being read)
MAX_RECORD = 1 << 20  # the longest record (or top-level value) decoded; longer ones are bad lines
MAX_META_KEYS = 64  # top-level values kept beside the events
_SPACE = re.compile(r"[ \t\r\n\x00]*")  # white space between records (NULs a crash left too)
_SPACE_OR_COMMA = re.compile(r"[ \t\r\n\x00,]*")
_BRACKETS_OR_QUOTE = re.compile(r'[\[{]+|[\]}]+|"')  # a run of openers or closers is one step
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
# one event object nested at most three deep (record, args, a value of args), whose strings hold no
# unescaped quote: what `skippable_record` passes over; possessive, so it never backtracks
_STR = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'  # unrolled (a run, then one escape and a run): fewer sre steps
_PLAIN = r'[^{}"]*+'
_DEPTH0 = rf"{_PLAIN}(?:{_STR}{_PLAIN})*+"
_DEPTH1 = rf"{_PLAIN}(?:(?:{_STR}|\{{{_DEPTH0}\}}){_PLAIN})*+"
_DEPTH2 = rf"{_PLAIN}(?:(?:{_STR}|\{{{_DEPTH1}\}}){_PLAIN})*+"
_OBJECT = rf"\{{{_DEPTH2}\}}"


def skippable_record(head: str) -> re.Pattern[str]:
    """The `skip` pattern of records whose text starts as `head` (a regex matched at the `{`): a run
    of them with the commas and white space between, passed over in one match."""
    return re.compile(rf"(?:[ \t\r\n\x00,]*+(?={head}){_OBJECT})++")


# what a parser's use of one decoded record may raise on hostile values (a list where a number goes,
# a number past every type): the record is one bad line, never the file's end
RECORD_ERRORS = (ArithmeticError, LookupError, RecursionError, TypeError, ValueError, AttributeError)


class TraceRecords:
    """Iterate (line number, event object) over a Chrome-trace file; `meta` holds the other
    top-level values of an object-form trace once iteration has passed them."""

    def __init__(
        self, path: Path, bad: BadLines, max_record: int = MAX_RECORD, skip: re.Pattern[str] | None = None
    ) -> None:
        self.path = Path(path)
        self.skip = skip
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
            except STREAM_ERRORS as err:
                why = str(err) if isinstance(err, ExpansionError) else f"compressed stream damaged: {err}"
                self.bad.add(self._line(len(self._buf)), "", why)
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

    def _skip_space(self, space: re.Pattern[str] = _SPACE) -> str:
        """The next character that `space` does not match ('' at the end of the file); a run of white
        space of any length is passed over in pieces of the read window."""
        while True:
            self._fill(1)
            if self._pos >= len(self._buf):
                return ""
            self._pos = space.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]

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
        except (json.JSONDecodeError, RecursionError) as err:
            too_long = not self._eof and len(self._buf) - self._pos >= self.max_record
            why = err.msg if isinstance(err, json.JSONDecodeError) else "nested too deep"
            why = f"a record longer than {self.max_record} characters" if too_long else why
            self.bad.add(line, self._rest_of_line(), why)
            if not self._skip_value():
                self._skip_to_next_object()
            return False, None
        if end - self._pos > self.max_record:  # decoded whole from a short file; still over the limit
            self.bad.add(line, self._rest_of_line(), f"a record longer than {self.max_record} characters")
            self._pos = end
            return False, None
        self._pos = end
        return True, value

    def _skip_value(self) -> bool:
        """Move past the object, array or string at the cursor by its brackets and quotes, when it
        closes within `max_record` characters (its content need not decode); False, unmoved, else."""
        buf, at = self._buf, self._pos
        stop = min(len(buf), at + self.max_record)
        if at >= stop or buf[at] not in '{["':
            return False
        depth = 0
        while (found := _BRACKETS_OR_QUOTE.search(buf, at, stop)) is not None:
            run = found.group()
            if run == '"':
                string = _STRING.match(buf, found.start(), stop)
                if string is None:
                    return False
                at = string.end()
            elif run[0] in "[{":
                depth, at = depth + len(run), found.end()
            elif len(run) >= depth:  # the value closes inside this run of closers
                self._pos = found.start() + depth
                return True
            else:
                depth, at = depth - len(run), found.end()
            if depth == 0:  # a string value
                self._pos = at
                return True
        return False

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
            ch = self._skip_space(_SPACE_OR_COMMA)
            if not ch:
                return
            if ch == "]":
                self._pos += 1
                if top_level:
                    continue
                return
            if ch != "{":
                self.bad.add(self._line(self._pos), self._rest_of_line(), "not a JSON object")
                if not self._skip_value():
                    self._skip_to_next_object()
                continue
            if self.skip is not None:
                self._fill(self.max_record)
                passed = self.skip.match(self._buf, self._pos)
                if passed is not None:  # a run of records, up to the last whole one in the window
                    self._pos = passed.end()
                    continue
            line = self._line(self._pos)
            ok, record = self._decode()
            if ok:
                yield line, record  # type: ignore[misc]

    def _object(self) -> Iterator[tuple[int, dict]]:
        """The top-level object: `traceEvents` streamed, every other value kept in `meta`."""
        while True:
            ch = self._skip_space(_SPACE_OR_COMMA)
            if not ch or ch == "}":
                return
            line = self._line(self._pos)
            ok, key = self._decode() if ch == '"' else (False, None)
            if not ok or not isinstance(key, str):
                if ch != '"':
                    self.bad.add(line, self._rest_of_line(), "not a key of the trace object")
                    if not self._skip_value():
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


def each_record(records: TraceRecords, use: Callable[[int, dict], None]) -> None:
    """`use(line, record)` for every record, a record it cannot use (RECORD_ERRORS) one bad line."""
    for line, record in records:
        try:
            use(line, record)
        except RECORD_ERRORS as err:
            records.bad.add(
                line, preview(record), f"cannot read the record: {type(err).__name__}: {str(err)[:120]}"
            )


def preview(record: object) -> str:
    """The start of a record as JSON, for a bad line's example."""
    try:
        return json.dumps(record)[:160]
    except (ValueError, TypeError, RecursionError):
        return str(type(record).__name__)


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
