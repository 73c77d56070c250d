"""`tracecore ingest PATHS…`: capture folders → the dataset (Parquet + DuckDB catalog).

Thin: parse options, call `tracecore.ingest.ingest`, print the summary (a table, or `--json`). Exit
code 0 when everything was read, `ExitCode.BAD_INPUT` (3) when some capture/log/input was bad (the
rest is ingested and committed anyway).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import DatasetOut, Scheduler
from tracecore.errors import ExitCode

if TYPE_CHECKING:
    from tracecore.ingest import IngestSummary


def register(app: typer.Typer) -> None:
    app.command("ingest", cls=PlainUsage)(ingest)


@boundary
def ingest(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Capture files, run folders, or folders of run folders.", show_default=False),
    ],
    data: DatasetOut = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="CPU cores to use (two per capture read in parallel).",
            show_default="all cores",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-ingest captures even when unchanged.")] = False,
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Seconds to wait for another ingest into the same dataset.")
    ] = 0.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a machine-readable summary on stdout.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    scheduler: Scheduler = None,
) -> None:
    """Ingest captures (one folder per run, one capture per worker) into partitioned Parquet + DuckDB.

    \b
    Examples:
      $ tracecore ingest pcaps/
      $ tracecore ingest pcaps/ --data elsewhere --json --quiet
    """
    import sys

    from tracecore.ingest import ingest as run_ingest

    summary = run_ingest(
        paths,
        data,
        jobs=jobs,
        force=force,
        progress=not quiet and not as_json and sys.stderr.isatty(),
        wait_s=wait,
        scheduler=scheduler,
    )
    if as_json:
        typer.echo(json.dumps(summary.to_json(), indent=2))
    else:
        print_summary(summary)
    if summary.failed:
        raise typer.Exit(ExitCode.BAD_INPUT)


def print_summary(summary: IngestSummary) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from tracecore.columns import short_run_column
    from tracecore.terminal import safe

    console = Console(stderr=True)
    table = Table(title=escape(safe(f"ingest → {summary.out}")), title_justify="left")
    for col, justify in (
        ("run", "left"),
        ("worker", "left"),
        ("file", "left"),
        ("status", "left"),
        ("packets", "right"),
        ("MB", "right"),
        ("s", "right"),
    ):  # names fold rather than lose their ends to an ellipsis; numbers never wrap
        table.add_column(col, justify=justify, overflow="fold", no_wrap=justify == "right")
    runs = sorted({c.run for c in summary.captures})  # on a terminal: what differs, as query tables say it
    short, named = short_run_column(runs, keep=True) if console.is_terminal else (runs, [])
    labels = dict(zip(runs, short, strict=True))
    style = {
        "ingested": "green",
        "unchanged": "dim",
        "partial": "yellow",
        "failed": "red",
        "removed": "magenta",
    }
    for c in sorted(summary.captures, key=lambda c: (c.run, c.worker or "", c.file)):
        table.add_row(  # names come from the user's folders: never read as Rich markup or control codes
            escape(safe(labels[c.run])),
            escape(safe(c.worker or "-")),
            escape(safe(c.file)),
            f"[{style.get(c.status, '')}]{c.status}",
            f"{c.packets:,}",
            f"{c.input_bytes / 1e6:,.1f}",
            f"{c.seconds:.2f}",
        )
    if not console.is_terminal:  # piped or logged: as wide as the names, never cut at 80 columns
        from rich.measure import Measurement

        wanted = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
        console.width = max(console.width, wanted)
    if summary.captures:
        console.print(table)
    captured = set(runs)
    for run in (r for r in summary.runs if r not in captured):  # traces or counters alone
        said = f"{escape(safe(run))}: no capture file; its traces, counters and logs read"
        console.print(said, highlight=False, soft_wrap=True)
    for line in named:  # the runs whole (safe already)
        console.print(escape(line), highlight=False, soft_wrap=True)
    lines = [("red", c.status, c.message) for c in summary.captures if c.message]
    lines += [("red", "problem", f"{path}: {reason}") for path, reason in summary.problems]
    lines += [("yellow", "warning", warning) for warning in summary.warnings]
    for colour, label, text in lines:  # whole lines: a log or a grep must see every name uncut
        console.print(f"[{colour}]{label}[/]: {escape(safe(text))}", highlight=False, soft_wrap=True)
    pps, bps = summary.rate()
    console.print(
        f"{len(summary.runs)} run(s), {summary.packets:,} packets read in {summary.seconds:.2f} s "
        f"({pps / 1e6:.2f} Mpkt/s, {bps / 1e9:.2f} GB/s)",
        highlight=False,
    )
