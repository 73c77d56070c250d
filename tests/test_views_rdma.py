"""`rdma_flows`, `congestion` and flow_counts' `qp` on real RoCE captures, with exact values.

Three references, none of them the views' SQL: tshark's per-flow summary of each corpus file
(expected/flow_summary.jsonl), a plain-Python reading of the rules the view headers state applied to
the stored packet rows, and the crafted run's frames, whose PSNs, QPs, ECN marks and times were
chosen by hand (tests/rdma_corpus.py).

What flow_summary's `bytes=` is, worked out by computing every candidate for every flow (test
`test_flow_summary_bytes_are_frame_bytes`): the sum of frame.len (L2 frames, as on the wire). IP
bytes (frame − 14 on these Ethernet frames), the UDP payload (l4_payload_len) and the RDMA message
bytes (rdma_payload_len) each differ from it on every flow that has an IP header. So
`rdma_flows.bytes` (frame_len) is compared with it, and `message_bytes` is checked separately.
Every summarised file reproduces exactly; none needs an exception.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path

import pandas as pd
import pytest

from tests.rdma_corpus import (
    ACK_QP,
    CRAFTED_RUN,
    MS,
    NCCL_FILES,
    NCCL_RUN,
    PSN_WRAP,
    SECOND_ACK_QP,
    SECOND_PORT,
    SHARED_QP_RUN,
    STEPS_NS,
    T0,
    WRAP_PORT,
    WRAP_QP,
    WRITE_QP,
    crafted_frames,
    flow_summary,
    make_shared_qp_run,
    open_rdma_dataset,
    shared_qp_frames,
)
from tracecore import query
from tracecore.reader import names

SUMMARY = flow_summary()
FILES = sorted(SUMMARY)
_FLOW = re.compile(r"^(\S+)>(\S+) dQP=0x([0-9a-f]+) pkts=(\d+) bytes=(\d+) psn=\[(\d+)\.\.(\d+)\]$")
_OPCODE = re.compile(r"^(\d+):(.*)=(\d+)$")
OP_COLUMNS = ("sends", "writes", "read_requests", "read_responses", "atomics", "acks", "atomic_acks", "cnps")


@pytest.fixture(scope="module")
def con():
    c = open_rdma_dataset()
    yield c
    c.close()


def flows(con, run: str, **params) -> pd.DataFrame:
    return query.run_view(con, "rdma_flows", runs=[run], params=params).to_pandas()


def address(text: str) -> str | None:
    return None if text == "lid" else text  # RoCE v1 frames: no IP header, tshark says "lid>lid"


def tshark_flows(file: str) -> dict[tuple, tuple[int, int, int, int]]:
    """(src, dst, dest QP) → (packets, bytes, psn min, psn max) of flow_summary."""
    out = {}
    for text in SUMMARY[file]["flows"]:
        src, dst, qp, pkts, nbytes, lo, hi = _FLOW.match(text).groups()
        out[(address(src), address(dst), int(qp, 16))] = (int(pkts), int(nbytes), int(lo), int(hi))
    return out


def tshark_op_column(code: int, name: str) -> str:
    """The rdma_flows column a tshark opcode name counts in (tshark's words, not tracecore's rule)."""
    if code == names.CNP_OPCODE:
        assert name.startswith("Unknown")  # tshark 4.0 has no name for the CNP (README quirk)
        return "cnps"
    for words, column in (
        ("Atomic Acknowledge", "atomic_acks"),
        ("Acknowledge", "acks"),
        ("Read Request", "read_requests"),
        ("Read Response", "read_responses"),
        ("Write", "writes"),
        ("Send", "sends"),
        ("Fetch Add", "atomics"),
        ("Compare Swap", "atomics"),
    ):
        if words in name:
            return column
    raise AssertionError(f"no column for tshark's {code}:{name}")


def key(row) -> tuple:
    src = None if pd.isna(row.src_ip) else row.src_ip
    dst = None if pd.isna(row.dst_ip) else row.dst_ip
    return (src, dst, int(row.dest_qp))


# ---- acceptance: flow_summary reproduced ----------------------------------------------------------
@pytest.mark.parametrize("file", FILES)
def test_rdma_flows_reproduce_flow_summary(con, file) -> None:
    """Every flow of every summarised file: packets, frame bytes and PSN range exactly; per file the
    opcode mix, RETH/AETH counts, ack requests and ECN marks."""
    got = flows(con, Path(file).stem)
    want = tshark_flows(file)
    have = {key(r): (r.packets, r.bytes, r.psn_min, r.psn_max) for r in got.itertuples()}
    assert have == want
    s = SUMMARY[file]
    assert got.packets.sum() == s["ib_pkts"]
    mix = Counter()
    for text in s["opcodes"]:
        code, name, count = _OPCODE.match(text).groups()
        mix[tshark_op_column(int(code), name)] += int(count)
    assert {c: int(got[c].sum()) for c in OP_COLUMNS} == {c: mix[c] for c in OP_COLUMNS}
    assert got.other_ops.sum() == 0
    assert got.reth_dma_bytes.sum() == s["reth_dmalen_sum"]
    assert got.ecn_ce.sum() == s["ecn"].get("3", 0)
    assert got.naks.sum() == sum(n for syn, n in s["aeth_syndromes"].items() if int(syn) >> 5 == 3) == 0
    rows = con.execute(
        "SELECT count(rdma_reth_dma_len), count(rdma_aeth_syndrome),"
        " count(*) FILTER (WHERE rdma_flags & 1 = 1) FROM packets WHERE run = ? AND rdma_opcode IS NOT NULL",
        [Path(file).stem],
    ).fetchall()
    assert rows == [(s["reth_pkts"], s["aeth_pkts"], s["ackreq_set"])]
    # a sequence of this corpus never skips, repeats or goes back
    assert (got[["psn_gaps", "psn_skipped", "psn_repeats", "psn_rewinds"]] == 0).all().all()


def test_flow_summary_bytes_are_frame_bytes(con) -> None:
    """flow_summary's `bytes=`: of frame, IP, UDP payload and message bytes only frame bytes fit each flow."""
    fits = Counter()
    n = 0
    for file in FILES:
        want = tshark_flows(file)
        measures = con.execute(
            "SELECT src_ip, dst_ip, rdma_dest_qp, sum(frame_len), sum(frame_len) - 14 * count(*),"
            " sum(l4_payload_len), sum(rdma_payload_len) FROM packets"
            " WHERE run = ? AND rdma_opcode IS NOT NULL"
            " GROUP BY ALL",
            [Path(file).stem],
        ).fetchall()
        for src, dst, qp, *values in measures:
            n += 1
            for name, value in zip(("frame", "ip", "udp_payload", "message"), values, strict=True):
                fits[name] += value == want[(src, dst, qp)][1]
    assert n == sum(len(SUMMARY[f]["flows"]) for f in FILES) == 39
    # UDP payload and message bytes match only the RoCE v1 ACK of scapy's file (no IP, no payload: 0 ≠ 74)
    assert fits == {"frame": 39, "ip": 0, "udp_payload": 0, "message": 0}


