"""`tracecore report OUT_DIR`: every figure and table for the selected runs in one offline HTML page."""

from __future__ import annotations

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

    \b
    Examples:
      $ tracecore report report/ --run torch_ddp-resnet8w8-sgd-16-gloo-normal-ring
    """
    from tracecore.cli.destination import writing
    from tracecore.report import write_report

    check_folder(out_dir)
    with writing(out_dir):
        page = write_report(data, out_dir, runs=runs)
    typer.echo(str(page))
