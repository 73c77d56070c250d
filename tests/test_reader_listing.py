"""`tracecore read` prints tshark's Info (TCP flags, relative Seq and Ack, scaled Win, Len; UDP Len) and
fits each line to the terminal, cutting the Info with '…'; piped, lines stay whole.

Why: the packet list showed ports and lengths only, 133 columns wide, so a reader could not tell a SYN
from a retransmission without tshark. The numbers are checked against tshark's own reading (its default
relative sequence numbers) on captures with a handshake, one that starts mid-connection with window
scaling (the embedded sample, captured at the sender) and a SYN in an IP fragment.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.conftest import require_tool
from tests.test_cli_width import in_terminal
from tracecore.cli.app import app
from tracecore.reader.listing import tcp_flags
from tracecore.sample import sample_run

runner = CliRunner()
INFO = re.compile(
    r" (?P<sport>\d+) → (?P<dport>\d+) \[(?P<flags>[^\]]*)\]( Seq=(?P<seq>\d+))?( Ack=(?P<ack>\d+))?"
    r"( Win=(?P<win>\d+))?( Len=(?P<len>\d+))?"
)
# capture → TCP packets compared (every TCP packet tshark decodes at the outer layer)
CAPTURES = {
    "dpkt__http.pcap": 41,
    "tcpdump__tcp-handshake-nano.pcap": 3,
    "zeek__fragmented-syn.pcap": 1,
    "arkime__ssl-selfsign.pcap": 20,
    "sample": 4528,
}


def _path(corpus_dir: Path, name: str) -> Path:
    return sample_run() / "worker-0-tcpdump.pcap" if name == "sample" else corpus_dir / name


def _lines(path: Path, *args: str, env: dict | None = None) -> list[str]:
    result = runner.invoke(app, ["read", str(path), *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def _tshark(path: Path, *fields: str) -> dict[int, list[str]]:
    """tshark's fields per frame number (its defaults: relative sequence numbers, calculated window)."""
    argv = [require_tool("tshark"), "-n", "-r", str(path), "-o", "ip.defragment:FALSE", "-T", "fields"]
    argv += ["-E", "occurrence=f", "-e", "frame.number", *(x for f in fields for x in ("-e", f))]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    return {int(row[0]): row[1:] for row in (line.split("\t") for line in out.splitlines())}


@pytest.mark.parametrize("name", CAPTURES)
def test_tcp_info_is_tsharks(corpus_dir: Path, name: str) -> None:
    path = _path(corpus_dir, name)
    ours = _lines(path)[1:]
    theirs = _tshark(path, "ip.proto", "tcp.flags", "tcp.seq", "tcp.ack", "tcp.window_size", "tcp.len")
    compared = 0
    for number, (proto, flags, seq, ack, win, length) in theirs.items():
        if proto != "6" or not flags:
            continue
        found = INFO.search(ours[number - 1])
        assert found, ours[number - 1]
        bits = int(flags, 16)
        want = {
            "flags": tcp_flags(bits & 0x1FF),
            "seq": seq or None,
            "ack": ack if bits & 0x10 else None,
            "win": win or None,
            "len": length or None,
        }
        assert {k: found.group(k) for k in want} == want, (number, ours[number - 1])
        compared += 1
    assert compared == CAPTURES[name]


def test_flag_names_are_tsharks_words(corpus_dir: Path) -> None:
    """The bracket is tshark's: its Info says '[SYN, ACK]' where ours does (pure TCP packets)."""
    path = corpus_dir / "dpkt__http.pcap"
    ours = _lines(path)[1:]
    said = {n: re.search(r"\[([A-Z, ]+)\]", info) for n, (info,) in _tshark(path, "_ws.col.Info").items()}
    pairs = {(m.group(1), INFO.search(ours[n - 1]).group("flags")) for n, m in said.items() if m}
    assert all(a == b for a, b in pairs)
    assert {a for a, _ in pairs} == {"SYN", "SYN, ACK", "ACK", "PSH, ACK", "FIN, ACK"}
    assert (tcp_flags(0), tcp_flags(0xC2), tcp_flags(0x814)) == (
        "<None>",
        "SYN, ECE, CWR",
        "RST, ACK, Reserved",
    )


def test_the_sample_starts_mid_connection_and_scales_windows() -> None:
    lines = _lines(sample_run() / "worker-0-tcpdump.pcap", "--limit", "7")
    assert lines[2].endswith(" 54 29500 → 56394 [RST, ACK] Seq=1 Ack=1 Win=0 Len=0")
    assert lines[6].endswith(" 74 29500 → 35778 [SYN, ACK] Seq=0 Ack=1 Win=65160 Len=0 WS=1024")
    assert lines[7].endswith(" 66 29500 → 35778 [ACK] Seq=1 Ack=6 Win=65536 Len=0")  # 64 << 10


def test_udp_len_is_tsharks(corpus_dir: Path) -> None:
    path = corpus_dir / "dpkt__dns_icmp.pcap"
    ours = _lines(path)[1:]
    theirs = _tshark(path, "udp.srcport", "udp.dstport", "udp.length")
    udp = {n: f"{s} → {d} Len={int(length) - 8}" for n, (s, d, length) in theirs.items() if length}
    assert len(udp) == 10
    for number, info in udp.items():
        assert ours[number - 1].endswith(f" {info}"), ours[number - 1]


def test_lines_fit_80_columns_in_a_terminal_and_stay_whole_when_piped() -> None:
    path = sample_run() / "worker-0-tcpdump.pcap"
    whole = _lines(path, "--limit", "40")
    assert max(len(line) for line in whole) > 80
    fitted = in_terminal(["read", str(path), "--limit", "40"], 80).splitlines()
    assert len(fitted) == len(whole)
    assert max(len(line) for line in fitted) <= 80
    for short, long in zip(fitted, whole, strict=True):
        assert short == long or (len(short) == 80 and short[-1] == "…" and long.startswith(short[:-1]))
    # the addresses, protocol and length are whole; only the Info is cut
    assert fitted[7] == "  7 0.332060 192.168.17.50 → 192.168.17.53 TCP        66 29500 → 35778 [ACK] Se…"


def test_help_says_the_sequence_numbers_are_relative() -> None:
    text = " ".join(runner.invoke(app, ["read", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "Seq and Ack are relative, as tshark shows them by default" in text
    assert "--format csv has the raw tcp_seq and tcp_ack" in text
