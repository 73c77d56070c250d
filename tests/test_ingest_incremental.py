"""Reruns: unchanged captures are skipped, changed ones replace their partitions, nothing is duplicated."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from tests.test_ingest_support import copy_run, records, retired_parts, write_pcap
from tracecore.ingest import ingest, open_catalog
from tracecore.reader import read_capture
from tracecore.sample import SAMPLE_RUN, both_directions_run


def _counts(out: Path) -> dict[str, int]:
    con = open_catalog(out)
    try:
        return dict(
            con.execute(
                "SELECT worker, count(*) FROM packets WHERE run = ? GROUP BY worker", [SAMPLE_RUN]
            ).fetchall()
        )
    finally:
        con.close()


def _live(out: Path) -> set[str]:
    """The part files the committed catalog reads (relative paths)."""
    con = open_catalog(out)
    try:
        return {row[0] for row in con.execute("SELECT path FROM _files").fetchall()}
    finally:
        con.close()


def _parts(out: Path) -> dict[str, int]:
    return {p.relative_to(out).as_posix(): p.stat().st_mtime_ns for p in (out / "packets").rglob("*.parquet")}


def test_rerun_skips_unchanged_and_force_reingests(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    first = ingest([run], out, jobs=1)
    assert [c.status for c in first.captures] == ["ingested"] * 4
    before, parts = _counts(out), _parts(out)
    again = ingest([run], out, jobs=1)
    assert [c.status for c in again.captures] == ["unchanged"] * 4
    assert _counts(out) == before
    assert _parts(out) == parts
    os.utime(run / "worker-0-tcpdump.pcap")  # touched, same bytes: still unchanged
    assert {c.status for c in ingest([run], out, jobs=1).captures} == {"unchanged"}
    forced = ingest([run], out, jobs=1, force=True)
    assert [c.status for c in forced.captures] == ["ingested"] * 4
    assert _counts(out) == before
    assert not _live(out) & set(parts)  # replaced by new files
    assert len(_live(out)) == len(parts)  # a dense and a sparse part per capture
    assert retired_parts(out) == set(parts)  # the old ones kept for readers until the next commit
    assert set(_parts(out)) == _live(out) | set(parts)
    ingest([run], out, jobs=1)
    assert set(_parts(out)) == _live(out)


def test_changed_capture_replaces_its_partition_only(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    ingest([run], out, jobs=1)
    before, parts = _counts(out), _parts(out)
    header, recs = records(run / "worker-1-tcpdump.pcap")
    write_pcap(run / "worker-1-tcpdump.pcap", header, recs[:1000])  # the capture was re-made, shorter
    summary = ingest([run], out, jobs=1)
    status = {c.file: c.status for c in summary.captures}
    assert status == {
        "worker-0-tcpdump.pcap": "unchanged",
        "worker-1-tcpdump.pcap": "ingested",
        "worker-2-tcpdump.pcap": "unchanged",
        "worker-3-tcpdump.pcap": "unchanged",
    }
    after = _counts(out)
    assert after == {**before, "W2": 1000}
    new_parts = _parts(out)
    assert set(new_parts) == _live(out) | retired_parts(out)  # no leftovers
    assert {p.split("/")[2] for p in retired_parts(out)} == {"worker=W2"}
    changed = [p for p in _live(out) if "worker=W2" in p]
    assert len(changed) == 2  # dense + nullable: the first 1000 records hold 3 ARP frames (tshark)
    assert not set(changed) & set(parts)
    assert all(parts[p] == new_parts[p] for p in new_parts if "worker=W2" not in p)


def test_deleted_capture_is_removed_and_rotated_parts_join_their_worker(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    ingest([run], out, jobs=1)
    # worker-3's capture is now rotated in two parts, the second gzip-compressed
    header, recs = records(run / "worker-3-tcpdump.pcap")
    (run / "worker-3-tcpdump.pcap").unlink()
    write_pcap(run / "worker-3-tcpdump.pcap0", header, recs[:2000])
    (run / "worker-3-tcpdump.pcap1.gz").write_bytes(gzip.compress(header + b"".join(recs[2000:])))
    summary = ingest([run], out, jobs=1)
    status = sorted((c.file, c.status) for c in summary.captures)
    assert ("worker-3-tcpdump.pcap", "removed") in status
    assert ("worker-3-tcpdump.pcap0", "ingested") in status
    assert (
        "worker-3-tcpdump.pcap1.gz",
        "ingested",
    ) in status
    con = open_catalog(out)
    w4 = con.execute(
        "SELECT n_files, packets, ip FROM workers WHERE run = ? AND worker = 'W4'", [SAMPLE_RUN]
    ).fetchone()
    assert w4 == (2, len(recs), "192.168.17.53")
    assert con.execute("SELECT count(*) FROM packets WHERE run = ?", [SAMPLE_RUN]).fetchone()[0] == 17027
    con.close()
    (run / "worker-2-tcpdump.pcap").unlink()
    ingest([run], out, jobs=1)
    assert set(_counts(out)) == {"W1", "W2", "W3"}  # worker-3 keeps W3... labels follow IP order
    con = open_catalog(out)
    assert con.execute("SELECT ip FROM workers WHERE run = ? AND worker = 'W3'", [SAMPLE_RUN]).fetchone() == (
        "192.168.17.53",
    )
    assert (
        con.execute("SELECT count(*) FROM packets WHERE run = ?", [SAMPLE_RUN]).fetchone()[0] == 17027 - 4216
    )
    con.close()
    # W1, W2, and W3's parts from two files (relabelled from W4): no leftovers
    assert set(_parts(out)) == _live(out) | retired_parts(out)
    assert {p.split("/")[2] for p in _live(out)} == {"worker=W1", "worker=W2", "worker=W3"}


def test_single_file_input_adds_to_its_run(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    ingest([run / "worker-0-tcpdump.pcap"], out, jobs=1)
    assert _counts(out) == {"W1": 4531}
    ingest([run / "worker-2-tcpdump.pcap"], out, jobs=1)
    assert _counts(out) == {"W1": 4531, "W2": 4216}  # .50 and .52: labels by IP order
    other = both_directions_run() / "worker-0-tcpdump.pcap"
    ingest([other], out, jobs=1)  # another run: this one is untouched
    assert _counts(out) == {"W1": 4531, "W2": 4216}
    con = open_catalog(out)
    n = con.execute("SELECT count(*) FROM packets_all").fetchone()[0]
    assert n == 4531 + 4216 + read_capture(other).num_rows


def test_a_connection_opened_after_an_ingest_sees_it(tmp_path: Path) -> None:
    """Even while an older connection to the replaced catalog is still open in this process."""
    run = copy_run(tmp_path / "in")
    out = tmp_path / "out"
    ingest([run], out, jobs=1)
    before = open_catalog(out)
    header, recs = records(run / "worker-0-tcpdump.pcap")
    write_pcap(run / "worker-0-tcpdump.pcap", header, recs[:100])
    ingest([run], out, jobs=1)
    after = open_catalog(out)
    assert after.execute("SELECT count(*) FROM packets WHERE worker = 'W1'").fetchone() == (100,)
    assert before.execute("SELECT packets FROM captures WHERE worker = 'W1'").fetchone() == (4531,)
    before.close()
    after.close()
