"""Queries running while ingests commit see the old or the new dataset, never a missing file
(issue 12, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.test_ingest_support import copy_run
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.lock import dataset_lock

REPO = Path(__file__).resolve().parent.parent
SAMPLE = (17027, 16_111_104)  # packets and bytes on the wire of the sample run
INGESTS = 5
READERS, QUERIES_EACH = 4, 5  # 20 connections, each queried before and after a commit
WAIT_S = 120.0


def _catalog_id(out: Path) -> int:
    return os.stat(out / "tracecore.duckdb").st_ino


@pytest.mark.slow
def test_queries_across_commits_never_miss_a_file(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "src")
    out = tmp_path / "data"
    assert not ingest([run], out, jobs=1).failed
    done = threading.Event()
    codes: list[tuple[int, str]] = []

    def reingest() -> None:
        try:
            for _ in range(INGESTS):
                argv = ["ingest", str(run), "--out", str(out), "--force", "-j", "1", "-q"]
                proc = subprocess.run(
                    [sys.executable, "-m", "tracecore", *argv, "--wait", str(WAIT_S)],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=WAIT_S,
                )
                codes.append((proc.returncode, proc.stderr))
        finally:
            done.set()

    results: list[tuple[int, int] | str] = []
    spanned: list[bool] = []

    def read() -> None:
        for _ in range(QUERIES_EACH):
            if done.is_set():
                return
            before = _catalog_id(out)
            try:
                con = open_catalog(out)
                try:
                    sql = "SELECT count(*), sum(frame_len) FROM packets"
                    results.append(con.execute(sql).fetchone())
                    # The connection outlives the next commit: once it is seen, the dataset lock
                    # waits for that ingest to finish (its deletions included) and keeps the one
                    # after it from committing while the old catalog is queried again.
                    deadline = time.monotonic() + WAIT_S
                    while _catalog_id(out) == before and not done.is_set() and time.monotonic() < deadline:
                        time.sleep(0.005)
                    with dataset_lock(out, WAIT_S):
                        spanned.append(_catalog_id(out) != before)
                        results.append(con.execute(sql).fetchone())
                finally:
                    con.close()
            except Exception as err:  # every failure is counted, whatever its kind
                results.append(f"{type(err).__name__}: {err}")

    writer = threading.Thread(target=reingest)
    readers = [threading.Thread(target=read) for _ in range(READERS)]
    writer.start()
    for thread in readers:
        thread.start()
    for thread in [writer, *readers]:
        thread.join(timeout=INGESTS * WAIT_S)
    assert not any(t.is_alive() for t in [writer, *readers])
    assert [code for code, _ in codes] == [0] * INGESTS, codes
    failures = [r for r in results if r != SAMPLE]
    assert failures == [], spanned
    assert sum(spanned) >= READERS  # each reader held a connection across at least one commit
    assert len(results) >= 2 * READERS
