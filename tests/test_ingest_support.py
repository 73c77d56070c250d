"""Helpers for the ingest tests (no tests here): real captures rewritten, tshark readings.

Captures are never synthesised from nothing: the helpers cut, repeat or corrupt the records of the real
sample captures (made by bench/ on the netns testbed), keeping their real packet bytes.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

from tests.conftest import require_tool
from tracecore.sample import both_directions_run, sample_run


def records(path: Path) -> tuple[bytes, list[bytes]]:
    """(24-byte header, raw records incl. their 16-byte headers) of a little-endian classic pcap."""
    data = path.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1", f"{path} is not a little-endian µs pcap"
    out, pos = [], 24
    while pos + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        out.append(data[pos : pos + 16 + caplen])
        pos += 16 + caplen
    return data[:24], out


def write_pcap(path: Path, header: bytes, recs: list[bytes]) -> Path:
    path.write_bytes(header + b"".join(recs))
    return path


def shifted(rec: bytes, seconds: int) -> bytes:
    sec = struct.unpack_from("<I", rec, 0)[0]
    return struct.pack("<I", sec + seconds) + rec[4:]


def repeat_pcap(src: Path, dst: Path, min_bytes: int) -> Path:
    """`src`'s records repeated (each copy shifted later in time) until the file exceeds `min_bytes`."""
    header, recs = records(src)
    span = (struct.unpack_from("<I", recs[-1])[0] - struct.unpack_from("<I", recs[0])[0]) + 1
    with open(dst, "wb") as fh:
        fh.write(header)
        size, k = 24, 0
        while size < min_bytes:
            chunk = b"".join(shifted(r, k * span) for r in recs)
            fh.write(chunk)
            size += len(chunk)
            k += 1
    return dst


def copy_run(dst_root: Path, which: str = "sample") -> Path:
    """A writable copy of a sample run folder under dst_root (same folder name)."""
    src = sample_run() if which == "sample" else both_directions_run()
    dst = dst_root / src.name
    shutil.copytree(src, dst)
    return dst


def tshark(path: Path, display_filter: str | None = None) -> tuple[int, int]:
    """(frames, sum of frame.len) as tshark reads the file."""
    argv = [require_tool("tshark"), "-n", "-r", str(path), "-T", "fields", "-e", "frame.len"]
    if display_filter:
        argv += ["-Y", display_filter]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    return len(out), sum(int(x) for x in out)


def retired_parts(out: Path) -> set[str]:
    """Part files the last commit stopped naming, kept for readers until the next commit."""
    import json

    from tracecore.ingest import open_catalog

    con = open_catalog(out)
    try:
        return set(json.loads(con.execute("SELECT value FROM _meta WHERE key = 'retired'").fetchone()[0]))
    finally:
        con.close()
