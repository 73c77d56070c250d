"""`tracecore run EXPERIMENT.toml`: launch, capture and record an experiment's matrix of runs.

Thin: the experiment model, the lifecycle and the backends live in `tracecore.runners`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary
from tracecore.runners.experiment import MAX_RUNS  # light: the model, no backend


def register(app: typer.Typer) -> None:
    app.command("run", cls=PlainUsage)(run)


@boundary
def run(
    experiment: Annotated[
        Path,
        typer.Argument(
            help="Experiment file (TOML).",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print every host's commands; run nothing.")
    ] = False,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact", help="With --dry-run: each command exactly as started (ssh, srun, batch scripts)."
        ),
    ] = False,
    only: Annotated[
        str | None,
        typer.Option("--only", help="Only runs whose name matches this glob.", show_default="every run"),
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip runs already complete.")] = False,
    ingest: Annotated[
        bool | None,
        typer.Option("--ingest/--no-ingest", help="Ingest the runs at the end.", show_default="file"),
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="KEY=V1,V2: a matrix axis, or SECTION.KEY=VALUE.", show_default="the file"
        ),
    ] = None,
    trust: Annotated[
        str | None,
        typer.Option(
            "--trust",
            help="HOST,HOST or 'all': record these ssh hosts' new keys first (a changed key stays refused).",
            show_default="no new keys",
        ),
    ] = None,
    max_runs: Annotated[
        int,
        typer.Option("--max-runs", min=1, help="Refuse a matrix of more runs (counted before excludes)."),
    ] = MAX_RUNS,
) -> None:
    """Expand EXPERIMENT's matrix into runs and capture each into pcaps/<run-name>/.

    Example experiment files: tracecore/runners/examples/ (runners/examples/ in a checkout).

    \b
    Examples:
      $ tracecore run experiment.toml --dry-run
    """
    from tracecore.runners.execute import ExperimentResult, run_experiment
    from tracecore.terminal import safe

    def progress(message: str) -> None:  # run names, hosts and remote output: escaped
        typer.echo(safe(message), err=True)

    result = run_experiment(
        experiment,
        dry=dry_run,
        exact=exact,
        only=only,
        resume=resume,
        ingest=ingest,
        overrides=overrides,
        progress=progress,
        trust=trust,
        max_runs=max_runs,
    )
    if not isinstance(result, ExperimentResult):  # the dry run's commands, printed as they are made
        for step in result:  # a step's text may span lines (a here-string): each is made safe alone
            for line in step.split("\n"):
                typer.echo(safe(line))
        return
    for outcome in result.outcomes:
        typer.echo(safe(f"{outcome.status:8} {outcome.name}  {outcome.folder or ''}"))