def test_nccl_run_joins_the_three_captures(con) -> None:
    """Three both-direction captures as one run: each directed flow once, the ring's data W1→W2→W3→W1."""
    union: dict[tuple, tuple] = {}
    for file in NCCL_FILES:
        for flow, value in tshark_flows(file).items():
            assert union.setdefault(flow, value) == value  # the two captures that saw a flow agree
    got = flows(con, NCCL_RUN)
    assert {key(r): (r.packets, r.bytes, r.psn_min, r.psn_max) for r in got.itertuples()} == union
    assert len(got) == 6
    data = got[got.message_bytes > 10_000]
    assert sorted(zip(data.src_worker, data.dst_worker, strict=True)) == [
        ("W1", "W2"),
        ("W2", "W3"),
        ("W3", "W1"),
    ]
    by_key = {key(r): r for r in got.itertuples()}
    for r in got.itertuples():  # each direction knows the other: the paired flow's dest QP is its source QP
        assert r.paired
        assert r.transport == "RC"
        back = by_key[(r.dst_ip, r.src_ip, r.src_qp)]
        assert back.src_qp == r.dest_qp
        assert back.src_port == r.src_port
    # the WRITEs carry the message bytes, the ACKs none: 44 WRITEs + 16 ACKs one way, 16 + 16 back
    assert sorted(zip(got.writes, got.acks, strict=True)) == [(16, 16)] * 3 + [(44, 16)] * 3


