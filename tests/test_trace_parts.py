"""`profiler_kernels` lives in part files under traces/ (one per trace file), not with the small tables:
what the traces say, replaced with their run, kept across other runs' ingests, refused when a received
catalog names a file outside, and a dataset that held the table in its state written out on its next
ingest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tracecore.errors import DatasetError
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.catalog import commit_catalog, export_tables, load_state
from tracecore.ingest.layout import TRACE_PART_PATH
from tracecore.logs import pytorch_profiler

CORPUS = Path(__file__).resolve().parents[2] / "shared/corpus-gpu"
FOUR = CORPUS / "gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
RUN = FOUR.name


def _traces_only(root: Path, name: str = RUN) -> Path:
    """The 4-rank run's profiler traces and NCCL logs (its workers), without captures."""
    run = root / name
    run.mkdir(parents=True)
    for f in FOUR.iterdir():
        if f.name.startswith(("kineto-", "nccl.")) or f.name == "run.toml":
            shutil.copy(f, run / f.name)
    return run


def _kernels(data: Path) -> list[tuple]:
    con = open_catalog(data)
    try:
        return con.execute(
            "SELECT run, file, rank, kind, start_ns, end_ns FROM profiler_kernels ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def _parts(data: Path) -> list[dict]:
    return load_state(data).rows("_trace_parts")


def _parsed_kernels(run: str = RUN) -> list[tuple]:
    rows = []
    for r in range(4):
        t = pytorch_profiler.parse(FOUR / f"kineto-rank{r}.json").more["profiler_kernels"]
        rows += [(run, k["file"], k["rank"], k["kind"], k["start_ns"], k["end_ns"]) for k in t.to_pylist()]
    return sorted(rows)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    _traces_only(root)
    out = tmp_path_factory.mktemp("ds") / "data"
    assert not ingest([root / RUN], out, jobs=1).failed
    return out


def test_kernels_are_part_files_one_per_trace_equal_to_what_the_traces_say(dataset: Path) -> None:
    parts = _parts(dataset)
    assert sorted(p["file"] for p in parts) == [f"kineto-rank{r}.json" for r in range(4)]
    for p in parts:
        assert TRACE_PART_PATH.fullmatch(p["path"])
        assert (dataset / p["path"]).is_file()
        assert p["table"] == "profiler_kernels"
    assert sum(p["rows"] for p in parts) == 1524
    assert _kernels(dataset) == _parsed_kernels()
    state = load_state(dataset)
    assert "profiler_kernels" not in state.tables  # never held with the small tables
    assert not (dataset / "tables" / "profiler_kernels.parquet").exists()


def test_a_reingest_replaces_the_runs_parts_and_another_runs_ingest_keeps_them(
    dataset: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(dataset, data)
    root = tmp_path / "runs"
    _traces_only(root)
    first = {p["path"] for p in _parts(data)}
    assert not ingest([root / RUN], data, force=True, jobs=1).failed
    second = {p["path"] for p in _parts(data)}
    assert first.isdisjoint(second)
    assert all((data / p).is_file() for p in first)  # retired: kept one commit for readers
    other = _traces_only(root, RUN + "-again")
    assert not ingest([other], data, jobs=1).failed
    assert all(not (data / p).exists() for p in first)  # deleted once the next commit is in place
    kept = {p["path"] for p in _parts(data) if p["run"] == RUN}
    assert kept == second
    assert _kernels(data) == sorted(_parsed_kernels() + _parsed_kernels(RUN + "-again"))


@pytest.mark.parametrize("state", ["kept", "deleted"])
def test_a_catalog_naming_a_file_outside_traces_is_refused(dataset: Path, tmp_path: Path, state: str) -> None:
    """Edited where it lies (its views made there: the open checks the part files it names) and, the
    state's record deleted, as a received catalog whose tables are read from it."""
    copy = tmp_path / "received"
    shutil.copytree(dataset, copy)
    open_catalog(copy).close()  # its views made for this folder
    con = duckdb.connect(str(copy / "tracecore.duckdb"))
    try:
        con.execute("UPDATE _trace_parts SET path = '../../../etc/passwd' WHERE rowid = 0")
        if state == "deleted":
            con.execute(
                "DELETE FROM _meta WHERE key = 'state'; UPDATE _meta SET value = 'x' WHERE key = 'root'"
            )
    finally:
        con.close()
    res = subprocess.run(
        [sys.executable, "-m", "tracecore", "sql", "SELECT count(*) FROM runs", "--data", str(copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 4, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "_trace_parts names '../../../etc/passwd'" in res.stderr
    assert "not a part file under traces/" in res.stderr


def test_trace_parts_naming_another_table_are_refused(dataset: Path, tmp_path: Path) -> None:
    copy = tmp_path / "received"
    shutil.copytree(dataset, copy)
    state = load_state(copy)
    parts = state.tables["_trace_parts"]
    state.tables["_trace_parts"] = parts.set_column(
        parts.column_names.index("table"), "table", pa.array(["runs"] * parts.num_rows)
    )
    commit_catalog(copy, state)
    with pytest.raises(DatasetError, match="_trace_parts names table 'runs'"):
        load_state(copy)


def test_a_dataset_holding_the_kernels_in_its_state_reads_them_and_writes_them_out(
    dataset: Path, tmp_path: Path
) -> None:
    """As every dataset written before part files: the table in the state, no traces/ folder."""
    data = tmp_path / "data"
    shutil.copytree(dataset, data)
    state = load_state(data)
    con = open_catalog(data)
    try:
        held = con.sql("SELECT * FROM profiler_kernels").to_arrow_table()
    finally:
        con.close()
    state.tables["profiler_kernels"] = held
    state.tables["_trace_parts"] = state.tables["_trace_parts"].slice(0, 0)
    shutil.rmtree(data / "traces")
    commit_catalog(data, state)
    export_tables(data, state)
    assert _kernels(data) == _parsed_kernels()  # read from the state's table as before
    root = tmp_path / "runs"
    other = _traces_only(root, RUN + "-new")
    assert not ingest([other], data, jobs=1).failed
    assert "profiler_kernels" not in load_state(data).tables
    assert {p["run"] for p in _parts(data)} == {RUN, RUN + "-new"}
    assert _kernels(data) == sorted(_parsed_kernels() + _parsed_kernels(RUN + "-new"))
