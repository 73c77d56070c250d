"""Where a result goes: a file or standard output, opened, written, flushed and closed with its errors
checked.

Why a module: a destination that cannot be opened or written to the end (`-o /proc/version`,
`-o /dev/full`, `> /dev/full`) must be one line naming it (OutputError, exit 2), not a traceback, on
every command that writes; only the opening and the writes are checked, so an error reading the input
keeps its own message. Standard output itself is checked where it is written to the system
(`checked_stdout`, which the console script installs first): a result, a list, a description, a plan,
--version and --help all fail the same way. CSV written to a terminal has its control characters
escaped (`sink(escaped=True)`, tracecore.terminal.safe); to a file or a pipe it is the data as it is.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tracecore.errors import OutputError

if TYPE_CHECKING:
    import altair as alt


@contextlib.contextmanager
def sink(out: Path | None, escaped: bool = False) -> Iterator[TextIO]:
    """The text destination of a result: the file `out`, or standard output, flushed and closed here;
    `escaped`: control characters written as their escapes when that is a terminal (line ends kept)."""
    if out is None:
        text: TextIO = sys.stdout
    else:
        with writing(out):
            text = out.open("w", encoding="utf-8", newline="")
    try:
        yield _CheckedText(text, out, escaped and out is None and _is_terminal(text))
        with writing(out):
            text.flush()
    except BaseException:
        if out is not None:  # the first error is the one to report
            with contextlib.suppress(OSError):
                text.close()
        raise
    if out is not None:
        with writing(out):
            text.close()


class _CheckedText:
    """A text stream whose failed writes raise OutputError (a closed pipe stays BrokenPipeError);
    `escaped`: each line's control characters written as their escapes."""

    def __init__(self, stream: TextIO, out: Path | None, escaped: bool = False):
        self.stream, self.out, self.escaped = stream, out, escaped

    def write(self, text: str) -> int:
        if self.escaped:
            from tracecore.terminal import safe

            text = "\n".join(safe(line) for line in text.split("\n"))
        with writing(self.out):
            return self.stream.write(text)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def checked_stdout() -> None:
    """Make `sys.stdout` raise OutputError ("cannot write standard output: …", exit 2) when the system
    refuses a write (a full disk, an I/O error), whoever writes: the console script's first step.

    Why at the file descriptor: --version, --help and Rich write to standard output without passing
    through `sink`, and a buffered stream fails only when it flushes, wherever that happens to be."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
        stream.flush()
    except (AttributeError, OSError, ValueError):
        return  # no standard output (closed), or not a file: left as it is
    raw = _CheckedStdout(fd)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
    )


class _CheckedStdout(io.RawIOBase):
    """File descriptor `fd` (standard output), written with `writing`'s errors (closing this object
    leaves the descriptor open: the process owns it)."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes) -> int | None:  # type: ignore[override]
        with writing(None):
            try:
                return os.write(self._fd, data)
            except BlockingIOError:  # a non-blocking descriptor that is full for now, as FileIO says
                return None


@contextlib.contextmanager
def writing(out: Path | None) -> Iterator[None]:
    """OSError while opening or writing `out` (standard output when None) → OutputError, in one line."""
    try:
        yield
    except BrokenPipeError:  # `| head`: the boundary ends quietly
        raise
    except OSError as err:
        where = "standard output" if out is None else str(out)
        raise OutputError(f"cannot write {where}: {err.strerror or err}") from None


def tell_written(rows: int, out: Path | None) -> None:
    """On standard error, how many rows a result written to the file `out` holds (nothing for stdout)."""
    if out is not None:
        import typer

        typer.echo(f"wrote {rows} rows to {out}", err=True)


def save_chart(chart: alt.TopLevelMixin, path: Path, scale: float | None = None) -> Path:
    """`render.save`, with a file that cannot be written as one line (see `sink`)."""
    from tracecore.figures.render import save

    with writing(path):
        return save(chart, path, scale=scale)
