"""Ingest carries forward only rows it wrote: edits made to the catalog with plain DuckDB do not survive
the next ingest (issue 12, item 3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from tests.test_ingest_support import copy_run
from tracecore.errors import DatasetError
from tracecore.ingest import ingest, open_catalog
from tracecore.sample import SAMPLE_RUN

SAMPLE_PACKETS = 17027


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path]:
    copy_run(tmp_path / "src")
    out = tmp_path / "data"
    assert not ingest([tmp_path / "src"], out).failed
    return tmp_path / "src", out


def edit(out: Path, *statements: str) -> None:
    con = duckdb.connect(str(out / "tracecore.duckdb"))
    try:
        for sql in statements:
            con.execute(sql)
    finally:
        con.close()


def runs_and_packets(out: Path) -> tuple[list[tuple], int]:
    con = open_catalog(out)
    try:
        runs = con.execute("SELECT run, n_workers FROM runs ORDER BY run").fetchall()
        return runs, con.execute("SELECT sum(packets) FROM workers").fetchone()[0]
    finally:
        con.close()


HAND_EDITS = (
    "INSERT INTO runs (run, n_workers) VALUES ('made-up-run', 9)",
    "UPDATE workers SET packets = 1",
    "DELETE FROM captures",
)


@pytest.mark.parametrize("force", [False, True])
def test_hand_edits_do_not_survive_an_ingest(dataset: tuple[Path, Path], force: bool) -> None:
    src, out = dataset
    edit(out, *HAND_EDITS)
    assert runs_and_packets(out) == ([("made-up-run", 9), (SAMPLE_RUN, 4)], 4)
    summary = ingest([src], out, force=force)
    assert not summary.failed
    assert {c.status for c in summary.captures} == {"ingested" if force else "unchanged"}
    assert runs_and_packets(out) == ([(SAMPLE_RUN, 4)], SAMPLE_PACKETS)


def test_hand_edits_do_not_survive_ingesting_another_run(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """Rows of runs the ingest does not touch come from what ingest wrote, not from the catalog."""
    _, out = dataset
    edit(out, *HAND_EDITS)
    other = copy_run(tmp_path / "other", "both")
    assert not ingest([other], out).failed
    runs, _ = runs_and_packets(out)
    assert runs == sorted([(SAMPLE_RUN, 4), (other.name, 4)])


def test_edited_state_is_refused(dataset: tuple[Path, Path]) -> None:
    src, out = dataset
    (state,) = (out / ".state").glob("*/runs.parquet")
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF
    state.write_bytes(bytes(data))
    with pytest.raises(DatasetError, match=r"runs\.parquet.* changed since ingest wrote it"):
        ingest([src], out)


def test_dataset_without_state_files_still_ingests(dataset: tuple[Path, Path]) -> None:
    """A dataset made before ingest kept its own copy of the tables: the catalog's are used once."""
    src, out = dataset
    shutil.rmtree(out / ".state")
    edit(out, "DELETE FROM _meta WHERE key = 'state'")
    summary = ingest([src], out)
    assert {c.status for c in summary.captures} == {"unchanged"}
    assert runs_and_packets(out) == ([(SAMPLE_RUN, 4)], SAMPLE_PACKETS)
    assert len(list((out / ".state").glob("*/runs.parquet"))) == 1
