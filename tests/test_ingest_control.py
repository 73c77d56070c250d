"""Two ingests in one process keep their cancel flag and progress apart (the control is per call)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.test_ingest_support import records
from tracecore.errors import ExitCode, IngestCancelledError
from tracecore.ingest import IngestControl, ingest, open_catalog
from tracecore.sample import both_directions_run, sample_run

WAIT_S = 60


def _packets(path: Path) -> int:
    """Records in a pcap, counted by the test's own parser (not tracecore's reader)."""
    return len(records(path)[1])


def test_cancelling_one_ingest_leaves_the_other_and_its_progress_alone(tmp_path: Path) -> None:
    a_run, b_run = sample_run(), both_directions_run()
    b_expected = sum(_packets(p) for p in b_run.glob("*.pcap"))
    a_first = max(a_run.glob("*.pcap"), key=lambda p: p.stat().st_size)  # read first: largest first
    b_ticked, a_cancelled = threading.Event(), threading.Event()
    a_ticks: list[int] = []
    b_ticks: list[int] = []

    def on_a(nbytes: int, packets: int) -> None:
        a_ticks.append(packets)
        assert b_ticked.wait(WAIT_S)  # B is mid-ingest when A is cancelled
        control_a.cancel()
        a_cancelled.set()

    def on_b(nbytes: int, packets: int) -> None:
        b_ticks.append(packets)
        b_ticked.set()
        assert a_cancelled.wait(WAIT_S)  # B goes on reading after A's cancel

    control_a, control_b = IngestControl(on_progress=on_a), IngestControl(on_progress=on_b)
    outcome: dict[str, object] = {}

    def run_a() -> None:
        try:
            ingest([a_run], tmp_path / "a", jobs=1, control=control_a)
        except IngestCancelledError as err:
            outcome["a"] = err

    thread_a = threading.Thread(target=run_a)
    thread_a.start()
    summary_b = ingest([b_run], tmp_path / "b", jobs=1, control=control_b)
    thread_a.join(WAIT_S)

    assert isinstance(outcome["a"], IngestCancelledError)
    assert outcome["a"].exit_code is ExitCode.INTERRUPTED  # the enum's member, as every other error's
    assert not control_b.cancelled
    assert [c.status for c in summary_b.captures] == ["ingested"] * 4
    assert sum(c.packets for c in summary_b.captures) == b_expected
    assert sum(b_ticks) == b_expected  # every tick of B reached B's callback, none of A's
    assert len(b_ticks) == 4  # one batch per (small) capture
    assert a_ticks == [_packets(a_first)]  # A stopped after its first capture; none of B's ticks
    assert not (tmp_path / "a" / "tracecore.duckdb").exists()  # a cancelled ingest commits nothing
    assert not (tmp_path / "a" / "packets").exists()
    con = open_catalog(tmp_path / "b")
    try:
        assert con.sql("SELECT count(*) FROM packets_all").fetchall() == [(b_expected,)]
    finally:
        con.close()


def test_a_control_cancelled_before_the_ingest_commits_nothing(tmp_path: Path) -> None:
    control = IngestControl()
    control.cancel()
    with pytest.raises(IngestCancelledError, match="cancelled; the dataset is unchanged"):
        ingest([sample_run()], tmp_path / "out", jobs=2, control=control)
    assert not (tmp_path / "out" / "tracecore.duckdb").exists()


def test_worker_processes_report_to_their_own_ingest_and_stop_on_its_cancel(tmp_path: Path) -> None:
    expected = sum(_packets(p) for p in sample_run().glob("*.pcap"))
    ticks: list[int] = []
    full = ingest(
        [sample_run()],
        tmp_path / "full",
        jobs=4,
        parallel_min_bytes=0,
        control=IngestControl(lambda nbytes, packets: ticks.append(packets)),
    )
    assert sum(c.packets for c in full.captures) == expected
    assert sum(ticks) == expected

    cancelled = IngestControl()
    cancelled.on_progress = lambda nbytes, packets: cancelled.cancel()
    with pytest.raises(IngestCancelledError):
        ingest([sample_run()], tmp_path / "cut", jobs=4, parallel_min_bytes=0, control=cancelled)
    assert not (tmp_path / "cut" / "tracecore.duckdb").exists()