# ---- the crafted run: values known by construction --------------------------------------------------
def test_rdma_flows_on_the_crafted_run(con) -> None:
    sent = crafted_frames()
    got = {int(r.dest_qp): r for r in flows(con, CRAFTED_RUN).itertuples()}
    assert sorted(got) == [WRITE_QP, ACK_QP, WRAP_QP]
    base = min(s.psn for s in sent if s.dest_qp == WRITE_QP)

    write = got[WRITE_QP]
    frames = [s for s in sent if s.dest_qp == WRITE_QP]
    assert (write.src_worker, write.dst_worker, write.src_ip, write.dst_ip) == (
        "W2",
        "W1",
        "10.1.16.62",
        "10.1.16.61",
    )
    assert (write.packets, write.writes, write.messages, write.ecn_ce) == (12, 12, 4, 3)
    assert write.bytes == sum(s.frame_len for s in frames)
    assert (
        write.message_bytes == 12 * 1024 - 4 * 72
    )  # First/Middle carry 1024 payload bytes, Last 952; 4 Lasts
    assert (write.psn_min, write.psn_max, write.psn_first, write.psn_last) == (base, base + 8, base, base + 8)
    assert (write.psn_gaps, write.psn_skipped, write.psn_repeats, write.psn_rewinds) == (1, 1, 3, 1)
    assert (write.paired, write.src_qp, write.src_port, write.transport) == (True, ACK_QP, 49935, "RC")

    wrap = got[WRAP_QP]
    assert (wrap.packets, wrap.src_port, wrap.paired) == (6, WRAP_PORT, False)
    assert pd.isna(wrap.src_qp)
    assert (wrap.psn_min, wrap.psn_max, wrap.psn_first, wrap.psn_last) == (0, PSN_WRAP - 1, PSN_WRAP - 2, 5)
    assert (wrap.psn_gaps, wrap.psn_skipped, wrap.psn_repeats, wrap.psn_rewinds) == (1, 4, 1, 1)

    ack = got[ACK_QP]
    assert (ack.src_worker, ack.dst_worker, ack.packets, ack.acks, ack.cnps) == ("W1", "W2", 6, 5, 1)
    assert (ack.message_bytes, ack.ecn_ce, ack.naks) == (0, 0, 0)
    assert (ack.paired, ack.src_qp, ack.src_port, ack.transport) == (True, WRITE_QP, 49935, "RC")
    assert (ack.psn_gaps, ack.psn_repeats, ack.psn_rewinds) == (0, 0, 0)  # ACKs and CNPs are no sequence
    assert (ack.first_ns, ack.last_ns) == (T0 + MS, T0 + 29 * MS)


def test_rdma_flows_window(con) -> None:
    """from_ns/to_ns cut the flows like every windowed view: the first 10 ms hold 4 WRITEs and 2 ACKs."""
    got = {int(r.dest_qp): r for r in flows(con, CRAFTED_RUN, from_ns=0, to_ns=10 * MS).itertuples()}
    assert sorted(got) == [WRITE_QP, ACK_QP]
    assert (got[WRITE_QP].packets, got[WRITE_QP].psn_gaps, got[WRITE_QP].psn_repeats) == (4, 1, 0)
    assert (got[ACK_QP].packets, got[ACK_QP].cnps) == (2, 0)


