"""bench.views_perf in smoke mode: builds the copied runs, ingests them, times the views (old SQL too)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import views_perf


def test_views_perf_smoke(tmp_path: Path) -> None:
    views_perf.main(["--smoke", "--data", str(tmp_path / "data"), "--results", str(tmp_path / "results")])
    result = json.loads((tmp_path / "results" / "views-latest.json").read_text())
    assert result["packets"] == 2 * 17_027  # two copies of the sample run, each packet once
    assert result["views"]["flow_matrix"]["rows"] == 2 * 12  # 12 directed pairs per run
    link = result["views"]["link_util_10ms"]
    # 12 directed worker pairs × the 661 10 ms bins from the sample's first to last packet (dpkt), per copy
    assert link["rows"] == 2 * 12 * 661
    # smoke mode times one repetition: the best is that one wall time (a timing: only its sign is known)
    assert link["best_wall_s"] == link["median_wall_s"] > 0
    assert "| flow_matrix | 24 |" in (tmp_path / "results" / "views-latest.md").read_text()
    # 12 directed pairs × 4 widths per copy; 12 × 1 for the 100 µs row alone
    assert result["views"]["burstiness"]["rows"] == 2 * 12 * 4
    assert result["views"]["burstiness_100us"]["rows"] == 2 * 12


def test_views_perf_baseline_runs_the_old_sql(tmp_path: Path, monkeypatch) -> None:
    """--baseline: a view file of the old revision is a TEMP macro that the timed query calls instead of
    the catalog's (here a stand-in burstiness of one row), and the tables are compared."""
    old = (
        "CREATE OR REPLACE TEMP MACRO burstiness(bins_ns := [1], runs := NULL, from_ns := NULL,"
        " to_ns := NULL) AS TABLE SELECT 1 AS one"
    )
    monkeypatch.setattr(views_perf, "baseline_sql", lambda ref: [old])
    out = tmp_path / "results"
    views_perf.main(["--smoke", "--data", str(tmp_path / "data"), "--results", str(out), "--baseline", "REF"])
    views = json.loads((out / "views-latest.json").read_text())["views"]
    assert views["burstiness"]["before"]["rows"] == 1
    assert views["burstiness"]["rows"] == 2 * 12 * 4
    assert not views["burstiness"]["same_table"]
    assert views["link_util_10ms"]["same_table"]  # the same SQL both times: the same table
    assert views["link_util_10ms"]["before"]["rows"] == views["link_util_10ms"]["rows"] == 2 * 12 * 661
    assert "| burstiness | " in (out / "views-latest.md").read_text()


def test_rdma_views_smoke(tmp_path: Path) -> None:
    """bench.rdma_views in smoke mode: the NCCL ring repeated to 1 MB per capture, 3 workers, 6 QP flows."""
    from bench import rdma_views

    rdma_views.main(["--smoke", "--data", str(tmp_path / "data"), "--results", str(tmp_path / "results")])
    result = json.loads((tmp_path / "results" / "rdma-views-latest.json").read_text())
    assert not result["ingest_failed"]
    roce, tcp = result["runs"][rdma_views.ROCE_RUN], result["runs"][rdma_views.TCP_RUN]
    assert roce["rdma_flows"]["rows"] == 6  # the ring's 6 directed QP flows, however often repeated
    assert tcp["rdma_flows"]["rows"] == 0
    assert roce["congestion_10ms"]["rows"] == roce["link_util_10ms"]["rows"] > 0
    assert roce["rdma_flows"]["ratio_to_peer"] > 0
    assert "| rdma_flows | 6 |" in (tmp_path / "results" / "rdma-views-latest.md").read_text()
