"""One writer per dataset: an exclusive `fcntl.flock` on `OUT/.lock`.

Why flock: the kernel drops it when the holder dies (even by SIGKILL), so a crashed ingest never
leaves a stale lock behind, and a second ingest can tell "busy" from "abandoned" for free.
The holder's pid is written into the file only as a hint for the error message, and a query that
rebuilds a moved dataset's views in place (`catalog.open_catalog`) adds the word `REFRESH`: an ingest
that finds the lock held by one waits for it (a rebuild takes seconds) instead of failing, so a reader
never turns a writer away.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from tracecore.errors import DatasetError
from tracecore.ingest.layout import LOCK_NAME, foreign, foreign_refused

# O_NOFOLLOW: a lock file that is a link (a received dataset's) is refused, never opened and truncated;
# a hard link is refused once opened, before anything is written (`_foreign`)
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
REFRESH = "refresh"  # the lock file's word for a query's rebuild of the views
REFRESH_WAIT_S = 120.0  # how long a writer waits for a query's rebuild before it gives up


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
        if text:
            return f" (pid {text})"
    return ""


@contextlib.contextmanager
def dataset_lock(out: Path, wait_s: float = 0.0, on_wait: object = None) -> Iterator[None]:
    """Hold OUT/.lock for the duration of the block.

    `wait_s` = 0 fails at once when another ingest holds it; a positive value polls for up to
    that many seconds (calling `on_wait(message)` once, if given); never blocks forever.
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    try:
        fd = os.open(path, _FLAGS, 0o644)
    except OSError as err:
        why = "a symbolic link, which tracecore does not follow" if err.errno == errno.ELOOP else err.strerror
        raise DatasetError(f"{path}: cannot open the dataset lock: {why}") from err
    try:
        why = _foreign(fd, out)
        if why is not None:
            raise foreign_refused(path, why, out)
        started = time.monotonic()
        deadline = started + max(wait_s, 0.0)
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                now = time.monotonic()
                if _refreshing(fd) and now < max(deadline, started + REFRESH_WAIT_S):
                    time.sleep(0.05)  # a query rebuilding the views: done in seconds, then ours
                    continue
                if now >= deadline:
                    raise DatasetError(
                        f"{out}: another ingest is writing this dataset{_holder(fd)}; "
                        "wait for it to finish (or pass --wait SECONDS) or use a different --out"
                    ) from None
                if not told and callable(on_wait):
                    on_wait(f"waiting for another ingest into {out}{_holder(fd)}")
                    told = True
                time.sleep(0.1)
        with contextlib.suppress(OSError):  # the pid is a hint for the waiting ones; a full disk
            os.ftruncate(fd, 0)  # is reported by the first write that matters
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _refreshing(fd: int) -> bool:
    """Whether the holder wrote that it is a query rebuilding the views (`try_lock(…, REFRESH)`)."""
    with contextlib.suppress(OSError):
        return os.pread(fd, 64, 0).decode("ascii", "replace").split()[1:] == [REFRESH]
    return False


def try_lock(out: Path, purpose: str | None = None) -> int | None:
    """Take the lock without waiting; the fd to pass to `release`, or None when busy or unwritable.
    The pid, and `purpose` when given (`REFRESH`), go into the file for those who find it held."""
    try:
        fd = os.open(out / LOCK_NAME, _FLAGS, 0o644)
    except OSError:
        return None
    try:
        if _foreign(fd, out) is not None:
            raise OSError("not the dataset's own lock file")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, " ".join([str(os.getpid()), *([purpose] if purpose else [])]).encode(), 0)
    return fd


def _foreign(fd: int, out: Path) -> str | None:
    """Why the opened lock file may be someone else's (`layout.foreign`: a hard link to a file
    outside, which O_NOFOLLOW does not see), checked before it is locked, truncated or written."""
    return foreign(os.fstat(fd), os.stat(out))


def release(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