# ---- every flow of every run against a plain-Python reading of the header's rules -----------------
def reference_flows(rows: list[dict]) -> dict[tuple, dict]:
    """rdma_flows' columns per (run, src, dst, dest QP), computed the slow, obvious way."""

    def op_of(code: int) -> str:
        if code == names.CNP_OPCODE:
            return "cnps"
        if code >= 0x80:
            return "other_ops"
        op = code & 0x1F
        for ops, column in (
            ((0, 1, 2, 3, 4, 5, 0x16, 0x17), "sends"),
            (range(6, 12), "writes"),
            ((12,), "read_requests"),
            (range(13, 17), "read_responses"),
            ((17,), "acks"),
            ((18,), "atomic_acks"),
            ((19, 20), "atomics"),
        ):
            if op in ops:
                return column
        return "other_ops"

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: (r["ts_ns"], r["rdma_psn"])):
        groups[(r["run"], r["src_ip"], r["dst_ip"], r["rdma_dest_qp"])].append(r)
    out = {}
    for flow, pkts in groups.items():
        f = Counter(op_of(p["rdma_opcode"]) for p in pkts)
        f.update(packets=len(pkts), ecn_ce=sum(p["ecn"] == 3 for p in pkts))
        f["naks"] = sum(
            p["rdma_aeth_syndrome"] is not None and 0x60 <= p["rdma_aeth_syndrome"] <= 0x7F for p in pkts
        )
        f["message_bytes"] = sum(p["rdma_payload_len"] or 0 for p in pkts)
        psns = [p["rdma_psn"] for p in pkts]
        f.update(psn_min=min(psns), psn_max=max(psns), psn_first=psns[0], psn_last=psns[-1])
        sequences: dict[tuple, list[dict]] = defaultdict(list)
        for p in pkts:
            column = op_of(p["rdma_opcode"])
            if column in ("sends", "writes", "read_requests", "atomics"):
                sequences[("request", p["rdma_deth_src_qp"])].append(p)
            elif column == "read_responses":
                sequences[("response", p["rdma_deth_src_qp"])].append(p)
        for seq in sequences.values():
            seen = set()
            for i, p in enumerate(seq):
                f["psn_repeats"] += p["rdma_psn"] in seen
                seen.add(p["rdma_psn"])
                if i == 0:
                    continue
                step = (p["rdma_psn"] - seq[i - 1]["rdma_psn"]) % PSN_WRAP
                step = step - PSN_WRAP if step >= PSN_WRAP // 2 else step
                free = seq[i - 1]["rdma_opcode"] & 0x1F in (
                    12,
                    15,
                    16,
                )  # after a READ Request / Response Last, Only
                if step <= 0:
                    f["psn_rewinds"] += 1
                elif step > 1 and not free:
                    f["psn_gaps"] += 1
                    f["psn_skipped"] += step - 1
        ports = {p["src_port"] for p in pkts if p["rdma_opcode"] != names.CNP_OPCODE}
        f["src_port"] = ports.pop() if len(ports) == 1 else None
        out[flow] = f
    for (run, src, dst, _qp), f in out.items():  # pairing: one flow each way on one UDP source port
        if f["src_port"] is None or src is None:
            continue
        same = [k for k, g in out.items() if k[:3] == (run, src, dst) and g["src_port"] == f["src_port"]]
        back = [k for k, g in out.items() if k[:3] == (run, dst, src) and g["src_port"] == f["src_port"]]
        if len(same) == 1 and len(back) == 1:
            f["src_qp"] = back[0][3]
    return out


