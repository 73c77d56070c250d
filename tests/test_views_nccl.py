"""NCCL's own account beside the wire: the shared NCCL 2.20.5 ring all-reduce (3 ranks over Soft-RoCE,
../shared/corpus-rdma: each node's capture and its rank's NCCL_DEBUG=INFO log) ingested as run folders
by the real ingest, and the views asked through the real CLI.

Ranks and addresses, from the logs: rank 0 = node0 = 172.30.0.25 (W3), rank 1 = node1 = 172.30.0.11
(W1), rank 2 = node2 = 172.30.0.12 (W2); `Ring 00 : 2 -> 0 -> 1`, so data flows 0→1→2→0, i.e.
W3→W1→W2→W3. Each node's capture holds what it sent and received; ingest keeps the sender's copy.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.sample import both_directions_run

REPO = Path(__file__).resolve().parent.parent
RDMA_CORPUS = REPO.parent / "shared" / "corpus-rdma"

RING = "nccl-allreduce-none-0-nccl-0-ring"
SWAPPED = f"{RING}-r2"  # node0's and node1's logs exchanged: each beside the other's capture
ROTATED = f"{RING}-r3"  # every log beside the next node's capture
TREE = "nccl-allreduce-none-0-nccl-0-tree"  # the same files, held to NCCL's trees
NO_RDMA = f"{RING}-r4"  # the logs beside TCP-only captures (a host-side tcpdump sees no RoCE)
DAMAGED = f"{RING}-r5"  # rank 2's log cut mid-line

RING_EDGES = {("W3", "W1"), ("W1", "W2"), ("W2", "W3")}  # ranks 0→1, 1→2, 2→0
TREE_EDGES = {("W3", "W2"), ("W2", "W3"), ("W2", "W1"), ("W1", "W2")}  # Trees: 0 ↔ 2 ↔ 1


def _corpus(name: str) -> Path:
    path = RDMA_CORPUS / name
    if not path.is_file():
        pytest.fail(f"corpus missing: {path} (the shared/ folder must sit beside the checkout)")
    return path


def nccl_run_folder(root: Path, name: str, log_of_worker: dict[int, int], captures: bool = True) -> Path:
    """worker-<i>-tcpdump.pcap = node i's capture, worker-<i>-nccl.log = node log_of_worker[i]'s log."""
    folder = root / name
    folder.mkdir(parents=True)
    for i, node in log_of_worker.items():
        if captures:
            shutil.copy(_corpus(f"linlinw5_nccl_ring2_node{i}.pcap"), folder / f"worker-{i}-tcpdump.pcap")
        shutil.copy(_corpus(f"linlinw5_ring2_node{node}.log"), folder / f"worker-{i}-nccl.log")
    return folder


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def view(data: Path, name: str, run: str) -> list[dict]:
    return json.loads(cli("query", name, "--data", str(data), "-r", run, "-f", "json"))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("nccl")
    runs = root / "runs"
    nccl_run_folder(runs, RING, {0: 0, 1: 1, 2: 2})
    nccl_run_folder(runs, SWAPPED, {0: 1, 1: 0, 2: 2})
    nccl_run_folder(runs, ROTATED, {0: 1, 1: 2, 2: 0})
    nccl_run_folder(runs, TREE, {0: 0, 1: 1, 2: 2})
    tcp_only = nccl_run_folder(runs, NO_RDMA, {0: 0, 1: 1, 2: 2}, captures=False)
    for pcap in both_directions_run().glob("worker-*-tcpdump.pcap"):
        shutil.copy(pcap, tcp_only / pcap.name)
    out = root / "data"
    report = cli("ingest", str(runs), "--data", str(out), "--quiet")
    assert "warning" not in report
    return out


def test_the_ring_run_ingests_as_three_workers_with_nccls_ranks(data: Path) -> None:
    sql = f"SELECT worker, ip, n_workers FROM workers JOIN runs USING (run) WHERE run = '{RING}' ORDER BY 1"
    workers = json.loads(cli("sql", sql, "--data", str(data), "-f", "json"))
    assert workers == [
        {"worker": "W1", "ip": "172.30.0.11", "n_workers": 3},
        {"worker": "W2", "ip": "172.30.0.12", "n_workers": 3},
        {"worker": "W3", "ip": "172.30.0.25", "n_workers": 3},
    ]
    ranks = {(r["rank"], r["worker"], r["pairing"], r["file"]) for r in view(data, "nccl_rank_workers", RING)}
    assert ranks == {
        (0, "W3", "name and address", "worker-0-nccl.log"),
        (1, "W1", "name and address", "worker-1-nccl.log"),
        (2, "W2", "name and address", "worker-2-nccl.log"),
    }


def test_flow_matrix_shows_the_declared_ring_with_its_bytes(data: Path) -> None:
    got = {(r["src_worker"], r["dst_worker"]): r["bytes"] for r in view(data, "flow_matrix", RING)}
    # the ring's edges carry the data (RoCE frames, plus a few TCP rendezvous bytes to rank 0's W3);
    # the reverse edges only NCCL's clear-to-send writes and the RC ACKs
    assert got == {
        ("W1", "W2"): 36640,
        ("W2", "W3"): 38920,
        ("W3", "W1"): 38110,
        ("W2", "W1"): 3200,
        ("W1", "W3"): 5484,
        ("W3", "W2"): 4740,
    }
    assert {edge for edge, b in got.items() if b > 30000} == RING_EDGES


def test_the_measured_graph_equals_the_declared_ring_qp_by_qp(data: Path) -> None:
    rows = view(data, "nccl_topology", RING)
    assert {(r["algorithm"], r["verdict"], r["rank_problems"]) for r in rows} == {("ring", True, None)}
    by_edge = {(r["src_worker"], r["dst_worker"]): r for r in rows}
    measured = {e: (r["src_rank"], r["dst_rank"], r["data_bytes"], r["data_frames"], r["measured_qps"],
                    r["declared_qps"], r["status"]) for e, r in by_edge.items() if r["measured"]}  # fmt: skip
    assert measured == {
        ("W3", "W1"): (0, 1, 32769, 44, [35], [35], "declared and measured"),
        ("W1", "W2"): (1, 2, 32770, 44, [40], [40], "declared and measured"),
        ("W2", "W3"): (2, 0, 32769, 44, [35], [35], "declared and measured"),
    }
    # the tree's two connections NCCL set up (0→2 on QP 42, 2→1 on QP 36) stayed idle under NCCL_ALGO=Ring
    idle = {
        e: (r["declared_qps"], r["status"], r["contradicts"]) for e, r in by_edge.items() if not r["measured"]
    }
    assert idle == {("W3", "W2"): ([42], "set up, idle", False), ("W2", "W1"): ([36], "set up, idle", False)}


def test_a_log_beside_the_wrong_capture_is_reported_with_the_wrong_edges(data: Path) -> None:
    rows = view(data, "nccl_topology", SWAPPED)
    assert {r["verdict"] for r in rows} == {False}
    wrong = {(r["src_worker"], r["dst_worker"], r["status"]) for r in rows if r["contradicts"]}
    # ranks 0 and 1 put on each other's workers turn the declared ring around
    assert wrong == {
        ("W1", "W3", "declared, no data on the wire"),
        ("W3", "W2", "declared, no data on the wire"),
        ("W2", "W1", "declared, no data on the wire"),
        ("W3", "W1", "data on the wire, not declared"),
        ("W1", "W2", "data on the wire, not declared"),
        ("W2", "W3", "data on the wire, not declared"),
    }
    assert rows[0]["rank_problems"] == (
        "rank 0 (worker-1-nccl.log) lies beside W1's capture, but its address 172.30.0.25 is W3's; "
        "rank 1 (worker-0-nccl.log) lies beside W3's capture, but its address 172.30.0.11 is W1's"
    )


def test_rotated_logs_keep_the_ring_shape_but_not_its_qps(data: Path) -> None:
    """A 3-cycle moved one node on is the same cycle: the edges agree, the logs' addresses and QP
    numbers do not (W2→W3 happens to use QP 35 under both readings)."""
    rows = view(data, "nccl_topology", ROTATED)
    assert {r["verdict"] for r in rows} == {False}
    assert {(r["src_worker"], r["dst_worker"]) for r in rows if r["measured"]} == RING_EDGES
    assert {(r["src_worker"], r["dst_worker"]) for r in rows if r["ring"]} == RING_EDGES
    wrong = {(r["src_worker"], r["dst_worker"], str(r["declared_qps"]), str(r["measured_qps"]), r["status"])
             for r in rows if r["contradicts"]}  # fmt: skip
    assert wrong == {
        ("W1", "W2", "[35]", "[40]", "data on QPs the log does not declare"),
        ("W3", "W1", "[40]", "[35]", "data on QPs the log does not declare"),
    }
    assert rows[0]["rank_problems"].count("lies beside") == 3


def test_the_cli_table_names_the_verdict_and_the_contradicting_edges(data: Path) -> None:
    lines = cli("query", "nccl_topology", "--data", str(data), "-r", SWAPPED).splitlines()
    # the key (run, link), then the answer: status, data_bytes, contradicts, verdict
    assert lines[0].split()[:7] == [
        "run",
        "src_worker",
        "dst_worker",
        "status",
        "data_bytes",
        "contradicts",
        "verdict",
    ]
    body = [line for line in lines if line.startswith(f"{SWAPPED} ")]
    assert len(body) == 6
    for src, dst, status in [
        ("W1", "W3", "declared, no data on the wire"),
        ("W3", "W1", "data on the wire, not declared"),
    ]:
        row = rf"^{SWAPPED} +{src} +{dst} +{status} +\S+ +True +False +ring "
        assert any(re.search(row, line) for line in body), status
    csv = cli("query", "nccl_topology", "--data", str(data), "-r", SWAPPED, "-f", "csv")
    # lists as JSON; 1 flow (destination QP 40)
    assert '"W1","W2",0,2,false,true,true,"NET/IB","[42]",true,32770,44,1,"[40]",false,' in csv


def test_without_rdma_on_the_wire_the_verdict_is_unknown_not_true(data: Path) -> None:
    rows = view(data, "nccl_topology", NO_RDMA)
    assert {r["verdict"] for r in rows} == {None}
    assert not any(r["measured"] for r in rows)
    assert {r["pairing"] for r in view(data, "nccl_rank_workers", NO_RDMA)} == {"name"}


def test_topology_check_recognises_nccls_ring_and_tree(data: Path) -> None:
    ring = view(data, "topology_check", RING)
    assert {r["pattern"] for r in ring} == {"nccl_ring"}
    assert {(r["src_worker"], r["dst_worker"]) for r in ring if r["predicted"]} == RING_EDGES
    on_ring = sum(r["measured_share"] for r in ring if r["predicted"])
    assert on_ring > 0.96  # RDMA payload: ACKs carry none, clear-to-send writes 1 KiB per edge
    assert all(abs(r["share_deviation"]) < 0.02 for r in ring)
    tree = view(data, "topology_check", TREE)
    assert {r["pattern"] for r in tree} == {"nccl_tree"}
    assert {(r["src_worker"], r["dst_worker"]) for r in tree if r["predicted"]} == TREE_EDGES
    # these captures are a ring all-reduce: held to the tree, W3→W1 carries a third of the data unpredicted
    assert max(r["share_deviation"] for r in tree) > 0.3
    held_to_tree = view(data, "nccl_topology", TREE)
    assert {r["verdict"] for r in held_to_tree} == {False}
    assert {(r["src_worker"], r["dst_worker"]) for r in held_to_tree if r["contradicts"]} == {
        ("W3", "W1"),  # data, no tree link
        ("W2", "W1"),  # tree links without data
        ("W3", "W2"),
    }


def test_a_damaged_log_is_reported_by_file_and_line_and_the_rest_is_kept(data: Path, tmp_path: Path) -> None:
    folder = nccl_run_folder(tmp_path / "more", DAMAGED, {0: 0, 1: 1, 2: 2})
    log = folder / "worker-2-nccl.log"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([*lines[:30], "node2:4706:4726 [0] NCCL INFO Ring 00 : 1 -> 2 ->"]))
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "more"), "--data", str(data), "--quiet"])
    assert result.exit_code == 3, result.output
    report = " ".join(result.output.split())
    assert (
        f"{log}: 1 unparseable line(s); first: line 31: node2:4706:4726 [0] NCCL INFO Ring 00 : 1 -> 2 ->"
        in report
    )
    rows = view(data, "nccl_topology", DAMAGED)
    # rank 0's `Channel 00/01 : 0 1 2` still declares the whole ring: the verdict stands
    assert {r["verdict"] for r in rows} == {True}
    assert len(view(data, "nccl_rank_workers", DAMAGED)) == 3
