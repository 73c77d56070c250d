"""A received dataset's symbolic links reach nothing outside it: ingest and queries refuse a dataset
that holds one, before anything is read, written or deleted through it (issue 25, item 11).

Everything happens under tmp_path: `home` stands in for the user's files, the received dataset lies
inside it, and a plain file stands in for /etc/passwd.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tracecore.ingest import ingest
from tracecore.sample import SAMPLE_RUN, sample_run

SECRET = "root:x:0:0:root:/root:/bin/bash\n"


def console(*args: str) -> subprocess.CompletedProcess:
    """The installed `tracecore` script, as a user runs it."""
    script = Path(sys.executable).with_name("tracecore")
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=180, check=False)


def tree(folder: Path) -> dict[str, object]:
    """Every entry under `folder`, links as links (never followed): what must not change."""
    seen: dict[str, object] = {}
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(top) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = "dir"
            else:
                seen[rel] = path.read_bytes()
    return seen


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's files, and inside them a dataset received from someone else (`received/ds`)."""
    home = tmp_path / "home"
    (home / "keep").mkdir(parents=True)
    (home / "mine.parquet").write_bytes(b"PAR1 my own data PAR1")
    (home / "keep" / "notes.txt").write_text("mine\n")
    (home / "secret.txt").write_text(SECRET)
    assert not ingest([sample_run()], home / "received" / "ds", jobs=1).failed
    return home


def one_link_refusal(res: subprocess.CompletedProcess, link: Path) -> None:
    assert res.returncode == 4, res.stdout + res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"Error: {link}: a symbolic link (to "), line
    assert "tracecore makes none and follows none" in line


def first_part(ds: Path) -> str:
    con = duckdb.connect(str(ds / "tracecore.duckdb"), read_only=True)
    try:
        return con.execute("SELECT min(path) FROM _files").fetchone()[0]
    finally:
        con.close()


def link_in_place(ds: Path, home: Path, name: str) -> Path:
    """Replace the dataset's entry `name` by a link to a copy of it (or to the user's files) in home."""
    entry = ds / name
    if name == "packets":
        shutil.rmtree(entry)
        entry.symlink_to("../..")  # the issue's: two levels up, the user's folder
        return entry
    target = home / f"target-{entry.name}"
    if entry.is_dir():
        shutil.copytree(entry, target)
        shutil.rmtree(entry)
    elif entry.exists():
        shutil.copyfile(entry, target)
        entry.unlink()
    else:  # .staging: no folder between ingests
        target.mkdir()
    entry.symlink_to(target)
    return entry


ENTRIES = ["packets", "tables", ".state", ".staging", ".lock", "tracecore.duckdb", "part folder", "part file"]


@pytest.mark.parametrize("name", ENTRIES)
def test_ingest_refuses_a_dataset_with_a_link(home: Path, name: str) -> None:
    """Before: `packets` → `../..` had ingest delete the user's *.parquet and a folder two levels up and
    write run=… folders there; a linked tables/ had its target's runs.parquet replaced."""
    ds = home / "received" / "ds"
    part = first_part(ds)
    rel = {"part folder": part.rsplit("/", 1)[0], "part file": part}.get(name, name)
    link = link_in_place(ds, home, rel)
    before = tree(home)
    one_link_refusal(console("ingest", str(sample_run()), "--out", str(ds), "--force"), link)
    assert tree(home) == before


@pytest.mark.parametrize("name", ["part file", "part folder", "tracecore.duckdb", "packets"])
def test_a_query_never_reads_through_a_link(home: Path, name: str) -> None:
    """Before: a part file linked to another file, and a macro redefined as `read_text(<that part>)`,
    made `tracecore query bytes_sent` print that file (`allowed_paths` allowed the link's path)."""
    ds = home / "received" / "ds"
    part = ds / first_part(ds)
    con = duckdb.connect(str(ds / "tracecore.duckdb"))
    try:
        root = con.execute("SELECT value FROM _meta WHERE key = 'root'").fetchone()[0]
        assert root == str(ds.resolve())  # the views are the folder's own: no rebuild on open
        con.execute(
            "CREATE OR REPLACE MACRO bytes_sent(runs := NULL) AS TABLE "
            f"SELECT content AS run FROM read_text('{part}')"
        )
    finally:
        con.close()
    if name == "part file":
        part.unlink()
        part.symlink_to(home / "secret.txt")
        link = part
    elif name == "part folder":
        shutil.copytree(part.parent, home / "copy")
        shutil.rmtree(part.parent)
        part.parent.symlink_to(home / "copy")
        link = part.parent
    else:
        link = link_in_place(ds, home, name)
    res = console("query", "bytes_sent", "--data", str(ds))
    assert "root:x" not in res.stdout + res.stderr
    one_link_refusal(res, link)


def test_a_dataset_without_links_still_ingests_and_queries(home: Path) -> None:
    ds = home / "received" / "ds"
    res = console("ingest", str(sample_run()), "--out", str(ds), "--json", "--quiet")
    assert res.returncode == 0, res.stderr
    res = console("query", "bytes_sent", "--data", str(ds), "--format", "csv")
    assert res.returncode == 0, res.stderr
    assert SAMPLE_RUN in res.stdout


def test_a_dataset_folder_reached_through_a_link_is_fine(home: Path, tmp_path: Path) -> None:
    """Only links inside the dataset are refused: the folder itself may be reached through one."""
    (tmp_path / "alias").symlink_to(home / "received" / "ds")
    res = console("query", "flow_counts", "--data", str(tmp_path / "alias"), "--format", "csv")
    assert res.returncode == 0, res.stderr
    res = console("ingest", str(sample_run()), "--out", str(tmp_path / "alias"), "--json", "--quiet")
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("target", ["a file outside", "nothing yet"])
def test_the_lock_is_never_opened_through_a_link(tmp_path: Path, target: str) -> None:
    """The lock itself, tested directly (ingest refuses a dataset holding a link before it locks): a
    `.lock` that is a link is refused by both ways of taking it, and what it points at is neither
    truncated, written with the holder's pid nor created."""
    from tracecore.errors import DatasetError
    from tracecore.ingest.lock import dataset_lock, try_lock

    out = tmp_path / "ds"
    out.mkdir()
    outside = tmp_path / "passwd"
    if target == "a file outside":
        outside.write_text(SECRET)
    (out / ".lock").symlink_to(outside)
    refused = r"cannot open the dataset lock: a symbolic link, which tracecore does not follow"
    with pytest.raises(DatasetError, match=refused), dataset_lock(out):
        pass
    assert try_lock(out) is None
    if target == "a file outside":
        assert outside.read_text() == SECRET
    else:
        assert not outside.exists()
