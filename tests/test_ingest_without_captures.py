"""Runs without captures: a run folder holding traces (profiler records, NIC counter files) but no pcap
is a run, and every view that needs no packets answers for it as for its captured twin.

The twin here is the real 4-rank NCCL run of ../shared/corpus-gpu (H200, PyTorch profiler traces, NCCL's
profiler plugin, NCCL logs), ingested once whole and once with its captures left out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.discover import NO_RUN

FOUR = (
    Path(__file__).parents[2] / "shared/corpus-gpu/gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
)
STEP_COLUMNS = (
    "worker, step, rank, compute_ns, communication_ns, overlap_ns, exposed_ns, gpu_idle_ns, iteration_ns"
)


def copy_without_captures(source: Path, into: Path) -> Path:
    run = into / source.name
    run.mkdir(parents=True)
    for f in source.iterdir():
        if not f.name.endswith(".pcap"):
            os.symlink(f, run / f.name)
    return run


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the run ingested whole, the run ingested without its captures)."""
    if not FOUR.is_dir():
        pytest.fail(f"corpus missing: {FOUR} (the shared/ folder must sit beside the checkout)")
    tmp = tmp_path_factory.mktemp("twins")
    whole = ingest([FOUR], tmp / "whole", jobs=1)
    assert not whole.failed
    run = copy_without_captures(FOUR, tmp / "runs")
    alone = ingest([run], tmp / "alone", jobs=1)
    assert not alone.failed
    assert not alone.problems, alone.problems
    assert alone.runs == [FOUR.name]
    return tmp / "whole", tmp / "alone"


def rows(data: Path, sql: str) -> list[tuple]:
    con = open_catalog(data)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_a_traces_only_run_gets_its_workers_from_nccls_logs(twins: tuple[Path, Path]) -> None:
    """No capture, no `worker-<i>` name, no pin: one worker per address NCCL's logs name first for a
    process, labelled in address order: the same workers, with the same addresses, as the captures gave."""
    whole, alone = twins
    workers = rows(alone, "SELECT worker, ip, ip_source, n_files, packets FROM workers ORDER BY worker")
    assert workers == [(f"W{i}", f"10.78.0.{i}", "nccl log", 0, 0) for i in (1, 2, 3, 4)]
    assert [w[:2] for w in workers] == rows(whole, "SELECT worker, ip FROM workers ORDER BY worker")
    assert rows(alone, "SELECT capture_mode, n_workers FROM runs") == [("none", 4)]
    assert rows(alone, "SELECT count(*) FROM captures") == [(0,)]


def test_views_without_packets_answer_as_for_the_captured_twin(twins: tuple[Path, Path]) -> None:
    """step_breakdown's GPU columns, collective_stragglers, collective_calls' workers and the NCCL ranks'
    workers are the captured twin's row for row; the views that need packets are empty."""
    whole, alone = twins
    for sql in (
        f"SELECT {STEP_COLUMNS} FROM step_breakdown ORDER BY ALL",
        "SELECT step, seq, op, last_rank, last_worker, spread_ns, wait_ns FROM collective_stragglers"
        " ORDER BY ALL",
        "SELECT source, rank, worker, worker_from, seq, step FROM collective_calls ORDER BY ALL",
        "SELECT comm_id, rank, nranks, worker, address FROM nccl_rank_workers ORDER BY ALL",
    ):
        expected = rows(whole, sql)
        assert len(expected) >= 4, sql
        assert rows(alone, sql) == expected, sql
    assert rows(alone, "SELECT count(*) FROM link_util") == [(0,)]


def test_explain_on_a_traces_only_run_names_the_late_rank_and_no_missing_capture(
    twins: tuple[Path, Path],
) -> None:
    """The slowest all-reduce's start skew and its late rank, as on the captured run; the workers having
    no capture is how the run was made, not a finding."""
    _whole, alone = twins
    found = rows(alone, "SELECT finding, subject, claim FROM findings")
    kinds = {f[0] for f in found}
    assert "start skew" in kinds, found
    assert "missing capture" not in kinds, found
    slowest = [f for f in found if f[0] == "slowest collective"]
    assert len(slowest) == 1
    assert "rank 3 (W4) last" in slowest[0][2], slowest


def test_a_folder_of_runs_takes_traces_only_runs_and_still_refuses_logs_alone(tmp_path: Path) -> None:
    """Beside a captured run, a folder with traces only is a run too; a folder holding only an NCCL log
    (no trace, no capture) is not, and a folder of nothing else is refused in one line as before."""
    root = tmp_path / "runs"
    copy_without_captures(FOUR, root)
    logs_only = root / "nccl-logs-only"
    logs_only.mkdir()
    os.symlink(next(FOUR.glob("nccl.vm.*.log")), logs_only / "nccl.log")
    res = CliRunner().invoke(app, ["ingest", str(root), "--data", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-2:] == [
        f"{FOUR.name}: no capture file; its traces, counters and logs read",
        res.output.splitlines()[-1],
    ]
    assert res.output.splitlines()[-1].startswith("1 run(s), 0 packets read in ")
    res = CliRunner().invoke(app, ["ingest", str(logs_only), "--out", str(tmp_path / "other")])
    assert res.exit_code != 0
    assert f"{logs_only}: {NO_RUN})" in res.output, res.output
    assert not (tmp_path / "other").exists()
