"""Fresh captures from the netns testbed (bench.make_captures --smoke): ingest = tshark, IPs inferred."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.test_ingest_support import tshark
from tracecore.ingest import ingest, open_catalog

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.netns
@pytest.mark.slow
def test_smoke_captures_ingest_like_tshark_reads_them(tmp_path: Path) -> None:
    made = subprocess.run(
        [sys.executable, "-m", "bench.make_captures", "--smoke", "--out", str(tmp_path / "caps")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr
    runs = sorted(p for p in (tmp_path / "caps").iterdir() if p.is_dir())
    assert len(runs) == 2
    for run in runs:  # infer addresses from the packets, not from the generator's notes
        (run / "run.toml").rename(run / "run.toml.orig")
    summary = ingest([tmp_path / "caps"], tmp_path / "out", jobs=4, parallel_min_bytes=0)
    assert not summary.failed, summary.to_json()
    con = open_catalog(tmp_path / "out")
    for run in runs:
        meta = tomllib.loads((run / "run.toml.orig").read_text())
        ips = {w["file"]: w["ip"] for w in meta["capture"]["worker"]}
        for i, pcap in enumerate(sorted(run.glob("worker-*-tcpdump.pcap"))):
            got = con.execute(
                "SELECT w.worker, w.ip, count(*), sum(p.frame_len)"
                " FROM packets p JOIN workers w USING (run, worker)"
                " WHERE p.run = ? AND w.capture = ? GROUP BY ALL",
                [run.name, pcap.name.removesuffix(".pcap")],
            ).fetchone()
            assert got[:2] == (f"W{i + 1}", ips[pcap.name])  # .50 → W1 … .53 → W4
            assert got[2:] == tshark(pcap)
        parsed = con.execute(
            "SELECT name_parsed, n_workers, capture_mode FROM runs WHERE run = ?", [run.name]
        )
        assert parsed.fetchone() == (True, 4, "sender-only")
