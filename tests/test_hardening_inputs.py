"""Inputs that cannot be read are reported, never skipped in silence, and never cost data already
ingested (issue 12, items 5 and 11)."""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_ingest_support import copy_run
from tracecore.ingest import ingest, open_catalog
from tracecore.sample import SAMPLE_RUN, sample_run

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PACKETS = 17027
PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the forked child only makes the calls


def _without_root_file_access() -> None:
    """Drop the capabilities that let root read any file, so a chmod 000 file is really unreadable
    (runs in the child between fork and exec: the bounding set limits what the new program gets)."""
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _ingest_cli(*args: str, unprivileged: bool = False) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "tracecore", "ingest", "--json", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_without_root_file_access if unprivileged else None,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else {}, proc.stderr


def _per_worker(out: Path) -> dict[str, int]:
    con = open_catalog(out)
    try:
        return dict(con.execute("SELECT worker, count(*) FROM packets_all GROUP BY worker").fetchall())
    finally:
        con.close()


def _captures(out: Path) -> dict[str, tuple[str, int]]:
    con = open_catalog(out)
    try:
        rows = con.execute("SELECT file, status, packets FROM captures").fetchall()
        return {file: (status, packets) for file, status, packets in rows}
    finally:
        con.close()


SAMPLE_WORKERS = {"W1": 4531, "W2": 4170, "W3": 4216, "W4": 4110}


def _make_unreadable(path: Path, how: str) -> None:
    if how == "chmod 000":
        path.chmod(0)
    elif how == "directory":
        path.unlink()
        path.mkdir()
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:  # a dangling symbolic link
        path.unlink()
        path.symlink_to(path.with_name("gone.pcap"))


@pytest.mark.parametrize("how", ["chmod 000", "directory", "fifo", "dangling symlink"])
def test_an_ingested_capture_that_became_unreadable_keeps_its_rows(tmp_path: Path, how: str) -> None:
    run = copy_run(tmp_path / "src")
    out = tmp_path / "data"
    assert not ingest([run], out, jobs=1).failed
    assert _per_worker(out) == SAMPLE_WORKERS
    capture = run / "worker-2-tcpdump.pcap"
    _make_unreadable(capture, how)
    rc, report, stderr = _ingest_cli(str(run), "--out", str(out), unprivileged=True)
    assert rc == 3, stderr
    by_file = {c["file"]: c for c in report["captures"]}
    assert by_file["worker-2-tcpdump.pcap"]["status"] == "failed"
    assert "removed" not in {c["status"] for c in report["captures"]}
    message = by_file["worker-2-tcpdump.pcap"]["message"]
    assert message.startswith(f"{capture}: ")
    assert "\n" not in message
    reason = {
        "chmod 000": "Permission denied",
        "directory": "a directory",
        "fifo": "a FIFO",
        "dangling symlink": "symbolic link to a missing file",
    }[how]
    assert reason in message
    assert _per_worker(out) == SAMPLE_WORKERS  # the rows read before are kept
    assert _captures(out)["worker-2-tcpdump.pcap"] == ("ok", 4216)


def _crc_failed_gzip(path: Path) -> None:
    blob = bytearray(gzip.compress((sample_run() / "worker-0-tcpdump.pcap").read_bytes()))
    blob[-8] ^= 0xFF  # the member's CRC-32 no longer matches its data
    path.write_bytes(bytes(blob))


def _pcapng_cut_in_its_interface_block(src: Path, path: Path) -> None:
    data = src.read_bytes()
    shb = struct.unpack_from("<I", data, 4)[0]
    idb = struct.unpack_from("<I", data, shb + 4)[0]
    path.write_bytes(data[: shb + idb - 2])


