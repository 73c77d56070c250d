"""The capture generator (smoke mode, real namespaces + iperf3 + DDP, generated once for the module and
ingested as tshark reads it) and the embedded sample."""

from __future__ import annotations

import collections
import math
import os
import shutil
import signal
import time
import tomllib
from pathlib import Path

import dpkt
import pytest

from bench.make_captures import MATRIX_SMALL, parse_size, parse_snaplen
from bench.ring_physics import check_ring, pair_bytes
from tests.commands import start_module
from tests.conftest import netns_made_by, require_tool
from tests.test_ingest_support import tshark
from tracecore.ingest import ingest, open_catalog
from tracecore.sample import both_directions_run, sample_root, sample_run

IPS = ["192.168.17.50", "192.168.17.51", "192.168.17.52", "192.168.17.53"]


def _check_train_log(path: Path, epochs: int, steps_per_epoch: int) -> None:
    lines = path.read_text().splitlines()
    assert lines[0] == "Type,ID,Timestamp,Loss,Accuracy"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == epochs * (steps_per_epoch + 1)
    expected_kinds = (["Batch"] * steps_per_epoch + ["Epoch"]) * epochs
    assert [r[0] for r in rows] == expected_kinds
    batch_ids = [int(r[1]) for r in rows if r[0] == "Batch"]
    assert batch_ids == list(range(steps_per_epoch)) * epochs
    assert [int(r[1]) for r in rows if r[0] == "Epoch"] == list(range(epochs))
    ts = [float(r[2]) for r in rows]
    assert ts == sorted(ts)
    assert ts[0] > 1.6e9  # Unix seconds
    for r in rows:
        loss, accuracy = float(r[3]), float(r[4])
        assert 0.0 <= accuracy <= 1.0
        # Running means of cross-entropy and accuracy over the same samples (runners/ddp_worker.py): a
        # misclassified sample has p(true class) <= 1/2, so a loss >= ln 2; a right one a loss > 0. The
        # exact values vary with the generated run; this is the bound (less the log's 6-decimal rounding).
        assert loss > 0
        assert loss >= (1.0 - accuracy) * math.log(2) - 1e-6, r


# ---- pure helpers -----------------------------------------------------------------------------
def test_parse_size_and_snaplen() -> None:
    assert parse_size("2GB") == 2_000_000_000
    assert parse_size("8G") == 8_000_000_000
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1.5GB") == 1_500_000_000
    assert parse_size("1000") == 1000
    assert parse_snaplen("full") == 262144
    assert parse_snaplen("128") == 128


def test_matrix_small_has_distinct_configurations() -> None:
    names = [c.run_name for c in MATRIX_SMALL]
    assert len(names) == len(set(names)) >= 6
    for name in names:
        fields = name.split("-")
        assert len(fields) == 7
        assert fields[0] == "torch_ddp"
        assert fields[4] == "gloo"
        assert fields[6] == "ring"
    assert "torch_ddp-resnet8w8-sgd-16-gloo-loss_1-ring" in names


# ---- the embedded sample (committed files: fast, no root needed) -------------------------------
def test_sample_layout_and_size() -> None:
    root = sample_root()
    run = sample_run()
    assert run.parent == root
    assert run.name == "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
    names = sorted(p.name for p in run.iterdir())
    assert names == ["run.toml", "train_history.log"] + [f"worker-{i}-tcpdump.pcap" for i in range(4)]
    total = sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert total <= 4_000_000
    meta = tomllib.loads((run / "run.toml").read_text())
    assert meta["run"]["backend"] == "gloo"
    assert meta["capture"]["snaplen"] == 128
    assert meta["capture"]["sender_only"] is True
    assert meta["model"]["n_params"] == 19954
    assert meta["model"]["gradient_bytes"] == 4 * 19954
    _check_train_log(run / "train_history.log", epochs=2, steps_per_epoch=15)


def test_sample_sender_only_and_ring_physics() -> None:
    run = sample_run()
    # Sender-only: every IP packet in worker-i's pcap comes from worker i.
    for i in range(4):
        with (run / f"worker-{i}-tcpdump.pcap").open("rb") as fh:
            reader = dpkt.pcap.Reader(fh)
            assert reader.snaplen == 128
            srcs = collections.Counter()
            for _ts, buf in reader:
                eth = dpkt.ethernet.Ethernet(buf)
                if isinstance(eth.data, dpkt.ip.IP):
                    srcs[eth.data.src] += 1
        assert len(srcs) == 1
        assert srcs.most_common(1)[0][0] == bytes(int(x) for x in IPS[i].split("."))
    rep = check_ring(run)
    assert rep.direction == "i -> i-1"  # gloo ring: rank i sends to rank i−1
    assert rep.expected_payload_per_rank_step == pytest.approx(119_724)
    for v in rep.payload_per_step.values():
        # payload per rank per step within +0..3 % of 2(N−1)/N·S (gloo framing on top)
        assert 1.0 <= v / rep.expected_payload_per_rank_step <= 1.03


