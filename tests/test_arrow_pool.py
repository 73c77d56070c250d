"""Ingest allocates Arrow memory from the system allocator (tracecore.ingest.arrow_pool), restores the
caller's pool afterwards, leaves a pool the user chose alone, and writes the same dataset either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.arrow_pool import CHOSEN_BY_USER, system_pool
from tracecore.sample import sample_run

TRACECORE = Path(sys.executable).parent / "tracecore"


def test_system_pool_inside_and_the_previous_pool_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    before = pa.default_memory_pool().backend_name
    assert before != "system"  # pyarrow's own default (mimalloc or jemalloc), or this test proves nothing
    with system_pool():
        assert pa.default_memory_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == before


def test_ingests_on_two_threads_leave_the_pool_they_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two ingests at once (threads of one process) leave their blocks in either order: the system
    pool holds until both have left, then the pool found before the first is back."""
    monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    before = pa.default_memory_pool().backend_name
    first, second = system_pool(), system_pool()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # the first ingest ends while the second still runs
    assert pa.default_memory_pool().backend_name == "system"
    second.__exit__(None, None, None)
    assert pa.default_memory_pool().backend_name == before


def test_a_pool_the_user_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHOSEN_BY_USER, "mimalloc")
    before = pa.default_memory_pool().backend_name
    with system_pool():
        assert pa.default_memory_pool().backend_name == before


def test_ingest_allocates_from_the_system_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CHOSEN_BY_USER, raising=False)
    before = pa.default_memory_pool().backend_name
    system = pa.system_memory_pool()
    allocations = system.num_allocations()
    summary = ingest([sample_run()], tmp_path / "ds", jobs=2)
    assert summary.packets > 10_000
    assert system.num_allocations() - allocations > 100  # the batches' columns and the encoders' buffers
    assert pa.default_memory_pool().backend_name == before


@pytest.mark.parametrize(("chosen", "pool"), [(None, "system"), ("mimalloc", "mimalloc")])
def test_worker_processes_use_the_system_pool_unless_the_user_chose_one(
    chosen: str | None, pool: str
) -> None:
    code = (
        "from tracecore.ingest.control import init_worker; init_worker(None, None); "
        "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    )
    env = {k: v for k, v in os.environ.items() if k != CHOSEN_BY_USER}
    if chosen:
        env[CHOSEN_BY_USER] = chosen
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == pool


def _packets(out: Path) -> list[tuple]:
    con = open_catalog(out)
    try:
        return con.execute(
            "SELECT worker, count(*), sum(frame_len), sum(ts_ns % 1000003),"
            " sum(hash(src_ip, dst_ip, tcp_seq)) FROM packets GROUP BY worker ORDER BY worker"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("chosen", [None, "mimalloc"])
def test_console_script_writes_the_same_packets_in_either_pool(tmp_path: Path, chosen: str | None) -> None:
    """Through the installed console script (where a start-up shortcut would live): the packets are
    the library's, whichever pool allocated them."""
    env = {k: v for k, v in os.environ.items() if k != CHOSEN_BY_USER}
    if chosen:
        env[CHOSEN_BY_USER] = chosen
    out = tmp_path / "cli"
    argv = [str(TRACECORE), "ingest", str(sample_run()), "--out", str(out), "-q"]
    subprocess.run(argv, env=env, check=True)
    ingest([sample_run()], tmp_path / "lib")
    assert _packets(out) == _packets(tmp_path / "lib")
    assert len(_packets(out)) == 4
