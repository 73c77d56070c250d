"""`tracecore model scaling|traffic|optimus …`: the performance models, one library call each.

Thin: parse options, call the task, print its titled tables through `cli.output` (the same tables as
`query`) and save its chart on `--figure`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.optimus import optimus_app
from tracecore.cli.optimus_ridge import optimus_ridge
from tracecore.cli.options import DATA_ENV, Dataset, Figure, FormatOpt, Out, Runs
from tracecore.cli.output import Format, emit_model

model_app = typer.Typer(
    help="Performance models: data-parallel scaling, Optimus loss/speed, Sec. VI traffic.",
    no_args_is_help=True,
)
optimus_app.command("ridge", cls=PlainUsage)(optimus_ridge)
model_app.add_typer(optimus_app, name="optimus")


def register(app: typer.Typer) -> None:
    app.add_typer(model_app, name="model")


@model_app.command("scaling", cls=PlainUsage)
@boundary
def scaling(
    ctx: typer.Context,
    times: Annotated[
        Path | None,
        typer.Argument(
            help="CSV with gpus,batch_size,epoch_time_s [,iters] [,wire_bytes per process per epoch]."
        ),
    ] = None,
    reference_study: Annotated[
        bool,
        typer.Option(
            "--reference-study",
            help="Use the epoch times of the published ResNet-18 / CIFAR-10 DataParallel study.",
        ),
    ] = False,
    wandb: Annotated[
        list[Path] | None,
        typer.Option(
            "--wandb",
            help="wandb history export(s), runs named ..._batch_size_<B>_<N>gpus.",
            show_default="none",
        ),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Dataset directory: captured runs (measured epoch times and wire bytes per worker), "
            "read when no other input is given.",
            envvar=DATA_ENV,
            show_envvar=True,
            show_default="./tracecore-data",
        ),
    ] = None,
    run: Runs = None,
    epoch: Annotated[
        int, typer.Option(help="Epoch timed in wandb histories (the study: 1, after warm-up).")
    ] = 1,
    n_params: Annotated[
        int | None,
        typer.Option(
            "--n-params", help="Gradient elements (model parameters).", show_default="the study's or CSV's"
        ),
    ] = None,
    dataset_size: Annotated[
        int | None,
        typer.Option(
            "--dataset-size", help="Training samples per epoch.", show_default="the study's or CSV iters"
        ),
    ] = None,
    bytes_per_param: Annotated[int, typer.Option("--bytes-per-param", help="4 for fp32 gradients.")] = 4,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    figure: Figure = None,
) -> None:
    """Speedups, compute/communication split and ring all-reduce bandwidth per (GPUs, batch size).

    --data fits the measured epoch times of a dataset's loss-free runs (two epochs or more); with
    no input given, the dataset of every command ($TRACECORE_DATA or ./tracecore-data) is read.
    Such runs come from `tracecore run runners/examples/ddp_scaling_sweep.toml --ingest`.
    --run picks some of them by name or glob.

    \b
    Examples:
      $ tracecore model scaling --reference-study --figure scaling.svg
    """
    from tracecore.models import tasks

    # $TRACECORE_DATA is the default dataset (tasks.scaling reads it), never a second input beside one given
    given = getattr(ctx.get_parameter_source("data"), "name", None) == "COMMANDLINE"
    result = tasks.scaling(
        times=times,
        reference_study=reference_study,
        wandb=wandb,
        data=data if given else None,
        runs=run,
        epoch=epoch,
        n_params=n_params,
        dataset_size=dataset_size,
        bytes_per_param=bytes_per_param,
    )
    emit_model(result, fmt, out, figure)


@model_app.command("traffic", cls=PlainUsage)
@boundary
def traffic(
    data: Dataset = None,
    input_csv: Annotated[
        Path | None,
        typer.Option(
            "--input",
            help="CSV instead of the catalog: run, model/model_size_mb, framework, ...",
            show_default="none",
        ),
    ] = None,
    model_size: Annotated[
        list[str] | None,
        typer.Option(
            "--model-size", help="NAME=MB for models of unknown size (repeat).", show_default="none"
        ),
    ] = None,
    include_loss: Annotated[bool, typer.Option(help="Keep runs with injected packet loss.")] = False,
    fmt: FormatOpt = Format.table,
    out: Out = None,
    figure: Figure = None,
) -> None:
    """Sec. VI: linear model of MB per step on model size, framework_backend, batch size and topology."""
    from tracecore.models import tasks

    result = tasks.traffic(data=data, input_csv=input_csv, model_sizes=model_size, include_loss=include_loss)
    emit_model(result, fmt, out, figure)
