"""`tracecore init RUN_DIR`: write a commented run.toml template into a run folder.

Thin: the template and its checks live in `tracecore.ingest.runtoml`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary


def register(app: typer.Typer) -> None:
    app.command("init", cls=PlainUsage)(init)


@boundary
def init(
    run_dir: Annotated[Path, typer.Argument(help="Run folder holding the worker captures.")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing run.toml.")] = False,
) -> None:
    """Write RUN_DIR/run.toml: the metadata keys ingest reads, commented, to fill in.

    \b
    Examples:
      $ tracecore init pcaps/RUN --force
    """
    from tracecore.ingest.runtoml import write_run_toml

    path = write_run_toml(run_dir, force=force)
    typer.echo(f"Wrote {path}; fill it in, then run `tracecore ingest {run_dir}`")
