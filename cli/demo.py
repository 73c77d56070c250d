"""`tracecore demo`: the whole pipeline on the embedded sample (what `make demo` runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary


def register(app: typer.Typer) -> None:
    app.command("demo", cls=PlainUsage)(demo)


@boundary
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Where the demo's dataset and report go.")] = Path(
        "tracecore-demo"
    ),
) -> None:
    """Ingest the embedded 4-worker DDP sample, show key views, and write the HTML report.

    \b
    Examples:
      $ tracecore demo --out demo
    """
    import sys

    from tracecore.cli.ingest import print_summary
    from tracecore.cli.output import render
    from tracecore.demo import SHOWN, run_demo
    from tracecore.sample import SAMPLE_RUN

    result = run_demo(out, progress=sys.stderr.isatty())
    print_summary(result.summary)
    typer.echo(f"\nRun {SAMPLE_RUN}: 4 PyTorch DDP ranks (gloo), captured at each sender like the paper")
    for shown in SHOWN:
        typer.secho(f"\n{shown.question}   [tracecore query {shown.view}]", bold=True)
        typer.echo(render(result.tables[shown.view], None), nl=False)
    typer.echo(f"\nDataset: {result.data_dir}   (next: tracecore query --list --data {result.data_dir})")
    typer.echo(f"Report:  {result.report.resolve() if result.report else '(none)'}")
