"""`tracecore model optimus fit|speed|time|ridge`: the Optimus models, one `tracecore.models.tasks` call each.

What is not given defaults to the reference Optimus notebook's values (θ, batch, steps, epochs).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import Figure, FormatOpt, Out
from tracecore.cli.output import Format, emit_model

REFERENCE = "the reference Optimus notebook's"


Axis = StrEnum("Axis", ["auto", "step", "epoch"])  # values are the names: --x epoch


class Kind(StrEnum):
    sync = "sync"
    async_ = "async"


optimus_app = typer.Typer(
    help="Optimus: loss-curve fit and convergence, speed models, time to convergence, Ridge.\n\n"
    "\b\nExamples:\n  $ tracecore model optimus fit pcaps/RUN/train_history.log --x step\n"
    "  $ tracecore model optimus time --workers 4 --workers 8 -f json\n",
    no_args_is_help=True,
)


@optimus_app.command("fit", cls=PlainUsage)
@boundary
def optimus_fit(
    log: Annotated[
        Path, typer.Argument(help="Loss log: step,loss CSV, train_history.log or wandb history CSV.")
    ],
    key: Annotated[
        str | None,
        typer.Option(
            help="wandb metric holding the loss, e.g. train_loss_step.", show_default="the one *_step loss"
        ),
    ] = None,
    x: Annotated[
        Axis, typer.Option("--x", help="Fit against epochs (Optimus) or steps; auto = epochs if known.")
    ] = Axis.auto,
    weighted: Annotated[
        bool, typer.Option(help="Weight later points 4^segment, as the Optimus prototype.")
    ] = False,
    window: Annotated[int, typer.Option(min=2, help="Convergence window, in units of --x.")] = 10,
    threshold: Annotated[
        float, typer.Option(help="Largest loss change over the window at convergence.")
    ] = 0.05,
    cap: Annotated[int, typer.Option(help="Give up past this point (Optimus: 100 epochs).")] = 100,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    figure: Figure = None,
) -> None:
    """Fit l(k) = 1/(b0·k + b1) + b2 (b ≥ 0) to a loss log and predict the convergence point."""
    from tracecore.models import tasks

    result = tasks.optimus_fit(
        log, key=key, x=x.value, weighted=weighted, window=window, threshold=threshold, cap=cap
    )
    emit_model(result, fmt, out, figure)


@optimus_app.command("speed", cls=PlainUsage)
@boundary
def optimus_speed(
    points: Annotated[Path, typer.Argument(help="CSV with workers,ps,speed (steps/s).")],
    kind: Annotated[
        Kind, typer.Option(help="Synchronous (θ0..θ4) or asynchronous (θ0..θ3) model.")
    ] = Kind.sync,
    batch: Annotated[
        float | None,
        typer.Option(help="Global batch size M (sync model).", show_default="none; sync needs it"),
    ] = None,
    fmt: FormatOpt = Format.table,
    out: Out = None,
) -> None:
    """Fit the Optimus speed model f(w, p) with θ ≥ 0 to measured speeds."""
    from tracecore.models import tasks

    emit_model(tasks.optimus_speed(points, kind=kind.value, batch=batch), fmt, out, None)


@optimus_app.command("time", cls=PlainUsage)
@boundary
def optimus_time(
    theta: Annotated[
        str | None,
        typer.Option(help="θ0..θ4 of the sync model, comma separated.", show_default=REFERENCE),
    ] = None,
    batch: Annotated[float | None, typer.Option(help="Global batch size M.", show_default="128")] = None,
    steps_per_epoch: Annotated[
        int | None, typer.Option(help="Steps per epoch.", show_default=f"{REFERENCE}: 50000/128 → 391")
    ] = None,
    epochs: Annotated[
        int | None, typer.Option(help="Epochs to convergence.", show_default=f"{REFERENCE}: 85")
    ] = None,
    ps: Annotated[
        list[int] | None, typer.Option("--ps", help="Parameter servers (repeat).", show_default="2 and 4")
    ] = None,
    workers: Annotated[
        list[int] | None, typer.Option("--workers", help="Workers (repeat).", show_default="1, 10, 50, 99")
    ] = None,
    max_workers: Annotated[
        int | None,
        typer.Option(help=f"Use workers 1..N instead ({REFERENCE} plot: 1..99).", show_default="--workers"),
    ] = None,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    figure: Figure = None,
) -> None:
    """Time to convergence = total steps / f(w, p) of the sync speed model, the notebook's number beside."""
    from tracecore.models import tasks

    result = tasks.optimus_time(
        theta=theta,
        batch=batch,
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        ps=ps,
        workers=workers,
        max_workers=max_workers,
    )
    emit_model(result, fmt, out, figure)
