"""`tracecore model scaling|optimus|traffic`: the performance models of tracecore.models.

Thin: read the inputs (CSV files, logs, the dataset catalog), call the library, print tables and
optionally save the Altair figure. polars, numpy, scipy, sklearn and altair are imported inside the
commands so `tracecore --help` stays instant.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from tracecore.cli.common import DataDir, boundary, default_data_dir

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import polars as pl


class Format(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


class Axis(StrEnum):
    auto = "auto"
    step = "step"
    epoch = "epoch"


class Kind(StrEnum):
    sync = "sync"
    async_ = "async"


FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Output format.")]


def _figure_suffix(path: Path | None) -> Path | None:
    """Refuse an unknown figure format before any work is done."""
    if path is not None and path.suffix.lower() not in (".png", ".svg", ".html", ".json"):
        raise typer.BadParameter(f"{path}: use .png, .svg, .html or .json")
    return path


FigureOpt = Annotated[
    Path | None,
    typer.Option(
        "--figure",
        help="Also save the figure: .png, .svg, .html or .json (Vega-Lite).",
        callback=_figure_suffix,
    ),
]

model_app = typer.Typer(
    help="Performance models: data-parallel scaling, Optimus loss/speed, Sec. VI traffic.",
    no_args_is_help=True,
)
optimus_app = typer.Typer(
    help="Optimus: loss-curve fit and convergence, speed models, time to convergence, Ridge.",
    no_args_is_help=True,
)
model_app.add_typer(optimus_app, name="optimus")


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")


def _read_csv(path: Path) -> pl.DataFrame:
    import polars as pl

    try:
        return pl.read_csv(path)
    except (OSError, pl.exceptions.PolarsError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"{path}: cannot read as CSV: {first}") from None


def _emit(tables: list[tuple[str, pl.DataFrame]], fmt: Format) -> None:
    """Print titled tables; csv writes the first (main) table only, json all of them by title."""
    import polars as pl

    if fmt is Format.csv:
        sys.stdout.write(tables[0][1].write_csv())
        return
    if fmt is Format.json:
        payload = {title: df.to_dicts() for title, df in tables}
        typer.echo(json.dumps(_json_safe(payload), indent=1, default=str, allow_nan=False))
        return
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        tbl_width_chars=240,
        float_precision=6,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        fmt_str_lengths=60,
    ):
        for title, df in tables:
            typer.echo(title)
            typer.echo(str(df))
            typer.echo("")


def _json_safe(value: Any) -> Any:
    """JSON has no NaN or infinity (a fit may give them, e.g. a t statistic over a zero SE): null instead."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _figure(chart: Any, path: Path | None) -> None:
    if path is None:
        return
    from tracecore.models.figures import save_chart

    save_chart(chart, path)
    typer.echo(f"figure written to {path}", err=True)


