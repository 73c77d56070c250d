"""Every file of ../shared/corpus (captures written by other tools) ingested: Parquet = reader = tshark."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tracecore.errors import CaptureError
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.discover import worker_key
from tracecore.reader import CaptureReader


def _reader_count(path: Path) -> tuple[int, int]:
    """(packets, sum frame_len) the reader yields, keeping the good packets before an error."""
    n = wire = 0
    try:
        for batch in CaptureReader(path).batches():
            n += batch.num_rows
            wire += int(batch.column("frame_len").to_numpy().sum())
    except CaptureError:
        pass
    return n, wire


def _tshark(tsv: Path) -> tuple[int, int]:
    with open(tsv, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return len(rows), sum(int(r["frame.len"]) for r in rows)


@pytest.fixture(scope="module")
def corpus_dataset(
    corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict], object]:
    with open(corpus_dir / "MANIFEST.csv", encoding="utf-8", newline="") as fh:
        manifest = list(csv.DictReader(fh))
    out = tmp_path_factory.mktemp("corpus") / "data"
    summary = ingest([corpus_dir / m["file"] for m in manifest], out, jobs=1)
    return out, manifest, summary


def test_every_corpus_file_matches_reader_and_tshark(corpus_dataset: tuple, corpus_dir: Path) -> None:
    out, manifest, summary = corpus_dataset
    con = open_catalog(out)
    stored = {
        r: (n, w)
        for r, n, w in con.execute(
            "SELECT run, count(*), sum(frame_len) FROM packets GROUP BY run"
        ).fetchall()
    }
    outcome = {c.file: c for c in summary.captures}
    compared_to_tshark = 0
    for m in manifest:
        path = corpus_dir / m["file"]
        run = worker_key(m["file"])[0]  # a lone file is its own run, named after it
        expect = _reader_count(path)
        assert stored.get(run, (0, 0)) == expect, m["file"]
        status = outcome[m["file"]].status
        if m["packets"] == m["tshark_frames"] and status == "ingested":
            assert expect == _tshark(corpus_dir / "expected" / f"{m['file']}.tsv"), m["file"]
            compared_to_tshark += 1
        if status in ("partial", "failed"):
            assert m["file"] in (outcome[m["file"]].message or ""), m["file"]
    assert compared_to_tshark == 55  # of 61: the rest differ from tshark's count or were not ingested whole
    assert summary.failed is True  # the corpus holds corrupt files: the exit status says so


def test_corrupt_corpus_files_are_reported_with_offsets(corpus_dataset: tuple) -> None:
    out, _, summary = corpus_dataset
    bad = [c for c in summary.captures if c.status in ("partial", "failed")]
    assert sorted((c.file, c.status) for c in bad) == [
        ("libpcap__pcap-invalid-version-1.pcap", "failed"),
        ("libpcap__pcapng-invalid-vers-1.pcapng", "failed"),
        ("libpcap__shb-option-too-long.pcapng", "failed"),
        ("tcpdump__cfm_sender_id-oobr_pre-18d7f66.pcap", "partial"),
        ("tcpdump__kday1_pre-eabcd87.pcap", "partial"),
    ]
    for c in bad:
        assert c.message
        assert c.message.count("\n") == 0
    con = open_catalog(out)
    rows = con.execute("SELECT file, status, error FROM captures WHERE status <> 'ok'").fetchall()
    assert {r[0] for r in rows} == {c.file for c in bad}
    assert all("byte offset" in r[2] or "cannot" in r[2] for r in rows)
