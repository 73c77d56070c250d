"""bench.ab_commits in smoke mode: both sides read and ingest the embedded sample in their own processes."""

from __future__ import annotations

import json
from pathlib import Path

from bench import ab_commits

SAMPLE_PACKETS = 17_027


def test_ab_commits_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ab.md"
    assert ab_commits.main(["--smoke", "--base", "HEAD", "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["packets"] == {"ingest": SAMPLE_PACKETS, "read": SAMPLE_PACKETS}
    assert report["order"] == ["ingest:base", "ingest:head", "read:base", "read:head"]
    for path in ("ingest", "read"):
        for side in ("base", "head"):
            (run,) = report["results"][path][side]
            assert run["packets"] == SAMPLE_PACKETS
            assert run["peak_rss_mib"] > 50  # a Python process with numpy and pyarrow loaded
            assert run["cpu_s"] == run["user_s"] + run["sys_s"] > 0
    text = out.read_text()
    assert f"## ingest: {ab_commits.WHAT['ingest']}, {SAMPLE_PACKETS:,} packets" in text
    assert text.count("| head vs base |") == 2
