"""bench.ab_commits in smoke mode: both sides read and ingest the embedded sample in their own processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import ab_commits

SAMPLE_PACKETS = 17_027


@pytest.mark.slow
def test_ab_commits_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ab.md"
    assert ab_commits.main(["--smoke", "--base", "HEAD", "--out", str(out)]) == 0
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["packets"] == {"ingest": SAMPLE_PACKETS, "read": SAMPLE_PACKETS}
    # the second round runs head first: a machine drifting during a round favours neither side
    assert report["order"] == [
        *("ingest:base", "ingest:head", "read:base", "read:head"),
        *("ingest:head", "ingest:base", "read:head", "read:base"),
    ]
    for path in ("ingest", "read"):
        for side in ("base", "head"):
            runs = report["results"][path][side]
            assert len(runs) == 2
            for run in runs:
                assert run["packets"] == SAMPLE_PACKETS
                assert run["peak_rss_mib"] > 50  # a Python process with numpy and pyarrow loaded
                assert run["cpu_s"] == run["user_s"] + run["sys_s"] > 0
    text = out.read_text()
    assert f"## ingest: {ab_commits.WHAT['ingest']}, {SAMPLE_PACKETS:,} packets" in text
    assert text.count("| head vs base |") == 2
    by = report["results"]["ingest"]
    ratio = ab_commits.paired(by["base"], by["head"], "cpu_s")
    assert f"- CPU time, median of the rounds' head/base ratios: {(ratio - 1) * 100:+.1f} %" in text


def test_paired_ratio_is_the_median_of_each_rounds_ratio() -> None:
    base = [{"cpu_s": c} for c in (10.0, 13.0, 9.0)]  # the machine slowed down in round 2
    head = [{"cpu_s": c} for c in (9.0, 14.3, 9.9)]
    assert ab_commits.paired(base, head, "cpu_s") == pytest.approx(1.1)  # ratios 0.9, 1.1, 1.1


def test_prefix_and_instruction_count(tmp_path: Path) -> None:
    """--instructions' parts: the first N records of a pcap (header kept), valgrind's count of a process."""
    from tests import oracle
    from tracecore.sample import sample_run

    src = sample_run() / "worker-0-tcpdump.pcap"
    prefix = tmp_path / "prefix.pcap"
    assert ab_commits.write_prefix(src, prefix, 100) == 100
    records = oracle.read_records(prefix).records
    assert [r.data for r in records] == [r.data for r in oracle.read_records(src).records[:100]]
    assert ab_commits.write_prefix(src, tmp_path / "all.pcap", 10**9) == 4531  # fewer there: all of them
    assert (tmp_path / "all.pcap").read_bytes() == src.read_bytes()
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind is missing: run `make system-deps` (scripts/install-system-deps.sh)")
    small = ab_commits.count_instructions(["/bin/true"], tmp_path, {})
    more = ab_commits.count_instructions(
        ["/bin/sh", "-c", "i=0; while [ $i -lt 1000 ]; do i=$((i+1)); done"], tmp_path, {}
    )
    assert 10_000 < small < more  # a process start is ~10^5 instructions, the loop adds to it
