"""Shared by the RDMA view, figure and report tests: ../shared/corpus-rdma ingested once, and captures
made from its real frames with one header field changed (a PSN, a QP, the ECN bits).

The dataset holds three kinds of run, ingested once per test process with the ingest library:
- one run per corpus capture that expected/flow_summary.jsonl summarises (the lone file is the run,
  named by its stem, its one worker the address seen most);
- `NCCL_RUN`: the three NCCL ring captures as the three workers of one run (each captured both
  directions, so ingest keeps each packet's sender copy);
- `CRAFTED_RUN`: two workers, 10.1.16.61 (W1) and 10.1.16.62 (W2), whose captures hold real RDMA WRITE,
  ACK and CNP frames of the corpus re-sent in a chosen order, with edited PSNs, QPs and ECN marks at
  chosen times (`crafted_frames` says which), so PSN gaps, repeats, rewinds, a PSN wrap, ECN-CE
  marks and a CNP have values known by construction.

`make_shared_qp_run` makes a run of its own, in a dataset of its own (`shared_qp_frames`): one sender
writing to two receivers whose QPs have the same number.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO
from tests.test_views_support import _pcap_records

RDMA_CORPUS = REPO.parent / "shared" / "corpus-rdma"
NCCL_RUN = "torch-allreduce-none-0-nccl-normal-ring"
CRAFTED_RUN = "crafted-rdma"
NCCL_FILES = [f"linlinw5_nccl_ring2_node{i}.pcap" for i in range(3)]

T0 = 1_800_000_000_000_000_000  # crafted frames' time origin, UTC ns (a multiple of every bin tried)
MS = 1_000_000
PSN_WRAP = 1 << 24


def flow_summary() -> dict[str, dict]:
    """expected/flow_summary.jsonl by file name (tshark 4.0.17's per-file, per-flow summary)."""
    path = RDMA_CORPUS / "expected" / "flow_summary.jsonl"
    if not path.is_file():
        import pytest

        pytest.fail(f"RDMA corpus missing: {path} (the shared/ folder must sit beside the checkout)")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {d["file"]: d for d in lines}


# ---- frames -------------------------------------------------------------------------------------
def roce_frames(name: str) -> list[tuple[int, bytes]]:
    """(ts_ns, frame) of a corpus file's RoCEv2 frames (Ethernet, IPv4 without options, UDP port 4791)."""
    out = []
    for ts, orig, frame in _pcap_records(RDMA_CORPUS / name):
        assert orig == len(frame), name
        if (
            frame[12:14] == b"\x08\x00"
            and frame[14] == 0x45
            and frame[23] == 17
            and frame[36:38] == b"\x12\xb7"
        ):
            out.append((ts, frame))
    return out


def _ip_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def edit(
    frame: bytes,
    *,
    psn: int | None = None,
    dest_qp: int | None = None,
    ecn: int | None = None,
    src_ip: bytes | None = None,
    dst_ip: bytes | None = None,
    src_port: int | None = None,
) -> bytes:
    """The frame with BTH PSN / destination QP, the IPv4 ECN bits, addresses or UDP source port set, and
    the IPv4 header checksum made right again (the UDP checksum of these frames is 0: not used)."""
    b = bytearray(frame)
    ip, udp, bth = 14, 34, 42
    if ecn is not None:
        b[ip + 1] = (b[ip + 1] & 0xFC) | ecn
    if src_ip is not None:
        b[ip + 12 : ip + 16] = src_ip
    if dst_ip is not None:
        b[ip + 16 : ip + 20] = dst_ip
    if src_port is not None:
        b[udp : udp + 2] = struct.pack("!H", src_port)
    if dest_qp is not None:
        b[bth + 5 : bth + 8] = dest_qp.to_bytes(3, "big")
    if psn is not None:
        b[bth + 9 : bth + 12] = psn.to_bytes(3, "big")
    b[ip + 10 : ip + 12] = b"\0\0"
    b[ip + 10 : ip + 12] = struct.pack("!H", _ip_checksum(bytes(b[ip : ip + 20])))
    return bytes(b)


def write_pcap(path: Path, frames: list[tuple[int, bytes]]) -> None:
    """A nanosecond pcap (Ethernet) of (ts_ns, frame)."""
    out = [struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)]
    for ts, frame in frames:
        out.append(struct.pack("<IIII", ts // 10**9, ts % 10**9, len(frame), len(frame)) + frame)
    path.write_bytes(b"".join(out))


# ---- the crafted run ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    """One crafted frame: when, by whom, and the fields the views read from it."""

    ts_ns: int
    sender: str  # "10.1.16.61" or "10.1.16.62"
    frame: bytes

    @property
    def frame_len(self) -> int:
        return len(self.frame)

    @property
    def ecn(self) -> int:
        return self.frame[15] & 3

    @property
    def opcode(self) -> int:
        return self.frame[42]

    @property
    def src_ip(self) -> str:
        return ".".join(map(str, self.frame[26:30]))

    @property
    def dst_ip(self) -> str:
        return ".".join(map(str, self.frame[30:34]))

    @property
    def dest_qp(self) -> int:
        return int.from_bytes(self.frame[47:50], "big")

    @property
    def psn(self) -> int:
        return int.from_bytes(self.frame[51:54], "big")


A61, A62 = bytes([10, 1, 16, 61]), bytes([10, 1, 16, 62])
WRITE_QP, ACK_QP, WRAP_QP, WRAP_PORT = 0x1B, 0x1D, 0x99, 40000


@functools.cache
def crafted_frames() -> tuple[Sent, ...]:
    """linlinw5_rdma_write_bw's 15 WRITE packets (PSN P..P+14, QP 0x1b, .62 → .61) and 5 ACKs (QP 0x1d),
    and scapy's ConnectX-4 CNP re-addressed to that connection, re-sent as:

    - QP 0x1b, every 3 ms from T0: PSNs P+0 P+1 P+3 P+4 P+5 P+2 P+3 P+4 P+5 P+6 P+7 P+8 (the frames that
      carried them), the frames of P+4 (both times) and P+6 marked ECN-CE: one gap skipping 1 PSN, one
      rewind (P+5 → P+2), three repeats (P+3, P+4, P+5 again), three CE marks;
    - QP 0x99 (UDP source port 40000, so its own connection), the remaining 6 WRITE frames every 3 ms
      after: PSNs 2^24−2, 2^24−1, 0, 1, 0, 5: a wrap that is no gap, one rewind and repeat (1 → 0),
      one gap skipping 4 PSNs (0 → 5);
    - the 5 ACKs (.61 → .62, QP 0x1d) at T0 + 1 ms + 7 ms·i, and the CNP (.61 → .62, QP 0x1d, BECN,
      DSCP 48, UDP source port 0) at T0 + 20.5 ms.
    """
    write_bw = roce_frames("linlinw5_rdma_write_bw.pcap")
    writes = [f for _, f in write_bw if f[26:30] == A62]
    acks = [f for _, f in write_bw if f[26:30] == A61]
    assert len(writes) == 15
    assert len(acks) == 5
    base = int.from_bytes(writes[0][51:54], "big")
    (cnp,) = [f for _, f in roce_frames("scapy_roce_hexcaps.pcap")]
    sent: list[Sent] = []
    order = [0, 1, 3, 4, 5, 2, 3, 4, 5, 6, 7, 8]
    for k, i in enumerate(order):
        marked = i in (4, 6)
        sent.append(Sent(T0 + 3 * MS * k, "10.1.16.62", edit(writes[i], ecn=3 if marked else None)))
    for j, psn in enumerate([PSN_WRAP - 2, PSN_WRAP - 1, 0, 1, 0, 5]):
        frame = edit(writes[9 + j], psn=psn, dest_qp=WRAP_QP, src_port=WRAP_PORT)
        sent.append(Sent(T0 + 3 * MS * (len(order) + j), "10.1.16.62", frame))
    for i, ack in enumerate(acks):
        sent.append(Sent(T0 + MS + 7 * MS * i, "10.1.16.61", ack))
    sent.append(Sent(T0 + 20 * MS + MS // 2, "10.1.16.61", edit(cnp, src_ip=A61, dst_ip=A62, dest_qp=ACK_QP)))
    assert sent[0].psn == base
    return tuple(sorted(sent, key=lambda s: s.ts_ns))


STEPS_NS = (T0, T0 + 20 * MS, T0 + 40 * MS)  # the crafted run's logged training steps (Batch rows)


def make_crafted_run(root: Path) -> Path:
    """The crafted run folder: one capture per worker (what it sent), a run.toml pinning their IPs and a
    train_history.log of three steps (`STEPS_NS`)."""
    run = root / CRAFTED_RUN
    run.mkdir(parents=True)
    for ip, name in (("10.1.16.61", "w61.pcap"), ("10.1.16.62", "w62.pcap")):
        write_pcap(run / name, [(s.ts_ns, s.frame) for s in crafted_frames() if s.sender == ip])
    (run / "run.toml").write_text(
        '[[capture.worker]]\nfile = "w61.pcap"\nip = "10.1.16.61"\n'
        '[[capture.worker]]\nfile = "w62.pcap"\nip = "10.1.16.62"\n',
        encoding="utf-8",
    )
    log = ["Type,ID,Timestamp,Loss,Accuracy"]
    log += [f"Batch,{i},{ts // 10**9}.{ts % 10**9:09d},2.3,0.1" for i, ts in enumerate(STEPS_NS)]
    (run / "train_history.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    return run


SHARED_QP_RUN = "shared-qp"
A63 = bytes([10, 1, 16, 63])
SECOND_ACK_QP, SECOND_PORT = 0x1E, 50000


@functools.cache
def shared_qp_frames() -> tuple[Sent, ...]:
    """linlinw5_rdma_write_bw's connection split in two that share the receivers' QP number, as on real
    clusters (a QP number is unique only per receiving NIC): 10.1.16.62 writes to QP 0x1b of
    10.1.16.61 (the first 8 WRITEs, its 3 first ACKs back to QP 0x1d) and to QP 0x1b of 10.1.16.63
    (the other 7 WRITEs re-addressed, UDP source port 50000; the 2 other ACKs from .63 to .62's second
    QP 0x1e), one frame every ms, ACKs at 2, 5, 8, 11 and 14 ms."""
    write_bw = roce_frames("linlinw5_rdma_write_bw.pcap")
    writes = [f for _, f in write_bw if f[26:30] == A62]
    acks = [f for _, f in write_bw if f[26:30] == A61]
    sent = [Sent(T0 + MS * i, "10.1.16.62", f) for i, f in enumerate(writes[:8])]
    sent += [
        Sent(T0 + MS * (8 + i), "10.1.16.62", edit(f, dst_ip=A63, src_port=SECOND_PORT))
        for i, f in enumerate(writes[8:])
    ]
    sent += [Sent(T0 + MS * (2 + 3 * i) + MS // 2, "10.1.16.61", f) for i, f in enumerate(acks[:3])]
    sent += [
        Sent(
            T0 + MS * (11 + 3 * i) + MS // 2,
            "10.1.16.63",
            edit(f, src_ip=A63, dest_qp=SECOND_ACK_QP, src_port=SECOND_PORT),
        )
        for i, f in enumerate(acks[3:])
    ]
    assert {s.dest_qp for s in sent if s.sender == "10.1.16.62"} == {WRITE_QP}
    return tuple(sorted(sent, key=lambda s: s.ts_ns))


def make_shared_qp_run(root: Path) -> Path:
    """The shared-QP run folder: one capture per worker (what it sent), run.toml pinning their IPs."""
    run = root / SHARED_QP_RUN
    run.mkdir(parents=True)
    doc = []
    for ip in ("10.1.16.61", "10.1.16.62", "10.1.16.63"):
        name = f"w{ip.rsplit('.', 1)[1]}.pcap"
        write_pcap(run / name, [(s.ts_ns, s.frame) for s in shared_qp_frames() if s.sender == ip])
        doc.append(f'[[capture.worker]]\nfile = "{name}"\nip = "{ip}"\n')
    (run / "run.toml").write_text("".join(doc), encoding="utf-8")
    return run


def make_nccl_run(root: Path) -> Path:
    """The NCCL ring's three captures as the workers of one run (a name the run-name parser reads)."""
    run = root / NCCL_RUN
    run.mkdir(parents=True)
    for i, name in enumerate(NCCL_FILES):
        shutil.copyfile(RDMA_CORPUS / name, run / f"node{i}.pcap")
    return run


@functools.cache
def rdma_dataset() -> Path:
    """Every summarised corpus file as a run, the NCCL run and the crafted run, in one fresh dataset
    (once per process; removed at exit)."""
    from tracecore.ingest import ingest

    files = [RDMA_CORPUS / name for name in sorted(flow_summary())]
    tmp = Path(tempfile.mkdtemp(prefix="tracecore-rdma-"))
    atexit.register(shutil.rmtree, tmp, True)
    runs = [make_nccl_run(tmp / "runs"), make_crafted_run(tmp / "runs")]
    summary = ingest([*files, *runs], tmp / "data", jobs=1)
    assert not summary.failed, summary.failed
    return tmp / "data"


def open_rdma_dataset():
    from tracecore.ingest import open_catalog

    return open_catalog(rdma_dataset(), read_only=True)