def test_inputs_skipped_in_silence_are_reported(tmp_path: Path, corpus_dir: Path) -> None:
    root = tmp_path / "src"
    run = copy_run(root)
    os.mkfifo(run / "worker-4-tcpdump.pcap")  # must not hang the ingest
    (run / "worker-5-tcpdump.pcap").symlink_to(run / "missing.pcap")
    (run / "worker-6-tcpdump.pcap").symlink_to(run / "worker-6-tcpdump.pcap")  # a loop
    hidden = root / "_scratch"
    hidden.mkdir()
    shutil.copy(sample_run() / "worker-0-tcpdump.pcap", hidden / "w0.pcap")
    (root / "gz-run").mkdir()
    _crc_failed_gzip(root / "gz-run" / "w0.pcap.gz")
    (root / "ng-run").mkdir()
    _pcapng_cut_in_its_interface_block(
        corpus_dir / "libpcap__rarp_req_reply.pcapng", root / "ng-run" / "w0.pcapng"
    )
    out = tmp_path / "data"
    rc, report, stderr = _ingest_cli(str(root), "--out", str(out))
    assert rc == 3, stderr
    reported = {Path(p["path"]).name: p["reason"] for p in report["problems"]}
    reported |= {c["file"]: c["message"] for c in report["captures"] if c["status"] in ("failed", "partial")}
    assert reported["worker-4-tcpdump.pcap"].endswith("not a regular file (a FIFO); not read")
    assert reported["worker-5-tcpdump.pcap"].endswith("symbolic link to a missing file")
    assert reported["worker-6-tcpdump.pcap"].endswith("symbolic link loop")
    assert "starts with '_'" in reported["_scratch"]
    assert "CRC check failed" in reported["w0.pcap.gz"]
    assert "cut short inside its first header blocks" in reported["w0.pcapng"]
    assert str(root / "ng-run" / "w0.pcapng") in reported["w0.pcapng"]
    assert len(reported) == 6
    statuses = {(c["run"], c["file"]): c["status"] for c in report["captures"]}
    assert statuses[("gz-run", "w0.pcap.gz")] == "partial"  # packets decoded before the CRC are kept
    assert statuses[("ng-run", "w0.pcapng")] == "failed"
    assert sorted(report["runs"]) == sorted([SAMPLE_RUN, "gz-run", "ng-run"])
    assert _per_worker(out)["W4"] == 4110
    con = open_catalog(out)
    try:
        got = con.execute("SELECT run, count(*) FROM packets GROUP BY run ORDER BY run").fetchall()
    finally:
        con.close()
    assert got == [("gz-run", 4531), (SAMPLE_RUN, SAMPLE_PACKETS)]


NCCL_LINES = (
    "gpu-a:3301:3301 [0] NCCL INFO NCCL version 2.20.5+cuda12.2\n"
    "gpu-a:3301:3301 [0] NCCL INFO Bootstrap : Using eth0:172.30.0.25<0>\n"
    "gpu-a:3301:3301 [0] NCCL INFO comm 0x43dc13b0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 80 "
    "commId 0x1f82c0ffee - Init START\n"
)


def test_a_utf16_log_is_read_not_skipped_in_silence(tmp_path: Path) -> None:
    """Before: a UTF-16 NCCL log (with or without a byte-order mark) passed for a binary file and was
    skipped without a word (issue 25, item 17), then was named and skipped; now it is read in its
    encoding, as a UTF-8 one (issue 36, item 3)."""
    run = copy_run(tmp_path / "src")
    (run / "worker-0-nccl.log").write_bytes(NCCL_LINES.encode("utf-16"))  # PowerShell's `>`: a BOM
    (run / "worker-1-nccl.log").write_bytes(NCCL_LINES.encode("utf-16-be"))  # none
    (run / "worker-2-nccl.log").write_text(NCCL_LINES)  # UTF-8
    rc, report, stderr = _ingest_cli(str(run), "--out", str(tmp_path / "data"))
    assert rc == 0, stderr
    assert not [w for w in report["warnings"] if "nccl.log" in w]
    con = open_catalog(tmp_path / "data")
    try:
        got = con.execute("SELECT worker, rank, nranks FROM nccl_ranks ORDER BY worker").fetchall()
        assert got == [("W1", 0, 2), ("W2", 0, 2), ("W3", 0, 2)]
    finally:
        con.close()
