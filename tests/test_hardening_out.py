"""`ingest --out DIR` writes only into a tracecore dataset or an empty folder (issue 12, item 4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_ingest_support import copy_run
from tracecore.errors import DatasetError
from tracecore.ingest import ingest
from tracecore.ingest.dataset_tables import FORMAT_VERSION
from tracecore.sample import sample_run

REPO = Path(__file__).resolve().parent.parent


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_folder_of_other_files_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    (out / "packets" / "run=x" / "worker=W1").mkdir(parents=True)
    (out / "packets" / "run=x" / "worker=W1" / "part-0.parquet").write_bytes(b"PAR1 my own data PAR1")
    (out / "tables").mkdir()
    (out / "tables" / "runs.parquet").write_bytes(b"PAR1 my runs PAR1")
    before = snapshot(out)
    res = subprocess.run(
        [sys.executable, "-m", "tracecore", "ingest", str(sample_run()), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 4, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "not a tracecore dataset" in lines[0]
    assert str(out) in lines[0]
    assert snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["packets", "tables"]


def test_a_folder_with_one_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "notes"
    out.mkdir()
    (out / "README.txt").write_text("mine\n")
    with pytest.raises(DatasetError, match="not a tracecore dataset"):
        ingest([sample_run()], out)
    assert snapshot(out) == {"README.txt": b"mine\n"}


def test_an_empty_folder_becomes_a_dataset(tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    assert not ingest([sample_run()], out).failed
    assert (
        out / ".tracecore-dataset"
    ).read_text() == f"tracecore dataset\nformat_version = {FORMAT_VERSION}\n"
    assert {c.status for c in ingest([sample_run()], out).captures} == {"unchanged"}


def test_a_dataset_made_before_the_marker_is_accepted_and_marked(tmp_path: Path) -> None:
    src = copy_run(tmp_path / "src")
    out = tmp_path / "old"
    ingest([src], out)
    (out / ".tracecore-dataset").unlink()
    summary = ingest([src], out)
    assert {c.status for c in summary.captures} == {"unchanged"}
    assert (out / ".tracecore-dataset").is_file()


def console_ingest(*args: str, code: str = "") -> subprocess.CompletedProcess:
    """`tracecore ingest …` as the installed script runs it; `code` runs first (e.g. hiding a module)."""
    run = f"{code}\nimport sys\nfrom tracecore.cli.app import main\nsys.argv[0] = 'tracecore'\nmain()"
    return subprocess.run(
        [sys.executable, "-c", run, "ingest", *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_a_folder_with_a_file_named_like_the_catalog_is_refused_untouched(tmp_path: Path) -> None:
    """Before: the marker and the lock were written, the ingest failed (exit 4) on the catalog, and once
    the bad catalog was removed the next ingest took the folder for its own and deleted mine.parquet
    (issue 25, item 12)."""
    out = tmp_path / "r"
    (out / "packets").mkdir(parents=True)
    (out / "packets" / "mine.parquet").write_text("precious\n")
    (out / "tracecore.duckdb").write_text("x\n")
    before = snapshot(out)
    res = console_ingest(str(sample_run()), "--out", str(out))
    assert res.returncode == 4, res.stderr
    (line,) = res.stderr.splitlines()
    assert line == (
        f"Error: {out}: not a tracecore dataset (no .tracecore-dataset, and tracecore.duckdb is not a "
        "catalog tracecore wrote); give --out a new or empty folder, or an existing dataset"
    )
    assert snapshot(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["packets", "tracecore.duckdb"]
    (out / "tracecore.duckdb").unlink()
    res = console_ingest(str(sample_run()), "--out", str(out))
    assert res.returncode == 4, res.stderr
    assert (out / "packets" / "mine.parquet").read_text() == "precious\n"
    assert sorted(p.name for p in out.iterdir()) == ["packets"]


NO_DISTRIBUTED = """\
import importlib.abc, sys
class NoDask(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoDask())"""


def test_a_scheduler_without_the_dask_extra_creates_nothing(tmp_path: Path) -> None:
    """Before: the one-line error came after an empty folder with the marker and the lock was made."""
    out = tmp_path / "new"
    res = console_ingest(
        str(sample_run()), "--out", str(out), "--scheduler", "tcp://x:1", code=NO_DISTRIBUTED
    )
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines() == [
        "Error: --scheduler needs Dask distributed: pip install 'tracecore[dask]'"
    ]
    assert not out.exists()