@model_app.command("scaling")
@boundary
def scaling(
    times: Annotated[
        Path | None,
        typer.Argument(
            help="CSV with gpus,batch_size,epoch_time_s [,iters] [,wire_bytes per process per epoch]."
        ),
    ] = None,
    from_seed002: Annotated[bool, typer.Option("--from-seed002", help="Use seed 002's epoch times.")] = False,
    wandb: Annotated[
        list[Path] | None,
        typer.Option("--wandb", help="wandb history export(s), runs named ..._batch_size_<B>_<N>gpus."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", help="Dataset directory: captured runs, with measured wire bytes per worker."),
    ] = None,
    epoch: Annotated[
        int, typer.Option(help="Epoch timed in wandb histories (seed 002: 1, after warm-up).")
    ] = 1,
    n_params: Annotated[
        int | None, typer.Option("--n-params", help="Gradient elements (model parameters).")
    ] = None,
    dataset_size: Annotated[
        int | None, typer.Option("--dataset-size", help="Training samples per epoch.")
    ] = None,
    bytes_per_param: Annotated[int, typer.Option("--bytes-per-param", help="4 for fp32 gradients.")] = 4,
    fmt: FormatOpt = Format.table,
    figure: FigureOpt = None,
) -> None:
    """Speedups, compute/communication split and ring all-reduce bandwidth per (GPUs, batch size)."""
    from tracecore.models import scaling as sc
    from tracecore.models import seed002

    sources = sum([times is not None, from_seed002, bool(wandb), data is not None])
    if sources != 1:
        raise UsageError("give exactly one input: a times CSV, --from-seed002, --wandb FILE or --data DIR")
    if data is not None:
        result = sc.scaling_table(sc.inputs_from_catalog(data), bytes_per_param=bytes_per_param)
        _emit([("Captured runs: ring all-reduce model beside the measured wire bytes", result)], fmt)
        _figure(sc.chart(result), figure)
        return
    if from_seed002:
        table = seed002.epoch_times()
        n_params = n_params or seed002.N_PARAMS
        dataset_size = dataset_size or seed002.DATASET_SIZE
    elif wandb:
        import polars as pl

        table = pl.concat([sc.epoch_times_from_wandb(_wandb_history(p), epoch=epoch) for p in wandb])
    else:
        table = _read_csv(times)
    if (n_params is None and "n_params" not in table.columns) or (
        dataset_size is None and "iters" not in table.columns
    ):
        raise UsageError("--n-params is required, and --dataset-size unless the CSV has an iters column")
    result = sc.scaling_table(
        table, n_params=n_params, dataset_size=dataset_size or 0, bytes_per_param=bytes_per_param
    )
    _emit(_scaling_tables(result, bytes_per_param), fmt)
    _figure(sc.chart(result), figure)


def _wandb_history(path: Path) -> pl.DataFrame:
    import polars as pl

    from tracecore.logs import wandb

    head = path.read_text(errors="replace")[:8192] if path.is_file() else ""
    if not wandb.detect(head):
        raise UsageError(f"{path}: not a wandb history CSV export (no _step/_timestamp columns)")
    return pl.from_arrow(wandb.parse(path).table)


def _scaling_tables(result: pl.DataFrame, bytes_per_param: int) -> list[tuple[str, pl.DataFrame]]:
    from tracecore.models.scaling import seed_wide

    tables = [
        ("All configurations (long form)", result),
        ("Table 1: epoch time [s]", seed_wide(result, "epoch_time_s")),
        (
            "Table 1: strong-scaling speedup T(1)/T(N) (seed 002's definition)",
            seed_wide(result, "strong_speedup"),
        ),
        ("Table 1: weak-scaling speedup N·T(1)/T(N)", seed_wide(result, "weak_speedup")),
        ("Table 2: communication time T(N) − T(1)/N [s]", seed_wide(result, "communication_s")),
        ("Table 2: compute time T(1)/N [s]", seed_wide(result, "compute_s")),
        (
            "Table 3: seed 002's 'bandwidth utilization (GB/s)' = parameters/s / 1e9 (a count, not bytes)",
            seed_wide(result, "seed_bandwidth_gbs"),
        ),
        (
            f"Table 3 in bytes: ring all-reduce GB/s with {bytes_per_param}-byte gradients",
            seed_wide(result, "bandwidth_gbyte_s"),
        ),
        ("Table 3 in bits: Gbit/s", seed_wide(result, "bandwidth_gbit_s")),
    ]
    if "wire_gbit_s" in result.columns:
        tables.append(("Measured: wire Gbit/s over the communication time", seed_wide(result, "wire_gbit_s")))
        tables.append(
            ("Measured wire bytes / modelled all-reduce bytes", seed_wide(result, "wire_over_model"))
        )
    return tables


@optimus_app.command("fit")
@boundary
def optimus_fit(
    log: Annotated[
        Path, typer.Argument(help="Loss log: step,loss CSV, train_history.log or wandb history CSV.")
    ],
    key: Annotated[
        str | None, typer.Option(help="wandb metric holding the loss, e.g. train_loss_step.")
    ] = None,
    x: Annotated[
        Axis, typer.Option("--x", help="Fit against epochs (Optimus) or steps; auto = epochs if known.")
    ] = (Axis.auto),
    weighted: Annotated[
        bool, typer.Option(help="Weight later points 4^segment, as the Optimus prototype.")
    ] = False,
    window: Annotated[int, typer.Option(min=2, help="Convergence window, in units of --x.")] = 10,
    threshold: Annotated[
        float, typer.Option(help="Largest loss change over the window at convergence.")
    ] = 0.05,
    cap: Annotated[int, typer.Option(help="Give up past this point (Optimus: 100 epochs).")] = 100,
    fmt: FormatOpt = Format.table,
    figure: FigureOpt = None,
) -> None:
    """Fit l(k) = 1/(b0·k + b1) + b2 (b ≥ 0) to a loss log and predict the convergence point."""
    from tracecore.models import optimus as op
    from tracecore.models.loss_input import loss_points

    points = loss_points(log, key=key)
    axis = x.value
    if axis == "auto":
        axis = "epoch" if points["epoch"].null_count() == 0 else "step"
    if axis == "epoch" and points["epoch"].null_count():
        raise UsageError(f"{log}: this log has no epoch information; use --x step")
    k = points[axis].to_numpy()
    fit = op.fit_loss_curve(k, points["loss"].to_numpy(), weighted=weighted)
    start = max(0, int(k.max()) - window)
    conv = op.convergence_point(fit, start=start, window=window, threshold=threshold, cap=cap)
    import polars as pl

    table = op.loss_fit_table(fit, conv)
    table = table.with_columns(pl.lit(axis).alias("unit"), pl.lit(float(k.max())).alias("last_observed"))
    _emit([(f"Optimus loss fit against {axis}s", table)], fmt)
    if conv is None and fmt is Format.table:
        typer.echo(f"no convergence point up to {axis} {cap} (loss still changes > {threshold} per {window})")
    _figure(op.loss_chart(k, points["loss"].to_numpy(), fit, conv, unit=axis), figure)


@optimus_app.command("speed")
@boundary
def optimus_speed(
    points: Annotated[Path, typer.Argument(help="CSV with workers,ps,speed (steps/s).")],
    kind: Annotated[
        Kind, typer.Option(help="Synchronous (θ0..θ4) or asynchronous (θ0..θ3) model.")
    ] = Kind.sync,
    batch: Annotated[float | None, typer.Option(help="Global batch size M (sync model).")] = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Fit the Optimus speed model f(w, p) with θ ≥ 0 to measured speeds."""
    import polars as pl

    from tracecore.models import optimus as op

    data = _read_csv(points)
    model = op.fit_speed(data, kind=kind.value, batch=batch)
    theta = pl.DataFrame({"theta": [f"θ{i}" for i in range(len(model.theta))], "value": list(model.theta)})
    measured = data.with_columns(
        pl.Series("fitted", model.speed(data["workers"].to_numpy(), data["ps"].to_numpy())),
    )
    _emit([(f"{kind.value} speed model", theta), ("measured vs fitted steps/s", measured)], fmt)


@optimus_app.command("time")
@boundary
def optimus_time(
    theta: Annotated[
        str, typer.Option(help="θ0..θ4 of the sync model, comma separated (seed 003's by default).")
    ] = "1.02,2.78,4.92,0,0.02",
    batch: Annotated[float, typer.Option(help="Global batch size M.")] = 128,
    steps_per_epoch: Annotated[int, typer.Option(help="Steps per epoch (seed 003: 50000/128 → 391).")] = 391,
    epochs: Annotated[int, typer.Option(help="Epochs to convergence (seed 003: 85).")] = 85,
    ps: Annotated[
        list[int] | None, typer.Option("--ps", help="Parameter servers (repeat; default 2 and 4).")
    ] = None,
    workers: Annotated[
        list[int] | None, typer.Option("--workers", help="Workers (repeat; default 1, 10, 50, 99).")
    ] = None,
    max_workers: Annotated[
        int | None, typer.Option(help="Use workers 1..N instead (seed 003 plots 1..99).")
    ] = None,
    fmt: FormatOpt = Format.table,
    figure: FigureOpt = None,
) -> None:
    """Time to convergence = total steps / f(w, p) for the sync speed model, with seed 003's number beside."""
    from tracecore.models import optimus as op

    try:
        values = tuple(float(v) for v in theta.split(","))
    except ValueError:
        raise UsageError(f"--theta {theta!r}: five comma-separated numbers expected") from None
    if len(values) != 5 or min(values) < 0:
        raise UsageError(f"--theta {theta!r}: five non-negative numbers θ0..θ4 expected")
    model = op.SpeedModel(kind="sync", theta=values, batch=batch)
    ws = list(range(1, max_workers + 1)) if max_workers else (workers or [1, 10, 50, 99])
    table = op.time_to_convergence(model, total_steps=steps_per_epoch * epochs, workers=ws, ps=ps or [2, 4])
    title = (
        f"time to convergence of {steps_per_epoch}×{epochs} steps; seed003_error_s = steps / denominator "
        "(seed 003's formula: steps × speed, not a time)"
    )
    _emit([(title, table)], fmt)
    _figure(op.time_chart(table), figure)


@optimus_app.command("ridge")
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
        float, typer.Option(help="Ridge regularisation (sklearn default 1.0, as seed 003).")
    ] = 1.0,
    drop_tail: Annotated[int, typer.Option(help="Rows dropped from each curve's end (seed 003: 5).")] = 0,
    fmt: FormatOpt = Format.table,
) -> None:
    """Ridge regression of the loss-curve parameters b0..b2 on model depth and GPU type (seed 003)."""
    import polars as pl

    from tracecore.models import optimus as op

    rows = []
    for item in predict:
        depth, _, gpu = item.partition(":")
        if not depth.strip().isdigit() or not gpu.strip():
            raise UsageError(f"--predict {item!r}: expected DEPTH:GPU, e.g. 50:K80")
        rows.append({"depth": int(depth), "gpu": gpu.strip()})
    curves = [p for p in fits if op.CURVE_NAME.search(p.name)]
    if curves and len(curves) != len(fits):
        raise UsageError("give either one fits CSV or loss curves named optimus_<depth>_<gpu>.csv, not both")
    if not curves and len(fits) != 1:
        raise UsageError("give one fits CSV (depth,gpu,b0,b1,b2)")
    fitted = op.fits_from_curves(curves, drop_tail=drop_tail) if curves else _read_csv(fits[0])
    table = op.ridge_loss_params(fitted, pl.DataFrame(rows), alpha=alpha)
    tables = [("Ridge prediction of b0, b1, b2", table)]
    if curves:
        tables.append(("fitted loss curves", fitted))
    _emit(tables, fmt)


