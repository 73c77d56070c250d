"""Views are bounded: a bin too fine for the data is refused with its size before DuckDB runs it, absurd
values are one friendly line, and the query connection's memory is set deliberately (issue 12, item 9)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

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
    assert cells > 5_000_000  # grid_check.sql's limit
    con = open_dataset()
    try:
        assert con.execute("SELECT max_rows FROM grid_check").fetchall() == [(5_000_000,)]  # as documented
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


def test_a_window_ending_past_the_run_is_sized_by_the_run() -> None:
    """`--to` past the run's last packet adds no bins: the estimate clips the window to the run (sized
    up to the 1000 s asked, the 1 ms grid would be 12 million rows and refused)."""
    span, pairs = sample_span_and_pairs()
    con = open_dataset()
    try:
        ((rows,),) = con.execute(
            "SELECT rows FROM grid_rows(bin_ns := 1000000, runs := [?], to_ns := 1000000000000)", [SAMPLE]
        ).fetchall()
        past = query.run_view(con, "link_util", runs=[SAMPLE], params={"bin_ns": "1ms", "to_ns": 10**12})
        whole = query.run_view(con, "link_util", runs=[SAMPLE], params={"bin_ns": "1ms"})
    finally:
        con.close()
    assert rows == (span // 1_000_000 + 2) * pairs
    assert 0 < past.num_rows == whole.num_rows <= rows


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
    folder = Path(temp).parent  # one connection's folder, in this process's own (issue 36)
    assert Path(spill_dir()).parent == folder
    assert stat.S_IMODE(folder.lstat().st_mode) == 0o700
    assert folder.lstat().st_uid == os.getuid()


def test_burstiness_builds_no_grid_and_is_not_capped() -> None:
    """Its 100 µs default counts bins arithmetically, so the cap does not apply to it."""
    con = open_dataset()
    try:
        table = query.run_view(con, "burstiness", runs=[SAMPLE], params={"bins_ns": "1us,10ms"})
    finally:
        con.close()
    assert sorted(set(table["bin_ns"].to_pylist())) == [1_000, 10_000_000]


# The installed script under a wrapper that reports its peak RSS: a process of its own, so nothing but
# this command counts
MEASURED = """\
import json, resource, subprocess, sys, time
start = time.monotonic()
res = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": res.returncode, "stderr": res.stderr, "s": time.monotonic() - start,
                  "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def measured(*args: str) -> dict:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(sys.executable).with_name("tracecore"))
    env = {**os.environ, "TRACECORE_MEMORY_LIMIT": "2GB"}  # before the fix: an out-of-memory error, not 11 GB
    res = subprocess.run(
        [sys.executable, "-c", MEASURED, script, *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "sql",
    [
        "select * from link_util(bin_ns := 1000) limit 5",
        "select count(*) from link_total(bin_ns := 1000)",
        "select * from congestion(bin_ns := 1000) limit 5",
        "select * from link_util_ci(window_ns := 1000)",
        "select count(*) from temporal_flows(bin_ns := 1000)",
    ],
)
def test_ad_hoc_sql_is_bounded_by_the_views_themselves(sql: str) -> None:
    """Before: the size check stopped at `tracecore query`; `tracecore sql` built the grid (37.8 s and
    11.2 GB peak for the first line on the issue's dataset). Now the views refuse it themselves, before
    reading a packet (issue 25, item 13)."""
    got = measured("sql", sql, "--data", str(dataset_dir()))
    assert got["rc"] == 2, got
    (line,) = got["stderr"].splitlines()
    assert line.startswith(
        "Error: Invalid Input Error: tracecore: bins of 1,000 ns would make a grid of about "
    )
    assert (
        "use larger bins (bin_ns, window_ns), fewer runs (runs := [...]) or a window (from_ns, to_ns)" in line
    )
    assert got["s"] < 60, got  # 2-4 s on the 2-core machine, mostly start-up
    assert got["rss_mb"] < 600, got


def test_plain_duckdb_gets_the_same_refusal() -> None:
    import duckdb

    con = duckdb.connect(str(dataset_dir() / "tracecore.duckdb"), read_only=True)
    try:
        # the sample may be a copy of a prebuilt one (bench.mutants): its own part files, as a copy reads them
        con.execute(f"SET file_search_path = '{dataset_dir()}'")
        with pytest.raises(duckdb.InvalidInputException, match=r"at most 5,000,000\): use larger bins"):
            con.execute("SELECT count(*) FROM link_util(bin_ns := 1000)").fetchall()
        fine = con.execute("SELECT count(*) FROM link_util(bin_ns := 100000000)").fetchone()[0]
    finally:
        con.close()
    assert fine > 0
