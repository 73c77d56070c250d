"""What one ingest shares with its capture tasks: where progress goes and whether to stop.

Why per call: an ingest's cancel flag and progress listener travel with its tasks (a channel passed to
`ingest_capture`), never in module state, so two ingests in one process cannot stop or report for
each other. Worker processes are the one exception: a pool's initializer installs that pool's queue
and stop event in each of its own processes, which serve no other ingest.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from tracecore.ingest.arrow_pool import use_system_pool


@dataclass
class IngestControl:
    """The caller's handle on one ingest: `cancel()` from any thread; `on_progress(bytes, packets)`."""

    on_progress: Callable[[int, int], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def cancel(self) -> None:
        self.stop.set()

    @property
    def cancelled(self) -> bool:
        return self.stop.is_set()


class TaskChannel(Protocol):
    """What a capture task calls while it reads: one report per batch, one stop check per batch."""

    def report(self, index: int, nbytes: int, packets: int) -> None: ...

    def cancelled(self) -> bool: ...


class LocalChannel:
    """The channel of tasks run on threads of this process: ticks go straight to the ingest's callback."""

    def __init__(self, tick: Callable[[int, int], None], *stops: threading.Event):
        self._tick = tick
        self._stops = stops
        self._lock = threading.Lock()

    def report(self, index: int, nbytes: int, packets: int) -> None:
        with self._lock:
            self._tick(nbytes, packets)

    def cancelled(self) -> bool:
        return any(stop.is_set() for stop in self._stops)


_in_worker: tuple[Any, Any] | None = None  # (tick queue, stop event) of this worker process's pool


def init_worker(ticks: object, stop: object) -> None:
    """Process-pool initializer: this pool's channel, and die with the parent (no orphan writers)."""
    global _in_worker
    _in_worker = (ticks, stop)
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and cleans up
    use_system_pool()


class WorkerChannel:
    """The channel of tasks run in a pool's worker process: holds nothing, so it pickles; it uses
    the queue and stop event that `init_worker` installed in the process."""

    def report(self, index: int, nbytes: int, packets: int) -> None:
        if _in_worker is not None:
            with contextlib.suppress(Exception):
                _in_worker[0].put_nowait((index, nbytes, packets))

    def cancelled(self) -> bool:
        return _in_worker is not None and _in_worker[1].is_set()