def test_every_flow_matches_the_reference(con) -> None:
    rows = (
        con.sql("SELECT * EXCLUDE (ts) FROM packets WHERE rdma_opcode IS NOT NULL")
        .to_arrow_table()
        .to_pylist()
    )
    ref = reference_flows(rows)
    got = query.run_view(con, "rdma_flows").to_pandas()
    assert len(got) == len(ref) == 39 + 6 + 3
    checked = [*OP_COLUMNS, "other_ops", "packets", "ecn_ce", "naks", "message_bytes", "psn_min", "psn_max",
               "psn_first", "psn_last", "psn_gaps", "psn_skipped", "psn_repeats", "psn_rewinds"]  # fmt: skip
    for r in got.itertuples():
        f = ref[(r.run, *key(r))]
        assert {c: getattr(r, c) for c in checked} == {c: f[c] for c in checked}, (r.run, key(r))
        port = None if pd.isna(r.src_port) else r.src_port
        assert port == f["src_port"], (r.run, key(r))
        if r.transport != "UD":
            assert (None if pd.isna(r.src_qp) else r.src_qp) == f.get("src_qp"), (r.run, key(r))
    # the rules meet every case in these runs: both PSN sequences, free steps after READs, a wrap
    assert got.read_responses.sum() > 0
    assert got.psn_rewinds.sum() == 2
    assert set(got.transport) == {"RC", "UC", "UD", "CNP"}


def test_transport_and_ud_source_qp(con) -> None:
    """Transport names are names.TRANSPORTS'; a UD flow's source QP is its DETH source QP."""
    got = query.run_view(con, "rdma_flows").to_pandas()
    rows = con.execute(
        "SELECT run, src_ip, dst_ip, rdma_dest_qp, any_value(rdma_opcode), any_value(rdma_deth_src_qp)"
        " FROM packets WHERE rdma_opcode IS NOT NULL AND rdma_opcode <> 129 GROUP BY ALL"
    ).fetchall()
    transports = {
        (run, src, dst, qp): (names.TRANSPORTS[op & 0xE0], deth) for run, src, dst, qp, op, deth in rows
    }
    assert len(transports) == len(got) - 1  # all but the CNP-only flow of scapy's capture
    for r in got.itertuples():
        if r.transport == "CNP":
            assert (r.packets, r.cnps) == (1, 1)
            continue
        transport, deth = transports[(r.run, *key(r))]
        assert r.transport == transport
        if transport == "UD":
            assert r.src_qp == deth
    ud = got[(got.run == "linlinw5_pingpong_ud")]
    assert sorted(zip(ud.dest_qp, ud.src_qp, ud.paired, strict=True)) == [
        (0x22, 0x23, False),
        (0x23, 0x22, False),
    ]


