"""Model inputs as users type or export them: CSV files, wandb histories, θ lists, DEPTH:GPU, NAME=MB.

Why in the library: every front end (the CLI, a notebook) reads these the same way and gets the same
one-line UsageError for a malformed one, never a polars or float() exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import polars as pl


def read_csv(path: Path) -> pl.DataFrame:
    """A CSV file as a frame; an unreadable one is a UsageError naming the file and the first problem."""
    import polars as pl

    try:
        return pl.read_csv(path)
    except (OSError, pl.exceptions.PolarsError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"{path}: cannot read as CSV: {first}") from None


def wandb_history(path: Path) -> pl.DataFrame:
    """A wandb history CSV export as the long `wandb_history` table (wandb_run, step, ts_ns, key, value)."""
    import polars as pl

    from tracecore.logs import wandb

    head = path.read_text(errors="replace")[:8192] if path.is_file() else ""
    if not wandb.detect(head):
        raise UsageError(f"{path}: not a wandb history CSV export (no _step/_timestamp columns)")
    return pl.from_arrow(wandb.parse(path).table)


def parse_theta(text: str) -> tuple[float, ...]:
    """'1.02,2.78,4.92,0,0.02' → the five non-negative θ0..θ4 of the sync speed model."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UsageError(f"--theta {text!r}: five comma-separated numbers expected") from None
    if len(values) != 5 or min(values) < 0:
        raise UsageError(f"--theta {text!r}: five non-negative numbers θ0..θ4 expected")
    return values


def parse_depth_gpu(items: list[str]) -> pl.DataFrame:
    """['50:K80', …] → a (depth, gpu) frame of the configurations to predict."""
    import polars as pl

    rows = []
    for item in items:
        depth, _, gpu = item.partition(":")
        if not depth.strip().isdigit() or not gpu.strip():
            raise UsageError(f"--predict {item!r}: expected DEPTH:GPU, e.g. 50:K80")
        rows.append({"depth": int(depth), "gpu": gpu.strip()})
    return pl.DataFrame(rows, schema={"depth": pl.Int64, "gpu": pl.String})


def parse_model_sizes(items: list[str]) -> dict[str, float]:
    """['resnet18=44.7', …] → {model name: MB}."""
    sizes: dict[str, float] = {}
    for item in items:
        name, _, mb = item.partition("=")
        try:
            sizes[name.strip()] = float(mb)
        except ValueError:
            raise UsageError(f"--model-size {item!r}: expected NAME=MB, e.g. resnet18=44.7") from None
    return sizes
