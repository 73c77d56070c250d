"""tcp_health against tshark 4.0's `tcp.analysis.*` flags, flow by flow: on every file of the shared
corpus with TCP, and on a real capture with loss made by the netns testbed's nftables rule.

tshark runs in the test (expected/ predates these fields). Each flow's counts must equal tshark's; the one
difference by design is the RTT: tshark samples an ACK of a sequence end that was sent twice (from
the later send), the view does not (Karn), so such ACKs are left out of tshark's samples here.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import netns_made_by, require_tool
from tests.runs import check_loss
from tests.test_reader_corpus import ERRORS, FILES, TSHARK_SUBSECOND_OVERFLOW, read_all
from tests.test_runners_run import TINY
from tracecore.cli.app import app
from tracecore.ingest import ingest, open_catalog

ANALYSIS = ("retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
            "duplicate_ack", "zero_window", "window_full", "ack_rtt", "acks_frame")  # fmt: skip
COUNTS = (
    "retransmissions",
    "spurious_retransmissions",
    "out_of_order",
    "dup_acks",
    "zero_window",
    "window_full",
)


def tshark_frames(path: Path) -> list[dict]:
    """tshark's analysis of every frame: its outermost TCP header's flags, ends and RTT."""
    fields = ["frame.number", "tcp.len", "tcp.seq_raw", "tcp.flags", *(f"tcp.analysis.{a}" for a in ANALYSIS)]
    argv = [require_tool("tshark"), "-n", "-r", str(path), "-o", "ip.defragment:FALSE", "-o",
            "ipv6.defragment:FALSE", "-T", "fields", "-E", "header=y", "-E", "separator=/t", "-E",
            "occurrence=f", *(arg for f in fields for arg in ("-e", f))]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout  # 2: a file cut short
    return list(csv.DictReader(out.splitlines(), delimiter="\t"))


def side_first(path: Path, dst: Path, rows: list[dict], side: str) -> list[int]:
    """`path` (a little-endian µs pcap) written to `dst` with each microsecond's packets sent from
    address `side` before the others' (each address's own order kept, stable): what tcp_health takes a
    packet of `side` to follow, since the reverse flow's packets of its own microsecond count as later.
    Returns the index in `path` of each frame written."""
    data = path.read_bytes()
    records = list(pcap_records(data))
    assert len(records) == len(rows)
    order = sorted(range(len(rows)), key=lambda i: (records[i][2], rows[i]["src_ip"] != side))
    with dst.open("wb") as out:
        out.write(data[:24])
        for i in order:
            frame, cap, _ = records[i]
            out.write(data[frame - 16 : frame + cap])
    return order


def tshark_frames_as_view(path: Path, rows: list[dict], scratch: Path) -> list[dict]:
    """tshark's analysis of each frame of `path` (a capture of both directions, from two hosts merged
    or one), each read with the reverse flow's packets of its microsecond after it, as tcp_health
    takes them: the analysis of an address's frames is tshark's on `path` reordered by `side_first`
    for that address (which of two hosts' packets of one microsecond came first is not in their
    captures; tshark follows the order of the merged file, mergecap's choice)."""
    sides = sorted({r["src_ip"] for r in rows if r["tcp_window"] is not None})
    frames: list[dict | None] = [None] * len(rows)
    for side in sides:
        reordered = scratch / f"side-{side}.pcap"
        order = side_first(path, reordered, rows, side)
        for pos, f in enumerate(tshark_frames(reordered)):
            i = order[pos]
            if rows[i]["src_ip"] == side or (rows[i]["src_ip"] not in sides and side == sides[0]):
                acks = f["tcp.analysis.acks_frame"]
                frames[i] = f | {
                    "frame.number": str(i + 1),
                    "tcp.analysis.acks_frame": acks and str(order[int(acks) - 1] + 1),
                }
    assert None not in frames
    return frames  # type: ignore[return-value]


def tshark_flows(path: Path, rows: list[dict], frames: list[dict] | None = None) -> dict[tuple, dict]:
    """Per directed flow (src ip, port, dst ip, port) of the frames whose outermost transport is TCP
    (`rows`: tracecore's, frame by frame; tshark's first tcp.* of a 6in4 or L2TP frame is the inner
    one, which tracecore does not read): tshark's counts and RTT samples (Karn's rule applied), from
    its analysis of `path` in file order unless `frames` gives another."""
    frames = tshark_frames(path) if frames is None else frames
    assert len(frames) == len(rows)
    flows: dict[tuple, dict] = defaultdict(lambda: Counter())
    rtts: dict[tuple, list[float]] = defaultdict(list)
    sends: Counter = Counter()
    end_of: dict[str, tuple] = {}
    for row, f in zip(rows, frames, strict=True):
        if row["tcp_window"] is None:
            continue
        key = (row["src_ip"], row["src_port"], row["dst_ip"], row["dst_port"])
        c = flows[key]
        c["packets"] += 1
        a = {name: f[f"tcp.analysis.{name}"] for name in ANALYSIS}
        c["retransmissions"] += bool(
            a["retransmission"] or a["fast_retransmission"] or a["spurious_retransmission"]
        )
        c["spurious_retransmissions"] += bool(a["spurious_retransmission"])
        c["out_of_order"] += bool(a["out_of_order"])
        c["dup_acks"] += bool(a["duplicate_ack"])
        c["zero_window"] += bool(a["zero_window"])
        c["window_full"] += bool(a["window_full"])
        span = int(f["tcp.len"] or 0) + bool(int(f["tcp.flags"] or "0", 16) & 3)  # "": a header cut short
        if span:
            end = (key, (int(f["tcp.seq_raw"]) + span) % 2**32)
            sends[end] += 1
            end_of[f["frame.number"]] = end
        if a["ack_rtt"]:
            acked = end_of[a["acks_frame"]]
            rtts[acked[0]].append((acked, float(a["ack_rtt"]) * 1e6))
    for key, samples in rtts.items():
        kept = [us for end, us in samples if sends[end] == 1]
        flows[key]["rtt"] = kept  # type: ignore[assignment]
    return flows


def view_flows(con, run: str) -> dict[tuple, dict]:
    cols = (
        "packets",
        "payload_bytes",
        *COUNTS,
        "window_scale",
        "rtt_samples",
        "rtt_min_us",
        "rtt_median_us",
        "rtt_max_us",
    )
    got = con.execute(
        f"SELECT src_ip, src_port, dst_ip, dst_port, {', '.join(cols)} FROM tcp_health(runs := [?])", [run]
    ).fetchall()
    return {tuple(r[:4]): dict(zip(cols, r[4:], strict=True)) for r in got}


def ingested_flows(captures: Path, data: Path) -> tuple[dict[tuple, dict], bool]:
    """`view_flows` of `captures` (one run) ingested into `data`, and whether any flow's reverse was seen."""
    assert not ingest([captures], data, jobs=1).failed
    con = open_catalog(data)
    try:
        (run,) = con.execute("SELECT DISTINCT run FROM _files").fetchall()[0]
        reverse = con.execute("SELECT bool_or(reverse_seen) FROM tcp_health").fetchall()[0][0]
        return view_flows(con, run), reverse
    finally:
        con.close()


def compare(got: dict[tuple, dict], want: dict[tuple, dict], where: str) -> Counter:
    """Every flow's counts equal; the RTT samples' count, min, median and max equal to the µs (the count
    only where tshark's clock is wrong: TSHARK_SUBSECOND_OVERFLOW)."""
    assert set(got) == set(want), where
    total: Counter = Counter()
    for key, w in want.items():
        g = got[key]
        view, shark = ({c: d[c] for c in ("packets", *COUNTS)} for d in (g, w))
        assert view == shark, f"{where} {key}: view {view}, tshark {shark}"
        rtt = w.get("rtt", [])
        assert g["rtt_samples"] == len(rtt), (where, key)
        if rtt and where not in TSHARK_SUBSECOND_OVERFLOW:
            assert (g["rtt_min_us"], g["rtt_max_us"]) == pytest.approx((min(rtt), max(rtt)), abs=1), (
                where,
                key,
            )
            assert g["rtt_median_us"] == pytest.approx(statistics.median(rtt), abs=1), (where, key)
        total.update({c: g[c] for c in (*COUNTS, "rtt_samples")})
    return total


@pytest.fixture(scope="module")
def tcp_corpus(corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The corpus files with TCP, one run each."""
    names = [
        n
        for n in FILES
        if n not in ERRORS and any(r["tcp_window"] is not None for r in _rows(corpus_dir / n))
    ]
    out = tmp_path_factory.mktemp("tcp") / "data"
    summary = ingest([corpus_dir / n for n in names], out, jobs=1)
    assert not summary.failed
    return out, names


def _rows(path: Path) -> list[dict]:
    return read_all(path, batch_rows=1 << 20)[0]


def test_every_tcp_flow_of_the_corpus_matches_tshark(corpus_dir: Path, tcp_corpus) -> None:
    out, names = tcp_corpus
    assert len(names) == 17  # test_reader_corpus.TCP_PACKETS_COMPARED's files
    con = open_catalog(out)
    try:
        runs = dict(con.execute("SELECT file, run FROM _files").fetchall())
        total: Counter = Counter()
        for name in names:
            (run,) = {r for f, r in runs.items() if Path(f).name == name}
            rows = _rows(corpus_dir / name)
            total += compare(view_flows(con, run), tshark_flows(corpus_dir / name, rows), name)
    finally:
        con.close()
    # not vacuous: the corpus has retransmissions and dup ACKs (dpkt__http, tcpreplay, pptp, VLAN-tagged zeek)
    assert (total["retransmissions"], total["dup_acks"]) == (11, 9), total
    assert total["rtt_samples"] > 150, total


def write_capture(path: Path, packets: list[tuple]) -> None:
    """A pcap of one connection, 10.0.0.1:40000 (a) and 10.0.0.2:29611 (b): packets (µs after the first,
    from a, seq, ack, flags, window, payload bytes)."""
    import dpkt

    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    with path.open("wb") as fh:
        out = dpkt.pcap.Writer(fh)
        for t_us, fwd, seq, ack, flags, win, n in packets:
            tcp = dpkt.tcp.TCP(sport=40000 if fwd else 29611, dport=29611 if fwd else 40000, seq=seq, ack=ack,
                               flags=flags, win=win, data=bytes(n))  # fmt: skip
            ip = dpkt.ip.IP(
                src=a if fwd else b, dst=b if fwd else a, p=dpkt.ip.IP_PROTO_TCP, ttl=64, data=tcp
            )
            ip.len += len(tcp)
            eth = dpkt.ethernet.Ethernet(
                src=b"\x02" * 6, dst=b"\x04" * 6, type=dpkt.ethernet.ETH_TYPE_IP, data=ip
            )
            out.writepkt(bytes(eth), ts=1_700_000_000 + t_us / 1e6)


SYN, ACK = 2, 16


def keep_alive_capture(path: Path) -> None:
    """A zero window closed by a window update that the sender never sees: its next zero-window probe
    (0 bytes at next − 1, a keep-alive) is answered with the same ack and window as the update, which is
    an ACK of a keep-alive, not a duplicate ACK; a later ACK of the same number after a data segment
    past a hole is one. The sequence of the 5 %-loss run that once differed from tshark (dup ACKs 136
    against 135) under load."""
    packets = [  # (from a, seq, ack, flags, window, payload bytes)
        (True, 1000, 0, SYN, 64000, 0),
        (False, 5000, 1001, SYN | ACK, 64000, 0),
        (True, 1001, 5001, ACK, 64000, 0),
        (True, 1001, 5001, ACK, 64000, 100),
        (False, 5001, 1101, ACK, 0, 0),  # zero window
        (True, 1100, 5001, ACK, 64000, 0),  # zero-window probe: a keep-alive
        (False, 5001, 1101, ACK, 0, 0),
        (False, 5001, 1101, ACK, 1000, 0),  # the window update, lost on its way
        (True, 1100, 5001, ACK, 64000, 0),  # probed again
        (False, 5001, 1101, ACK, 1000, 0),  # its answer: same ack, same window
        (True, 1201, 5001, ACK, 64000, 100),  # past a hole at 1101
        (False, 5001, 1101, ACK, 1000, 0),  # a duplicate ACK
    ]
    write_capture(path, [(i * 10_000, *packet) for i, packet in enumerate(packets)])


def test_an_ack_of_a_keep_alive_is_no_duplicate_ack(tmp_path: Path) -> None:
    capture = tmp_path / "runs" / "keepalive" / "worker-0-tcpdump.pcap"
    capture.parent.mkdir(parents=True)
    keep_alive_capture(capture)
    want = tshark_flows(capture, _rows(capture))
    data = tmp_path / "data"
    assert not ingest([capture.parent], data, jobs=1).failed
    con = open_catalog(data)
    try:
        got = view_flows(con, "keepalive")
    finally:
        con.close()
    compare(got, want, "keep-alive")
    acks = got[("10.0.0.2", 29611, "10.0.0.1", 40000)]
    assert (acks["dup_acks"], acks["zero_window"]) == (1, 2)  # before: 2 dup ACKs, tshark 1


# A segment lost on the wire (2001), the receiver's ACK and duplicate ACKs of it, and the sender's
# re-sends; in two microseconds the receiver sends two ACKs, which a capture may hold in either order:
# at 402 a duplicate ACK and a window update of the same number, at 420 a duplicate ACK and the ACK of
# everything (the re-send at 410 filled the hole), before a needless re-send at 430.
LOST_SEGMENT = [
    (0, True, 1000, 0, SYN, 1000, 0),
    (100, False, 5000, 1001, SYN | ACK, 1000, 0),
    (200, True, 1001, 5001, ACK, 1000, 0),
    (300, True, 1001, 5001, ACK, 1000, 1000),
    (301, True, 2001, 5001, ACK, 1000, 1000),
    (302, True, 3001, 5001, ACK, 1000, 1000),
    (303, True, 4001, 5001, ACK, 1000, 1000),
    (400, False, 5001, 2001, ACK, 1000, 0),
    (401, False, 5001, 2001, ACK, 1000, 0),
]
TIES = (
    [(402, False, 5001, 2001, ACK, 1000, 0), (402, False, 5001, 2001, ACK, 900, 0)],
    [(420, False, 5001, 2001, ACK, 1000, 0), (420, False, 5001, 5001, ACK, 1000, 0)],
)
RESENT = ([(410, True, 2001, 5001, ACK, 1000, 1000)], [(430, True, 2001, 5001, ACK, 1000, 1000)])


def test_packets_of_one_microsecond_give_the_same_rows_in_either_order(tmp_path: Path) -> None:
    """The same packets, those of one microsecond in either order in the file, on 1 and 4 threads: the
    same rows of tcp_health and tcp_segments. A flow's packets are taken in one order of their own (time,
    then sequence number, length, ack, flags, window), and the reverse flow's last packet before a
    segment is the last of its microsecond in that order. Before, the file's order and the threads
    decided whether the ACK after the window update was a duplicate (window unchanged), so whether the
    re-send at 410 was fast (a retransmission) or out-of-order (tshark reads the file's order: fast in
    one file, out-of-order in the other); and which ACK of 420 the re-send at 430 was judged by."""
    for name, order in (("first", 1), ("second", -1)):
        (tmp_path / "runs" / name).mkdir(parents=True)
        packets = LOST_SEGMENT + TIES[0][::order] + RESENT[0] + TIES[1][::order] + RESENT[1]
        write_capture(tmp_path / "runs" / name / "worker-0-tcpdump.pcap", packets)
    assert not ingest([tmp_path / "runs"], tmp_path / "data", jobs=1).failed
    con = open_catalog(tmp_path / "data", unsafe=True)  # unsafe: a locked connection keeps its threads
    answers = Counter()
    try:
        for threads in (1, 4, 1, 4):
            con.execute(f"SET threads = {threads}")
            for run in ("first", "second"):
                health = con.execute(
                    "SELECT * EXCLUDE (run) FROM tcp_health(runs := [?]) ORDER BY ALL", [run]
                ).fetchall()
                segments = con.execute(
                    "SELECT * EXCLUDE (flow, back) FROM tcp_segments(runs := [?]) ORDER BY ALL", [run]
                ).fetchall()
                answers[repr((health, segments))] += 1
        counts = con.execute(
            "SELECT src_port, retransmissions, spurious_retransmissions, out_of_order, dup_acks "
            "FROM tcp_health ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    assert list(answers.values()) == [8], answers
    # 402: the window update first (900 < 1000), so the duplicate ACK after it changed the window: the
    # re-send at 410 had one duplicate ACK before it, out-of-order; 420: the ACK of 5001 last (ack order),
    # so the re-send at 430 is of data already acknowledged: spurious
    assert counts == [(29611, 0, 0, 0, 2)] * 2 + [(40000, 1, 1, 1, 0)] * 2


B_ISN = 3_353_798_725  # ≥ 2^31, as half of all initial sequence numbers

# Segments whose class depends on one of tshark's tests that the corpus and the loss run rarely reach
# (SYN, SYN+ACK and ACK at 0, 100, 200 µs unless said; a sends 1001-2000 at 300 µs):
RULES = {
    # a retransmitted SYN in the microsecond of the handshake's ACK: that RTT is 0, which tshark takes for
    # none and measures again at the next packet with ACK, 100 µs after the SYN: segments re-sent 0.5 ms
    # and 4 ms after `next` are retransmissions (from the first SYN, 5 ms, both were out-of-order; with
    # the 3 ms default, the first)
    "syn-again": [
        (0, True, 1000, 0, SYN, 1000, 0),
        (5000, True, 1000, 0, SYN, 1000, 0),
        (5000, False, 5000, 1001, SYN | ACK, 1000, 0),
        (5000, True, 1001, 5001, ACK, 1000, 0),
        (5100, True, 1001, 5001, ACK, 1000, 1000),
        (5101, True, 2001, 5001, ACK, 1000, 1000),
        (5601, True, 1001, 5001, ACK, 1000, 1000),
        (9101, True, 2001, 5001, ACK, 1000, 1000),
    ],
    # 100 bytes from next − 1 (after a zero-window probe of the byte before, say): new data, no flag
    "next-minus-one": [(400, True, 2000, 5001, ACK, 1000, 100)],
    # the capture missed 2001-3000, b acknowledged it, a sends it: at `next`, not behind, yet data
    # already acknowledged: a spurious retransmission
    "acked-unseen": [(400, False, 5001, 3001, ACK, 1000, 0), (500, True, 2001, 5001, ACK, 1000, 1000)],
    # b acknowledged everything a sent (the ACK the loss rule then drops, say); a re-sends 2001-3000
    # soon after: out-of-order by that test alone, a spurious retransmission by tshark's first
    "acked-soon": [
        (301, True, 2001, 5001, ACK, 1000, 1000),
        (302, True, 3001, 5001, ACK, 1000, 1000),
        (350, False, 5001, 4001, ACK, 1000, 0),
        (360, True, 2001, 5001, ACK, 1000, 1000),
    ],
    # a re-sends 2001-3000, ending at `next`, long after, then 1001-2000: `next` was reached at 301 µs,
    # not again by the re-send (tshark keeps the first packet's time), so the second is a retransmission
    "resent-to-next": [
        (301, True, 2001, 5001, ACK, 1000, 1000),
        (2000, True, 2001, 5001, ACK, 1000, 1000),
        (2050, True, 1001, 5001, ACK, 1000, 1000),
    ],
    # the connection re-sends its last segment, and a new one on the same ports starts lower (SYN at
    # 7000 < 2001): a new connection to tshark ("port numbers reused"), whose SYN and data are no
    # retransmissions of the old one's
    "ports-reused": [
        (5000, True, 1001, 5001, ACK, 1000, 1000),
        (1_000_000, True, 7000, 0, SYN, 1000, 0),
        (1_000_100, False, 9000, 7001, SYN | ACK, 1000, 0),
        (1_000_200, True, 7001, 9001, ACK, 1000, 0),
        (1_000_300, True, 7001, 9001, ACK, 1000, 1000),
    ],
    # only a's side captured: 10,000 segments, a FIN 1 ms later, a re-send 50 µs after it; tshark keeps
    # 10,000 segments no ACK removed, and the FIN beyond them moves `next` by its payload only: `next` was
    # reached by the last segment, 1 ms before, and the re-send is a retransmission (the sender-side
    # file alone of the loss run met it)
    "fin-after-10000": [
        (0, True, 1000, 0, SYN, 1000, 0),
        (200, True, 1001, 5001, ACK, 1000, 0),
        *((300 + i, True, 1001 + 100 * i, 5001, ACK, 1000, 100) for i in range(10_000)),
        (11_300, True, 1_001_001, 5001, ACK | 1, 1000, 0),
        (11_350, True, 1001, 5001, ACK, 1000, 100),
    ],
    # b refused the first SYN (RST, sequence number 0), the RST was lost, a sent the SYN again 1 s later:
    # b's SYN+ACK starts its flow afresh, and its ACKs of the hole at 2001 are duplicate ACKs (before,
    # its initial sequence number ≥ 2^31 lay 2^31 below the RST's 0, which stayed b's `next`: no
    # duplicate ACK, no keep-alive; the loss run's retried connections met it)
    "refused-first": [
        (0, True, 1000, 0, SYN, 1000, 0),
        (50, False, 0, 1001, ACK | 4, 0, 0),
        (1_000_000, True, 1000, 0, SYN, 1000, 0),
        (1_000_100, False, B_ISN, 1001, SYN | ACK, 1000, 0),
        (1_000_200, True, 1001, B_ISN + 1, ACK, 1000, 0),
        (1_000_300, True, 1001, B_ISN + 1, ACK, 1000, 1000),
        (1_000_301, True, 2001, B_ISN + 1, ACK, 1000, 1000),
        (1_000_302, True, 3001, B_ISN + 1, ACK, 1000, 1000),
        (1_000_400, False, B_ISN + 1, 2001, ACK, 1000, 0),
        (1_000_401, False, B_ISN + 1, 2001, ACK, 1000, 0),
        (1_000_402, False, B_ISN + 1, 2001, ACK, 1000, 0),
    ],
}
HANDSHAKE = [
    (0, True, 1000, 0, SYN, 1000, 0),
    (100, False, 5000, 1001, SYN | ACK, 1000, 0),
    (200, True, 1001, 5001, ACK, 1000, 0),
    (300, True, 1001, 5001, ACK, 1000, 1000),
]


def test_tsharks_rules_on_crafted_segments(tmp_path: Path) -> None:
    for name, packets in RULES.items():
        (tmp_path / "runs" / name).mkdir(parents=True)
        write_capture(
            tmp_path / "runs" / name / "worker-0-tcpdump.pcap",
            packets if packets[0][3] == 0 else HANDSHAKE + packets,  # its own handshake, or the usual
        )
    assert not ingest([tmp_path / "runs"], tmp_path / "data", jobs=1).failed
    con = open_catalog(tmp_path / "data")
    try:
        got = {name: view_flows(con, name) for name in RULES}
    finally:
        con.close()
    sent = ("10.0.0.1", 40000, "10.0.0.2", 29611)
    for name in RULES:
        capture = tmp_path / "runs" / name / "worker-0-tcpdump.pcap"
        compare(got[name], tshark_flows(capture, _rows(capture)), name)
    counts = {
        name: tuple(
            got[name][sent][c] for c in ("retransmissions", "spurious_retransmissions", "out_of_order")
        )
        for name in RULES
    }
    assert counts == {
        "syn-again": (3, 0, 0),
        "next-minus-one": (0, 0, 0),
        "acked-unseen": (1, 1, 0),
        "acked-soon": (1, 1, 0),
        "resent-to-next": (2, 0, 0),
        "ports-reused": (1, 0, 0),
        "fin-after-10000": (1, 0, 0),
        "refused-first": (1, 0, 0),  # the SYN sent again
    }
    assert got["refused-first"][sent[2:] + sent[:2]]["dup_acks"] == 2


def test_describe_prints_the_rules_in_tsharks_order() -> None:
    result = CliRunner().invoke(app, ["query", "tcp_health", "--describe"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    rules = lines[
        lines.index("Rules:") + 1 : next(i for i, t in enumerate(lines) if t.startswith("Parameters"))
    ]
    assert "tcp_analyze_sequence_number" in rules[0]
    tests = [t.split()[1] for t in rules if t.lstrip()[:2] in ("1.", "2.", "3.", "4.")]
    assert tests == ["spurious", "fast", "out-of-order", "retransmission"]
    for flag in (
        "spurious_retransmission",
        "fast_retransmission",
        "out_of_order",
        "duplicate_ack",
        "window_full",
    ):
        assert flag in "\n".join(rules), flag


# rank 0 reads one TCP stream to its end, through a small receive buffer it leaves full (zero windows,
# segments that fill the window): it starts reading once ≥ 16 KiB wait unread and none came for 0.5 s
# (at most 20 s), not after a fixed time, which an early loss's retransmission timeout (0.2 s, doubling)
# could outlast with the window still open; rank 1 sends it 4 MB (retrying until rank 0 listens).
# Meanwhile both send each other 16 MB over a second connection (port 29612) with default buffers, as a
# ring all-reduce's neighbours do: under loss the sender re-sends data whose ACK the capture holds but
# the loss rule dropped after it, soon after new data (tshark's spurious retransmissions)
TRANSFER = (
    "import fcntl,socket,struct,sys,termios,threading,time\n"
    "rank, host = int(sys.argv[1]), sys.argv[2]\n"
    "def connect(port):\n"
    "    for _ in range(200):\n"
    "        try: return socket.create_connection((host, port))\n"
    "        except OSError: time.sleep(0.05)\n"
    "def accept(port, rcvbuf=0):\n"
    "    srv = socket.socket()\n"
    "    if rcvbuf: srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)\n"
    "    srv.bind(('0.0.0.0', port)); srv.listen(); return srv.accept()[0]\n"
    "def both_ways(n=16 << 20):\n"
    "    c = accept(29612) if rank == 0 else connect(29612)\n"
    "    def drain():\n"
    "        got = 0\n"
    "        while got < n: got += len(c.recv(1 << 20))\n"
    "    t = threading.Thread(target=drain); t.start(); c.sendall(bytes(n)); t.join(); c.close()\n"
    "bulk = threading.Thread(target=both_ways); bulk.start()\n"
    "if rank == 0:\n"
    "    c = accept(29611, 16384); seen = -1\n"
    "    for _ in range(40):\n"
    "        time.sleep(0.5); unread = struct.unpack('i', fcntl.ioctl(c, termios.FIONREAD, bytes(4)))[0]\n"
    "        if unread == seen >= 16384: break\n"
    "        seen = unread\n"
    "    while c.recv(1 << 16): pass\n"
    "else:\n"
    "    s = connect(29611); s.sendall(bytes(4 << 20)); s.close()\n"
    "bulk.join()\n"
)


@pytest.fixture(scope="module")
def loss_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two hosts of the netns testbed, 5 % loss by the nftables rule, running TRANSFER, each host
    capturing what it sends (the paper's sender side): the run folder and its two captures merged."""
    for tool in ("tcpdump", "nft", "mergecap"):
        require_tool(tool)
    tmp_path = tmp_path_factory.mktemp("loss")
    out = tmp_path / "pcaps"
    program = json.dumps([sys.executable, "-c", TRANSFER, "{rank}", "{master_addr}"])  # a TOML array
    text = TINY.format(out=out, python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    exp = tmp_path / "loss.toml"
    exp.write_text(
        text.replace("loss = [0, 1]", "loss = [5]").replace("[launcher]", f"[launcher]\nprogram = {program}")
    )
    res = CliRunner().invoke(app, ["run", str(exp)])
    assert res.exit_code == 0, res.output
    assert not netns_made_by(os.getpid())
    (run_dir,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith("_")]
    check_loss(tomllib.loads((run_dir / "run.toml").read_text()), 5.0)
    captures = sorted(run_dir.glob("worker-*-tcpdump.pcap"))
    merged = tmp_path / "merged.pcap"
    subprocess.run(["mergecap", "-F", "pcap", "-w", str(merged), *map(str, captures)], check=True)
    return run_dir, merged


@pytest.mark.netns
@pytest.mark.slow
def test_a_real_loss_run_matches_tshark(loss_run: tuple[Path, Path], tmp_path: Path) -> None:
    """The view, over both workers' files, counts what tshark counts on the two captures merged (each
    host's packets read before the other's of the same microsecond: `tshark_frames_as_view`); the 4 MB
    transfer's data flow has retransmissions and its ACK flow duplicate ACKs; the run has spurious
    retransmissions (0 to a few hundred per connection; in about half the runs some sent soon after
    `next` was reached, out-of-order by that test alone: tshark tests "already acknowledged" first;
    RULES' "acked-soon" always has one). The sender's file alone (one direction):
    the view counts what tshark counts on that file, with no RTT and no window_full for a flow whose
    reverse is missing."""
    run_dir, merged = loss_run
    got, _ = ingested_flows(run_dir, tmp_path / "data")
    rows = _rows(merged)
    want = tshark_flows(merged, rows, tshark_frames_as_view(merged, rows, tmp_path))
    total = compare({k: got[k] for k in want}, want, "merged")
    # the transfer's connection (connection attempts before rank 0 listened are flows of their own)
    data_flow = max((k for k in want if k[3] == 29611), key=lambda k: want[k]["packets"])
    ack_flow = (data_flow[2], data_flow[3], data_flow[0], data_flow[1])
    assert got[ack_flow]["dup_acks"] > 0, got
    assert got[data_flow]["retransmissions"] > 0, got
    assert got[ack_flow]["zero_window"] > 0, got
    assert got[data_flow]["window_full"] > 0, got
    assert got[data_flow]["payload_bytes"] >= 4 << 20, got
    assert total["rtt_samples"] > 100, total
    assert total["spurious_retransmissions"] > 0, total  # both connections have some, neither always

    # the sender's file alone: one direction
    sender = next(p for p in sorted(run_dir.glob("worker-*-tcpdump.pcap")) if p.name.startswith("worker-1"))
    one, reverse = ingested_flows(sender, tmp_path / "alone")
    shark = tshark_flows(sender, _rows(sender))
    compare(one, shark, "sender alone")
    # without the receiver's duplicate ACKs no fast retransmission is recognised: one sent soon after
    # the highest segment passes for out-of-order, in tshark's count as in the view's
    moved = one[data_flow]["out_of_order"] - got[data_flow]["out_of_order"]
    assert got[data_flow]["retransmissions"] - one[data_flow]["retransmissions"] == moved >= 0, (one, got)
    assert (one[data_flow]["rtt_samples"], one[data_flow]["window_full"], reverse) == (0, 0, False)


def pcap_records(data: bytes | bytearray) -> Iterator[tuple[int, int, int]]:
    """(frame offset, captured length, timestamp in µs) of each record of a little-endian µs pcap."""
    assert data[:4] == b"\xd4\xc3\xb2\xa1", data[:4]
    pos = 24
    while pos + 16 <= len(data):
        sec, usec, cap = struct.unpack_from("<III", data, pos)
        yield pos + 16, cap, sec * 1_000_000 + usec
        pos += 16 + cap


def tcp_header(data: bytes | bytearray, frame: int, cap: int) -> tuple[int, tuple, int] | None:
    """An Ethernet/IPv4/TCP frame's TCP header offset, directed flow (addresses as text) and payload."""
    if cap < 34 or data[frame + 12 : frame + 14] != b"\x08\x00" or data[frame + 23] != 6:
        return None
    ihl = (data[frame + 14] & 15) * 4
    tcp = frame + 14 + ihl
    if tcp + 20 > frame + cap:
        return None
    src, dst = (socket.inet_ntoa(bytes(data[frame + i : frame + i + 4])) for i in (26, 30))
    sport, dport = struct.unpack_from(">HH", data, tcp)
    payload = struct.unpack_from(">H", data, frame + 16)[0] - ihl - (data[tcp + 12] >> 4) * 4
    return tcp, (src, sport, dst, dport), payload


def wrap_between(src: Path, dst: Path, seq_after: int) -> tuple:
    """`src` with one flow's sequence numbers moved (and its reverse flow's acknowledgment numbers and
    SACK edges), so that two of its data segments sent in one microsecond lie on both sides of 2^32:
    the later one starts at `seq_after`, the earlier one near 2^32. A real capture with another initial
    sequence number. No sequence end or acknowledgment of the flow becomes 0: tshark takes a `next` of 0
    for none (a quirk tcp_health does not copy, 1 in 2^32 in a real capture). Returns the flow."""
    data = bytearray(src.read_bytes())
    seqs: dict[tuple, list[int]] = defaultdict(list)
    numbers: dict[tuple, set[int]] = defaultdict(set)  # per flow: each packet's end and (reverse) ack
    for frame, cap, us in pcap_records(data):
        header = tcp_header(data, frame, cap)
        if header is None:
            continue
        tcp, key, payload = header
        seq, ack = struct.unpack_from(">II", data, tcp + 4)
        numbers[key].add((seq + payload + bool(data[tcp + 13] & 3)) % 2**32)
        numbers[key[2:] + key[:2]].add(ack)
        if payload > 0:
            seqs[(key, us)].append(seq)
    pairs = [
        (key, s) for key, s in seqs.items() if len(s) >= 2 and s == sorted(s) and s[-1] - s[-2] > seq_after
    ]
    offsets = [(flow, (seq_after - sent[-1]) % 2**32) for (flow, _), sent in pairs]
    fit = [(flow, off) for flow, off in offsets if all((n + off) % 2**32 for n in numbers[flow])]
    assert fit, "no two data segments of one flow in one microsecond"
    flow, offset = fit[len(fit) // 2]
    back = (flow[2], flow[3], flow[0], flow[1])

    def move(at: int) -> None:
        struct.pack_into(">I", data, at, (struct.unpack_from(">I", data, at)[0] + offset) % 2**32)

    for frame, cap, _ in pcap_records(data):
        header = tcp_header(data, frame, cap)
        if header is None or header[1] not in (flow, back):
            continue
        tcp = header[0]
        if header[1] == flow:
            move(tcp + 4)
            continue
        move(tcp + 8)
        end, pos = min(tcp + (data[tcp + 12] >> 4) * 4, frame + cap), tcp + 20
        while pos + 1 < end and data[pos] != 0:  # options: SACK (5) edges are acknowledgment numbers
            if data[pos] == 1:
                pos += 1
                continue
            if data[pos] == 5:
                for edge in range(pos + 2, min(pos + data[pos + 1], end) - 3, 4):
                    move(edge)
            pos += max(data[pos + 1], 2)
    dst.write_bytes(bytes(data))
    return flow


@pytest.mark.netns
@pytest.mark.slow
def test_a_sequence_number_wrapped_inside_a_microsecond_matches_tshark(
    loss_run: tuple[Path, Path], tmp_path: Path
) -> None:
    """The merged capture of the loss run with one flow's initial sequence number moved so that two of
    its segments sent in one microsecond lie on both sides of 2^32 (the later at 1285): every flow counts
    what tshark counts (ordered by the raw number the wrapped segment came first, and the one before it
    became out-of-order)."""
    _, merged = loss_run
    run = tmp_path / "runs" / "wrapped"
    run.mkdir(parents=True)
    flow = wrap_between(merged, run / "worker-0-tcpdump.pcap", 1285)
    got, _ = ingested_flows(run, tmp_path / "data")
    wrapped, rows = run / "worker-0-tcpdump.pcap", _rows(run / "worker-0-tcpdump.pcap")
    compare(got, tshark_flows(wrapped, rows, tshark_frames_as_view(wrapped, rows, tmp_path)), "wrapped")
    con = open_catalog(tmp_path / "data")
    try:
        low, high = con.execute(
            "SELECT min(tcp_seq), max(tcp_seq) FROM packets WHERE src_ip = ? AND src_port = ? AND dst_ip = ? "
            "AND dst_port = ?",
            list(flow),
        ).fetchone()
    finally:
        con.close()
    assert low <= 1285 < 2**32 - 1448 <= high, (low, high)
