"""Checks of what a command will write, made before any work is done.

Why a module: `query`, `sql`, `read`, `figure`, `report` and `model` write files, and a missing folder or
a folder given as a file must be one line and exit 2 on each of them, not a traceback after the work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    from pathlib import Path

    from tracecore.cli.output import Format


MAX_ROWS = 2**63 - 1


def check_destination(fmt: Format, out: Path | None, limit: int | None = None) -> None:
    """Refuse before any work is done what cannot be written: Parquet to a terminal (it is binary),
    a file that cannot be created, a row limit below 0 or past what Arrow and DuckDB count rows in."""
    if limit is not None and limit < 0:
        raise UsageError(f"--limit must be 0 or more, got {limit}")
    if limit is not None and limit > MAX_ROWS:
        raise UsageError(f"--limit must be at most {MAX_ROWS:,}, got {limit:,}")
    if fmt == "parquet" and out is None:  # Format is a StrEnum
        raise UsageError("parquet output is binary: give --out FILE.parquet")
    check_file(out)


def check_file(out: Path | None) -> None:
    """One line, not a traceback, for an output file in a missing folder or that is a folder."""
    if out is not None and out.is_dir():
        raise UsageError(f"cannot write {out}: it is a folder; give a file name")
    if out is not None and not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: no folder {out.parent}")


def check_folder(out_dir: Path) -> None:
    """One line, not a traceback, for an output folder that is a file; a new one is made only in a
    folder that exists (a mistyped path must not become a chain of folders, as root even under /)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"cannot write into {out_dir}: it is a file, not a folder")
    if not out_dir.exists() and not out_dir.absolute().parent.is_dir():
        raise UsageError(f"cannot write into {out_dir}: no folder {out_dir.absolute().parent}")
