"""Views are bounded: a bin too fine for the data is refused with its size before DuckDB runs it, absurd
values are one friendly line, and the query connection's memory is set deliberately (issue 12, item 9)."""

from __future__ import annotations

import pytest

from tests.commands import tracecore
from tests.test_views_support import SAMPLE, dataset_dir, open_dataset
from tracecore import query
from tracecore.errors import UsageError
from tracecore.ingest.catalog import spill_dir


def sample_span_and_pairs() -> tuple[int, int]:
    con = open_dataset()
    try:
        span = con.execute(
            "SELECT max(last_ts_ns) - min(first_ts_ns) FROM captures WHERE run = ?", [SAMPLE]
        ).fetchone()[0]
        workers = con.execute("SELECT count(*) FROM workers WHERE run = ?", [SAMPLE]).fetchone()[0]
        return span, workers * (workers - 1)
    finally:
        con.close()


def test_a_too_fine_bin_is_refused_before_running() -> None:
    span, pairs = sample_span_and_pairs()
    assert pairs == 12
    cells = (span // 10_000 + 2) * pairs
    assert cells > query.MAX_CELLS
    con = open_dataset()
    try:
        with pytest.raises(UsageError) as err:
            query.run_view(con, "link_util", runs=[SAMPLE], params={"bin_ns": "10us"})
    finally:
        con.close()
    text = str(err.value)
    assert f"about {cells:,} rows" in text
    assert "--run" in text
    assert "--from/--to" in text
    assert "--bin" in text


def test_the_same_bin_over_a_short_window_runs() -> None:
    con = open_dataset()
    try:
        coarse = query.run_view(con, "link_util", runs=[SAMPLE], params={"bin_ns": "100ms"})
        times, sizes = coarse["t_s"].to_pylist(), coarse["bytes"].to_pylist()
        start = max(round(min(t for t, b in zip(times, sizes, strict=True) if b) * 1e9), 0)
        window = {"bin_ns": "10us", "from_ns": start, "to_ns": start + 10**8}
        fine = query.run_view(con, "link_util", runs=[SAMPLE], params=window)
    finally:
        con.close()
    assert set(fine["bin_ns"].to_pylist()) == {10_000}
    assert sum(fine["bytes"].to_pylist()) == 256  # dpkt: 4 worker-to-worker frames in the first 100 ms
    assert fine.num_rows <= 12 * (10**8 // 10_000 + 2)


@pytest.mark.parametrize("value", ["1e99", "1e-9", "0"])
def test_absurd_bins_are_one_friendly_line(value: str) -> None:
    res = tracecore("query", "link_util", "--bin", value, "--data", str(dataset_dir()))
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "bin_ns" in lines[0]
    assert "Error:" in lines[0]
    assert "INT64" not in lines[0].upper()


def test_memory_limit_and_spill_folder_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACECORE_MEMORY_LIMIT", "1GB")
    con = open_dataset()
    try:
        limit, temp = con.execute(
            "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
        ).fetchone()
    finally:
        con.close()
    assert limit == "953.6 MiB"
    assert temp == spill_dir()


def test_burstiness_builds_no_grid_and_is_not_capped() -> None:
    """Its 100 µs default counts bins arithmetically, so the cap does not apply to it."""
    con = open_dataset()
    try:
        table = query.run_view(con, "burstiness", runs=[SAMPLE], params={"bins_ns": "1us,10ms"})
    finally:
        con.close()
    assert sorted(set(table["bin_ns"].to_pylist())) == [1_000, 10_000_000]
