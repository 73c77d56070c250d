"""`tracecore demo`: the whole pipeline on the embedded sample (what `make demo` runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.common import boundary


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


@boundary
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the demo's dataset and report go.")] = Path(
        "tracecore-demo"
    ),
) -> None:
    """Ingest the embedded 4-worker DDP sample, show key views, and write the HTML report."""
    import sys

    from rich.console import Console

    from cli.ingest import print_summary
    from tracecore.demo import SHOWN_VIEWS, run_demo
    from tracecore.query import write_result

    console = Console(width=max(Console().width, 140))
    result = run_demo(out, progress=sys.stderr.isatty())
    print_summary(result.summary)
    for name, question in SHOWN_VIEWS:
        console.print(f"\n[bold]{question}[/bold]  (tracecore query {name})")
        typer.echo(write_result(result.tables[name], "table", None))
    if result.link_peaks is not None:
        console.print("\n[bold]Link utilization in 10 ms bins[/bold]  (tracecore query link_util)")
        typer.echo(write_result(result.link_peaks, "table", None))
    console.print(f"\nDataset: {result.data_dir}   (try: tracecore query --list --data {result.data_dir})")
    console.print(f"Report:  {result.report}")
