"""The options the commands share, declared once: dataset, runs, format, output file, row limit, figure,
Dask scheduler.

Why one module: a user learns `--data`, `--run`, `--format`, `--out` and `--limit` once and they mean
the same on every command, with the same help and defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.output import TABLE_ROWS, Format

DATA_ENV = "TRACECORE_DATA"  # read by click for the help's sake; ingest.layout.default_data_dir owns the rule


def _dataset(value: Path | None) -> Path:
    """The dataset directory, by the rule's one owner when the option is not given."""
    from tracecore.ingest.layout import default_data_dir

    return value if value is not None else default_data_dir()


def _runs(value: list[str] | None) -> list[str] | None:
    """Repeated and comma-separated run names as one list; None (every run) when none is given."""
    return [r.strip() for item in value or [] for r in item.split(",") if r.strip()] or None


def _figure(value: Path | None) -> Path | None:
    """Refuse a figure format `render.save` cannot write before any work is done."""
    from tracecore.errors import UsageError
    from tracecore.figures.render import check_suffix

    try:
        return None if value is None else check_suffix(value)
    except UsageError as err:
        raise typer.BadParameter(str(err)) from None


_DATASET = {"callback": _dataset, "envvar": DATA_ENV, "show_envvar": True, "show_default": "./tracecore-data"}
Dataset = Annotated[Path | None, typer.Option("--data", help="Dataset directory.", **_DATASET)]
# ingest's dataset: --out/-o, its older name, still works
DatasetOut = Annotated[
    Path | None, typer.Option("--data", "--out", "-o", help="Dataset directory (alias: --out).", **_DATASET)
]
Runs = Annotated[
    list[str] | None,
    typer.Option(
        "--run",
        "--runs",
        "-r",
        callback=_runs,
        help="Run to include (repeat, or comma-separated).",
        show_default="every run",
    ),
]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]
Out = Annotated[
    Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.", show_default="stdout")
]
Limit = Annotated[
    int | None,
    typer.Option("--limit", "-n", help="At most N rows.", show_default=f"all; {TABLE_ROWS} in a table"),
]
# the table's columns, `query` and `sql`: which (any format), and whether fitted to the terminal
Columns = Annotated[
    str | None,
    typer.Option(
        "--columns",
        help="Only these columns, in this order (comma-separated), in every format.",
        show_default="all; in a table the answer first",
    ),
]
Wide = Annotated[bool, typer.Option("--wide", help="A table with every column, not fitted to the terminal.")]
Figure = Annotated[
    Path | None,
    typer.Option(
        "--figure",
        callback=_figure,
        help="Also save the figure: .png, .svg, .pdf, .html or .json.",
        show_default="none",
    ),
]
# the time options of `query` and `figure`: a bin width and a window on each run's own clock
Bin = Annotated[
    str | None,
    typer.Option(
        "--bin", help="Bin or window width, e.g. 10ms, 100us, 1s (bare number: s).", show_default="its own"
    ),
]
From = Annotated[
    str | None,
    typer.Option(
        "--from", help="Window start after each run's first packet, e.g. 90s.", show_default="run start"
    ),
]
To = Annotated[
    str | None,
    typer.Option("--to", help="Window end after each run's first packet, e.g. 120s.", show_default="run end"),
]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        envvar="TRACECORE_SCHEDULER",
        # \\[: help text is Rich markup, where a bare [dask] is a style tag and vanishes
        help="Dask scheduler (tcp://HOST:8786): run the work on its cluster "
        "(pip install 'tracecore\\[dask]').",
        show_default="this machine",
    ),
]
# `sql` and `query`: how long a query may run (a received view can loop forever); 0: no limit
TIMEOUT = "10min"
Timeout = Annotated[
    str,
    typer.Option("--timeout", help="Stop the query after this long, e.g. 30s, 2h (bare number: s; 0: none)."),
]
