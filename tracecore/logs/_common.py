"""Helpers shared by the log parsers: reading text, exact time conversion, bad-line bookkeeping.

Not a parser itself (registers nothing). Every parser counts the lines it cannot read and keeps a few
for the report, because a log silently shortened by a parser would bias every model fitted on it.
Parsers never raise on content: the worst file is an empty table with its bad lines counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecore.logs import ParsedLog
from tracecore.logs._text import STREAM_ERRORS, ExpansionError, open_text

if TYPE_CHECKING:
    import pyarrow as pa

MAX_EXAMPLES = 5
NS_PER_S = Decimal(1_000_000_000)

# kungfu-run tags child output `[<peer>::stdout] `; mpirun --tag-output tags `[<job>,<rank>]<stdout>:`.
KUNGFU_PREFIX = re.compile(r"^\[(?P<peer>[^\]\s]+?)::(?P<stream>stdout|stderr)\] ?")
MPIRUN_PREFIX = re.compile(r"^\[(?P<job>\d+),(?P<peer>\d+)\]<(?P<stream>stdout|stderr)>: ?")


MAX_LINE = 1 << 20  # characters of a line the line-based parsers read; a longer one is a bad line
CHUNK_ROWS = 1 << 16  # rows gathered as Python values before they become Arrow arrays


def log_lines(path: Path, bad: BadLines) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a log, streamed (`bounded_lines`): a line longer than
    MAX_LINE characters is counted as a bad line and not read into memory. Why: the parsers read
    whole files before, so a 1 GB file (one sparse, NUL-filled line) took 2.2 GB of memory.
    A damaged gzip stream ends the file there, counted once, with the lines before it kept.
    An unreadable file raises OSError, which ingest reports per file (it keeps going with the rest)."""
    for line_no, text, cut in read_lines(path, MAX_LINE, bad):
        if cut:
            bad.add(line_no, text[:24], f"longer than {MAX_LINE:,} characters; not read")
        else:
            yield line_no, text


def read_lines(path: Path, max_chars: int, bad: BadLines) -> Iterator[tuple[int, str, bool]]:
    """`bounded_lines`, a damaged (or too far expanding) compressed stream ending the file as one bad
    line after the lines before it."""
    line_no = 0
    try:
        for line_no, text, cut in bounded_lines(path, max_chars):
            yield line_no, text, cut
    except DamagedStreamError as err:
        bad.add(line_no + 1, "", str(err))


class DamagedStreamError(OSError):
    """A compressed log whose stream breaks off, fails its check or expands past its limit partway."""


def bounded_lines(path: Path, max_chars: int) -> Iterator[tuple[int, str, bool]]:
    """(line number, text without line end, cut short?) for each line, streamed: a line longer than
    `max_chars` yields its first `max_chars` characters and the rest is skipped unread into memory,
    so one hostile multi-gigabyte line costs no more than a normal one."""
    with open_text(path) as fh:
        line_no = 0
        while True:
            text = _read(fh, max_chars + 1)
            if not text:
                return
            line_no += 1
            cut = len(text) > max_chars and not text.endswith("\n")
            if cut:
                while True:  # skip the rest of this line in bounded pieces
                    rest = _read(fh, 1 << 16)
                    if not rest or rest.endswith("\n"):
                        break
                text = text[:max_chars]
            yield line_no, text.rstrip("\r\n"), cut


def _read(fh, size: int) -> str:
    """One line of at most `size` characters; a damaged compressed stream raises DamagedStreamError."""
    try:
        return fh.readline(size)
    except ExpansionError as err:
        raise DamagedStreamError(str(err)) from None
    except STREAM_ERRORS as err:
        raise DamagedStreamError(f"compressed stream damaged: {err or 'cut short'}") from None


def seconds_to_ns(text: str) -> int:
    """Unix seconds as printed (`1649128380`, `1649128380.123456`) → int ns, without float rounding."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"not a number of seconds: {text!r}") from None
    if not value.is_finite():
        raise ValueError(f"not a finite time: {text!r}")
    return int((value * NS_PER_S).to_integral_value())


def strip_tag(line: str) -> tuple[str | None, str | None, str]:
    """Split a launcher tag off a line: (peer, stream, message); (None, None, line) when untagged."""
    for pattern in (KUNGFU_PREFIX, MPIRUN_PREFIX):
        match = pattern.match(line)
        if match:
            return match["peer"], match["stream"], line[match.end() :]
    return None, None, line


@dataclass
class BadLines:
    """Count of unparseable lines and the first few, as `line N: text`."""

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, line_no: int, text: str, why: str = "") -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            reason = f" ({why})" if why else ""
            self.examples.append(f"line {line_no}: {text[:160]}{reason}")


def note_empty(rows: int, bad: BadLines, kind: str) -> None:
    """A file with no parseable row gives an empty table, never an exception (one odd file must not
    stop an ingest); it is reported as one bad line when nothing else was."""
    if rows == 0 and bad.count == 0:
        bad.count = 1
        bad.examples.append(f"no {kind} line in the file")


def parsed_log(columns: dict[str, list[Any]] | Rows, schema: pa.Schema, bad: BadLines) -> ParsedLog:
    """What a parser returns: its columns as a table of `schema`, with the bad lines it counted."""
    import pyarrow as pa

    table = columns.table() if isinstance(columns, Rows) else pa.table(columns, schema=schema)
    return ParsedLog(table=table, bad_lines=bad.count, first_bad=bad.examples)


class Rows:
    """A parser's rows, gathered as Python values and made Arrow arrays every CHUNK_ROWS rows.

    Why: a row of Python objects costs ten times or more the Arrow values it becomes, so a big log's
    memory follows the table it makes, not a list of everything it read.
    """

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self.columns: dict[str, list[Any]] = {name: [] for name in schema.names}
        self.batches: list[pa.RecordBatch] = []
        self.count = 0

    def add(self, **values: Any) -> None:
        """One row; a column not given is null."""
        for name, column in self.columns.items():
            column.append(values.get(name))
        self.count += 1
        if len(next(iter(self.columns.values()))) >= CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        from tracecore.arrow_rows import array  # not from_pydict: pa.array imports pandas

        try:
            arrays = [array(self.columns[f.name], f.type) for f in self.schema]
        except (OverflowError, pa.ArrowInvalid):  # an integer past its column's type: NULL, as Columns
            arrays = [array(_fitting(self.columns[f.name], f.type), f.type) for f in self.schema]
        self.batches.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        for column in self.columns.values():
            column.clear()

    def table(self) -> pa.Table:
        import pyarrow as pa

        self._flush()
        return pa.Table.from_batches(self.batches, schema=self.schema)


def _fitting(values: list[Any], typ: pa.DataType) -> list[Any]:
    """`values` with every integer that `typ` (an integer type) cannot hold as None."""
    import pyarrow as pa

    if not pa.types.is_integer(typ):
        return values
    low, high = -(2 ** (typ.bit_width - 1)), 2 ** (typ.bit_width - 1)
    return [v if not isinstance(v, int) or low <= v < high else None for v in values]