def test_both_direction_sample_has_every_packet_twice() -> None:
    run = both_directions_run()
    meta = tomllib.loads((run / "run.toml").read_text())
    assert meta["capture"]["sender_only"] is False
    assert sum(p.stat().st_size for p in run.iterdir()) <= 1_000_000
    copies: collections.Counter = collections.Counter()
    where = collections.defaultdict(set)
    for i in range(4):
        with (run / f"worker-{i}-tcpdump.pcap").open("rb") as fh:
            for _ts, buf in dpkt.pcap.Reader(fh):
                copies[buf] += 1
                where[buf].add(i)
    assert set(copies.values()) == {2}
    # ... once at the sender and once at the receiver (two different captures).
    assert all(len(w) == 2 for w in where.values())


# ---- the generator, for real (root, namespaces, iperf3, torch) ---------------------------------
@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`bench.make_captures --smoke` run once for this module's tests: the folder it wrote."""
    for tool in ("ip", "tcpdump", "ethtool", "iperf3"):
        require_tool(tool)
    if os.geteuid() != 0:
        pytest.fail("the capture generator needs root (network namespaces)")
    out = tmp_path_factory.mktemp("smoke")
    proc = start_module("bench.make_captures", "--smoke", "--out", str(out))
    try:
        _out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert not netns_made_by(proc.pid)  # nothing of its own left behind (others' namespaces ignored)
    return out


@pytest.mark.netns
@pytest.mark.slow
def test_make_captures_smoke(smoke: Path) -> None:
    runs = sorted(p.name for p in smoke.iterdir())
    assert runs == [
        "iperf3-bulk_800kB_s128-none-0-tcp-normal-ring",
        "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring",
    ]

    # iperf3 ring: worker i sends bulk data to worker i+1; the reverse pairs carry ACKs only.
    # (iperf3 -n ends the test once its last 128 KiB block is written, and the server resets
    # the connection, so part of the last block may never reach the wire.)
    ring = smoke / runs[0]
    pb = pair_bytes(ring)
    assert set(pb) == {(IPS[i], IPS[(i + 1) % 4]) for i in range(4)} | {
        (IPS[(i + 1) % 4], IPS[i]) for i in range(4)
    }
    for i in range(4):
        data = pb[(IPS[i], IPS[(i + 1) % 4])]
        acks = pb[(IPS[(i + 1) % 4], IPS[i])]
        assert data.payload >= 50_000
        assert acks.payload < 2_000  # control-connection bytes only
        assert max(data.frames / data.packets, acks.frames / acks.packets) < 1514
    meta = tomllib.loads((ring / "run.toml").read_text())
    assert all(w["iperf3_bytes_sent"] >= 200_000 for w in meta["capture"]["worker"])
    assert all(w["dropped_by_kernel"] == 0 for w in meta["capture"]["worker"])

    # DDP: real gloo ring, paper log format, physics.
    ddp = smoke / runs[1]
    assert sorted(p.name for p in ddp.iterdir()) == ["run.toml", "train_history.log"] + [
        f"worker-{i}-tcpdump.pcap" for i in range(4)
    ]
    _check_train_log(ddp / "train_history.log", epochs=1, steps_per_epoch=3)
    meta = tomllib.loads((ddp / "run.toml").read_text())
    assert meta["model"]["gradient_bytes"] == 4 * meta["model"]["n_params"]
    assert all(w["dropped_by_kernel"] == 0 for w in meta["capture"]["worker"])
    rep = check_ring(ddp)
    assert rep.direction == "i -> i-1"
    assert 1.0 <= rep.ratio <= 1.1


@pytest.mark.netns
@pytest.mark.slow
def test_smoke_captures_ingest_like_tshark_reads_them(smoke: Path, tmp_path: Path) -> None:
    """The fresh captures ingest as tshark reads them, with the workers' addresses inferred from the
    packets (run.toml set aside), W1..W4 in address order."""
    shutil.copytree(smoke, tmp_path / "caps", copy_function=os.link)
    runs = sorted(p for p in (tmp_path / "caps").iterdir() if p.is_dir())
    assert len(runs) == 2
    for run in runs:  # infer addresses from the packets, not from the generator's notes
        (run / "run.toml").unlink()
    summary = ingest([tmp_path / "caps"], tmp_path / "out", jobs=4, parallel_min_bytes=0)
    assert not summary.failed, summary.to_json()
    con = open_catalog(tmp_path / "out")
    for run in runs:
        meta = tomllib.loads((smoke / run.name / "run.toml").read_text())
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


@pytest.mark.netns
@pytest.mark.slow
def test_make_captures_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    """SIGINT in the middle of a DDP run: exit 130, no namespace, no partial run directory."""

    for tool in ("ip", "tcpdump", "ethtool", "iperf3"):
        require_tool(tool)
    proc = start_module("bench.make_captures", "--smoke", "--out", str(tmp_path))
    partial = tmp_path / "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring.partial"
    try:
        # Wait (bounded) until the DDP run's four captures run: its testbed is up, its ranks start.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if len(list(partial.glob("worker-*-tcpdump.pcap"))) == 4:
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        else:
            pytest.fail("DDP run's captures never started")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert not netns_made_by(proc.pid)
    assert not list(tmp_path.glob("*.partial"))
    assert not (tmp_path / "torch_ddp-resnet8w4-sgd-4-gloo-normal-ring").exists()
    assert (tmp_path / "iperf3-bulk_800kB_s128-none-0-tcp-normal-ring" / "run.toml").is_file()
