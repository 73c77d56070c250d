"""Training and benchmark logs: a registry of parsers detected by content.

Each parser module defines a `LogParser` and adds it to `PARSERS`. Ingest offers every text file of a
run folder to `detect_parser`; the chosen parser returns one Arrow table (its own kind, stored as
table `parser.table`) and the count of lines it could not parse, which are reported, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class ParsedLog:
    """What a parser made of one file."""

    table: pa.Table
    bad_lines: int = 0
    first_bad: list[str] = field(default_factory=list)  # a few examples for the report


@dataclass(frozen=True)
class LogParser:
    """A log format: a cheap content test on the file's head and the full parse."""

    table: str  # dataset table name, e.g. "train_log"
    detect: Callable[[str], bool]  # given the first ~8 KiB of text
    parse: Callable[[Path], ParsedLog]


PARSERS: list[LogParser] = []

HEAD_BYTES = 8192


def detect_parser(path: Path) -> LogParser | None:
    """The first registered parser that recognises the file, or None."""
    _load_builtin_parsers()
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    if "\x00" in head:
        return None  # binary, e.g. a capture
    return next((p for p in PARSERS if p.detect(head)), None)


def _load_builtin_parsers() -> None:
    """Import the parser modules (each appends itself to PARSERS) once."""
    import importlib
    import pkgutil

    if getattr(_load_builtin_parsers, "done", False):
        return
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    _load_builtin_parsers.done = True  # type: ignore[attr-defined]
