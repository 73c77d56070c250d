"""Data-parallel scaling: speedups, compute/communication split and the ring all-reduce model.

The computation follows the published ResNet-18 / CIFAR-10 DataParallel study (`reference_study`):

- strong speedup `T(1)/T(N)` (fixed problem: one epoch), weak speedup `N·T(1)/T(N)`;
- compute `T(1)/N` (the single-GPU epoch is all compute, split N ways) and communication
  `T(N) − T(1)/N`;
- ring all-reduce: each of P processes sends `2·S·(P−1)/P` per iteration, `iters` iterations per
  epoch, so per process per epoch `iters · 2·S·(P−1)/P`; bandwidth utilization is that volume over
  the communication time.

The study puts the parameter *count* in S and calls count/1e9 per second "GB/s". We keep that number
(`allreduce_gparams_s`, for reproducing its Table 3) and report bytes beside it: S in bytes is
`n_params · bytes_per_param` (4 for fp32 gradients), hence GB/s and Gbit/s. Where a run was captured,
the measured wire bytes per process per epoch and the achieved Gbit/s sit next to the model.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from tracecore.errors import ModelFitError, UsageError
from tracecore.models.input_checks import numeric

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
    n_params: int | None = None,
    dataset_size: int = 0,
    bytes_per_param: int = 4,
) -> pl.DataFrame:
    """One row per (gpus, batch_size) with speedups, the compute/communication split and bandwidth.

    `times` needs `gpus`, `batch_size`, `epoch_time_s`; optional `iters` (iterations per epoch,
    default `ceil(dataset_size / batch_size)` as in the study, where DataParallel's batch is global)
    `n_params` (per-row gradient elements, else the keyword) and `wire_bytes` (measured bytes one
    process sent in that epoch, from the capture). Ratios and the compute/communication split need
    the 1-GPU time of the same batch size; without it they are null while the all-reduce volume and
    the measured bytes are still reported.
    """
    import polars as pl

    missing = [c for c in REQUIRED if c not in times.columns]
    if missing:
        raise UsageError(
            f"scaling input lacks column(s) {', '.join(missing)}; it needs {', '.join(REQUIRED)}"
        )
    if times.height == 0:
        raise ModelFitError("scaling: no (gpus, batch_size, epoch_time_s) rows")
    df = numeric(times, ("gpus", "batch_size", "iters", "n_params"), what="scaling input", integer=True)
    df = numeric(df, ("epoch_time_s", "wire_bytes"), what="scaling input")
    if df.filter((pl.col("gpus") < 1) | (pl.col("batch_size") < 1) | (pl.col("epoch_time_s") <= 0)).height:
        raise ModelFitError("scaling input: gpus and batch_size must be ≥ 1 and epoch_time_s > 0")
    if "iters" not in df.columns:
        if dataset_size <= 0:
            raise UsageError("scaling: give dataset_size or an iters column (iterations per epoch)")
        df = df.with_columns(
            pl.col("batch_size")
            .map_elements(lambda b: math.ceil(dataset_size / b), return_dtype=pl.Int64)
            .alias("iters")
        )
    base = df.filter(pl.col("gpus") == 1).select("batch_size", pl.col("epoch_time_s").alias("t1_s"))
    if base["batch_size"].n_unique() != base.height:
        raise ModelFitError(
            "scaling: more than one 1-GPU time for a batch size; give one row per configuration"
        )

    if "n_params" not in df.columns:
        if n_params is None:
            raise UsageError("scaling: give the gradient size (n_params) for the all-reduce model")
        df = df.with_columns(pl.lit(n_params).alias("n_params"))
    elements = (
        2.0
        * pl.col("n_params").cast(pl.Float64)
        * (pl.col("gpus") - 1).cast(pl.Float64)
        / pl.col("gpus").cast(pl.Float64)
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
            pl.when(usable).then(pl.col("allreduce_params") / (comm * 1e9)).alias("allreduce_gparams_s"),
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


CATALOG_SQL = """
WITH counts AS (
    SELECT run, count(*) FILTER (WHERE type = 'Batch') AS batches,
           count(*) FILTER (WHERE type = 'Epoch') AS epochs
    FROM train_log GROUP BY run
),
ep AS (SELECT run, id, ts_ns FROM train_log WHERE type = 'Epoch')
SELECT m.run, m.n_workers AS gpus, m.batch_size, m.grad_bytes,
       c.batches // c.epochs AS iters,
       (e1.ts_ns - e0.ts_ns) / 1e9 AS epoch_time_s,
       d.rank_bytes_per_step * (c.batches // c.epochs) AS wire_bytes
FROM run_meta AS m
JOIN counts AS c ON c.run = m.run AND c.epochs >= 2
JOIN ep AS e0 ON e0.run = m.run AND e0.id = 0
JOIN ep AS e1 ON e1.run = m.run AND e1.id = 1
LEFT JOIN data_per_step AS d ON d.run = m.run
WHERE coalesce(m.loss_pct, 0) = 0
ORDER BY gpus, m.batch_size, m.run
"""


def inputs_from_catalog(data_dir: Any, runs: list[str] | None = None) -> pl.DataFrame:
    """Per captured run: GPUs (workers), batch size, second-epoch time, iterations and wire bytes.

    As seed 002, the first epoch is warm-up: the time is Epoch 1's log timestamp minus Epoch 0's
    (the measured time of `tracecore run`'s scaling sweep, runners/examples/ddp_scaling_sweep.toml).
    `wire_bytes` is the mean frame bytes one worker sent per step (`data_per_step`) × iterations,
    and `n_params` the catalog's gradient bytes / 4. Runs with packet loss
    and runs of a single epoch are left out. `runs` keeps only the runs matching one of these names
    or globs (`torch_ddp-resnet20w8-*`); one that matches no run of the dataset is an error.
    """
    import polars as pl

    from tracecore.ingest.runname import BYTES_PER_PARAM
    from tracecore.models.catalog_input import catalog_frame

    table = catalog_frame(data_dir, CATALOG_SQL, model="scaling")
    if runs:
        known = catalog_frame(data_dir, "SELECT run FROM runs ORDER BY run", model="scaling")["run"]
        table = table.filter(pl.col("run").is_in(matching_runs(known.to_list(), runs)))
    if table.height == 0:
        among = f" among the runs matching {', '.join(runs)}" if runs else ""
        raise ModelFitError(f"{data_dir}: no loss-free run with two logged epochs{among}")
    missing = table.filter(pl.col("grad_bytes").is_null())["run"].to_list()
    if missing:
        raise ModelFitError(
            f"scaling: gradient size unknown for {', '.join(missing)} (run.toml gave neither "
            "gradient_bytes nor n_params when it was ingested)"
        )
    return table.with_columns((pl.col("grad_bytes") // BYTES_PER_PARAM).alias("n_params")).drop("grad_bytes")


def matching_runs(known: list[str], patterns: list[str]) -> list[str]:
    """The runs of `known` matched by any of the names or globs; a pattern matching none is an error."""
    import fnmatch

    picked = {p: fnmatch.filter(known, p) for p in patterns}
    unmatched = [p for p, found in picked.items() if not found]
    if unmatched:
        listing = ", ".join(known) if known else "(none: the dataset is empty)"
        raise UsageError(
            f"--run {', '.join(map(repr, unmatched))} matches no run; runs in the dataset: {listing}"
        )
    return sorted({run for found in picked.values() for run in found})


def wide_by_batch(result: pl.DataFrame, value: str) -> pl.DataFrame:
    """The study's layout: one row per GPU count, one `batch_<b>_<value>` column per batch size."""
    wide = result.pivot(on="batch_size", index="gpus", values=value, sort_columns=True).sort("gpus")
    return wide.rename({c: f"batch_{c}_{value}" for c in wide.columns if c != "gpus"}).rename(
        {"gpus": "gpu_nums"}
    )


def study_tables(result: pl.DataFrame, bytes_per_param: int) -> list[tuple[str, pl.DataFrame]]:
    """`result` titled and laid out as the reference study's Tables 1-3, with bytes and bits beside."""
    tables = [
        ("All configurations (long form)", result),
        ("Table 1: epoch time [s]", wide_by_batch(result, "epoch_time_s")),
        (
            "Table 1: strong-scaling speedup T(1)/T(N) (the study's definition)",
            wide_by_batch(result, "strong_speedup"),
        ),
        ("Table 1: weak-scaling speedup N·T(1)/T(N)", wide_by_batch(result, "weak_speedup")),
        ("Table 2: communication time T(N) − T(1)/N [s]", wide_by_batch(result, "communication_s")),
        ("Table 2: compute time T(1)/N [s]", wide_by_batch(result, "compute_s")),
        (
            "Table 3: the study's 'bandwidth utilization (GB/s)' = parameters/s / 1e9 (a count, not bytes)",
            wide_by_batch(result, "allreduce_gparams_s"),
        ),
        (
            f"Table 3 in bytes: ring all-reduce GB/s with {bytes_per_param}-byte gradients",
            wide_by_batch(result, "bandwidth_gbyte_s"),
        ),
        ("Table 3 in bits: Gbit/s", wide_by_batch(result, "bandwidth_gbit_s")),
    ]
    if "wire_gbit_s" in result.columns:
        tables.append(
            ("Measured: wire Gbit/s over the communication time", wide_by_batch(result, "wire_gbit_s"))
        )
        tables.append(
            ("Measured wire bytes / modelled all-reduce bytes", wide_by_batch(result, "wire_over_model"))
        )
    return tables


def epoch_times_from_wandb(history: pl.DataFrame, *, epoch: int = 1) -> pl.DataFrame:
    """Epoch time per wandb run as the reference study measures it: last minus first `_timestamp` of `epoch`.

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
    """Epoch time split into compute and communication, one panel per batch size, bars per GPU count.

    Without 1-GPU baselines (captured multi-worker runs only) there is no split to draw; the chart
    then compares the ring all-reduce model's bytes with the measured wire bytes per run.
    """
    import altair as alt

    from tracecore.figures._data import inline, rows

    if result["compute_s"].null_count() == result.height and "wire_bytes" in result.columns:
        return _bytes_chart(result)

    long = result.select("gpus", "batch_size", "compute_s", "communication_s").unpivot(
        index=["gpus", "batch_size"], variable_name="part", value_name="seconds"
    )
    return (
        alt.Chart(inline(rows(long)))
        .mark_bar()
        .encode(
            x=alt.X("gpus:O", title="GPUs"),
            y=alt.Y("seconds:Q", title="epoch time [s]", stack=True),
            color=alt.Color("part:N", title=None),
            column=alt.Column("batch_size:O", title="batch size"),
            tooltip=["gpus:O", "batch_size:O", "part:N", alt.Tooltip("seconds:Q", format=".2f")],
        )
        .properties(width=120, height=220, title="Epoch time: compute T(1)/N and communication T(N) − T(1)/N")
    )


def _bytes_chart(result: pl.DataFrame) -> Any:
    import altair as alt

    from tracecore.figures._data import inline, rows

    label = "run" if "run" in result.columns else "gpus"
    long = result.select(label, "allreduce_bytes", "wire_bytes").unpivot(
        index=[label], variable_name="bytes", value_name="per_process_per_epoch"
    )
    return (
        alt.Chart(inline(rows(long)))
        .mark_bar()
        .encode(
            y=alt.Y(f"{label}:N", title=None),
            x=alt.X("per_process_per_epoch:Q", title="bytes per process per epoch"),
            yOffset="bytes:N",
            color=alt.Color("bytes:N", title=None),
        )
        .properties(width=420, title="Ring all-reduce model 2·S·(P−1)/P·iters vs measured wire bytes")
    )
