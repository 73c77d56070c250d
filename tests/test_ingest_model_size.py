"""Gradient size has one owner: ingest reads it from run.toml into `runs`; models read the catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_ingest_support import copy_run
from tracecore.ingest import ingest, open_catalog


def _without_gradient_bytes(run: Path) -> None:
    toml = run / "run.toml"
    toml.write_text(toml.read_text().replace("gradient_bytes = 79816\n", ""))


def test_parameters_alone_give_fp32_gradient_bytes_and_models_need_no_run_folder(tmp_path: Path) -> None:
    from tracecore.models.scaling import inputs_from_catalog
    from tracecore.models.traffic import load_runs

    run = copy_run(tmp_path / "src")
    _without_gradient_bytes(run)
    ingest([run], tmp_path / "data", jobs=1)
    shutil.rmtree(run)  # the models must not go back to run.toml
    con = open_catalog(tmp_path / "data")
    try:
        assert con.sql("SELECT grad_bytes, n_params FROM runs").fetchall() == [(79816, 19954)]
        assert con.sql("SELECT grad_bytes FROM run_meta").fetchall() == [(79816,)]
    finally:
        con.close()
    assert inputs_from_catalog(tmp_path / "data")["n_params"].to_list() == [19954]
    assert load_runs(tmp_path / "data")["grad_bytes"].to_list() == [79816]


def test_grad_bytes_in_the_run_table_is_a_column_not_an_extra(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "src")
    toml = run / "run.toml"
    toml.write_text(toml.read_text().replace("[run]\n", "[run]\ngrad_bytes = 4000\n", 1))
    ingest([run], tmp_path / "data", jobs=1)
    con = open_catalog(tmp_path / "data")
    try:
        # [model] gradient_bytes is read after [run] and wins, as before
        assert con.sql("SELECT grad_bytes, extra LIKE '%grad_bytes%' FROM runs").fetchall() == [
            (79816, False)
        ]
    finally:
        con.close()
