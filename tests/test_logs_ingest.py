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


def test_an_nccl_log_with_lines_of_an_unknown_form_is_ingested_with_one_warning(tmp_path: Path) -> None:
    """Format drift in a new NCCL release is visible the day its logs are read: the real 2.28.9
    socket run with two made-up lines in rank 0's log ingests whole, with one warning for that file."""
    real = (
        REPO.parent / "shared" / "corpus-gpu" / "h100-nccl-socket-2rank" / "torch_ddp-mlp-sgd-32-nccl-0-ring"
    )
    run = tmp_path / "runs" / real.name
    shutil.copytree(real, run)
    log = run / "nccl.vm.637.log"
    lines = log.read_text().splitlines()
    drift = [f"vm:637:637 [0] NCCL INFO Graph v3 0{c} : 1 => 0 => 1" for c in (0, 1)]
    log.write_text("\n".join([*lines[:40], *drift, *lines[40:]]) + "\n")
    out = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "runs"), "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output  # a warning, not a problem: the file was read
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {log}: 2 NCCL line(s) of a form tracecore does not know (a newer NCCL?), passed over; "
        "first: 'line 41: vm:637:637 [0] NCCL INFO Graph v3 00 : 1 => 0 => 1'"
    ]
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        ranks = con.execute("SELECT file, rank, unknown_lines FROM nccl_ranks ORDER BY rank").fetchall()
        assert ranks == [("nccl.vm.637.log", 0, 2), ("nccl.vm.636.log", 1, 0)]
        assert con.execute("SELECT count(*) FROM nccl_trees").fetchone() == (
            8,
        )  # `Tree` and `Trees`, 2 ranks
    finally:
        con.close()
