"""The reader against tshark's reading of every real RoCE, InfiniBand-side and tunnel capture in
../shared/corpus-rdma, and against itself on every cut-short copy of their frames.

Every packet is compared on the fields tshark and tracecore both have: timestamp, frame length,
addresses, DSCP/ECN, UDP ports, BTH opcode, destination QP, PSN, ack-request and solicited bits,
RETH DMA length, AETH syndrome, DETH source QP; for tunnels the VNI and the inner 5-tuple. Frames
tshark does not list in an .ib.tsv file carry no RDMA field, and frames of the tunnel files no
RoCE field. Where tracecore and tshark differ, EXCEPTIONS says why and the test asserts what
tracecore gives instead (and fails when the exception is no longer needed).
"""

from __future__ import annotations

import csv
import os
import re
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from tests.conftest import REPO
from tracecore.errors import UsageError
from tracecore.reader import CaptureReader
from tracecore.schema import PACKET_SCHEMA

RDMA_CORPUS = REPO.parent / "shared" / "corpus-rdma"
FILES = sorted(p.name for p in RDMA_CORPUS.glob("*.pcap")) or ["<corpus-rdma missing>"]
IB_FILES = [f for f in FILES if (RDMA_CORPUS / "expected" / f"{Path(f).stem}.ib.tsv").is_file()]
TUNNEL_FILES = [f for f in FILES if (RDMA_CORPUS / "expected" / f"{Path(f).stem}.tunnel.tsv").is_file()]

# Where tracecore and tshark differ on purpose: {file: {frame: {column: tracecore's value}}}.
EXCEPTIONS: dict[str, dict[int, dict[str, object]]] = {
    # tshark 4.0 has no FECN/BECN fields (README): the CNP's BTH byte 4 is 0x40, BECN set (the README
    # and scapy's test say so), which tracecore reports as rdma_flags bit 8.
    "scapy_roce_hexcaps.pcap": {1: {"rdma_flags": 8}},
}
# tshark marks these frames [Malformed Packet] (README quirk): 62-byte RC SEND Only frames whose UDP
# length (28) holds BTH, 4 payload bytes and the ICRC; tshark prints no ICRC for them but reads their
# BTH as tracecore does, so their fields agree and tracecore reports 4 message bytes.
TSHARK_MALFORMED = {"linlinw5_rdma_cm.pcap": 16}

INNER_ETHERNET = {"tcpdump_vxlan.pcap", "tcpdump_geneve.pcap"}  # the others carry inner IP directly


def read(path: Path, batch_rows: int = 7, **options) -> tuple[list[dict], CaptureReader]:
    reader = CaptureReader(path, batch_rows=batch_rows, **options)
    batches = []
    for batch in reader.batches():
        assert batch.schema == PACKET_SCHEMA
        batches.append(batch)
    return pa.Table.from_batches(batches, schema=PACKET_SCHEMA).to_pylist(), reader


