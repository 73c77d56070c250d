"""Every error tracecore raises on purpose.

The CLI has one error boundary (`tracecore.cli.app.main`) that turns a `TracecoreError` into a
one-line message on stderr and the error's `exit_code`; anything else is a bug and
keeps its traceback. Messages say what happened, where (file and byte offset when
there is one), and what to do.
"""

from __future__ import annotations


class TracecoreError(Exception):
    """Base of all expected failures; carries the process exit code."""

    exit_code = 1


class UsageError(TracecoreError, ValueError):
    """The user asked for something that does not exist or does not fit (unknown view, bad option)."""

    exit_code = 2


class CaptureError(TracecoreError):
    """A capture file cannot be read, or stops being readable at some byte offset.

    `packets_read` tells how many complete packets came before the problem, so callers
    can keep them.
    """

    exit_code = 3

    def __init__(self, path: object, message: str, offset: int | None = None, packets_read: int = 0):
        self.path = str(path)
        self.offset = offset
        self.packets_read = packets_read
        self.reason = message
        where = f" at byte offset {offset}" if offset is not None else ""
        super().__init__(f"{self.path}: {message}{where}")


class NotACaptureError(CaptureError):
    """The file is not pcap or pcapng at all (wrong magic, empty file)."""


class LogParseError(TracecoreError):
    """A training or benchmark log has no line tracecore can parse."""

    exit_code = 3


class DatasetError(TracecoreError):
    """The dataset directory is missing, locked by another ingest, or inconsistent."""

    exit_code = 4


class DatasetVersionError(DatasetError):
    """The dataset was written in a schema version this tracecore cannot read (see tracecore.schema);
    never overwritten, not even by `ingest --force`."""


class IngestCancelledError(TracecoreError):
    """An ingest was cancelled through its IngestControl before it committed anything."""

    exit_code = 130


class ModelFitError(TracecoreError):
    """A model cannot be fitted from the data given (too few points or runs for its features)."""

    exit_code = 5
