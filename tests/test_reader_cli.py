"""`tracecore read`: table, csv and parquet output, --limit, and one-line errors."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow.parquet as pq
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.reader import read_capture
from tracecore.schema import PACKET_COLUMNS

runner = CliRunner()
HTTP = "dpkt__http.pcap"


def test_table_is_tshark_like(corpus_dir: Path) -> None:
    result = runner.invoke(app, ["read", str(corpus_dir / HTTP), "--limit", "3"])
    assert result.exit_code == 0, result.output
    head = "No.     Time          Source   Destination     Proto Length Info"
    there, back = "145.254.160.237 → 65.208.228.223 ", " 65.208.228.223 → 145.254.160.237"
    assert result.stdout.splitlines() == [
        head,
        f"  1 0.000000 {there} TCP       62 3372 → 80 [SYN] Seq=0 Win=8760 Len=0",
        f"  2 0.911310 {back} TCP       62 80 → 3372 [SYN, ACK] Seq=0 Ack=1 Win=5840 Len=0",
        f"  3 0.911310 {there} TCP       54 3372 → 80 [ACK] Seq=1 Ack=1 Win=9660 Len=0",
    ]


def test_table_names_link_type_when_not_ip(corpus_dir: Path) -> None:
    path = corpus_dir / "libpcap__wpa-Induction.pcap"
    result = runner.invoke(app, ["read", str(path), "-n", "1"])
    assert result.exit_code == 0
    assert "link 127" in result.stdout.splitlines()[1]
    warning = (
        f"Warning: {path}: 10 frames of link type IEEE802_11_RADIOTAP (127) kept with null IP fields: "
        "tracecore has no network decoder for that link type"
    )
    assert result.stderr.splitlines() == [warning]  # counted and named, on stderr only
    assert "IEEE802_11_RADIOTAP" not in result.stdout


def test_csv_has_schema_columns_and_values(corpus_dir: Path) -> None:
    result = runner.invoke(app, ["read", str(corpus_dir / HTTP), "--format", "csv"])
    assert result.exit_code == 0
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == PACKET_COLUMNS
    assert len(rows) == 43
    assert rows[0]["src_ip"] == "145.254.160.237"
    assert rows[0]["ts_ns"] == "1084443427311224000"
    assert rows[3]["l4_payload_len"] == "479"


def test_csv_limit_to_file(corpus_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.csv"
    result = runner.invoke(
        app, ["read", str(corpus_dir / HTTP), "-f", "csv", "--limit", "5", "--out", str(out)]
    )
    assert result.exit_code == 0
    assert result.stdout == ""
    assert len(list(csv.DictReader(out.open()))) == 5


def test_parquet_round_trip(corpus_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.parquet"
    path = corpus_dir / "pcapplusplus__many_interfaces-1.pcapng"
    result = runner.invoke(app, ["read", str(path), "--format", "parquet", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == PACKET_COLUMNS
    assert table.to_pylist() == read_capture(path).to_pylist()


def test_parquet_needs_out(corpus_dir: Path) -> None:
    result = runner.invoke(app, ["read", str(corpus_dir / HTTP), "--format", "parquet"])
    assert result.exit_code == 2
    assert "--out" in result.stderr


def test_not_a_capture_is_one_line_exit_3(tmp_path: Path) -> None:
    bad = tmp_path / "notes.pcap"
    bad.write_text("not a capture at all\n")
    result = runner.invoke(app, ["read", str(bad)])
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"Error: {bad}: not a pcap or pcapng capture")
    assert "Traceback" not in result.output


def test_corrupt_file_prints_good_packets_then_error(corpus_dir: Path) -> None:
    result = runner.invoke(app, ["read", str(corpus_dir / "tcpdump__kday1_pre-eabcd87.pcap"), "-f", "csv"])
    assert result.exit_code == 3
    assert len(result.stdout.splitlines()) == 2  # header + the one good packet
    assert "captured length 138952731" in result.stderr
    assert "at byte offset 222" in result.stderr


def test_truncated_file_warns_on_stderr(corpus_dir: Path) -> None:
    result = runner.invoke(app, ["read", str(corpus_dir / "tcpdump__kday2_pre-eabcd87.pcap")])
    assert result.exit_code == 0
    assert len(result.stdout.splitlines()) == 6
    assert result.stderr.startswith("Warning: ")
    assert "byte offset 897" in result.stderr
