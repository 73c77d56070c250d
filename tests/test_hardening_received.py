"""A received catalog reads no file outside the dataset, ever (issue 36, item 1): the connection is locked
down before a byte of the catalog is read, objects tracecore reads as tables must be base tables (a view
of the sender's never runs), no file of the dataset is read or written through a hard link, the spill
folder is one no one else can plant, and a folder that is not a dataset gets nothing written into it.

Everything runs through the installed console script; `home` stands in for the user's files and a
plain file in it for a secret such as /etc/shadow.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tracecore.ingest import ingest
from tracecore.sample import sample_run

SECRET = "SECRET-LINE-1234"
SCRIPT = Path(sys.executable).with_name("tracecore")


def console(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed `tracecore` script, as a user runs it."""
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=180, check=False, env=env)


def one_line(res: subprocess.CompletedProcess, code: int) -> str:
    """The single stderr line of a refusal with exit `code`, nothing on stdout, no secret anywhere."""
    assert res.returncode == code, res.stdout + res.stderr
    (line,) = res.stderr.splitlines()
    assert res.stdout == ""
    assert SECRET not in res.stdout + res.stderr
    return line


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample run ingested once; every test works on its own copy."""
    out = tmp_path_factory.mktemp("sample") / "ds"
    assert not ingest([sample_run()], out, jobs=1).failed
    return out


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text(SECRET + "\nsecond line\n")
    return home


@pytest.fixture
def received(sample: Path, home: Path) -> Path:
    """A copy of the sample dataset inside `home`, as if received: its views were made for another root."""
    copy = home / "received"
    shutil.copytree(sample, copy)
    return copy


def edit(ds: Path, *statements: str) -> None:
    """The catalog edited in plain DuckDB, as its sender could."""
    con = duckdb.connect(str(ds / "tracecore.duckdb"))
    try:
        for sql in statements:
            con.execute(sql)
    finally:
        con.close()


def secret_view(home: Path) -> str:
    return f"SELECT content FROM read_text('{home / 'secret.txt'}')"


def first_part(ds: Path) -> Path:
    con = duckdb.connect(str(ds / "tracecore.duckdb"), read_only=True)
    try:
        return ds / con.execute("SELECT min(path) FROM _files").fetchone()[0]
    finally:
        con.close()


# ---- objects read as tables are base tables, read only once the connection is locked down ------------
def test_a_meta_view_over_another_file_never_runs(received: Path, home: Path) -> None:
    """Before: `_meta` was read before the lock-down, and the schema-version message printed the file's
    first line ("schema_version 'SECRET-LINE-1234'")."""
    edit(
        received,
        "DROP TABLE _meta",
        f"CREATE VIEW _meta AS SELECT 'schema_version' AS key, ({secret_view(home)}) AS value",
    )
    for args in (("sql", "SELECT 1"), ("query", "run_meta"), ("ingest", str(sample_run()))):
        line = one_line(console(*args, "--data" if args[0] != "ingest" else "--out", str(received)), 4)
        assert "_meta is not a table" in line, line


def test_a_table_view_is_never_copied_into_the_rebuilt_catalog(received: Path, home: Path) -> None:
    """Before: a dataset without `_meta.state` is rebuilt from its catalog's tables when moved, and that
    read ran `runs` (a view over another file) without the lock-down, copying the file into a table."""
    edit(
        received,
        "DELETE FROM _meta WHERE key = 'state'",
        "DROP TABLE runs",
        f"CREATE VIEW runs AS SELECT ({secret_view(home)}) AS run",
    )
    line = one_line(console("query", "run_meta", "--data", str(received)), 4)
    assert "runs is not a table" in line, line
    assert SECRET.encode() not in (received / "tracecore.duckdb").read_bytes()


def test_a_received_dataset_still_opens_and_moves(received: Path) -> None:
    res = console("sql", "SELECT count(*) AS n FROM packets", "--format", "csv", "--data", str(received))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "17027"


# ---- no file is read or written through a hard link -----------------------------------------------------
def test_a_lock_file_hard_linked_outside_is_never_written(received: Path, home: Path) -> None:
    """Before: ingest truncated the file `.lock` is a hard link of and wrote its pid into it."""
    (received / ".lock").unlink()
    os.link(home / "secret.txt", received / ".lock")
    line = one_line(console("ingest", str(sample_run()), "--out", str(received)), 4)
    assert line.startswith(f"Error: {received / '.lock'}: a hard link (2 names)"), line
    assert (home / "secret.txt").read_text() == SECRET + "\nsecond line\n"
    # a query of the moved dataset does not take it either (its catalog is rebuilt in memory)
    res = console("sql", "SELECT count(*) FROM runs", "--format", "csv", "--data", str(received))
    assert res.returncode == 0, res.stderr
    assert (home / "secret.txt").read_text() == SECRET + "\nsecond line\n"


def test_a_part_file_hard_linked_outside_is_never_read(received: Path, home: Path) -> None:
    """Before: the part file's name was allowed, so a macro of the sender's read the file it is a hard
    link of."""
    assert console("sql", "SELECT 1", "--data", str(received)).returncode == 0  # made for its folder
    part = first_part(received)
    part.unlink()
    os.link(home / "secret.txt", part)
    edit(received, f"CREATE MACRO leak() AS TABLE SELECT content FROM read_text('{part}')")
    for sql in ("SELECT * FROM leak()", "SELECT 1"):
        line = one_line(console("sql", sql, "--data", str(received)), 4)
        assert line.startswith(f"Error: {part}: a hard link (2 names)"), line


def test_a_part_files_second_name_inside_the_dataset_is_its_own(received: Path) -> None:
    """Ingest hard-links a relabelled worker's part file to its new name and keeps the old one a commit
    longer: both names inside packets/, so the file is the dataset's own."""
    part = first_part(received)
    os.link(part, part.with_name("part-999999.parquet"))
    res = console("sql", "SELECT count(*) AS n FROM packets", "--format", "csv", "--data", str(received))
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "17027"


