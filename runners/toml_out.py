"""A tiny TOML writer for run.toml (stdlib reads TOML with tomllib but cannot write it).

Handles what run descriptions hold: str, bool, int, float, lists of scalars, nested tables and
arrays of tables. Keys must be bare (letters, digits, `_`, `-`).
"""

from __future__ import annotations

import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return f'"{esc}"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    if not _BARE.match(k):
        raise ValueError(f"TOML key must be bare: {k!r}")
    return k


def dumps(data: dict[str, Any]) -> str:
    """TOML text for a dict (tables after scalars, in insertion order)."""
    lines: list[str] = []

    def emit(table: dict[str, Any], path: list[str]) -> None:
        scalars = {k: v for k, v in table.items() if not _is_table(v) and not _is_table_array(v)}
        for k, v in scalars.items():
            lines.append(f"{_key(k)} = {_scalar(v)}")
        for k, v in table.items():
            if _is_table(v):
                if lines:
                    lines.append("")
                lines.append("[" + ".".join(map(_key, [*path, k])) + "]")
                emit(v, [*path, k])
            elif _is_table_array(v):
                for item in v:
                    if lines:
                        lines.append("")
                    lines.append("[[" + ".".join(map(_key, [*path, k])) + "]]")
                    emit(item, [*path, k])

    emit(data, [])
    return "\n".join(lines) + "\n"


def _is_table(v: Any) -> bool:
    return isinstance(v, dict)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)
