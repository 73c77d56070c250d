"""Each log kind found in a run folder lands in its own dataset table through the real ingest."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from tracecore.cli.app import app

DATA = Path(__file__).parent / "data" / "logs"
REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = REPO / "tracecore" / "sample" / "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"


def test_logs_become_one_table_per_kind(tmp_path: Path) -> None:
    src = tmp_path / "runs" / SAMPLE_RUN.name
    shutil.copytree(SAMPLE_RUN, src)
    for name in ("kungfu_scalability_resnet50.txt", "horovod_timeline.json", "wandb_history_seed002.csv"):
        shutil.copy(DATA / name, src / name)
    damaged = (DATA / "loss_ddp_resnet8w8_b16.csv").read_text() + "30,not-a-loss\n"
    (src / "loss.csv").write_text(damaged)
    out = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "runs"), "--out", str(out), "--quiet"])
    # The bad line is reported, not silently dropped: ingest lists it and exits 3 (problems found).
    assert result.exit_code == 3, result.output
    report = " ".join(result.output.split())
    assert "loss.csv: 1 unparseable line(s); first: line 32: 30,not-a-loss" in report
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        counts = {
            table: con.execute(f"SELECT count(*), count(DISTINCT run) FROM {table}").fetchone()
            for table in ("benchmark_output", "horovod_timeline", "wandb_history", "loss_curve", "train_log")
        }
        assert counts["benchmark_output"] == (17, 1)
        assert counts["horovod_timeline"] == (26, 1)
        assert counts["loss_curve"] == (30, 1)
        assert counts["train_log"] == (32, 1)  # 30 Batch + 2 Epoch rows, the ingest engineer's parser
        assert counts["wandb_history"][1] == 1
        result_row = con.execute("SELECT value, np FROM benchmark_output WHERE kind = 'result'").fetchone()
        assert result_row == (43.42902, 32)
    finally:
        con.close()
