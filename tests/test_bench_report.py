"""bench.report_ab in smoke mode: both builds report on the embedded sample, each in its own processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report_ab


@pytest.mark.slow
def test_report_ab_smoke(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    assert report_ab.main(["--smoke", "--base", "HEAD", "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["same_page"] is True  # HEAD and this checkout draw the same page
    assert report["order"] == ["base", "head"]
    for side in ("base", "head"):
        (run,) = report["results"][side]
        for r in (run, report["first"][side]):
            assert r["peak_rss_mib"] > 100  # a Python process with DuckDB, Arrow and Altair loaded
            assert r["cpu_s"] == r["user_s"] + r["sys_s"] > 0.3
    text = out.read_text()
    assert "The two pages are the same" in text
    assert text.count("| head vs base |") == 1


def test_the_pages_are_compared_without_their_generation_time(tmp_path: Path) -> None:
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    a.write_text("<p>generated 2026-11-26 13:08 UTC · Vega 6</p>")
    b.write_text("<p>generated 2026-11-27 09:41 UTC · Vega 6</p>")
    assert report_ab._page(a) == report_ab._page(b)
    b.write_text("<p>generated 2026-11-27 09:41 UTC · Vega 5</p>")
    assert report_ab._page(a) != report_ab._page(b)
