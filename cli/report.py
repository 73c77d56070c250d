"""`tracecore report OUT_DIR`: every figure and table for the selected runs in one offline HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from tracecore.cli.common import DataDir, boundary, default_data_dir


def register(app: typer.Typer) -> None:
    app.command("report")(report)


@boundary
def report(
    out_dir: Annotated[Path, typer.Argument(help="Folder for index.html (created if missing).")],
    runs: Annotated[
        list[str] | None,
        typer.Option(
            "--runs", "--run", "-r", help="Run to include (repeat, or comma-separated); default: all."
        ),
    ] = None,
    data: DataDir = None,
) -> None:
    """Write a self-contained HTML report (no CDN; opens from file:// with the network off)."""
    from tracecore.report import write_report

    selected = [r.strip() for item in runs or [] for r in item.split(",") if r.strip()] or None
    path = write_report(data if data is not None else default_data_dir(), out_dir, runs=selected)
    typer.echo(str(path))
