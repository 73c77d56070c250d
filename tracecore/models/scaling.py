"""Data-parallel scaling: speedups, compute/communication split and the ring all-reduce model.

The computation follows seed 002 (ResNet-18 / CIFAR-10 under PyTorch DataParallel):

- strong speedup `T(1)/T(N)` (fixed problem: one epoch), weak speedup `N·T(1)/T(N)`;
- compute `T(1)/N` (the single-GPU epoch is all compute, split N ways) and communication
  `T(N) − T(1)/N`;
- ring all-reduce: each of P processes sends `2·S·(P−1)/P` per iteration, `iters` iterations per
  epoch, so per process per epoch `iters · 2·S·(P−1)/P`; bandwidth utilization is that volume over
  the communication time.

Seed 002 puts the parameter *count* in S and calls count/1e9 per second "GB/s". We keep that number
(`seed_bandwidth_gbs`, for reproducing its Table 3) and report bytes beside it: S in bytes is
`n_params · bytes_per_param` (4 for fp32 gradients), hence GB/s and Gbit/s. Where a run was captured,
the measured wire bytes per process per epoch and the achieved Gbit/s sit next to the model.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from tracecore.errors import ModelFitError, UsageError

if TYPE_CHECKING:
    import polars as pl

REQUIRED = ("gpus", "batch_size", "epoch_time_s")
RUN_NAME = re.compile(r"batch_size_(?P<batch>\d+)_(?P<gpus>\d+)gpus?\b")


def ring_allreduce_elements(n_elements: float, processes: int) -> float:
    """Elements each process sends in one ring all-reduce of `n_elements`: 2·n·(P−1)/P."""
    return 2.0 * n_elements * (processes - 1) / processes


def scaling_table(
    times: pl.DataFrame,
    *,
    n_params: int,
    dataset_size: int,
    bytes_per_param: int = 4,
) -> pl.DataFrame:
    """One row per (gpus, batch_size) with speedups, the compute/communication split and bandwidth.

    `times` needs `gpus`, `batch_size`, `epoch_time_s`; optional `iters` (iterations per epoch,
    default `ceil(dataset_size / batch_size)` as in seed 002, where DataParallel's batch is global)
    and `wire_bytes` (measured bytes one process sent in that epoch, from the capture).
    Every batch size needs a 1-GPU time, the baseline of all ratios.
    """
    import polars as pl

    missing = [c for c in REQUIRED if c not in times.columns]
    if missing:
        raise UsageError(
            f"scaling input lacks column(s) {', '.join(missing)}; it needs {', '.join(REQUIRED)}"
        )
    if times.height == 0:
        raise ModelFitError("scaling: no (gpus, batch_size, epoch_time_s) rows")
    df = times.with_columns(
        pl.col("gpus").cast(pl.Int64),
        pl.col("batch_size").cast(pl.Int64),
        pl.col("epoch_time_s").cast(pl.Float64),
    )
    if "iters" not in df.columns:
        df = df.with_columns(
            pl.col("batch_size")
            .map_elements(lambda b: math.ceil(dataset_size / b), return_dtype=pl.Int64)
            .alias("iters")
        )
    base = df.filter(pl.col("gpus") == 1).select("batch_size", pl.col("epoch_time_s").alias("t1_s"))
    lacking = sorted(set(df["batch_size"].to_list()) - set(base["batch_size"].to_list()))
    if lacking:
        raise ModelFitError(f"scaling: batch size(s) {lacking} have no 1-GPU epoch time to compare with")
    if base["batch_size"].n_unique() != base.height:
        raise ModelFitError(
            "scaling: more than one 1-GPU time for a batch size; give one row per configuration"
        )

    elements = (
        pl.lit(2.0 * n_params) * (pl.col("gpus") - 1).cast(pl.Float64) / pl.col("gpus").cast(pl.Float64)
    ) * pl.col("iters").cast(pl.Float64)
    comm = pl.col("communication_s")
    usable = (pl.col("gpus") > 1) & (comm > 0)
    out = (
        df.join(base, on="batch_size", how="left")
        .with_columns(
            (pl.col("t1_s") / pl.col("epoch_time_s")).alias("strong_speedup"),
            (pl.col("gpus") * pl.col("t1_s") / pl.col("epoch_time_s")).alias("weak_speedup"),
            (pl.col("t1_s") / pl.col("gpus")).alias("compute_s"),
            (pl.col("epoch_time_s") - pl.col("t1_s") / pl.col("gpus")).alias("communication_s"),
            elements.alias("allreduce_params"),
            (elements * bytes_per_param).alias("allreduce_bytes"),
        )
        .with_columns(
            pl.when(usable).then(pl.col("allreduce_params") / (comm * 1e9)).alias("seed_bandwidth_gbs"),
            pl.when(usable).then(pl.col("allreduce_bytes") / (comm * 1e9)).alias("bandwidth_gbyte_s"),
            pl.when(usable).then(pl.col("allreduce_bytes") * 8 / (comm * 1e9)).alias("bandwidth_gbit_s"),
        )
    )
    if "wire_bytes" in out.columns:
        out = out.with_columns(
            pl.when(usable).then(pl.col("wire_bytes") * 8 / (comm * 1e9)).alias("wire_gbit_s"),
            (pl.col("wire_bytes") * 8 / (pl.col("epoch_time_s") * 1e9)).alias("wire_gbit_s_over_epoch"),
            pl.when(pl.col("allreduce_bytes") > 0)
            .then(pl.col("wire_bytes") / pl.col("allreduce_bytes"))
            .alias("wire_over_model"),
        )
    return out.sort("gpus", "batch_size")


def seed_wide(result: pl.DataFrame, value: str) -> pl.DataFrame:
    """Seed 002's layout: one row per GPU count, one `batch_<b>_<value>` column per batch size."""
    wide = result.pivot(on="batch_size", index="gpus", values=value, sort_columns=True).sort("gpus")
    return wide.rename({c: f"batch_{c}_{value}" for c in wide.columns if c != "gpus"}).rename(
        {"gpus": "gpu_nums"}
    )


def epoch_times_from_wandb(history: pl.DataFrame, *, epoch: int = 1) -> pl.DataFrame:
    """Epoch time per wandb run as seed 002 measures it: last minus first `_timestamp` of `epoch`.

    `history` is the `wandb_history` table (long form: wandb_run, step, ts_ns, key, value). GPUs
    and batch size come from run names like `SGD_dp_batch_size_512_2gpus`; other names are refused.
    """
    import polars as pl

    rows = history.filter(
        (pl.col("key") == "epoch") & (pl.col("value") == float(epoch)) & pl.col("ts_ns").is_not_null()
    )
    if rows.height == 0:
        raise ModelFitError(f"wandb history has no rows with epoch == {epoch} and a timestamp")
    spans = rows.group_by("wandb_run").agg(
        ((pl.col("ts_ns").max() - pl.col("ts_ns").min()) / 1e9).alias("epoch_time_s")
    )
    records: list[dict[str, Any]] = []
    for run, seconds in spans.iter_rows():
        match = RUN_NAME.search(run or "")
        if match is None:
            raise UsageError(
                f"wandb run {run!r}: cannot read GPUs and batch size (expected '..._batch_size_<B>_<N>gpus')"
            )
        records.append(
            {
                "run": run,
                "gpus": int(match["gpus"]),
                "batch_size": int(match["batch"]),
                "epoch_time_s": seconds,
            }
        )
    return pl.DataFrame(records).sort("gpus", "batch_size")


def chart(result: pl.DataFrame) -> Any:
    """Epoch time split into compute and communication, one panel per batch size, bars per GPU count."""
    import altair as alt

    long = result.select("gpus", "batch_size", "compute_s", "communication_s").unpivot(
        index=["gpus", "batch_size"], variable_name="part", value_name="seconds"
    )
    return (
        alt.Chart(long.to_pandas())
        .mark_bar()
        .encode(
            x=alt.X("gpus:O", title="GPUs"),
            y=alt.Y("seconds:Q", title="epoch time [s]", stack=True),
            color=alt.Color("part:N", title=None),
            column=alt.Column("batch_size:O", title="batch size"),
            tooltip=["gpus", "batch_size", "part", alt.Tooltip("seconds:Q", format=".2f")],
        )
        .properties(width=120, height=220, title="Epoch time: compute T(1)/N and communication T(N) − T(1)/N")
    )
