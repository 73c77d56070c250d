"""Every error tracecore raises on purpose, and the exit codes of the `tracecore` command.

The CLI has one error boundary (`tracecore.cli.common.boundary`) that turns a `TracecoreError` into
a one-line message on stderr and the error's `exit_code`; anything else is a bug and keeps its
traceback. Messages say what happened, where (file and byte offset when there is one), and what to do.
"""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitCode(IntEnum):
    """The process exit codes, one owner, so scripts can tell a bad option from a bad capture."""

    OK = 0
    ERROR = 1  # an expected failure of no more specific kind (and Python's code for a traceback)
    USAGE = 2
    BAD_INPUT = 3
    DATASET = 4
    MODEL_FIT = 5
    TESTBED = 6
    # 128 + the signal, as shells report a process it ended; `tracecore run` exits so after its cleanup
    HANGUP = 129  # SIGHUP (the terminal closed), `tracecore run` only
    INTERRUPTED = 130  # SIGINT: Ctrl-C
    TERMINATED = 143  # SIGTERM (`kill`, a batch system), `tracecore run` only


class TracecoreError(Exception):
    """Base of all expected failures; carries the process exit code."""

    exit_code: ExitCode = ExitCode.ERROR


class UsageError(TracecoreError, ValueError):
    """The user asked for something that does not exist or does not fit (unknown view, bad option)."""

    exit_code = ExitCode.USAGE


class CaptureError(TracecoreError):
    """A capture file cannot be read, or stops being readable at some byte offset.

    `packets_read` tells how many complete packets came before the problem, so callers
    can keep them.
    """

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, path: object, message: str, offset: int | None = None, packets_read: int = 0):
        self.path = str(path)
        self.offset = offset
        self.packets_read = packets_read
        self.reason = message
        where = f" at byte offset {offset}" if offset is not None else ""
        super().__init__(f"{self.path}: {message}{where}")


class NotACaptureError(CaptureError):
    """The file is not pcap or pcapng at all (wrong magic, empty file)."""


class NoInputError(TracecoreError):
    """No input given to ingest was usable, so nothing was created or changed."""

    exit_code = ExitCode.BAD_INPUT


class LogParseError(TracecoreError):
    """A training or benchmark log has no line tracecore can parse."""

    exit_code = ExitCode.BAD_INPUT


class OutputError(UsageError):
    """A result's destination cannot be written: not openable, or a write failed (a full disk, an I/O
    error); the exit code of an `--out` in a missing folder, whose check comes before any work."""


class DatasetError(TracecoreError):
    """The dataset directory is missing, locked by another ingest, or inconsistent."""

    exit_code = ExitCode.DATASET


class DatasetVersionError(DatasetError):
    """The dataset was written in a schema version this tracecore cannot read (see tracecore.schema);
    never overwritten, not even by `ingest --force`."""


class ClusterError(TracecoreError):
    """A Dask cluster cannot be used: its scheduler is unreachable or lost, or `distributed` is missing."""


class IngestCancelledError(TracecoreError):
    """An ingest was cancelled through its IngestControl before it committed anything."""

    exit_code = ExitCode.INTERRUPTED


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or a signal that unwinds like it: `Terminated`), with the state it left behind as its
    message (e.g. which dataset an ingest left).

    Why a KeyboardInterrupt and not a TracecoreError: code that catches Exception must not swallow
    a Ctrl-C; the CLI boundary prints the message as its one line and exits `exit_code`.
    """

    def __init__(self, message: str = "", exit_code: ExitCode = ExitCode.INTERRUPTED):
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(Interrupted):
    """SIGTERM or SIGHUP, raised where the program was (`tracecore.runners.signals`) so it unwinds as
    Ctrl-C does; exits 128 + the signal's number."""

    def __init__(self, signum: int):
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"Interrupted by {self.signal_name}", ExitCode(128 + signum))


class ModelFitError(TracecoreError):
    """A model cannot be fitted from the data given (too few points or runs for its features)."""

    exit_code = ExitCode.MODEL_FIT
