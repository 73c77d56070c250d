"""The published ResNet-18 / CIFAR-10 DataParallel scaling study's inputs, so its tables can be reproduced.

Why kept as data: `tracecore model scaling --reference-study` checks the scaling model against the
study's printed numbers. Epoch times are its In[76] table (second epoch, seconds, from wandb
`_timestamp`); the batch size 8192 runs did not fit on its GPUs and are left out, as in the study.
`N_PARAMS` is its printed ResNet-18 parameter count and `DATASET_SIZE` the CIFAR-10 training split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

N_PARAMS = 11_173_962
DATASET_SIZE = 50_000
BATCH_SIZES = (32, 128, 512, 2048)
EPOCH_TIMES_S: dict[tuple[int, int], float] = {
    (1, 32): 38.0,
    (1, 128): 16.0,
    (1, 512): 13.0,
    (1, 2048): 13.0,
    (2, 32): 67.0,
    (2, 128): 18.0,
    (2, 512): 9.0,
    (2, 2048): 10.0,
    (4, 32): 121.0,
    (4, 128): 30.0,
    (4, 512): 11.0,
    (4, 2048): 11.0,
}


def epoch_times() -> pl.DataFrame:
    """The study's (gpus, batch_size, epoch_time_s) table."""
    import polars as pl

    return pl.DataFrame(
        [{"gpus": g, "batch_size": b, "epoch_time_s": t} for (g, b), t in EPOCH_TIMES_S.items()]
    ).sort("gpus", "batch_size")
