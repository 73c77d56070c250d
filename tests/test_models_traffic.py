"""Sec. VI traffic model: OLS coefficients, standard errors and R² against closed forms."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from sklearn.linear_model import LinearRegression

from tracecore.errors import ModelFitError
from tracecore.models import traffic


def _two_groups() -> pl.DataFrame:
    """One model, two framework_backends: the coefficient is a difference of means with a known SE."""
    a = [10.0, 11.0, 12.0]
    b = [20.0, 22.0, 24.0, 26.0]
    rows = [("horovod", "mpi", y) for y in a] + [("tf_sync", "grpc", y) for y in b]
    return pl.DataFrame(
        {
            "run": [f"r{i}" for i in range(len(rows))],
            "model": ["mobilenetv2"] * len(rows),
            "framework": [r[0] for r in rows],
            "backend": [r[1] for r in rows],
            "batch_size": [64] * len(rows),
            "topology": ["ring"] * len(rows),
            "mb_per_step": [r[2] for r in rows],
        }
    )


def test_two_group_regression_matches_the_closed_form() -> None:
    fit = traffic.fit_traffic(_two_groups())
    coef = {row["term"]: row for row in fit.coefficients.iter_rows(named=True)}
    # Constant model size is collinear with the intercept: dropped and listed, not fitted.
    assert fit.dropped == ["model_size_mb"]
    assert list(coef) == ["const", "framework_backend_tf_sync_grpc"]
    assert coef["const"]["coef"] == pytest.approx(11.0)
    assert coef["framework_backend_tf_sync_grpc"]["coef"] == pytest.approx(23.0 - 11.0)
    # Pooled variance: (2 + 20) / (7 − 2) = 4.4; SE of the difference = sqrt(4.4 (1/3 + 1/4)).
    assert coef["framework_backend_tf_sync_grpc"]["std_err"] == pytest.approx(
        math.sqrt(4.4 * (1 / 3 + 1 / 4))
    )
    assert coef["const"]["std_err"] == pytest.approx(math.sqrt(4.4 / 3))
    # R² = 1 − RSS/TSS with RSS = 22.
    y = np.array([10, 11, 12, 20, 22, 24, 26.0])
    assert fit.r2 == pytest.approx(1 - 22 / ((y - y.mean()) ** 2).sum())
    assert fit.n_runs == 7
    assert fit.n_coefficients == 2


def test_full_design_agrees_with_sklearn_and_recovers_the_generator() -> None:
    rng = np.random.default_rng(3)
    rows = []
    sizes = {"mobilenetv2": 14.0, "resnet50": 98.0, "densenet201": 80.0}
    for model, fb, bs, topo in itertools.product(sizes, ["horovod_mpi", "tf_sync_grpc"], [64, 128], ["ring"]):
        y = 1.0 + 0.5 * sizes[model] + (3.0 if fb == "tf_sync_grpc" else 0.0) + (-1.0 if bs == 128 else 0.0)
        fw, backend = fb.rsplit("_", 1)
        rows.append(
            {
                "run": f"{fb}-{model}-{bs}",
                "model": model,
                "framework": fw,
                "backend": backend,
                "batch_size": bs,
                "topology": topo,
                "mb_per_step": y + rng.normal(0, 0.05),
            }
        )
    df = pl.DataFrame(rows)
    fit = traffic.fit_traffic(df)
    coef = dict(zip(fit.coefficients["term"], fit.coefficients["coef"], strict=True))
    assert coef["model_size_mb"] == pytest.approx(0.5, abs=0.01)
    assert coef["framework_backend_tf_sync_grpc"] == pytest.approx(3.0, abs=0.15)
    assert coef["batch_size_128"] == pytest.approx(-1.0, abs=0.15)
    x = np.column_stack(
        [
            [sizes[m] for m in df["model"]],
            [1.0 if f == "tf_sync" else 0.0 for f in df["framework"]],
            [1.0 if b == 128 else 0.0 for b in df["batch_size"]],
        ]
    )
    ref = LinearRegression().fit(x, df["mb_per_step"].to_numpy())
    assert coef["const"] == pytest.approx(ref.intercept_)
    assert [
        coef["model_size_mb"],
        coef["framework_backend_tf_sync_grpc"],
        coef["batch_size_128"],
    ] == pytest.approx(list(ref.coef_))
    assert fit.r2 == pytest.approx(ref.score(x, df["mb_per_step"].to_numpy()))
    assert fit.predictions.height == 0  # every combination was measured


def test_predictions_for_unmeasured_configurations_are_flagged_when_confounded() -> None:
    df = _two_groups().with_columns(
        pl.when(pl.col("framework") == "horovod")
        .then(pl.lit("hierarchical"))
        .otherwise(pl.lit("ring"))
        .alias("topology")
    )
    fit = traffic.fit_traffic(df)
    # topology is confounded with framework_backend: its dummy is dropped, and the two unmeasured
    # combinations (horovod+ring, tf_sync+hierarchical) cannot be identified from these runs.
    assert fit.dropped == ["model_size_mb", "topology_ring"]
    assert fit.predictions.height == 2
    assert not any(fit.predictions["identifiable"].to_list())


def test_identifiable_prediction_for_a_missing_combination() -> None:
    df = pl.DataFrame(
        {
            "model_size_mb": [14.0, 14.0, 98.0, 14.0, 98.0],
            "framework_backend": ["a", "b", "a", "a", "a"],
            "batch_size": [64, 64, 64, 64, 64],
            "topology": ["ring"] * 5,
            "mb_per_step": [1.0, 3.0, 9.0, 1.2, 9.2],
        }
    )
    fit = traffic.fit_traffic(df)
    pred = fit.predictions.row(0, named=True)
    assert (pred["model_size_mb"], pred["framework_backend"]) == (98.0, "b")
    assert pred["identifiable"] is True
    coef = dict(zip(fit.coefficients["term"], fit.coefficients["coef"], strict=True))
    assert pred["predicted_mb_per_step"] == pytest.approx(
        coef["const"] + 98.0 * coef["model_size_mb"] + coef["framework_backend_b"]
    )


def test_too_few_runs_for_the_features_is_refused() -> None:
    df = _two_groups()[[0, 3]]  # one run per framework_backend: 2 runs, 2 coefficients
    with pytest.raises(ModelFitError, match=r"2 run\(s\) for 2 coefficients .* at least 3 runs"):
        traffic.fit_traffic(df)


def test_unknown_model_size_asks_for_it() -> None:
    df = _two_groups().with_columns(pl.lit("resnet8w8").alias("model"))
    with pytest.raises(ModelFitError, match="resnet8w8; give it as --model-size"):
        traffic.fit_traffic(df)
    fit = traffic.fit_traffic(df, {"resnet8w8": 0.08})
    assert fit.n_runs == 7


def test_model_size_from_gradient_bytes() -> None:
    df = _two_groups().with_columns(pl.lit(79816).alias("grad_bytes"))
    prepared = traffic.prepare(df)
    assert prepared["model_size_mb"].to_list() == [0.079816] * 7