def test_a_state_file_hard_linked_outside_is_never_read(received: Path, home: Path) -> None:
    """Ingest's own copy of the tables is read whole (its digest checked after): a hard link to a file
    outside, even one with the recorded content, is refused before a byte of it is read."""
    (state,) = (received / ".state").iterdir()
    table = state / "runs.parquet"
    outside = home / "runs.parquet"
    shutil.copyfile(table, outside)
    table.unlink()
    os.link(outside, table)
    line = one_line(console("ingest", str(sample_run()), "--out", str(received)), 4)
    assert line.startswith(f"Error: {table}: a hard link (2 names)"), line


def test_a_catalog_hard_linked_outside_is_refused(received: Path, home: Path) -> None:
    os.link(received / "tracecore.duckdb", home / "elsewhere.duckdb")
    line = one_line(console("sql", "SELECT 1", "--data", str(received)), 4)
    assert line.startswith(f"Error: {received / 'tracecore.duckdb'}: a hard link (2 names)"), line


# ---- the spill folder is no one else's ------------------------------------------------------------------
PLANT_AND_RUN = """\
import os, sys
tmp, target, *argv = sys.argv[1:]
os.symlink(target, os.path.join(tmp, f"tracecore-spill-{os.getpid()}"))  # the name the pid predicts
os.execv(argv[0], argv)  # the same process (and pid) runs the console script
"""


def spill_folder(res: subprocess.CompletedProcess) -> Path:
    assert res.returncode == 0, res.stderr
    return Path(res.stdout.splitlines()[1].strip('"'))


@pytest.mark.parametrize("plant", ["pid link", "user link", "user folder anyone can write"])
def test_a_planted_spill_folder_receives_nothing(sample: Path, tmp_path: Path, plant: str) -> None:
    """Before: DuckDB spilled into `$TMPDIR/tracecore-spill-<pid>`, whatever was there already."""
    tmp, target = tmp_path / "tmp", tmp_path / "attacker"
    tmp.mkdir()
    target.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    argv = [str(SCRIPT), "sql", "SELECT current_setting('temp_directory') AS d", "-f", "csv"]
    argv += ["--data", str(sample)]
    if plant == "user link":
        (tmp / f"tracecore-{os.getuid()}").symlink_to(target)
    elif plant == "user folder anyone can write":
        (tmp / f"tracecore-{os.getuid()}").mkdir()
        os.chmod(tmp / f"tracecore-{os.getuid()}", 0o777)
    run = [sys.executable, "-c", PLANT_AND_RUN, str(tmp), str(target), *argv]
    folder = spill_folder(subprocess.run(run, capture_output=True, text=True, timeout=120, env=env))
    assert folder.parent.parent == tmp, folder
    assert not folder.parent.is_symlink()
    assert folder.parent.name != f"tracecore-{os.getuid()}" or plant == "pid link", folder
    mode = folder.parent.lstat()
    assert stat.S_ISDIR(mode.st_mode)
    assert stat.S_IMODE(mode.st_mode) == 0o700
    assert mode.st_uid == os.getuid()
    assert list(target.iterdir()) == []


# ---- nothing is written into a folder that is not a dataset ---------------------------------------------
def test_a_folder_with_a_bare_catalog_is_never_claimed(home: Path) -> None:
    """Before: `packets/` and a `tracecore.duckdb` holding only `_meta` passed for an older dataset: the
    ingest failed after writing the marker and `.lock`, and `--force` then deleted packets/b.parquet."""
    folder = home / "mine"
    (folder / "packets").mkdir(parents=True)
    (folder / "packets" / "b.parquet").write_bytes(b"PAR1 my own data PAR1")
    edit(
        folder,
        "CREATE TABLE _meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
        "INSERT INTO _meta VALUES ('schema_version', '6'), ('format_version', '4')",
    )
    before = sorted(p.name for p in folder.iterdir())
    for force in ([], ["--force"]):
        line = one_line(console("ingest", str(sample_run()), "--out", str(folder), *force), 4)
        assert "not a tracecore dataset" in line, line
        assert sorted(p.name for p in folder.iterdir()) == before
        assert (folder / "packets" / "b.parquet").read_bytes() == b"PAR1 my own data PAR1"


def test_force_deletes_only_files_tracecore_names(received: Path) -> None:
    """A file of the user's under a dataset's packets/ is not one ingest wrote: kept, even by --force."""
    mine = received / "packets" / "b.parquet"
    mine.write_bytes(b"PAR1 my own data PAR1")
    stray = first_part(received).with_name("part-999999.parquet")
    stray.write_bytes(b"a part file no catalog names: swept")
    res = console("ingest", str(sample_run()), "--out", str(received), "--force")
    assert res.returncode == 0, res.stderr
    assert mine.read_bytes() == b"PAR1 my own data PAR1"
    assert not stray.exists()
