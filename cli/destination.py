"""Where a result goes: a file or standard output, opened, written, flushed and closed with its errors
checked.

Why a module: a destination that cannot be opened or written to the end (`-o /proc/version`,
`-o /dev/full`, `> /dev/full`) must be one line naming it (OutputError, exit 2), not a traceback, on
every command that writes; only the opening and the writes are checked, so an error reading the input
keeps its own message.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tracecore.errors import OutputError

if TYPE_CHECKING:
    import altair as alt


@contextlib.contextmanager
def sink(out: Path | None) -> Iterator[TextIO]:
    """The text destination of a result: the file `out`, or standard output, flushed and closed here."""
    if out is None:
        text: TextIO = sys.stdout
    else:
        with writing(out):
            text = out.open("w", encoding="utf-8", newline="")
    try:
        yield _CheckedText(text, out)
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
    """A text stream whose failed writes raise OutputError (a closed pipe stays BrokenPipeError)."""

    def __init__(self, stream: TextIO, out: Path | None):
        self.stream, self.out = stream, out

    def write(self, text: str) -> int:
        with writing(self.out):
            return self.stream.write(text)


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
