"""Address text is tshark's, including the IPv6 forms with an embedded IPv4 address."""

from __future__ import annotations

import socket
import struct
import subprocess
from pathlib import Path

from tests.conftest import require_tool
from tracecore.reader import read_capture

# Zero-compression choices and embedded-IPv4 forms where formatters disagree
# (Python's ipaddress writes ::ffff:102:304; tshark and inet_ntop ::ffff:1.2.3.4).
IPV6 = [
    "::2",
    "::1",
    "::ffff:1.2.3.4",
    "::1.2.3.4",
    "::",
    "64:ff9b::1.2.3.4",
    "2001:db8::1:0:0:1",
    "fe80::1:0:0:0",
]
IPV4 = ["0.0.0.0", "255.255.255.255", "10.0.0.1", "192.168.17.50"]


def test_address_text_matches_tshark(tmp_path: Path) -> None:
    tshark = require_tool("tshark")
    out = bytearray(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # LINKTYPE_RAW
    for i, addr in enumerate(IPV6):
        dst = socket.inet_pton(socket.AF_INET6, IPV6[-1 - i])
        pkt = struct.pack(">IHBB", 0x60000000, 0, 59, 64) + socket.inet_pton(socket.AF_INET6, addr) + dst
        out += struct.pack("<IIII", i, 0, len(pkt), len(pkt)) + pkt
    for i, addr in enumerate(IPV4):
        pkt = struct.pack(">BBHHHBBH", 0x45, 0, 20, 0, 0, 64, 59, 0) + socket.inet_aton(addr) * 2
        out += struct.pack("<IIII", 100 + i, 0, len(pkt), len(pkt)) + pkt
    path = tmp_path / "addresses.pcap"
    path.write_bytes(bytes(out))
    fields = ["-e", "ip.src", "-e", "ipv6.src", "-e", "ip.dst", "-e", "ipv6.dst"]
    text = subprocess.run(
        [tshark, "-n", "-r", str(path), "-T", "fields", "-E", "separator=/t", *fields],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    want = [tuple(x for x in line.split("\t") if x) for line in text.splitlines()]
    table = read_capture(path)
    got = list(zip(table.column("src_ip").to_pylist(), table.column("dst_ip").to_pylist(), strict=True))
    assert got == want
    assert got[2][0] == "::ffff:1.2.3.4"
