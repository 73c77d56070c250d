"""`tracecore report OUT_DIR`: every figure and table for the selected runs in one offline HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from tracecore.cli.common import boundary
from tracecore.cli.options import Dataset, Runs


def register(app: typer.Typer) -> None:
    app.command("report")(report)


@boundary
def report(
    out_dir: Annotated[Path, typer.Argument(help="Folder for index.html (created if missing).")],
    runs: Runs = None,
    data: Dataset = None,
) -> None:
    """Write a self-contained HTML report (no CDN; opens from file:// with the network off)."""
    from tracecore.report import write_report

    typer.echo(str(write_report(data, out_dir, runs=runs)))
