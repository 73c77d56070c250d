"""The user's cache: what tracecore can rebuild but would rather not rebuild in every process.

Why one owner: the catalog's draft template and the report's Vega bundle live in the same folder,
under the same rules: `$TRACECORE_CACHE_DIR` (an empty value turns the cache off), else
`$XDG_CACHE_HOME/tracecore` or `~/.cache/tracecore`; an entry is written whole, then renamed; a
cache that cannot be written or read is not an error, only slower.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path


def cache_dir() -> Path | None:
    """The cache folder, or None when `$TRACECORE_CACHE_DIR` is set empty."""
    folder = os.environ.get("TRACECORE_CACHE_DIR")
    if folder is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        folder = os.path.join(xdg, "tracecore")
    return Path(folder) if folder else None


def store(path: Path, write: Callable[[Path], object]) -> None:
    """`write(partial)` beside `path`, then rename it into place; an OSError leaves the cache as it was."""
    partial = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(partial)
        os.replace(partial, path)
    except OSError:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
