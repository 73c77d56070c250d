"""Scaling model: seed 002's three tables reproduced to its printed digits from its inputs."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from tracecore.errors import ModelFitError, UsageError
from tracecore.logs import wandb
from tracecore.models import reference_study, scaling

DATA = Path(__file__).parent / "data" / "logs"


@pytest.fixture(scope="module")
def result() -> pl.DataFrame:
    return scaling.scaling_table(
        reference_study.epoch_times(),
        n_params=reference_study.N_PARAMS,
        dataset_size=reference_study.DATASET_SIZE,
    )


def _rows(result: pl.DataFrame, value: str) -> list[list[float | None]]:
    wide = scaling.wide_by_batch(result, value)
    return [list(row[1:]) for row in wide.iter_rows()]


def _printed(rows: list[list[float | None]]) -> list[list[float | None]]:
    """Round as pandas prints: 6 decimals."""
    return [[None if v is None else round(v, 6) for v in row] for row in rows]


def test_table1_times_and_strong_speedup_as_printed(result: pl.DataFrame) -> None:
    # Seed 002, In[84]: gpu_nums, batch_{32,128,512,2048}_{time,speedup}.
    assert _rows(result, "epoch_time_s") == [[38, 16, 13, 13], [67, 18, 9, 10], [121, 30, 11, 11]]
    assert _printed(_rows(result, "strong_speedup")) == [
        [1.0, 1.0, 1.0, 1.0],
        [0.567164, 0.888889, 1.444444, 1.3],
        [0.31405, 0.533333, 1.181818, 1.181818],
    ]


def test_table1_weak_speedup_as_printed(result: pl.DataFrame) -> None:
    # Seed 002, In[86]: N·T(1)/T(N).
    assert _printed(_rows(result, "weak_speedup")) == [
        [1.0, 1.0, 1.0, 1.0],
        [1.134328, 1.777778, 2.888889, 2.6],
        [1.256198, 2.133333, 4.727273, 4.727273],
    ]


def test_table2_communication_and_compute_as_printed(result: pl.DataFrame) -> None:
    # Seed 002, In[96] / In[97].
    assert _rows(result, "communication_s") == [[0, 0, 0, 0], [48, 10, 2.5, 3.5], [111.5, 26, 7.75, 7.75]]
    assert _rows(result, "compute_s") == [[38, 16, 13, 13], [19, 8, 6.5, 6.5], [9.5, 4, 3.25, 3.25]]


def test_table3_bandwidth_in_the_seeds_convention_as_printed(result: pl.DataFrame) -> None:
    # Seed 002, In[73]: parameter count per second / 1e9, which it labels GB/s.
    assert _printed(_rows(result, "allreduce_gparams_s")) == [
        [None, None, None, None],
        [0.363852, 0.436902, 0.438019, 0.079814],
        [0.234954, 0.252059, 0.211945, 0.054068],
    ]
    # In[72]: communication_count, printed as 17464900000.0 ... 279349050.0 / 419023575.0.
    counts = _rows(result, "allreduce_params")
    assert counts[1][3] == 279349050.0
    assert counts[2][3] == 419023575.0
    assert counts[1][0] == pytest.approx(17464900000.0, rel=1e-6)
    assert counts[2][2] == pytest.approx(1642572000.0, rel=1e-6)


def test_bytes_reported_beside_the_seeds_count(result: pl.DataFrame) -> None:
    row = result.filter((pl.col("gpus") == 2) & (pl.col("batch_size") == 32)).row(0, named=True)
    # 1563 iterations × 2·S·(P−1)/P with S = 11173962 × 4 bytes, over 48 s.
    expected_bytes = 1563 * 2 * 11173962 * 4 * (2 - 1) / 2
    assert row["iters"] == math.ceil(50000 / 32) == 1563
    assert row["allreduce_bytes"] == expected_bytes
    assert row["bandwidth_gbyte_s"] == pytest.approx(expected_bytes / 48 / 1e9, rel=1e-12)
    assert row["bandwidth_gbit_s"] == pytest.approx(8 * expected_bytes / 48 / 1e9, rel=1e-12)
    assert row["bandwidth_gbyte_s"] == pytest.approx(4 * row["allreduce_gparams_s"], rel=1e-12)


def test_measured_wire_bytes_sit_beside_the_model() -> None:
    times = pl.DataFrame(
        {
            "gpus": [1, 4],
            "batch_size": [8, 8],
            "epoch_time_s": [10.0, 4.0],
            "iters": [4, 4],
            "wire_bytes": [0, 600_000],
        }
    )
    out = scaling.scaling_table(times, n_params=19954, dataset_size=0)
    four = out.filter(pl.col("gpus") == 4).row(0, named=True)
    assert four["communication_s"] == 4.0 - 10.0 / 4
    model_bytes = 4 * 2 * 19954 * 4 * 3 / 4
    assert four["allreduce_bytes"] == model_bytes
    assert four["wire_gbit_s"] == pytest.approx(600_000 * 8 / 1.5 / 1e9)
    assert four["wire_over_model"] == pytest.approx(600_000 / model_bytes)


def test_superlinear_speedup_has_no_bandwidth_rather_than_a_negative_one() -> None:
    times = pl.DataFrame({"gpus": [1, 2], "batch_size": [64, 64], "epoch_time_s": [10.0, 4.0]})
    out = scaling.scaling_table(times, n_params=1000, dataset_size=640)
    two = out.filter(pl.col("gpus") == 2).row(0, named=True)
    assert two["communication_s"] == -1.0
    assert two["bandwidth_gbit_s"] is None


def test_without_a_baseline_ratios_are_null_but_volumes_stay() -> None:
    out = scaling.scaling_table(
        pl.DataFrame({"gpus": [1, 2], "batch_size": [64, 128], "epoch_time_s": [1.0, 1.0]}),
        n_params=10,
        dataset_size=1280,
    )
    two = out.filter(pl.col("gpus") == 2).row(0, named=True)
    assert (two["strong_speedup"], two["communication_s"], two["bandwidth_gbit_s"]) == (None, None, None)
    assert two["allreduce_params"] == 10 * 2 * (1 / 2) * 10  # 2·n·(P−1)/P × ceil(1280/128) iterations


def test_missing_columns_and_sizes_are_refused() -> None:
    with pytest.raises(UsageError, match="lacks column"):
        scaling.scaling_table(pl.DataFrame({"gpus": [1]}), n_params=1, dataset_size=1)
    times = pl.DataFrame({"gpus": [1], "batch_size": [8], "epoch_time_s": [1.0]})
    with pytest.raises(UsageError, match="n_params"):
        scaling.scaling_table(times, dataset_size=80)
    with pytest.raises(UsageError, match="iters column"):
        scaling.scaling_table(times, n_params=1)


def test_epoch_time_from_wandb_history_as_seed_002_measures_it() -> None:
    history = pl.from_arrow(wandb.parse(DATA / "wandb_history_seed002.csv").table)
    history = history.with_columns(pl.lit("SGD_dp_batch_size_512_2gpus").alias("wandb_run"))
    # Rows printed for epoch 0: _timestamp 1649128380 .. 1649128381.
    times = scaling.epoch_times_from_wandb(history, epoch=0)
    assert times.to_dicts() == [
        {"run": "SGD_dp_batch_size_512_2gpus", "gpus": 2, "batch_size": 512, "epoch_time_s": 1.0}
    ]
    with pytest.raises(ModelFitError, match="epoch == 7"):
        scaling.epoch_times_from_wandb(history, epoch=7)