def tsv(name: str, kind: str) -> list[dict[str, str]]:
    with (RDMA_CORPUS / "expected" / f"{Path(name).stem}.{kind}.tsv").open(newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def _int(text: str) -> int | None:
    return None if text == "" else int(text, 0)


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not (RDMA_CORPUS / "MANIFEST.csv").is_file():
        pytest.fail(f"corpus missing: {RDMA_CORPUS} (the shared/ folder must sit beside the checkout)")
    return RDMA_CORPUS


def test_the_corpus_is_what_the_tests_expect(corpus: Path) -> None:
    with (corpus / "MANIFEST.csv").open(newline="") as f:
        listed = sorted(row["file"] for row in csv.DictReader(f) if row["file"].endswith(".pcap"))
    assert listed == FILES
    assert len(FILES) == 17
    assert len(IB_FILES) == 13
    assert len(TUNNEL_FILES) == 3


@pytest.mark.parametrize("name", IB_FILES)
def test_every_roce_packet_agrees_with_tshark(corpus: Path, name: str) -> None:
    rows, reader = read(corpus / name)
    assert reader.warnings == []
    expected = tsv(name, "ib")
    exceptions = dict(EXCEPTIONS.get(name, {}))
    listed = {int(e["frame.number"]) for e in expected}
    malformed = 0
    for e in expected:
        frame = int(e["frame.number"])
        row = rows[frame - 1]
        where = f"{name} frame {frame}"
        malformed += "[Malformed Packet]" in e["_ws.col.Info"]
        sec, _, frac = e["frame.time_epoch"].partition(".")
        assert row["ts_ns"] == int(sec) * 10**9 + int(frac.ljust(9, "0")), where
        assert row["frame_len"] == int(e["frame.len"]), where
        src = e["ip.src"] or e["ipv6.src"] or None
        dst = e["ip.dst"] or e["ipv6.dst"] or None
        assert (row["src_ip"], row["dst_ip"]) == (src, dst), where
        assert (row["dscp"], row["ecn"]) == (_int(e["ip.dsfield.dscp"]), _int(e["ip.dsfield.ecn"])), where
        ports = (_int(e["udp.srcport"]), _int(e["udp.dstport"]))
        assert (row["src_port"], row["dst_port"]) == ports, where
        assert (row["link_type"], e["eth.type"] in ("0x0800", "0x8915")) == (1, True), where
        assert row["ip_version"] == (None if e["eth.type"] == "0x8915" else 4), where
        flags = int(e["infiniband.bth.a"]) * 1 | int(e["infiniband.bth.se"]) * 2
        want = {
            "rdma_opcode": int(e["infiniband.bth.opcode"]),
            "rdma_dest_qp": int(e["infiniband.bth.destqp"], 16),
            "rdma_psn": int(e["infiniband.bth.psn"]),
            "rdma_flags": flags,
            "rdma_reth_dma_len": _int(e["infiniband.reth.dmalen"]),
            "rdma_aeth_syndrome": _int(e["infiniband.aeth.syndrome"]),
            "rdma_deth_src_qp": _int(e["infiniband.deth.srcqp"]),
        } | exceptions.pop(frame, {})
        assert {k: row[k] for k in want} == want, where
        assert row["rdma_payload_len"] == _message_bytes(row, int(e["infiniband.bth.padcnt"])), where
        assert row["tunnel"] is None, where
    assert exceptions == {}, f"{name}: exceptions no longer needed: {exceptions}"
    assert malformed == TSHARK_MALFORMED.get(name, 0), name
    for i, row in enumerate(rows, 1):  # the frames tshark finds no InfiniBand in: no RDMA field
        if i not in listed:
            assert all(row[c] is None for c in PACKET_SCHEMA.names if c.startswith("rdma_")), (name, i)
            assert row["dst_port"] != 4791, (name, i)


def _message_bytes(row: dict, padcnt: int) -> int:
    """RDMA message bytes from the frame length the independent way: the frame less the headers
    of its opcode (Soft-RoCE frames carry no Ethernet padding: every one is over 60 bytes)."""
    op = row["rdma_opcode"]
    ext = {0x0A: 16, 0x06: 16, 0x0C: 16, 0x0B: 20, 0x09: 4, 0x11: 4, 0x10: 4, 0x0D: 4, 0x0F: 4}
    ext |= {0x12: 12, 0x13: 28, 0x14: 28, 0x64: 8, 0x81: 16, 0x24: 0, 0x04: 0, 0x00: 0, 0x01: 0, 0x02: 0}
    ext |= {0x07: 0, 0x08: 0, 0x0E: 0}
    outer = 14 + (40 if row["ip_version"] is None else 20 + 8)  # Ethernet + GRH, or + IPv4 + UDP
    return row["frame_len"] - outer - 12 - ext[op] - padcnt - 4


def test_rdma_message_bytes_add_up_to_the_reth_dma_length(corpus: Path) -> None:
    """Within each QP, a WRITE First..Last's packets carry exactly the First's RETH DMA length, and an
    Only packet its own: rdma_payload_len counts message bytes, not headers or ICRC."""
    messages = 0
    for name in IB_FILES:
        rows, _ = read(corpus / name, batch_rows=1 << 16)
        open_msgs: dict[tuple, list[int]] = {}
        for row in rows:
            op = row["rdma_opcode"]
            if op is None or op >= 0x20:
                continue
            key = (row["src_ip"], row["dst_ip"], row["rdma_dest_qp"])
            if op in (0x0A, 0x0B):
                assert row["rdma_payload_len"] == row["rdma_reth_dma_len"], (name, row)
                messages += 1
            elif op == 0x06:
                open_msgs[key] = [row["rdma_reth_dma_len"], row["rdma_payload_len"]]
            elif op == 0x07:
                open_msgs[key][1] += row["rdma_payload_len"]
            elif op in (0x08, 0x09):
                dma, got = open_msgs.pop(key)
                assert got + row["rdma_payload_len"] == dma, (name, row)
                messages += 1
    assert messages == 208


@pytest.mark.parametrize("name", TUNNEL_FILES)
def test_every_tunnel_packet_agrees_with_tshark(corpus: Path, name: str) -> None:
    rows, reader = read(corpus / name)
    assert reader.warnings == []
    expected = tsv(name, "tunnel")
    assert len(rows) == len(expected)
    kinds = Counter()
    for row, e in zip(rows, expected, strict=True):
        where = f"{name} frame {e['frame.number']}"
        src, dst = e["ip.src"].split(","), e["ip.dst"].split(",")
        protos = [int(p) for p in e["ip.proto"].split(",")]
        assert row["frame_len"] == int(e["frame.len"]), where
        assert (row["src_ip"], row["dst_ip"], row["ip_proto"]) == (src[0], dst[0], protos[0]), where
        assert (row["src_port"], row["dst_port"]) == (int(e["udp.srcport"]), int(e["udp.dstport"])), where
        vni = _int(e["vxlan.vni"]) if e["vxlan.vni"] else _int(e["geneve.vni"])
        tunnel = "vxlan" if e["vxlan.vni"] else "geneve"
        assert (row["tunnel"], row["vni"]) == (tunnel, vni), where
        inner = (src[1], dst[1], protos[1]) if len(src) == 2 else (None, None, None)
        assert (row["inner_src_ip"], row["inner_dst_ip"], row["inner_ip_proto"]) == inner, where
        inner_ports = (_int(e["tcp.srcport"]), _int(e["tcp.dstport"]))
        assert (row["inner_src_port"], row["inner_dst_port"]) == inner_ports, where
        assert row["rdma_opcode"] is None, where
        kinds[(row["tunnel"], row["inner_ip_proto"])] += 1
    assert sum(kinds.values()) == {"tcpdump_vxlan.pcap": 10, "tcpdump_geneve.pcap": 39}.get(name, 1)


def test_ipoib_frames_decode_their_ip_packets(corpus: Path) -> None:
    """tshark has no expected/ file for link type 242; this is tcpdump's reading of it (`tcpdump -nr`,
    which decodes the 44-byte IPoIB header): a one-way capture from .10, ICMP echo requests, an SSH
    connection and five probes, and 4 ARP frames (no IP)."""
    rows, reader = read(corpus / "tcpdump_ipoib.pcap")
    assert reader.warnings == []
    assert reader.stats.undecoded_link_frames == {}
    assert {r["link_type"] for r in rows} == {242}
    five = Counter((r["src_ip"], r["dst_ip"], r["ip_proto"], r["src_port"], r["dst_port"]) for r in rows)
    a, b = "192.168.56.10", "192.168.56.24"
    assert five == {
        (a, b, 6, 34170, 22): 15,
        (a, b, 1, None, None): 6,
        (None, None, None, None, None): 4,
        (a, b, 6, 52289, 8): 1,
        (a, b, 6, 56684, 8): 1,
        (a, b, 6, 54877, 13): 1,
        (a, b, 6, 43822, 12): 1,
        (a, b, 6, 51201, 14): 1,
    }
    assert (rows[0]["dscp"], rows[0]["ecn"], rows[0]["l4_payload_len"]) == (0, 0, 64)  # echo, length 64


def test_vxlan_ports_are_a_reader_option(corpus: Path) -> None:
    rows, _ = read(corpus / "tcpdump_vxlan.pcap", vxlan_ports=[8472])
    assert {r["tunnel"] for r in rows} == {None}  # 4789 no longer VXLAN
    assert all(r[c] is None for r in rows for c in ("vni", "inner_src_ip", "inner_src_port"))
    rows, _ = read(corpus / "tcpdump_vxlan.pcap", vxlan_ports=[4789, 9999])
    assert [r["vni"] for r in rows] == [100] * 10
    with pytest.raises(UsageError, match="vxlan_ports"):
        CaptureReader(corpus / "tcpdump_vxlan.pcap", vxlan_ports=[4791])


# -- frames cut short ------------------------------------------------------------------------


def _frames(path: Path) -> list[bytes]:
    data = path.read_bytes()
    order = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    frames, pos = [], 24
    while pos + 16 <= len(data):
        (cap,) = struct.unpack_from(order + "I", data, pos + 8)
        frames.append(data[pos + 16 : pos + 16 + cap])
        pos += 16 + cap
    return frames


def _needed(frame: bytes, row: dict) -> tuple[int, int, int]:
    """Bytes from which the reader knows the frame is RoCE or a tunnel, bytes the BTH or tunnel header
    needs, bytes all its headers need; from the frame's own bytes: Ethernet, then IPv4 + UDP (RoCEv2,
    tunnels) or a GRH (RoCE v1)."""
    ext = {0x0A: 16, 0x06: 16, 0x0C: 16, 0x0B: 20, 0x11: 4, 0x10: 4, 0x0D: 4, 0x0F: 4, 0x12: 12}
    ext |= {0x13: 28, 0x14: 28, 0x64: 8, 0x81: 16, 0x09: 4}
    if row["ip_version"] is None:  # RoCE v1: the ethertype says so
        return 14, 14 + 40 + 12, 14 + 40 + 12 + ext.get(row["rdma_opcode"], 0)
    udp = 14 + (frame[14] & 15) * 4
    if row["tunnel"] is None:
        return udp + 4, udp + 8 + 12, udp + 8 + 12 + ext.get(row["rdma_opcode"], 0)
    inner = udp + 8 + 8 + (frame[udp + 8] & 0x3F) * 4 * (row["tunnel"] == "geneve")
    if row["tunnel"] == "vxlan" or (frame[udp + 10 : udp + 12] == b"\x65\x58"):
        inner += 14
    if row["inner_ip_proto"] is None:  # ARP inside
        return udp + 4, udp + 16, inner
    inner += (frame[inner] & 15) * 4
    return udp + 4, udp + 16, inner + (4 if row["inner_ip_proto"] in (6, 17) else 0)


def _cut_capture(path: Path, frame: bytes) -> None:
    """A pcap of `frame` cut at every length 0..len (orig_len stays the full length)."""
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for n in range(len(frame) + 1):
        out.append(struct.pack("<IIII", 1, 0, n, len(frame)) + frame[:n])
    path.write_bytes(b"".join(out))


@pytest.mark.parametrize("name", [f for f in FILES if f != "tcpdump_ipoib.pcap"])
def test_cut_short_roce_and_tunnel_headers_give_nulls_and_a_counted_warning(
    corpus: Path, tmp_path: Path, name: str
) -> None:
    """Each distinct kind of RoCE or tunnel frame of the file, cut at every length: nothing crashes,
    every field the reader still gives equals the whole frame's (no garbage from beyond the cut), and
    each copy cut inside the BTH, its extension headers, the tunnel header or the inner headers is
    counted in stats and named in one warning."""
    rows, _ = read(corpus / name, batch_rows=1 << 16)
    frames = _frames(corpus / name)
    seen: set[tuple] = set()
    checked = 0
    for frame, full in zip(frames, rows, strict=True):
        kind = (full["rdma_opcode"], full["tunnel"], full["inner_ip_proto"], full["ip_version"])
        if kind[:2] == (None, None) or kind in seen:
            continue
        seen.add(kind)
        path = tmp_path / f"cut{checked}.pcap"
        _cut_capture(path, frame)
        cut, reader = read(path, batch_rows=64)
        assert len(cut) == len(frame) + 1
        for n, row in enumerate(cut):
            for column, value in row.items():
                if value is not None and column not in ("cap_len", "ts_ns"):
                    assert value == full[column], (name, kind, n, column)
        known, first, need = _needed(frame, full)
        short = sum(1 for n in range(len(frame) + 1) if known <= n < need)
        stat = "rdma_cut_short" if full["tunnel"] is None else "tunnel_cut_short"
        assert getattr(reader.stats, stat) == short, (name, kind)
        assert len(reader.warnings) == 1, reader.warnings
        assert f" {short} " in reader.warnings[0], reader.warnings
        layer = "rdma_opcode" if full["tunnel"] is None else "vni"  # set once the BTH / tunnel header is
        assert [row[layer] is not None for row in cut] == [n >= first for n in range(len(cut))], (name, kind)
        assert all(row == full | {"cap_len": n, "ts_ns": 10**9} for n, row in enumerate(cut) if n >= need)
        checked += 1
    assert checked >= 1, name


def test_jit_and_ahead_of_time_kernels_agree_on_the_rdma_corpus(corpus: Path) -> None:
    """Every RDMA corpus file read by both kernels, each in a fresh process, row by row."""
    script = (
        "import sys, pyarrow as pa\n"
        "from tracecore.reader import CaptureReader, compiled\n"
        "from tracecore.schema import PACKET_SCHEMA\n"
        "print(compiled.kernels().source)\n"
        "for f in sys.argv[1:]:\n"
        "    r = CaptureReader(f, batch_rows=5)\n"
        "    t = pa.Table.from_batches(list(r.batches()), schema=PACKET_SCHEMA)\n"
        "    print(f, t.num_rows, t.to_pylist(), r.warnings, r.stats)\n"
    )
    files = [str(corpus / f) for f in FILES]
    out = {}
    for jit in ("0", "1"):
        env = os.environ | {"TRACECORE_JIT": jit}
        done = subprocess.run(
            [sys.executable, "-c", script, *files], env=env, capture_output=True, text=True, check=True
        )
        out[jit] = done.stdout.splitlines()
    assert (out["0"][0], out["1"][0]) == ("aot", "jit")
    assert out["0"][1:] == out["1"][1:]
    assert len(out["0"]) == len(files) + 1


def test_read_names_roce_operations_and_tunnels(corpus: Path) -> None:
    """`tracecore read` shows RoCE and tunnel packets as a person recognises them: operation and QP
    (tshark's Info words: 'RC RDMA Write Only QP=0x000027'), VNI and the inner addresses."""
    from typer.testing import CliRunner

    from tracecore.cli.app import app

    def table(name: str, *args: str) -> list[str]:
        result = CliRunner().invoke(app, ["read", str(corpus / name), *args])
        assert result.exit_code == 0, result.output
        return [line.split(None, 2)[2] for line in result.stdout.splitlines()[1:]]  # from the addresses on

    assert table("scapy_roce_hexcaps.pcap") == [
        "10.0.17.1 → 10.0.18.1   RoCEv2     74 CNP QP=0x000118 PSN=0",
        "RoCE       94 RC RDMA Write Only QP=0x00010a PSN=10979516",
        "RoCE       74 RC Acknowledge QP=0x000109 PSN=10979520",
    ]
    assert table("tcpdump_vxlan.pcap", "--limit", "2") == [
        "192.168.203.1 → 192.168.202.1 VXLAN    148 VXLAN VNI=100 192.168.203.3 → 192.168.203.5",
        "192.168.202.1 → 192.168.203.1 VXLAN     92 VXLAN VNI=100",
    ]
    assert table("tcpdump_geneve-gcp.pcap")[0].endswith(
        "Geneve VNI=0 192.168.100.2:2905 → 192.168.100.1:8080"
    )
    lines = table("linlinw5_nccl_ring2_node0.pcap")
    infos = {re.search(r" \d+ (\D+)$", line.split(" QP=")[0]).group(1) for line in lines if "QP=" in line}
    assert infos == {
        "RC RDMA Write Only",
        "RC RDMA Write Only Immediate",
        "RC Acknowledge",
        "RC RDMA Write First",
        "RC RDMA Write Middle",
        "RC RDMA Write Last Immediate",
    }


@pytest.mark.parametrize("name", IB_FILES)
def test_operation_names_are_tsharks(corpus: Path, name: str) -> None:
    """opcode_name + QP is tshark's Info column for every RoCE packet but the CM MADs (tshark decodes
    the management datagram instead) and the CNP (tshark 4.0: 'Unknown OpCode')."""
    from tracecore.reader.names import opcode_name

    rows, _ = read(corpus / name)
    for e in tsv(name, "ib"):
        row = rows[int(e["frame.number"]) - 1]
        info = e["_ws.col.Info"].removesuffix(" [Malformed Packet]").strip()
        if info.startswith(("CM: ", "Unknown OpCode")):
            assert row["rdma_opcode"] in (0x64, 0x81), (name, e["frame.number"])
            continue
        assert f"{opcode_name(row['rdma_opcode'])} QP=0x{row['rdma_dest_qp']:06x}" == info, (
            name,
            e["frame.number"],
        )


def test_reading_imports_neither_pandas_nor_numba(corpus: Path) -> None:
    """The batch conversion of the new columns builds its arrays from buffers: a read (TCP, RoCE and
    tunnel captures) imports neither pandas (0.25 s, first `pa.array(list)`) nor numba (AOT kernels)."""
    script = (
        "import sys\n"
        "from tracecore.reader import read_capture\n"
        "for f in sys.argv[1:]:\n"
        "    read_capture(f)\n"
        "print('pandas' in sys.modules, 'numba' in sys.modules)\n"
    )
    files = [
        str(corpus / f) for f in ("tcpdump_vxlan.pcap", "scapy_roce_hexcaps.pcap", "linlinw5_rping.pcap")
    ]
    env = os.environ | {"TRACECORE_JIT": "0"}
    done = subprocess.run(
        [sys.executable, "-c", script, *files], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["False", "False"]


def test_ingest_stores_the_rdma_columns_of_the_nccl_ring(corpus: Path, tmp_path: Path) -> None:
    """The three NCCL ring captures ingested as one run: the `packets` view has every RoCE packet's
    opcode as expected/flow_summary.jsonl counts them per file, and its DSCP/ECN."""
    import json
    import shutil

    from tracecore.ingest import ingest, open_catalog

    run = tmp_path / "runs" / "nccl-allreduce-none-0-nccl-0-ring"
    run.mkdir(parents=True)
    for i in range(3):
        shutil.copy(corpus / f"linlinw5_nccl_ring2_node{i}.pcap", run / f"node{i}.pcap")
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert not summary.failed
    flows = {}
    for line in (corpus / "expected" / "flow_summary.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry["file"].startswith("linlinw5_nccl_ring2_node"):
            node = "node" + entry["file"].removesuffix(".pcap")[-1]
            flows[node] = {int(op.split(":")[0]): int(op.rsplit("=", 1)[1]) for op in entry["opcodes"]}
    con = open_catalog(tmp_path / "data")
    rows = con.execute(
        "SELECT w.capture, p.rdma_opcode, count(*), count(p.dscp) FROM packets_all p"
        " JOIN workers w USING (run, worker) WHERE p.rdma_opcode IS NOT NULL GROUP BY ALL"
    ).fetchall()
    con.close()
    got: dict[str, dict[int, int]] = {}
    for capture, opcode, count, with_dscp in rows:
        assert count == with_dscp
        got.setdefault(Path(capture).name, {})[opcode] = count
    assert got == flows
    assert len(got) == 3
