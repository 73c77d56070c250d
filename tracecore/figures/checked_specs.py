"""The specs `render.spec` has checked against Vega-Lite's schema, kept in the user's cache, so a chart
drawn again from the same data is not checked again.

Why: the check is the costliest Python of a report (jsonschema walks Vega-Lite's schema for every
chart), and a report drawn again from the same dataset checks the same specs. What is checked is the
spec with each inline dataset cut to its first row; its key is the SHA-256 of that spec as canonical
JSON, with the chart's class and the Altair and jsonschema versions that checked it, so any change to
a spec, a schema or a checker checks it anew. A spec that fails is never recorded. One file per
Altair and jsonschema version, a key a line (appended, as `cache` allows for what is only a hint: a
torn line matches no key), cut to its last `KEPT` keys when it has twice as many.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from tracecore.cache import cache_dir, store

KEPT = 4096
_LOCK = threading.Lock()
_KNOWN: dict[Path, set[str]] = {}  # each file's keys, read once per process


def key(chart_type: type, cut: dict[str, Any]) -> str | None:
    """The key of checking `cut` as a `chart_type`; None when the spec is not plain JSON."""
    try:
        text = json.dumps(cut, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    kind = f"{chart_type.__module__}.{chart_type.__qualname__}"
    return hashlib.sha256(f"{kind}\n{text}".encode()).hexdigest()


def checked(spec_key: str | None) -> bool:
    """Whether the spec of this key passed the check before (in this cache)."""
    path = _path()
    if spec_key is None or path is None:
        return False
    with _LOCK:
        return spec_key in _known(path)


def remember(spec_key: str | None) -> None:
    """Record that the spec of this key passed the check; an OSError leaves the cache as it was."""
    path = _path()
    if spec_key is None or path is None:
        return
    with _LOCK:
        known = _known(path)
        if spec_key in known:
            return
        known.add(spec_key)
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="ascii") as out:
                out.write(spec_key + "\n")


def _path() -> Path | None:
    folder = cache_dir()
    return None if folder is None else folder / _file_name()


@functools.cache
def _file_name() -> str:
    from importlib.metadata import version

    return f"checked-specs-altair-{version('altair')}-jsonschema-{version('jsonschema')}.txt"


def _known(path: Path) -> set[str]:
    """The keys in `path` (read once; the lock held), the file cut to its last KEPT when it grew long."""
    if path not in _KNOWN:
        lines: list[str] = []
        with contextlib.suppress(OSError, UnicodeDecodeError):
            lines = [line for line in path.read_text(encoding="ascii").splitlines() if _is_key(line)]
        if len(lines) > 2 * KEPT:
            lines = lines[-KEPT:]
            text = "".join(f"{k}\n" for k in lines)
            store(path, lambda partial: partial.write_text(text, encoding="ascii"))
        _KNOWN[path] = set(lines)
    return _KNOWN[path]


def _is_key(line: str) -> bool:
    return len(line) == 64 and all(c in "0123456789abcdef" for c in line)
