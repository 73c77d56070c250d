"""`tracecore ingest DIR` whose run folders sit two or more levels down names the folders to pass.

Why: ingest reads DIR's run folders one level down; a corpus grouped by experiment (corpus-gpu/<group>/
<run>/) was answered "no capture files in it or in its subfolders" with no word of where they are.
The deeper look only builds the message: nothing more is ingested, and the exit code stays 3.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.errors import ExitCode
from tracecore.ingest import discover as discover_module
from tracecore.ingest import open_catalog
from tracecore.ingest.discover import NO_RUN
from tracecore.sample import sample_run

runner = CliRunner()


def _run(folder: Path) -> Path:
    """A run folder holding one of the sample's captures."""
    folder.mkdir(parents=True)
    shutil.copy(sample_run() / "worker-0-tcpdump.pcap", folder / "worker-0-tcpdump.pcap")
    return folder


def test_runs_two_levels_down_are_named_in_one_line(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _run(root / "group-a" / "run-1")
    _run(root / "group-a" / "run-2")
    _run(root / "group-b" / "run-3")
    (root / "logs-only" / "notes").mkdir(parents=True)
    (root / "logs-only" / "notes" / "nccl.log").write_text("NCCL INFO\n")
    result = runner.invoke(app, ["ingest", str(root), "--data", str(tmp_path / "out")])
    assert result.exit_code == ExitCode.BAD_INPUT == 3
    assert result.output.strip().splitlines() == [
        f"Error: nothing to ingest ({root}: {NO_RUN}, but run folders "
        f"sit 2 levels down: pass the folders that hold them: tracecore ingest {root / 'group-a'} "
        f"{root / 'group-b'}); {tmp_path / 'out'} was not touched"
    ]
    assert not (tmp_path / "out").exists()


def test_runs_at_mixed_depths_and_the_cap_on_names(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "corpus"
    _run(root / "a" / "run")
    _run(root / "b" / "c" / "run")
    _run(root / "d" / "e" / "f" / "g" / "run")  # 5 levels: past the look's depth
    result = runner.invoke(app, ["ingest", str(root), "--data", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert (
        f"but run folders sit deeper: pass the folders that hold them: tracecore ingest {root / 'a'} "
        f"{root / 'b' / 'c'}); "
    ) in result.output
    monkeypatch.setattr(discover_module, "HINT_SHOWN", 1)
    result = runner.invoke(app, ["ingest", str(root), "--data", str(tmp_path / "out")])
    assert f"tracecore ingest {root / 'a'} (and 1 more)); " in result.output


def test_the_look_stops_after_its_entries(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "corpus"
    for i in range(5):
        (root / f"empty-{i}").mkdir(parents=True)
    _run(root / "z" / "run")  # sorted after the empty folders
    monkeypatch.setattr(discover_module, "HINT_ENTRIES", 5)
    result = runner.invoke(app, ["ingest", str(root), "--data", str(tmp_path / "out")])
    assert result.exit_code == 3
    assert f"{root}: {NO_RUN}); " in result.output


def test_the_named_folders_ingest(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    _run(root / "group-a" / "run-1")
    _run(root / "group-b" / "run-2")
    out = tmp_path / "out"
    result = runner.invoke(app, ["ingest", str(root / "group-a"), str(root / "group-b"), "--data", str(out)])
    assert result.exit_code == 0, result.output
    con = open_catalog(out, read_only=True)
    try:
        runs = con.execute("SELECT DISTINCT run FROM captures ORDER BY run").fetchall()
    finally:
        con.close()
    assert runs == [("run-1",), ("run-2",)]
