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
