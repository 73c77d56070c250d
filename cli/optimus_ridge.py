"""`tracecore model optimus ridge`: Ridge regression of loss-curve parameters, one `models.tasks` call.

Registered on the optimus group by `cli/model.py`; a module of its own keeps each cli file thin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import boundary
from tracecore.cli.options import FormatOpt, Out
from tracecore.cli.output import Format, emit_model


@boundary
def optimus_ridge(
    fits: Annotated[
        list[Path],
        typer.Argument(
            help="CSV with depth,gpu,b0,b1,b2, or loss curves optimus_<depth>_<gpu>.csv to fit first."
        ),
    ],
    predict: Annotated[
        list[str], typer.Option("--predict", help="DEPTH:GPU to predict b0..b2 for (repeat).")
    ],
    alpha: Annotated[
        float, typer.Option(help="Ridge regularisation (sklearn's default, as the notebook).")
    ] = 1.0,
    drop_tail: Annotated[int, typer.Option(help="Rows dropped from each curve's end (the notebook: 5).")] = 0,
    fmt: FormatOpt = Format.table,
    out: Out = None,
) -> None:
    """Ridge regression of the loss-curve parameters b0..b2 on model depth and GPU type."""
    from tracecore.models import tasks

    result = tasks.optimus_ridge(fits, predict=predict, alpha=alpha, drop_tail=drop_tail)
    emit_model(result, fmt, out, None)
