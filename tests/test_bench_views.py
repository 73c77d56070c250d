"""bench.views_perf in smoke mode: builds the copied runs, ingests them, times both views."""

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
