"""Ctrl-C during an ingest: noticed whatever exception it surfaces as, and held off around the steps
that must finish together.

Why: SIGINT raises KeyboardInterrupt at whatever line runs, which DuckDB or Arrow may turn into their
own exceptions, and which could land between the catalog rename and the export of `tables/` (tables
mixing two states). `watch` records that a SIGINT came, so the ingest can say which state it left the
dataset in; `deferred` postpones it to the end of a block. Only the main thread receives signals, and
only Python's default handler is replaced: an ingest in another thread, or under a program's own
handler (or SIG_IGN), is left alone.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Watch:
    """Whether a SIGINT came while the watch was on; one set by `deferred` waits there."""

    def __init__(self) -> None:
        self.seen = False
        self.holding = False
        self.pending = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if self.holding:
            self.pending = True
            return
        raise KeyboardInterrupt


_active: Watch | None = None


@contextlib.contextmanager
def watch() -> Iterator[Watch]:
    """Record SIGINTs for the body (which still sees KeyboardInterrupt where it was)."""
    global _active
    on = Watch()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield on
        return
    signal.signal(signal.SIGINT, on.handle)
    _active = on
    try:
        yield on
    finally:
        _active = None
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A SIGINT during the body is raised when it ends (a no-op outside a watch)."""
    on = _active
    if on is None or on.holding:
        yield
        return
    on.holding = True
    try:
        yield
    finally:
        on.holding = False
    if on.pending:
        on.pending = False
        raise KeyboardInterrupt
