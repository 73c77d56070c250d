"""Link types: the kernel decodes exactly the ones linktypes.py names as decoded, and the reader
counts the frames of every other one, per link type, in its stats and one warning."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from tracecore.reader import CaptureReader
from tracecore.reader.abi import DEFAULT_VXLAN_PORTS
from tracecore.reader.linktypes import DECODED, describe

# An IPv4/UDP packet, 10.0.0.1:7 -> 10.0.0.2:9, no payload: valid behind any header offset.
IPV4_UDP = bytes.fromhex("450000 1c 0000 0000 4011 0000 0a000001 0a000002 0007 0009 0008 0000")


@pytest.mark.slow
def test_the_kernel_decodes_exactly_the_link_types_named_decoded() -> None:
    from tracecore.reader import kernel

    frame = np.frombuffer(bytes(20) + IPV4_UDP, dtype=np.uint8)
    vxlan = np.array(DEFAULT_VXLAN_PORTS, dtype=np.int64)
    known = {
        link for link in range(1 << 16) if kernel.parse(frame, 0, len(frame), len(frame), link, vxlan)[0]
    }
    assert known == DECODED


def test_describe_names_the_link_type() -> None:
    assert describe(127) == "IEEE802_11_RADIOTAP (127)"
    assert describe(1) == "ETHERNET (1)"
    assert describe(147) == "147"


def _pcapng(frames: list[tuple[int, int]]) -> bytes:
    """A pcapng section with one interface per link type in `frames` ((link type, count) each),
    and that many EPBs of IPV4_UDP on it."""

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    for link, _ in frames:
        out += block(1, struct.pack("<HHI", link, 0, 0))
    for ifid, (_, count) in enumerate(frames):
        for _ in range(count):
            out += block(6, struct.pack("<IIIII", ifid, 0, 0, len(IPV4_UDP), len(IPV4_UDP)) + IPV4_UDP)
    return out


def test_frames_of_undecoded_link_types_are_counted_per_link_type(tmp_path: Path) -> None:
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(_pcapng([(192, 3), (228, 2), (127, 4), (147, 1)]))
    reader = CaptureReader(path, batch_rows=4)  # the counts add up across batches
    rows = [row for batch in reader.batches() for row in batch.to_pylist()]
    assert [r["link_type"] for r in rows] == [192] * 3 + [228] * 2 + [127] * 4 + [147]
    assert [r["src_ip"] for r in rows if r["link_type"] == 228] == ["10.0.0.1", "10.0.0.1"]
    assert reader.stats.undecoded_link_frames == {127: 4, 147: 1, 192: 3}
    assert reader.warnings == [
        f"{path}: 4 frames of link type IEEE802_11_RADIOTAP (127), 1 frame of link type 147, "
        "3 frames of link type PPI (192) kept with null IP fields: tracecore has no network decoder "
        "for those link types"
    ]
