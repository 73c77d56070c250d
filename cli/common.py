"""What every command shares: the error boundary and the dataset option.

Kept free of heavy imports (no pyarrow, duckdb, numba) so `tracecore --help` is instant.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from tracecore.errors import TracecoreError

F = TypeVar("F", bound=Callable[..., Any])

INTERRUPTED_EXIT = 130


def boundary(func: F) -> F:
    """Turn expected failures into one line on stderr and the error's exit code.

    Anything that is not a TracecoreError is a bug and keeps its traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TracecoreError as err:
            typer.echo(f"Error: {err}", err=True)
            raise typer.Exit(err.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("Interrupted; nothing half-written was kept.", err=True)
            raise typer.Exit(INTERRUPTED_EXIT) from None
        except BrokenPipeError:
            # `tracecore read x.pcap | head`: the reader went away, which is not an error.
            sys.stderr.close()
            raise typer.Exit(0) from None

    return wrapper  # type: ignore[return-value]


def default_data_dir() -> Path:
    """Where the dataset lives when no --data/--out is given: $TRACECORE_DATA or ./tracecore-data."""
    return Path(os.environ.get("TRACECORE_DATA", "tracecore-data"))


DataDir = Annotated[
    Path | None,
    typer.Option("--data", help="Dataset directory [default: $TRACECORE_DATA or ./tracecore-data]."),
]
