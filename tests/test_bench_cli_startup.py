"""bench.cli_startup in smoke mode: the sample dataset, both pairs timed once, the breakdown written."""

from __future__ import annotations

import json
from pathlib import Path

from bench import cli_startup


def test_cli_startup_smoke(sample_dataset: Path, tmp_path: Path) -> None:
    cli_startup.main(["--smoke", "--data", str(sample_dataset), "--results", str(tmp_path)])
    result = json.loads((tmp_path / "cli-startup.json").read_text())
    assert result["packets"] == 19_957  # both sample runs, received copies hidden (test_dataset_portable)
    assert set(result["pairs"]) == {"sql count", "query link_util csv"}
    for pair in result["pairs"].values():
        times = pair["times"]
        assert set(times) == {"plain DuckDB", "tracecore"}
        assert times["plain DuckDB"]["ratio"] == 1.0
        assert len(times["tracecore"]["walls_s"]) == 1  # smoke: one repetition
        assert dict(pair["imports_ms"])["duckdb"] > 0  # both sides import DuckDB
        steps = dict(pair["steps_ms"])
        assert steps["open_catalog (all of it)"] >= steps["  lock_down (settings)"] > 0
    assert "| plain DuckDB |" in (tmp_path / "cli-startup.md").read_text()
