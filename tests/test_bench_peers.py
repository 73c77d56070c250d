"""The peer benchmark harness, in smoke mode on the embedded sample (real tools, real files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import dpkt
import pyarrow.parquet as pq
import pytest

from tests.commands import run_module
from tests.conftest import require_tool
from tracecore.sample import sample_run

REPO = Path(__file__).resolve().parent.parent
PATHS = [
    "cat",
    "tcpdump -r",
    "dpkt loop",
    "tshark fields",
    "tracecore read",
    "tracecore ingest",
    "query link_util",
    "query flow_matrix",
]


def _sample_packets() -> tuple[int, list[int]]:
    counts = []
    for i in range(4):
        with (sample_run() / f"worker-{i}-tcpdump.pcap").open("rb") as fh:
            counts.append(sum(1 for _ in dpkt.pcap.Reader(fh)))
    return sum(counts), counts


def _peers(tmp_path: Path, *args: str) -> dict:
    proc = run_module("bench.peers", "--smoke", "--results", str(tmp_path), *args, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| path | what | wall s |" in proc.stdout
    return json.loads((tmp_path / "peers-latest.json").read_text())


@pytest.mark.slow
def test_peers_smoke_all_paths(tmp_path: Path) -> None:
    for tool in ("tcpdump", "tshark"):
        require_tool(tool)
    report = _peers(tmp_path)
    total, _ = _sample_packets()
    assert report["packets"] == total
    assert report["n_files"] == 4
    assert report["input_bytes"] == sum(p.stat().st_size for p in sample_run().glob("*.pcap"))
    res = {r["name"]: r for r in report["results"]}
    assert list(res) == PATHS
    for name in ("cat", "tcpdump -r", "dpkt loop", "tshark fields"):
        r = res[name]
        assert r["status"] == "ok", r["reason"]
        assert len(r["walls"]) == 1
        assert r["wall_s"] > 0
        assert r["peak_rss_mib"] > 0
        assert r["extrapolated"] is False
        assert r["packets_per_s"] == pytest.approx(total / r["wall_s"])
        assert r["gb_per_s"] == pytest.approx(report["input_bytes"] / r["wall_s"] / 1e9)
    assert res["dpkt loop"]["packets"] == total
    # tracecore's own paths must run: a `failed` or `unavailable` one fails the test.
    for name in PATHS[4:]:
        r = res[name]
        assert (r["status"], r["reason"]) == ("ok", ""), name
        assert len(r["walls"]) == 1, name
        assert r["wall_s"] > 0, name
        assert r["extrapolated"] is False, name
    assert res["tracecore read"]["packets"] == total
    assert res["tracecore read"]["ratio_to_tracecore"] == pytest.approx(1.0)
    assert res["cat"]["ratio_to_tracecore"] == pytest.approx(
        res["cat"]["wall_s"] / res["tracecore read"]["wall_s"]
    )
    for name in ("query link_util", "query flow_matrix"):  # measured against the ingest
        assert res[name]["ratio_to_tracecore"] == pytest.approx(
            res[name]["wall_s"] / res["tracecore ingest"]["wall_s"]
        )
    ingest = res["tracecore ingest"]
    assert ingest["status"] == "ok", ingest["reason"]
    assert 0 < ingest["inner_wall_s"] < ingest["wall_s"]  # the CLI process adds start-up
    md = (tmp_path / "peers-latest.md").read_text()
    for name in PATHS:
        assert f"| {name} |" in md
    assert "in-process (without interpreter start-up)" in md
    assert "× `tshark fields`" in md


def test_peers_prefix_extrapolation(tmp_path: Path) -> None:
    require_tool("tshark")
    report = _peers(tmp_path, "--prefix-packets", "1000", "--only", "dpkt loop", "--only", "tshark fields")
    total, counts = _sample_packets()
    res = {r["name"]: r for r in report["results"]}
    assert list(res) == ["dpkt loop", "tshark fields"]
    for r in res.values():
        assert r["status"] == "ok", r["reason"]
        assert r["extrapolated"] is True
        assert r["packets"] == sum(min(1000, c) for c in counts) == 4000
        assert r["wall_s"] == pytest.approx(r["measured_wall_s"] * total / 4000)
    assert "extrapolated from first 4,000 packets" in (tmp_path / "peers-latest.md").read_text()


def test_dpkt_loop_writes_paper_fields(tmp_path: Path) -> None:
    pcap = sample_run() / "worker-1-tcpdump.pcap"
    out = tmp_path / "w1.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.dpkt_loop", "--out", str(out), str(pcap)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    table = pq.read_table(out)
    assert int(proc.stdout) == table.num_rows
    assert table.column_names == ["ts", "src", "dst", "sport", "dport", "frame_len"]
    srcs = set(table.column("src").drop_null().to_pylist())
    assert srcs == {"192.168.17.51"}  # sender-only capture of worker 1
    # Its gradient traffic goes to worker 0 (gloo ring i → i−1): the heaviest destination.
    by_dst: dict[str, int] = {}
    for d, n in zip(table.column("dst").to_pylist(), table.column("frame_len").to_pylist(), strict=True):
        if d is not None:
            by_dst[d] = by_dst.get(d, 0) + n
    assert max(by_dst, key=by_dst.__getitem__) == "192.168.17.50"
    assert max(table.column("frame_len").to_pylist()) == 1514
