"""Loss points for the Optimus fit, from whichever log holds them.

The same curve arrives in three shapes: an Optimus-style `step,loss` CSV (`loss_curve`), a DML
`train_history.log` (`train_log`: per-batch running means, `ID` restarting every epoch) and a wandb
history export (`wandb_history`, a loss metric such as `train_loss_step`). All become one frame
`(step, epoch, loss)`: `step` counts batches from 0 across epochs, `epoch` is fractional training
progress (epoch e's batch i of n is at e + (i+1)/n) where the log tells epochs, else null.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.errors import LogParseError, ModelFitError

if TYPE_CHECKING:
    import polars as pl


def loss_points(path: Path, *, key: str | None = None) -> pl.DataFrame:
    """(step, epoch, loss) from a loss CSV, train_history.log or wandb history file, in log order."""
    import polars as pl

    from tracecore.logs import detect_parser

    parser = detect_parser(path)
    if parser is None:
        raise LogParseError(f"{path}: not a loss CSV, train_history.log or wandb history export")
    try:
        parsed = parser.parse(path)
    except OSError as err:
        raise LogParseError(f"{path}: cannot read: {err.strerror or err}") from None
    if parsed.table.num_rows == 0:
        first = f"; {parsed.first_bad[0]}" if parsed.first_bad else ""
        raise LogParseError(f"{path}: no {parser.table} line could be parsed{first}")
    table = pl.from_arrow(parsed.table)
    if parser.table == "loss_curve":
        return _from_loss_curve(table)
    if parser.table == "train_log":
        return _from_train_log(table)
    if parser.table == "wandb_history":
        return _from_wandb(table, key)
    raise LogParseError(f"{path}: a {parser.table} log holds no loss curve")


def _from_loss_curve(table: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    step = table["step"] if table["step"].null_count() < table.height else pl.Series(range(table.height))
    return pl.DataFrame({"step": step.cast(pl.Float64), "epoch": table["epoch"], "loss": table["loss"]})


def _from_train_log(table: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    batches = []
    epoch = 0
    current: list[tuple[int, float]] = []
    for kind, ident, loss in table.select("type", "id", "loss").iter_rows():
        if kind == "Batch":
            current.append((ident, loss))
        elif kind == "Epoch":
            batches.append((epoch, current))
            epoch, current = ident + 1, []
    if current:
        batches.append((epoch, current))
    if not any(rows for _, rows in batches):
        raise ModelFitError("train_history.log has no Batch rows to fit a loss curve to")
    per_epoch = max(len(rows) for _, rows in batches)
    steps, epochs, losses = [], [], []
    for e, rows in batches:
        for ident, loss in rows:
            steps.append(float(len(steps)))
            epochs.append(e + (ident + 1) / per_epoch)
            losses.append(loss)
    return pl.DataFrame({"step": steps, "epoch": epochs, "loss": losses})


def _from_wandb(table: pl.DataFrame, key: str | None) -> pl.DataFrame:
    import polars as pl

    keys = sorted({k for k in table["key"].drop_nulls().to_list() if "loss" in k.lower()})
    if key is None:
        preferred = [k for k in keys if k.endswith("_step")] or keys
        if len(preferred) != 1:
            raise ModelFitError(
                f"wandb history: choose the loss metric with --key (candidates: {', '.join(keys) or 'none'})"
            )
        key = preferred[0]
    rows = table.filter((pl.col("key") == key) & pl.col("value").is_not_null()).sort("step")
    if rows.height == 0:
        raise ModelFitError(f"wandb history has no values for {key!r}")
    return pl.DataFrame(
        {
            "step": rows["step"],
            "epoch": pl.Series([None] * rows.height, dtype=pl.Float64),
            "loss": rows["value"],
        }
    )
