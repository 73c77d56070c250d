"""`tracecore read -` reads standard input: `tcpdump -w - | tracecore read -` (issue 13 item 5)."""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

REPO = Path(__file__).resolve().parent.parent
COMPRESS = {"": bytes, ".gz": gzip.compress, ".xz": lzma.compress, ".zst": zstandard.compress}


def _read(source: str, stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tracecore", "read", source, "--format", "csv"],
        cwd=REPO,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "suffix", "packets"),
    [
        ("dpkt__http.pcap", "", 43),
        ("ndpi__quic-v2.pcapng", "", 19),
        ("dpkt__http.pcap", ".gz", 43),
        ("pcapplusplus__many_interfaces-1.pcapng", ".zst", 64),
        ("tcpreplay__test.pcap", ".xz", 179),
    ],
)
def test_a_pipe_reads_like_the_file(
    corpus_dir: Path, tmp_path: Path, name: str, suffix: str, packets: int
) -> None:
    capture = tmp_path / f"{name}{suffix}"
    capture.write_bytes(COMPRESS[suffix]((corpus_dir / name).read_bytes()))
    cat = subprocess.Popen(["cat", str(capture)], stdout=subprocess.PIPE)
    assert cat.stdout is not None
    piped = _read("-", stdin=cat.stdout.fileno())
    cat.stdout.close()
    assert cat.wait() == 0
    direct = _read(str(corpus_dir / name))
    assert (piped.returncode, piped.stderr) == (0, direct.stderr)
    assert piped.stdout == direct.stdout
    assert len(list(csv.DictReader(io.StringIO(piped.stdout)))) == packets


def test_empty_or_foreign_input_is_one_line_exit_3() -> None:
    cases = ((b"", "-: empty input: no capture"), (b"hello\n", "-: not a pcap or pcapng capture"))
    for data, reason in cases:
        command = [sys.executable, "-m", "tracecore", "read", "-"]
        done = subprocess.run(command, cwd=REPO, input=data, capture_output=True, timeout=120)
        assert done.returncode == 3
        assert done.stdout == b""
        assert done.stderr.decode().startswith(f"Error: {reason}")
        assert len(done.stderr.splitlines()) == 1
