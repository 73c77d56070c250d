"""`tracecore report OUT_DIR`: every figure and table for the selected runs in one offline HTML page."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.checks import check_folder
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import Dataset, Runs


def register(app: typer.Typer) -> None:
    app.command("report", cls=PlainUsage)(report)


@boundary
def report(
    out_dir: Annotated[Path, typer.Argument(help="Folder for index.html (created if missing).")],
    runs: Runs = None,
    data: Dataset = None,
) -> None:
    """Write a self-contained HTML report (no CDN; opens from file:// with the network off).

    In a terminal, a progress bar shows which figure or table is being made.

    \b
    Examples:
      $ tracecore report report/ --run torch_ddp-resnet8w8-sgd-16-gloo-normal-ring
    """
    from tracecore.cli.destination import writing
    from tracecore.report import write_report

    check_folder(out_dir)
    if not sys.stderr.isatty():
        with writing(out_dir):
            page = write_report(data, out_dir, runs=runs)
        typer.echo(str(page))
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("report"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"))
    with Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("opening the dataset", total=None)

        def progress(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=name)

        with writing(out_dir):
            page = write_report(data, out_dir, runs=runs, progress=progress)
    typer.echo(str(page))
