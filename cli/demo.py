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
    import shlex
    import sys

    from tracecore.cli.ingest import print_summary
    from tracecore.cli.options import DATA_ENV
    from tracecore.cli.output import render
    from tracecore.demo import SHOWN, run_demo
    from tracecore.sample import SAMPLE_RUN

    result = run_demo(out, progress=sys.stderr.isatty())
    print_summary(result.summary)
    typer.echo(f"\nRun {SAMPLE_RUN}: 4 PyTorch DDP ranks (gloo), captured at each sender like the paper")
    for shown in SHOWN:
        typer.secho(f"\n{shown.question}   [tracecore query {shown.view}]", bold=True)
        typer.echo(render(result.tables[shown.view], None), nl=False)
    data = result.data_dir.resolve()
    typer.echo(f"\nDataset: {data}")
    typer.echo(f"Report:  {result.report.resolve() if result.report else '(none)'}")
    # the README's commands read ./tracecore-data or $TRACECORE_DATA: this line points them here
    typer.echo(f"Next:    export {DATA_ENV}={shlex.quote(str(data))}   # then: tracecore query --list")
