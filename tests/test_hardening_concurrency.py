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
from tracecore.dataset import Dataset
from tracecore.errors import DatasetError, ExitCode, UsageError
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.lock import dataset_lock
from tracecore.query import run_sql

REPO = Path(__file__).resolve().parent.parent
SAMPLE = (17027, 16_111_104)  # packets and bytes on the wire of the sample run
INGESTS = 5
READERS, QUERIES_EACH = 4, 5  # 20 connections, each queried before and after a commit
WAIT_S = 120.0


def _catalog_id(out: Path) -> tuple[int, int]:
    """Which catalog file is committed (the inode alone may be reused by a later commit)."""
    st = os.stat(out / "tracecore.duckdb")
    return st.st_ino, st.st_mtime_ns


@pytest.mark.slow
def test_queries_across_commits_never_miss_a_file(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "src")
    out = tmp_path / "data"
    assert not ingest([run], out, jobs=1).failed
    done = threading.Event()
    codes: list[tuple[int, str]] = []
    # The promise is one commit: a connection finds its files until the commit after the one that
    # replaced its catalog. So each ingest starts only once every reader holding a connection from
    # before the last commit has queried it again (else a reader that loses the dataset lock to the
    # next ingest a few times holds its connection across two commits).
    opened_on: dict[int, tuple[int, int]] = {}  # reader -> catalog committed before it connected
    turn = threading.Condition()
    stalls: list[dict[int, tuple[int, int]]] = []

    def readers_caught_up() -> bool:
        return all(seen == _catalog_id(out) for seen in opened_on.values())

    def reingest() -> None:
        try:
            for _ in range(INGESTS):
                with turn:
                    if not turn.wait_for(readers_caught_up, timeout=WAIT_S):
                        stalls.append(dict(opened_on))
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

    def read(reader: int) -> None:
        for _ in range(QUERIES_EACH):
            if done.is_set():
                return
            with turn:
                before = opened_on[reader] = _catalog_id(out)
            try:
                con = open_catalog(out)
                try:
                    sql = "SELECT count(*), sum(frame_len) FROM packets"
                    results.append(con.execute(sql).fetchone())
                    # The connection outlives the next commit: once it is seen, the dataset lock
                    # waits for that ingest to finish (its deletions included), and the writer
                    # starts the one after it only when this reader is done (`readers_caught_up`).
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
            finally:
                with turn:
                    del opened_on[reader]
                    turn.notify_all()

    writer = threading.Thread(target=reingest)
    readers = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
    writer.start()
    for thread in readers:
        thread.start()
    for thread in [writer, *readers]:
        thread.join(timeout=INGESTS * WAIT_S)
    assert not any(t.is_alive() for t in [writer, *readers])
    assert stalls == []
    assert [code for code, _ in codes] == [0] * INGESTS, codes
    failures = [r for r in results if r != SAMPLE]
    assert failures == [], spanned
    assert sum(spanned) >= READERS  # each reader held a connection across at least one commit
    assert len(results) >= 2 * READERS


@pytest.mark.parametrize("unsafe", [False, True])
def test_a_connection_held_across_two_commits_is_told_the_dataset_changed(
    tmp_path: Path, unsafe: bool
) -> None:
    """One commit later its files are still there; two commits later the query says why it fails
    (before: DuckDB's "file system operations are disabled by configuration", exit 2)."""
    run = copy_run(tmp_path / "src")
    out = tmp_path / "data"
    sql = "SELECT count(*) AS n, sum(frame_len) AS b FROM packets"
    assert not ingest([run], out, jobs=1).failed
    con = open_catalog(out, unsafe=unsafe)
    try:
        assert not ingest([run], out, jobs=1, force=True).failed
        assert tuple(run_sql(con, sql, unsafe=unsafe).to_pylist()[0].values()) == SAMPLE
        assert not ingest([run], out, jobs=1, force=True).failed
        with pytest.raises(DatasetError) as err:
            run_sql(con, sql, unsafe=unsafe)
        if unsafe:  # a file the query names itself, not one of the catalog's, is the query's own error
            other = out / "packets" / "elsewhere.parquet"
            with pytest.raises(UsageError, match="No files found that match the pattern"):
                run_sql(con, f"SELECT * FROM read_parquet('{other}')", unsafe=True)
    finally:
        con.close()
    assert err.value.exit_code == ExitCode.DATASET
    message = str(err.value)
    assert message.startswith(str(out.resolve() / "packets" / f"run={run.name}"))
    assert message.endswith(
        ".parquet: this part file is gone: the dataset was ingested again twice since this connection "
        "opened it; open the dataset again and rerun the query"
    )
    assert tuple(Dataset(out, as_="arrow").sql(sql).to_pylist()[0].values()) == SAMPLE


def test_a_query_rebuilding_a_copied_dataset_does_not_turn_an_ingest_away(
    tmp_path: Path, sample_dataset: Path
) -> None:
    """A query on a copied dataset rebuilds its views in place under `.lock`; an ingest started then
    failed at once ("another ingest is writing this dataset"). It now waits for the rebuild (issue 36,
    item 6): here the query is held inside its rebuild (`TRACECORE_TEST_PAUSE_AT=draft`) and ended."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(sample_dataset, copy)  # views made for another root: the first query rebuilds them
    script = Path(sys.executable).with_name("tracecore")
    marker = tmp_path / "paused"
    env = {**os.environ, "TRACECORE_TEST_PAUSE_AT": "draft", "TRACECORE_TEST_PAUSE_MARKER": str(marker)}
    reader = subprocess.Popen([script, "query", "flow_counts", "--data", copy], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    writer = None
    try:
        deadline = time.monotonic() + WAIT_S
        while not marker.exists() and reader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.read_text().split()[0] == "draft"
        assert (copy / ".lock").read_text().split() == [str(reader.pid), "refresh"]
        run = copy_run(tmp_path / "src")
        writer = subprocess.Popen([script, "ingest", run, "--out", copy, "--force", "-q"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1.5)
        assert writer.poll() is None  # waiting for the rebuild, not failed
    finally:
        reader.kill()
        reader.wait()
    _, err = writer.communicate(timeout=WAIT_S)
    assert writer.returncode == 0, err
    con = open_catalog(copy)
    try:
        assert run_sql(con, "SELECT count(*) FROM runs").to_pylist()[0]["count_star()"] >= 1
        packets = run_sql(con, "SELECT count(*) AS n FROM packets WHERE run = $r", {"r": run.name})
        assert packets.to_pylist()[0]["n"] == SAMPLE[0]
    finally:
        con.close()
