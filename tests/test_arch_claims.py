"""Claims README.md and ARCHITECTURE.md make, tested: memory stays flat as captures grow, and
`open_catalog` rebuilds the views when queries/ changed (the recorded views fingerprint differs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.test_ingest_support import copy_run, repeat_pcap
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.catalog import views_fingerprint
from tracecore.reader.source import SEGMENT
from tracecore.sample import sample_run

_PEAK_RSS = """\
import resource, sys
from tracecore.reader import read_batches
n = sum(b.num_rows for b in read_batches(sys.argv[1]))
print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


HAS_LINK_UTIL = "SELECT count(*) FROM duckdb_views() WHERE view_name = 'link_util'"


def _peak_rss_kib(path: Path) -> tuple[int, int]:
    """(packets, peak RSS in KiB) of a fresh process that streams the whole capture."""
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(path)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    packets, rss = proc.stdout.split()
    return int(packets), int(rss)


@pytest.mark.slow
def test_memory_stays_flat_as_captures_grow(tmp_path: Path) -> None:
    """A real capture grown 10× (its records repeated later in time) costs at most the reader's
    mapped window more resident memory, not the 360 MB it grew by."""
    src = sample_run() / "worker-0-tcpdump.pcap"
    small = repeat_pcap(src, tmp_path / "small.pcap", 40_000_000)
    big = repeat_pcap(src, tmp_path / "big.pcap", 400_000_000)
    assert big.stat().st_size - small.stat().st_size > 350_000_000
    n_small, rss_small = _peak_rss_kib(small)
    n_big, rss_big = _peak_rss_kib(big)
    per_copy = 4531  # the sample capture's packets; each file holds whole copies of them
    assert (n_small, n_big) == (69 * per_copy, 684 * per_copy)
    assert SEGMENT == 64 << 20  # the reader maps a plain file 64 MiB at a time
    assert rss_big - rss_small < 128 << 10, (rss_small, rss_big)  # KiB: two windows at most


def test_views_are_rebuilt_when_queries_changed(tmp_path: Path) -> None:
    """A catalog whose views were made for another queries/ (recorded fingerprint differs, a view
    missing) gets today's views back, in place, the next time it is opened."""
    out = tmp_path / "data"
    assert not ingest([copy_run(tmp_path / "in")], out, jobs=1).failed
    con = duckdb.connect(str(out / "tracecore.duckdb"))
    con.execute("UPDATE _meta SET value = 'an older queries/' WHERE key = 'views_fingerprint'")
    con.execute("DROP VIEW link_util")
    con.close()
    con = open_catalog(out)
    try:
        assert con.execute("SELECT value FROM _meta WHERE key = 'views_fingerprint'").fetchone() == (
            views_fingerprint(),
        )
        assert con.execute(
            "SELECT count(*) FROM duckdb_views() WHERE view_name = 'link_util'"
        ).fetchone() == (1,)
        assert con.execute("SELECT sum(packets) FROM workers").fetchone() == (17027,)
    finally:
        con.close()
    raw = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)  # rebuilt in the file itself
    try:
        assert raw.execute("SELECT value FROM _meta WHERE key = 'views_fingerprint'").fetchone() == (
            views_fingerprint(),
        )
        assert raw.execute(
            "SELECT count(*) FROM duckdb_views() WHERE view_name = 'link_util'"
        ).fetchone() == (1,)
    finally:
        raw.close()
