"""bench/hta_side_by_side.py: a process tree's memory is the sum of its processes' and a tree past the limit
is killed; a set's events are counted as the generator counted them; and its smoke (a generated 2-rank
job through tracecore and HTA 0.5.0 in .venv-hta) measures both tools and finds their answers agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import hta_side_by_side as side
from bench import make_job_traces as jobs

REPO = Path(__file__).resolve().parent.parent
HTA_PYTHON = REPO / ".venv-hta" / "bin" / "python"  # `make .venv-hta/.installed` (make test builds it)
MIB = 1 << 20

# a parent holding 120 MiB forks a child that holds 120 MiB more (and maps the parent's): ~360 MiB of RSS
FORKED = (
    "import os, sys, time; a = b'x' * (120 << 20); pid = os.fork()\n"
    "b = b'y' * (120 << 20) if pid == 0 else None\n"
    "sys.stdout.flush(); time.sleep(30)"
)


def test_a_tree_past_the_limit_is_killed_and_its_processes_are_summed() -> None:
    """Past the limit the whole session dies at once, well before the child's 30 s; under it, a timeout
    ends it, and the peak is the sum over the tree (the child maps its parent's 120 MiB too)."""
    killed = side.measure([sys.executable, "-c", FORKED], limit=300 * MIB, timeout=20)
    assert killed.exceeded
    assert not killed.timed_out
    assert killed.wall_s < 15
    assert killed.peak_rss > 300 * MIB
    timed = side.measure([sys.executable, "-c", FORKED], limit=2048 * MIB, timeout=4)
    assert timed.timed_out
    assert not timed.exceeded
    assert timed.processes >= 3  # GNU time, python, its fork
    assert 340 * MIB < timed.peak_rss < 600 * MIB
    assert timed.peak_pss < timed.peak_rss  # the shared 120 MiB counted once


def test_events_without_a_manifest_are_counted_as_the_generator_counted_them(tmp_path: Path) -> None:
    """A set without manifest.json: its JSON bytes and events (one "ph" per event) read from the traces,
    plain and gzip, equal the manifest's."""
    for extra in ([], ["--gzip"]):
        out = tmp_path / f"out{len(extra)}"
        argv = [str(out), "--ranks", "2", "--steps", "2", "--rank-mb", "0", "--jobs", "1", *extra]
        assert jobs.main(argv) == 0
        folder = out / "job-2r"
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").unlink()
        got = side.describe(folder)
        assert (got["json_bytes"], got["events"]) == (
            manifest["total"]["json_bytes"],
            manifest["total"]["events"],
        )
        assert got["ranks"] == 2
        assert got["gzip"] == bool(extra)


@pytest.mark.slow
def test_smoke_measures_both_tools_and_their_answers_agree(tmp_path: Path) -> None:
    """Issue 38, point 3, in small: both tools measured whole (tree RSS, GNU time's %M), HTA with its
    default and its fastest backend; per iteration and per rank tracecore's breakdown, overlap and kernel
    sums within 1 % of HTA's; HTA's straggler finder fails on NCCL's ncclDevKernel names while tracecore
    names the planted straggler."""
    if not HTA_PYTHON.is_file():
        pytest.fail(
            f"{HTA_PYTHON} is missing: `make .venv-hta/.installed` builds HTA's venv (make test does)"
        )
    results = tmp_path / "side"
    argv = ["--smoke", "--hta-python", str(HTA_PYTHON), "--results", str(results)]
    proc = subprocess.run(
        [sys.executable, "-m", "bench.hta_side_by_side", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (got,) = json.loads(results.with_suffix(".json").read_text())["sets"].values()
    tools = {(t["tool"], t["setting"]): t for t in got["tools"]}
    assert set(tools) == {
        ("tracecore", "ingest"),
        ("tracecore", "answers (views)"),
        ("HTA 0.5.0", "json"),
        ("HTA 0.5.0", "ijson_batch_and_compress"),
    }
    assert all(t["ok"] and t["peak_rss"] > 50 * MIB and t["max_rss_one"] > 50 * MIB for t in tools.values())
    for backend in ("json", "ijson_batch_and_compress"):
        hta = tools[("HTA 0.5.0", backend)]
        assert hta["processes"] >= 4  # GNU time, python and HTA's Pool of 2 (one per rank)
        assert 0 < hta["load_s"] < hta["wall_s"]
        assert 0 < hta["mark_peak_rss"] <= hta["peak_rss"]
        assert hta["hta_rows"] > 0
    assert tools[("HTA 0.5.0", "json")].get("answered")
    assert set(got["ratios"]) == {"json", "ijson_batch_and_compress"}
    agreement = got["agreement"]
    iterations = agreement["iterations"]
    assert (iterations["compared"], iterations["last_step_cut"], iterations["missing"]) == (4, 2, 0)
    assert iterations["over_1pct"] == 0
    assert max(iterations["worst_share"].values()) <= side.TOLERANCE
    ranks = agreement["ranks"]
    assert ranks["compared"] == 2
    assert all(
        ranks["worst_share"][k] <= side.TOLERANCE for k in ("compute", "non_compute", "overlap", "kernels")
    )
    for row in ranks["rows"]:  # HTA loses ~1 µs a kernel to its rounding: never more than 1 % of the window
        assert row["kernels_tracecore_us"]["COMMUNICATION"] > 0
        assert row["kernels_hta_us"]["COMPUTATION"] < row["kernels_tracecore_us"]["COMPUTATION"]
    stragglers = agreement["stragglers"]
    assert stragglers["planted"] == [1]
    assert stragglers["tracecore"] == [1]
    assert stragglers["hta"]["error"].startswith("ValueError")  # HTA knows only ncclKernel_* names
    assert stragglers["hta"]["old_names"] == {"ranks": [0, 1]}  # its top 2 of 2 when it can read them
    page = results.with_suffix(".md").read_text()
    assert "## job-2r: 2 ranks" in page
    assert "| HTA 0.5.0 | json |" in page
    assert "tracecore names the planted" in page
