"""Models on real bench/ runs: `python -m bench.make_captures --matrix small` (6 short 4-worker gloo DDP
runs: 3 model sizes, 3 batch sizes, one with 1 % loss), ingested by the real `tracecore ingest`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.commands import run_module
from tracecore.cli.app import app
from tracecore.models import optimus
from tracecore.models.loss_input import loss_points

NORMAL_RUNS = 5

# Slow: the matrix is generated first (over a minute, root, network namespaces).
pytestmark = pytest.mark.slow

runner = CliRunner()


def _normal_runs(matrix: Path) -> list[Path]:
    return [p for p in matrix.iterdir() if "-normal-" in p.name and (p / "train_history.log").is_file()]


@pytest.fixture(scope="module")
def matrix_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bench matrix, generated into a tmp dir (needs root for the network namespaces)."""
    if os.geteuid() != 0:
        pytest.fail("generating the bench matrix needs root: python -m bench.make_captures --matrix small")
    out = tmp_path_factory.mktemp("bench-data")
    proc = run_module("bench.make_captures", "--matrix", "small", "--out", str(out), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    matrix = out / "matrix_small"
    assert len(_normal_runs(matrix)) == NORMAL_RUNS
    return matrix


@pytest.fixture(scope="module")
def dataset(matrix_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dataset")
    result = runner.invoke(app, ["ingest", str(matrix_small), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    return out


def test_traffic_model_on_bench_runs(dataset: Path, tmp_path: Path) -> None:
    figure = tmp_path / "traffic.svg"
    result = runner.invoke(
        app, ["model", "traffic", "--data", str(dataset), "-f", "json", "--figure", str(figure)]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (fit,) = out["fit"]
    coef = {row["term"]: row for row in out["OLS coefficients of MB per step (one-hot, first level dropped)"]}
    # 5 loss-free configurations; model size and batch size vary, framework/backend/topology do not.
    assert fit["n_runs"] == NORMAL_RUNS
    assert set(coef) == {"const", "model_size_mb", "batch_size_16", "batch_size_32"}
    # The gradient fixes the payload per step; only ACK and header counts vary from run to run, so
    # model size explains all but a few parts per million (0.999992 on one generated matrix).
    assert fit["r2"] > 0.9999
    # Physics: 4 ranks each send 2(N−1)/N = 1.5 × the gradient bytes per step, 6 × in all, plus L2–L4
    # headers and ACKs (a few %). Batch size does not change the gradient, so its terms are ~0.
    slope = coef["model_size_mb"]
    assert 6.0 < slope["coef"] < 6.8
    assert slope["std_err"] < 0.1
    for term in ("batch_size_16", "batch_size_32"):
        assert abs(coef[term]["coef"]) < 0.02
    predictions = out["predictions for unmeasured configurations"]
    assert predictions
    assert all(p["identifiable"] for p in predictions)
    assert figure.read_text().startswith("<svg")


def test_scaling_puts_measured_wire_bytes_beside_the_ring_model(dataset: Path) -> None:
    result = runner.invoke(app, ["model", "scaling", "--data", str(dataset), "-f", "json"])
    assert result.exit_code == 0, result.output
    (rows,) = json.loads(result.stdout).values()
    assert len(rows) == NORMAL_RUNS
    for row in rows:
        # 4 workers, 8 steps per epoch: model bytes = 8 · 2 · (4 · n_params) · 3/4 per worker.
        assert row["gpus"] == 4
        assert row["allreduce_bytes"] == 8 * 2 * 4 * row["n_params"] * 3 / 4
        # The wire adds Ethernet/IP/TCP headers and ACKs: a few % to ~25 % for the smallest model.
        assert 1.0 < row["wire_over_model"] < 1.3, row["run"]
        # A rate over a measured epoch varies run to run; its value is the measured bytes over that time.
        assert row["wire_gbit_s_over_epoch"] == pytest.approx(
            row["wire_bytes"] * 8 / (row["epoch_time_s"] * 1e9), rel=1e-12
        )
        assert row["strong_speedup"] is None  # no 1-worker runs to compare with


def test_traffic_model_keeps_loss_runs_on_request(dataset: Path) -> None:
    result = runner.invoke(app, ["model", "traffic", "--data", str(dataset), "--include-loss", "-f", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fit"][0]["n_runs"] == NORMAL_RUNS + 1


def test_optimus_fit_on_bench_runs(matrix_small: Path) -> None:
    """Most short runs plateau within the 100-epoch cap; where one does not, None is what the curve says."""
    converged = {}
    for run in sorted(_normal_runs(matrix_small)):
        points = loss_points(run / "train_history.log")
        k = points["epoch"].to_numpy()
        fit = optimus.fit_loss_curve(k, points["loss"].to_numpy())
        assert fit.rmse < 0.1, run.name
        conv = optimus.convergence_point(fit, start=max(0, int(k.max()) - 10))
        converged[run.name] = conv
        if conv is None:
            # Still falling by more than 0.05 over the last 10 epochs before the cap.
            assert float(fit.predict(91) - fit.predict(100)) > 0.05, run.name
        else:
            assert 9 <= conv <= 100, run.name
            window = fit.predict(range(conv - 9, conv + 1))
            assert float(window[0] - window[-1]) <= 0.05, run.name
    assert sum(c is not None for c in converged.values()) >= NORMAL_RUNS - 1, converged
    # The paper-like configuration (ResNet-20) converges.
    assert converged["torch_ddp-resnet20w8-sgd-16-gloo-normal-ring"] is not None
