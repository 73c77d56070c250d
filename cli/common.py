"""The error boundary every command runs inside.

Kept free of heavy imports (no pyarrow, duckdb, numba) so `tracecore --help` is instant.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from tracecore.cli.coerce import use_plain_coercion
from tracecore.errors import ExitCode, TracecoreError
from tracecore.terminal import safe

F = TypeVar("F", bound=Callable[..., Any])


def boundary(func: F) -> F:
    """Turn expected failures into one line on stderr and the error's exit code.

    Anything that is not a TracecoreError is a bug and keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TracecoreError as err:  # messages name files and runs: text from outside (terminal.safe)
            typer.echo(f"Error: {safe(str(err))}", err=True)
            raise typer.Exit(err.exit_code) from None
        except KeyboardInterrupt as err:  # an Interrupted says what state it left, and its exit code
            typer.echo(safe(str(err)) or "Interrupted; nothing half-written was kept.", err=True)
            raise typer.Exit(getattr(err, "exit_code", ExitCode.INTERRUPTED)) from None
        except BrokenPipeError:
            # `tracecore read x.pcap | head`: the reader went away, which is not an error.
            sys.stderr.close()
            raise typer.Exit(ExitCode.OK) from None

    return wrapper  # type: ignore[return-value]


class PlainUsage(TyperCommand):
    """A usage line as people write one (`tracecore read [OPTIONS] FILE`): Typer writes a required
    argument as `{file}` and an optional one as `[file]`; every command is registered with this class.
    Its parameters coerce plain values without pydantic (`cli/coerce.py`), and its help's paragraphs
    read as paragraphs (`paragraphs`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = paragraphs(self.help)
        for param in self.params:  # the Arguments panel and "Missing argument 'FILE'" too
            if isinstance(param, TyperArgument) and param.metavar is None and param.name:
                param.metavar = param.name.upper()

    def get_params(self, ctx: Any) -> list[Any]:
        return use_plain_coercion(super().get_params(ctx))  # --help too

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [_ARGUMENT.sub(_upper_argument, p) for p in super().collect_usage_pieces(ctx)]


class PlainGroup(TyperGroup):
    """The root command: its own options (--version, completion) coerce as the commands' do."""

    def get_params(self, ctx: Any) -> list[Any]:
        return use_plain_coercion(super().get_params(ctx))  # the completion options come after __init__


def paragraphs(text: str | None) -> str | None:
    """A docstring's paragraphs with the line breaks inside each made spaces, save those of a paragraph
    that starts with \\b (examples). Why: Typer's Rich help keeps every line break after the first
    paragraph, so a docstring wrapped at the source's line length printed its lines cut mid-sentence
    ("frame length and" / "tshark's Info (…)") at any other width."""
    if not text:
        return text
    kept = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            kept.append(paragraph)
        else:
            kept.append(" ".join(line.strip() for line in paragraph.splitlines()))
    return "\n\n".join(kept)


_ARGUMENT = re.compile(r"^(?:\{([A-Za-z_]+)\}|\[([A-Za-z_]+)\])(\.\.\.)?$")


def _upper_argument(m: re.Match) -> str:
    required, optional, more = m.groups()
    return (required.upper() if required else f"[{optional.upper()}]") + (more or "")