# ---- congestion ---------------------------------------------------------------------------------
@pytest.mark.parametrize("bin_ns", [10 * MS, 4 * MS])
def test_congestion_counts_marks_and_cnps_per_link_and_bin(con, bin_ns) -> None:
    sent = crafted_frames()
    label = {"10.1.16.61": "W1", "10.1.16.62": "W2"}
    first, last = min(s.ts_ns for s in sent) // bin_ns, max(s.ts_ns for s in sent) // bin_ns
    want = {}
    for src, dst in (("W1", "W2"), ("W2", "W1")):
        for k in range(first, last + 1):
            want[(src, dst, k * bin_ns)] = [0, 0, 0]
    for s in sent:
        cell = want[(label[s.sender], "W2" if label[s.sender] == "W1" else "W1", s.ts_ns // bin_ns * bin_ns)]
        cell[0] += s.frame_len
        cell[1] += s.ecn == 3
        cell[2] += s.opcode == names.CNP_OPCODE
    got = query.run_view(con, "congestion", runs=[CRAFTED_RUN], params={"bin_ns": bin_ns}).to_pandas()
    have = {
        (r.src_worker, r.dst_worker, r.bin_start_ns): [r.bytes, r.ecn_ce, r.cnps] for r in got.itertuples()
    }
    assert have == want
    assert got.ecn_ce.sum() == 3
    assert got.cnps.sum() == 1
    assert (got.gbps == got.bytes * 8 / bin_ns).all()
    assert (got.bin_ns == bin_ns).all()
    # beside link_util: the same rows, bytes and times
    util = query.run_view(con, "link_util", runs=[CRAFTED_RUN], params={"bin_ns": bin_ns}).to_pandas()
    cols = ["run", "src_worker", "dst_worker", "bin_start_ns", "bin_ns", "t_s", "bytes", "gbps"]
    pd.testing.assert_frame_equal(got[cols], util[cols])


def test_congestion_window_and_other_runs(con) -> None:
    got = query.run_view(
        con,
        "congestion",
        runs=[CRAFTED_RUN],
        params={"bin_ns": 10 * MS, "from_ns": 10 * MS, "to_ns": 30 * MS},
    ).to_pandas()
    assert sorted(set(got.bin_start_ns)) == [T0 + 10 * MS, T0 + 20 * MS]
    cnp = got[got.cnps > 0]
    assert list(zip(cnp.src_worker, cnp.dst_worker, cnp.bin_start_ns, strict=True)) == [
        ("W1", "W2", T0 + 20 * MS)
    ]
    assert got.ecn_ce.sum() == 2  # CE frames were sent at 9, 21 and 27 ms


# ---- flow_counts' qp ----------------------------------------------------------------------------
@pytest.mark.parametrize("window", [{}, {"from_ns": 0, "to_ns": 10 * MS}])
def test_flow_counts_qp_counts_the_rdma_flows(con, window) -> None:
    counts = query.run_view(con, "flow_counts", params=window).to_pandas()
    assert set(counts.definition) == {"4tuple", "5tuple", "connection", "hostpair", "qp"}
    qp = counts[counts.definition == "qp"].set_index("run").flows
    per_run = query.run_view(con, "rdma_flows", params=window).to_pandas().groupby("run").size()
    assert qp.to_dict() == per_run.reindex(qp.index, fill_value=0).to_dict()
    if not window:
        assert qp[CRAFTED_RUN] == 3
        assert qp[NCCL_RUN] == 6
        assert qp["scapy_roce_hexcaps"] == 3  # two of them RoCE v1: no IP, counted by destination QP
        assert qp.sum() == 39 + 6 + 3
        # both directions of a QP connection go to port 4791: `connection` counts each direction; the
        # CNP (source port 0) is a 5-tuple of its own
        crafted = counts[counts.run == CRAFTED_RUN].set_index("definition").flows
        assert (crafted["5tuple"], crafted["connection"], crafted["hostpair"]) == (4, 4, 1)


# ---- two receivers whose QPs have the same number -----------------------------------------------------
@pytest.fixture(scope="module")
def shared_qp_con(tmp_path_factory: pytest.TempPathFactory):
    from tracecore.ingest import ingest, open_catalog

    root = tmp_path_factory.mktemp("shared-qp")
    summary = ingest([make_shared_qp_run(root / "runs")], root / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    c = open_catalog(root / "data", read_only=True)
    yield c
    c.close()


def test_a_flow_is_told_apart_by_its_receiver_when_receivers_share_a_qp_number(shared_qp_con) -> None:
    """A QP number names a queue pair of one receiving NIC: .62's writes to QP 0x1b of .61 and to QP 0x1b
    of .63 are two flows (and two `qp` flows in flow_counts), each paired with its own ACKs."""
    got = {key(r): r for r in flows(shared_qp_con, SHARED_QP_RUN).itertuples()}
    a61, a62, a63 = "10.1.16.61", "10.1.16.62", "10.1.16.63"
    label = {a61: "W1", a62: "W2", a63: "W3"}
    assert sorted(got) == sorted(
        [(a62, a61, WRITE_QP), (a62, a63, WRITE_QP), (a61, a62, ACK_QP), (a63, a62, SECOND_ACK_QP)]
    )
    sent = shared_qp_frames()
    for (src, dst, qp), r in got.items():
        frames = [s for s in sent if (s.src_ip, s.dst_ip, s.dest_qp) == (src, dst, qp)]
        assert (r.packets, r.bytes) == (len(frames), sum(s.frame_len for s in frames)), (src, dst, qp)
        assert (r.src_worker, r.dst_worker) == (label[src], label[dst])
    to61, to63 = got[(a62, a61, WRITE_QP)], got[(a62, a63, WRITE_QP)]
    assert (to61.writes, to61.src_qp, to61.src_port, to61.paired) == (8, ACK_QP, 49935, True)
    assert (to63.writes, to63.src_qp, to63.src_port, to63.paired) == (7, SECOND_ACK_QP, SECOND_PORT, True)
    assert (to61.psn_gaps, to63.psn_gaps, to61.psn_repeats, to63.psn_repeats) == (0, 0, 0, 0)
    assert got[(a61, a62, ACK_QP)].acks == 3
    assert got[(a63, a62, SECOND_ACK_QP)].acks == 2
    counts = query.run_view(shared_qp_con, "flow_counts").to_pandas().set_index("definition").flows
    assert (counts["qp"], counts["hostpair"]) == (4, 2)  # host pairs are undirected


# ---- the frame-counting views on RoCE runs --------------------------------------------------------
def run_packets(con, run: str) -> pd.DataFrame:
    """The run's stored packets, with the payload rule topology_check and data_per_step state: RDMA
    payload for RoCE packets, TCP/UDP payload for the others."""
    p = con.sql("SELECT * EXCLUDE (ts) FROM packets WHERE run = $run", params={"run": run}).df()
    p["payload"] = p.rdma_payload_len.where(p.rdma_payload_len.notna(), p.l4_payload_len)
    return p


def test_frame_views_count_roce_frames_like_any_other(con) -> None:
    """flow_matrix, bytes_sent and link_util on the NCCL run: every frame between two workers by frame_len,
    RoCEv2 (276 frames) and the TCP bootstrap (91) alike."""
    p = run_packets(con, NCCL_RUN)
    workers = dict(con.execute("SELECT ip, worker FROM workers WHERE run = ?", [NCCL_RUN]).fetchall())
    between = p[p.src_ip.isin(workers) & p.dst_ip.isin(workers)]
    assert (between.rdma_opcode.notna().sum(), between.rdma_opcode.isna().sum()) == (276, 91)
    pair = between.groupby([between.src_ip.map(workers), between.dst_ip.map(workers)])
    want = pair.frame_len.agg(["sum", "size"])
    matrix = query.run_view(con, "flow_matrix", runs=[NCCL_RUN]).to_pandas()
    got = matrix.set_index(["src_worker", "dst_worker"])
    assert got.bytes.to_dict() == want["sum"].to_dict()
    assert got.packets.to_dict() == want["size"].to_dict()
    sent = query.run_view(con, "bytes_sent", runs=[NCCL_RUN]).to_pandas().set_index("worker")
    assert (
        sent.bytes.to_dict()
        == p[p.src_ip.isin(workers)].groupby(p.src_ip.map(workers)).frame_len.sum().to_dict()
    )
    util = query.run_view(con, "link_util", runs=[NCCL_RUN]).to_pandas()
    assert util.groupby(["src_worker", "dst_worker"]).bytes.sum().to_dict() == want["sum"].to_dict()
    # RoCE v1 frames have no IP header: flow_matrix drops them as it drops ARP; rdma_flows keeps them
    scapy = query.run_view(con, "flow_matrix", runs=["scapy_roce_hexcaps"]).to_pandas()
    assert list(zip(scapy.src_ip, scapy.dst_ip, scapy.bytes, strict=True)) == [("10.0.17.1", "10.0.18.1", 74)]


def test_topology_check_counts_rdma_payload_on_the_nccl_ring(con) -> None:
    """The ring's data is RDMA WRITE payload; the reverse direction carries ACKs (no payload), NCCL's
    64-byte clear-to-send WRITEs and the TCP bootstrap, so the predicted ring edges hold ~97 %."""
    p = run_packets(con, NCCL_RUN)
    workers = dict(con.execute("SELECT ip, worker FROM workers WHERE run = ?", [NCCL_RUN]).fetchall())
    between = p[p.src_ip.isin(workers) & p.dst_ip.isin(workers)]
    payload = between.groupby([between.src_ip.map(workers), between.dst_ip.map(workers)]).payload.sum()
    udp = between.groupby([between.src_ip.map(workers), between.dst_ip.map(workers)]).l4_payload_len.sum()
    got = (
        query.run_view(con, "topology_check", runs=[NCCL_RUN])
        .to_pandas()
        .set_index(["src_worker", "dst_worker"])
    )
    assert got.pattern.unique().tolist() == ["ring_next"]  # backend nccl, topology ring
    assert got.payload_bytes.to_dict() == payload.to_dict()
    assert (got.payload_bytes < udp.reindex(got.index)).all()  # BTH, RETH/AETH and ICRC are not payload
    ring = got[got.predicted]
    assert sorted(ring.index) == [("W1", "W2"), ("W2", "W3"), ("W3", "W1")]
    assert ring.measured_share.sum() == pytest.approx(payload[ring.index].sum() / payload.sum(), rel=1e-12)
    assert 0.95 < ring.measured_share.sum() < 0.99
    flows_ = flows(con, NCCL_RUN).set_index(["src_worker", "dst_worker"])
    tcp = between[between.rdma_opcode.isna()]
    tcp_payload = tcp.groupby([tcp.src_ip.map(workers), tcp.dst_ip.map(workers)]).l4_payload_len.sum()
    for edge, row in got.iterrows():  # RDMA payload of the pair's QP flow + its TCP payload
        assert row.payload_bytes == flows_.message_bytes[edge] + tcp_payload.get(edge, 0), edge


def test_data_per_step_counts_rdma_payload(con) -> None:
    """The crafted run's log has 3 steps: the window (T0, T0 + 40 ms] holds 13 of its 18 WRITEs, 5 ACKs,
    the CNP; payload is the WRITEs' RDMA payload alone."""
    sent = [s for s in crafted_frames() if STEPS_NS[0] < s.ts_ns <= STEPS_NS[-1]]
    writes = [s for s in sent if s.opcode & 0x1F in (6, 7, 8)]
    assert (len(sent), len(writes)) == (19, 13)
    payload = sum(s.frame_len - 58 - 16 * (s.opcode & 0x1F == 6) for s in writes)  # less headers, RETH, ICRC
    row = query.run_view(con, "data_per_step", runs=[CRAFTED_RUN]).to_pandas().iloc[0]
    assert (row.steps, row.n_workers) == (2, 2)
    assert row.bytes == sum(s.frame_len for s in sent)
    assert row.payload_bytes == payload
    assert row.rank_payload_max == payload / 2  # W2 sent every WRITE: payload / steps
    assert row.rank_payload_min == 0  # W1 sent ACKs and the CNP: no payload


# ---- the columns are the documented contract ------------------------------------------------------
@pytest.mark.parametrize("name", ["rdma_flows", "congestion"])
def test_columns_are_those_the_header_documents(con, name) -> None:
    """Each column once, in the header's order, with integer counts (BIGINT) and QPs/PSNs as stored."""
    from tracecore.views import view_header_section

    documented = []
    for line in view_header_section(name, "Columns"):
        if not line.startswith("   "):  # continuation lines are indented under the meaning
            documented += [c.strip() for c in re.split(r"\s{2,}", line.strip())[0].split(",")]
    described = con.sql(f"DESCRIBE SELECT * FROM {name}").fetchall()
    assert [c[0] for c in described] == documented
    types = {c[0]: c[1] for c in described}
    assert {types[c] for c in documented if c not in ("run", "t_s", "gbps") and "worker" not in c} <= {
        "BIGINT",
        "UINTEGER",
        "USMALLINT",
        "BOOLEAN",
        "VARCHAR",
    }
    if name == "rdma_flows":
        assert [types[c] for c in ("dest_qp", "src_qp", "psn_min", "src_port", "psn_gaps", "packets")] == [
            "UINTEGER",
            "UINTEGER",
            "UINTEGER",
            "USMALLINT",
            "BIGINT",
            "BIGINT",
        ]