@model_app.command("traffic")
@boundary
def traffic(
    data: DataDir = None,
    input_csv: Annotated[
        Path | None,
        typer.Option("--input", help="CSV instead of the catalog: run, model/model_size_mb, framework, ..."),
    ] = None,
    model_size: Annotated[
        list[str] | None, typer.Option("--model-size", help="NAME=MB for models of unknown size (repeat).")
    ] = None,
    include_loss: Annotated[bool, typer.Option(help="Keep runs with injected packet loss.")] = False,
    fmt: FormatOpt = Format.table,
    figure: FigureOpt = None,
) -> None:
    """Sec. VI: linear model of MB per step on model size, framework_backend, batch size and topology."""
    from tracecore.models import traffic as tr

    sizes: dict[str, float] = {}
    for item in model_size or []:
        name, _, mb = item.partition("=")
        try:
            sizes[name.strip()] = float(mb)
        except ValueError:
            raise UsageError(f"--model-size {item!r}: expected NAME=MB, e.g. resnet18=44.7") from None
    runs = (
        _read_csv(input_csv)
        if input_csv
        else tr.load_runs(data or default_data_dir(), include_loss=include_loss)
    )
    fit = tr.fit_traffic(runs, sizes)
    tables = [
        ("OLS coefficients of MB per step (one-hot, first level dropped)", fit.coefficients),
        ("fit", fit.summary()),
        ("runs: measured and fitted MB per step", fit.fitted),
        ("predictions for unmeasured configurations", fit.predictions),
    ]
    _emit(tables, fmt)
    _figure(tr.chart(fit), figure)
