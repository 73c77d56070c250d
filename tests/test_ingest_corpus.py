"""Every file of ../shared/corpus (captures written by other tools) ingested: Parquet = reader = tshark."""

from __future__ import annotations

import csv
from pathlib import Path

from tracecore.errors import CaptureError
from tracecore.ingest import open_catalog
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


# Files whose stored (packets, sum of frame_len) differ from tshark's reading on purpose:
# {file: (why, tshark's reading, what tracecore stores)}. Every other corpus file is compared.
DIFFERS_FROM_TSHARK: dict[str, tuple[str, tuple[int, int], tuple[int, int]]] = {
    "pcapngtestgen__le-basic-test018.pcapng": (
        "tshark 4.0 emits each of the 4 pcapng Custom Blocks as a frame of its own; they hold no packet",
        (8, 1464),
        (4, 1312),
    ),
}

# Corrupt files and the status ingest gives them (tshark rejects the first three outright: 0
# frames; it reads the other two up to the same corrupt record as tracecore). All others: ingested.
NOT_INGESTED: dict[str, str] = {
    "libpcap__pcap-invalid-version-1.pcap": "failed",  # pcap version 1.4
    "libpcap__pcapng-invalid-vers-1.pcapng": "failed",  # pcapng version 0.1
    "libpcap__shb-option-too-long.pcapng": "failed",  # section header trailer length mismatch
    "tcpdump__cfm_sender_id-oobr_pre-18d7f66.pcap": "partial",  # record 2 claims 392950 bytes
    "tcpdump__kday1_pre-eabcd87.pcap": "partial",  # record 2 claims 138952731 bytes
}


def test_every_corpus_file_matches_reader_and_tshark(corpus_dataset: tuple, corpus_dir: Path) -> None:
    out, manifest, summary = corpus_dataset
    names = [m["file"] for m in manifest]
    on_disk = {p.name for p in corpus_dir.iterdir() if p.is_file()} - {"MANIFEST.csv", "README.md"}
    assert sorted(names) == sorted(on_disk)
    assert len(names) == 61
    con = open_catalog(out)
    stored = {
        r: (n, w)
        for r, n, w in con.execute(
            "SELECT run, count(*), sum(frame_len) FROM packets GROUP BY run"
        ).fetchall()
    }
    outcome = {c.file: c for c in summary.captures}
    assert sorted(outcome) == sorted(names)
    compared_to_tshark = set()
    for name in names:
        run = worker_key(name)[0]  # a lone file is its own run, named after it
        got = stored.get(run, (0, 0))
        assert got == _reader_count(corpus_dir / name), name
        status = outcome[name].status
        assert status == NOT_INGESTED.get(name, "ingested"), name
        if status != "ingested":
            assert name in (outcome[name].message or ""), name
        tshark = _tshark(corpus_dir / "expected" / f"{name}.tsv")
        if name in DIFFERS_FROM_TSHARK:
            why, want_tshark, want_stored = DIFFERS_FROM_TSHARK[name]
            assert (tshark, got) == (want_tshark, want_stored), f"{name}: {why}"
            assert tshark != got, f"{name}: the exception is no longer needed"
        else:
            assert got == tshark, name
            compared_to_tshark.add(name)
    assert compared_to_tshark == set(names) - set(DIFFERS_FROM_TSHARK)
    assert len(compared_to_tshark) == 60
    assert summary.failed  # the corpus holds corrupt files: the exit status says so


def test_exceptions_name_corpus_files(corpus_dir: Path) -> None:
    for name in [*DIFFERS_FROM_TSHARK, *NOT_INGESTED]:
        assert (corpus_dir / name).is_file(), name


def test_corrupt_corpus_files_are_reported_with_offsets(corpus_dataset: tuple) -> None:
    out, _, summary = corpus_dataset
    bad = [c for c in summary.captures if c.status in ("partial", "failed")]
    assert {c.file: c.status for c in bad} == NOT_INGESTED
    for c in bad:
        assert c.message
        assert c.message.count("\n") == 0
    con = open_catalog(out)
    rows = con.execute("SELECT file, status, error FROM captures WHERE status <> 'ok'").fetchall()
    assert {r[0] for r in rows} == {c.file for c in bad}
    assert all("byte offset" in r[2] or "cannot" in r[2] for r in rows)
