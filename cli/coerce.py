"""Typer's coercion of plain option values (a string, a number within its bounds, a path, a choice)
without pydantic.

Why: Typer 0.29 turns every parameter's value into its type through a pydantic `TypeAdapter`, and
importing pydantic and building one adapter per parameter cost more than DuckDB's own import before
`tracecore sql` ran anything (bench/results/cli-startup.md). Here a value whose result is certain is
converted as pydantic would convert it; any other value (an error to report, a type not handled
here) goes to Typer's own adapter, so every message and every odd case stays Typer's
(tests/test_cli_startup.py compares both on the same values). Typers without this machinery (the
ones that coerce through click) are left as they are.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any

try:  # Typer ≥ 0.25's runtime coercion; older ones use click's types, which import no pydantic
    from dataclasses import dataclass

    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path
except ImportError:  # pragma: no cover - depends on the installed Typer
    RuntimeParam = None

_WHOLE = re.compile(r"-?[0-9]{1,18}")  # int() and pydantic agree on these (leading zeros included)
_DECIMAL = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")  # and float() and pydantic on these
_NOT_PLAIN = object()


def plain(value: Any, annotation: Any, info: Any, param: Any, ctx: Any) -> Any:
    """`value` as Typer's adapter for `annotation` returns it, or _NOT_PLAIN when that is not certain."""
    if annotation is str:
        return value if isinstance(value, str) else _NOT_PLAIN
    if annotation is bool:
        return value if isinstance(value, bool) else _NOT_PLAIN
    if annotation is int:
        if isinstance(value, str) and _WHOLE.fullmatch(value):
            value = int(value)
        return value if type(value) is int and _in_range(value, info) else _NOT_PLAIN
    if annotation is float:
        decimal = isinstance(value, str) and _DECIMAL.fullmatch(value) is not None
        if decimal or (type(value) is int and abs(value) < 1 << 53):  # an int default: exact as a float
            value = float(value)
        return value if type(value) is float and _in_range(value, info) else _NOT_PLAIN
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(
                value, choices=tuple(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return _NOT_PLAIN
    if annotation is Path and info.path_type is None and info.parser is None:
        if isinstance(value, str) and value and "\0" not in value:
            value = Path(value)
        if not isinstance(value, Path):
            return _NOT_PLAIN
        return coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)
    if getattr(annotation, "__origin__", None) is list and isinstance(value, (list, tuple)):
        (item_type,) = annotation.__args__
        items = [plain(v, item_type, info, param, ctx) for v in value]
        return _NOT_PLAIN if any(i is _NOT_PLAIN for i in items) else items
    return _NOT_PLAIN


def _in_range(number: float, info: Any) -> bool:
    """Within the option's `min`/`max` (a finite number): outside, or with a clamp to apply, Typer's
    adapter answers (its message, its clamped value)."""
    return (
        number == number
        and abs(number) != float("inf")
        and (info.min is None or number >= info.min)
        and (info.max is None or number <= info.max)
    )


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):
        """A parameter's coercion: `plain` first, Typer's own adapter for anything else."""

        descriptor: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.parameter_info.parser is None:
                done = plain(value, self.annotation, self.parameter_info, param, ctx)
                if done is not _NOT_PLAIN:
                    return done
            return build_runtime_param(self.descriptor)._coerce_value(value, param=param, ctx=ctx)


def use_plain_coercion(params: list[Any]) -> list[Any]:
    """`params`, each of Typer's given `PlainRuntimeParam` (on older Typers, as they are)."""
    if RuntimeParam is None:
        return params
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", False) is not None:
            continue  # not Typer's, or coerced already
        if descriptor.file_annotation:
            continue
        param._runtime_param = PlainRuntimeParam(
            parameter_info=descriptor.parameter_info, annotation=descriptor.annotation, descriptor=descriptor
        )
    return params
