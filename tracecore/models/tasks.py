"""Each `tracecore model …` command as one library call: inputs in, titled tables and a chart out.

Why here and not in the CLI: choosing among input sources, checking that they fit and titling the
paper's tables is model knowledge; a notebook gets the same tables as the command line, and the CLI
only parses options and prints what these return.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecore.errors import UsageError
from tracecore.models import arguments

if TYPE_CHECKING:
    import polars as pl


@dataclass
class ModelResult:
    """Titled result tables (the first is the main one), the chart drawn on request, a note for people."""

    tables: list[tuple[str, pl.DataFrame]]
    chart: Callable[[], Any]
    note: str | None = None


def scaling(
    *,
    times: Path | None = None,
    reference_study: bool = False,
    wandb: list[Path] | None = None,
    data: Path | None = None,
    runs: list[str] | None = None,
    epoch: int = 1,
    n_params: int | None = None,
    dataset_size: int | None = None,
    bytes_per_param: int = 4,
) -> ModelResult:
    """Speedups, compute/communication split and ring all-reduce bandwidth from exactly one input;
    `runs` (names or globs) picks the dataset's runs to fit when the input is `data`. With no input,
    the input is the default dataset of every command ($TRACECORE_DATA or ./tracecore-data)."""
    import polars as pl

    from tracecore.ingest.layout import default_data_dir
    from tracecore.models import reference_study as study
    from tracecore.models import scaling as scaling_model

    inputs = "give exactly one input: a times CSV, --reference-study, --wandb FILE or --data DIR"
    given = sum([times is not None, reference_study, bool(wandb), data is not None])
    if given > 1:
        raise UsageError(inputs)
    if given == 0:
        data = default_data_dir()
        if not data.exists():
            raise UsageError(
                f"{inputs} (no dataset at {data}, the default: $TRACECORE_DATA or ./tracecore-data)"
            )
    if runs and data is None:
        raise UsageError("--run picks runs of a dataset: give it with --data")
    if data is not None:
        result = scaling_model.scaling_table(
            scaling_model.inputs_from_catalog(data, runs), bytes_per_param=bytes_per_param
        )
        title = "Captured runs: ring all-reduce model beside the measured wire bytes"
        return ModelResult([(title, result)], lambda: scaling_model.chart(result))
    if reference_study:
        table = study.epoch_times()
        n_params = n_params or study.N_PARAMS
        dataset_size = dataset_size or study.DATASET_SIZE
    elif wandb:
        table = pl.concat(
            [scaling_model.epoch_times_from_wandb(arguments.wandb_history(p), epoch=epoch) for p in wandb]
        )
    else:
        table = arguments.read_csv(times)
    if (n_params is None and "n_params" not in table.columns) or (
        dataset_size is None and "iters" not in table.columns
    ):
        raise UsageError("--n-params is required, and --dataset-size unless the CSV has an iters column")
    result = scaling_model.scaling_table(
        table, n_params=n_params, dataset_size=dataset_size or 0, bytes_per_param=bytes_per_param
    )
    return ModelResult(
        scaling_model.study_tables(result, bytes_per_param), lambda: scaling_model.chart(result)
    )


def traffic(
    *,
    data: Path,
    input_csv: Path | None = None,
    model_sizes: list[str] | None = None,
    include_loss: bool = False,
) -> ModelResult:
    """Sec. VI: OLS of MB per step on model size, framework_backend, batch size and topology."""
    from tracecore.models import traffic as traffic_model

    sizes = arguments.parse_model_sizes(model_sizes or [])
    runs = (
        arguments.read_csv(input_csv)
        if input_csv
        else traffic_model.load_runs(data, include_loss=include_loss)
    )
    fit = traffic_model.fit_traffic(runs, sizes)
    tables = [
        ("OLS coefficients of MB per step (one-hot, first level dropped)", fit.coefficients),
        ("fit", fit.summary()),
        ("runs: measured and fitted MB per step", fit.fitted),
        ("predictions for unmeasured configurations", fit.predictions),
    ]
    return ModelResult(tables, lambda: traffic_model.chart(fit))


def optimus_fit(
    log: Path,
    *,
    key: str | None = None,
    x: str = "auto",
    weighted: bool = False,
    window: int = 10,
    threshold: float = 0.05,
    cap: int = 100,
) -> ModelResult:
    """Fit l(k) = 1/(b0·k + b1) + b2 to a loss log against epochs or steps and find its convergence point."""
    import polars as pl

    from tracecore.models import optimus
    from tracecore.models.loss_input import loss_points

    points = loss_points(log, key=key)
    axis = ("epoch" if points["epoch"].null_count() == 0 else "step") if x == "auto" else x
    if axis == "epoch" and points["epoch"].null_count():
        raise UsageError(f"{log}: this log has no epoch information; use --x step")
    k, loss = points[axis].to_numpy(), points["loss"].to_numpy()
    fit = optimus.fit_loss_curve(k, loss, weighted=weighted)
    start = max(0, int(k.max()) - window)
    conv = optimus.convergence_point(fit, start=start, window=window, threshold=threshold, cap=cap)
    table = optimus.loss_fit_table(fit, conv).with_columns(
        pl.lit(axis).alias("unit"), pl.lit(float(k.max())).alias("last_observed")
    )
    note = None
    if conv is None:
        note = f"no convergence point up to {axis} {cap} (loss still changes > {threshold} per {window})"
    chart = lambda: optimus.loss_chart(k, loss, fit, conv, unit=axis)  # noqa: E731
    return ModelResult([(f"Optimus loss fit against {axis}s", table)], chart, note)


def optimus_speed(points: Path, *, kind: str = "sync", batch: float | None = None) -> ModelResult:
    """Fit the Optimus speed model f(w, p) with θ ≥ 0 to measured (workers, ps, speed) points."""
    import polars as pl

    from tracecore.models import optimus

    data = arguments.read_csv(points)
    model = optimus.fit_speed(data, kind=kind, batch=batch)
    theta = pl.DataFrame({"theta": [f"θ{i}" for i in range(len(model.theta))], "value": list(model.theta)})
    measured = data.with_columns(
        pl.Series("fitted", model.speed(data["workers"].to_numpy(), data["ps"].to_numpy()))
    )
    tables = [(f"{kind} speed model", theta), ("measured vs fitted steps/s", measured)]
    return ModelResult(tables, lambda: None)


def optimus_time(
    *,
    theta: str | None = None,
    batch: float | None = None,
    steps_per_epoch: int | None = None,
    epochs: int | None = None,
    ps: list[int] | None = None,
    workers: list[int] | None = None,
    max_workers: int | None = None,
) -> ModelResult:
    """Time to convergence = total steps / f(w, p); what is not given is the reference notebook's."""
    from tracecore.models import optimus

    values = arguments.parse_theta(theta) if theta is not None else optimus.REFERENCE_THETA
    model = optimus.SpeedModel(kind="sync", theta=values, batch=batch or optimus.REFERENCE_BATCH)
    steps_per_epoch = steps_per_epoch or optimus.REFERENCE_STEPS_PER_EPOCH
    epochs = epochs or optimus.REFERENCE_EPOCHS
    ws = list(range(1, max_workers + 1)) if max_workers else (workers or [1, 10, 50, 99])
    table = optimus.time_to_convergence(
        model, total_steps=steps_per_epoch * epochs, workers=ws, ps=ps or [2, 4]
    )
    title = (
        f"time to convergence of {steps_per_epoch}×{epochs} steps; steps_over_denominator = steps / "
        "denominator of f (the reference Optimus notebook's 'time': steps × speed, not a time)"
    )
    return ModelResult([(title, table)], lambda: optimus.time_chart(table))


def optimus_ridge(
    fits: list[Path], *, predict: list[str], alpha: float = 1.0, drop_tail: int = 0
) -> ModelResult:
    """Ridge regression of b0..b2 on depth and GPU type, from a fits CSV or from loss curves fitted first."""
    from tracecore.models import optimus

    wanted = arguments.parse_depth_gpu(predict)
    curves = [p for p in fits if optimus.CURVE_NAME.search(p.name)]
    if curves and len(curves) != len(fits):
        raise UsageError("give either one fits CSV or loss curves named optimus_<depth>_<gpu>.csv, not both")
    if not curves and len(fits) != 1:
        raise UsageError("give one fits CSV (depth,gpu,b0,b1,b2)")
    fitted = optimus.fits_from_curves(curves, drop_tail=drop_tail) if curves else arguments.read_csv(fits[0])
    tables = [("Ridge prediction of b0, b1, b2", optimus.ridge_loss_params(fitted, wanted, alpha=alpha))]
    if curves:
        tables.append(("fitted loss curves", fitted))
    return ModelResult(tables, lambda: None)
