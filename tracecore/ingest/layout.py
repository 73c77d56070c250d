"""Where files live under OUT, and the file moves around a commit.

Why this order is crash-safe: new part files are written under `OUT/.staging/` and renamed into
`packets/` (same filesystem, atomic) before the catalog commit; a worker relabelled by the commit gets a
hard link at its new path. Files the old catalog used are deleted only after the commit after this
one (`State.retired`): a reader still planning on the old catalog finds them. So at any instant the
committed catalog, and the one before it, name only complete files. What a crash leaves behind (staging
folders, temporary catalogs, part files no catalog names) is swept by `recover` at the start of the
next ingest.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from tracecore.ingest import testpause
from tracecore.ingest.fileid import file_id

if TYPE_CHECKING:
    from tracecore.errors import DatasetError

# The catalog's layout; 2: packets views widen byte columns and add `ts`; 3: `_files.layers`;
# 4: `_files.read_version`; 5: `profiler_kernels` a view over part files under traces/ (`_trace_parts`).
FORMAT_VERSION = "5"

CATALOG_NAME = "tracecore.duckdb"
PACKETS_DIR = "packets"
TRACES_DIR = "traces"  # the big tables of traces, part files per table and run (`_trace_parts`)
TABLES_DIR = "tables"
STAGING = ".staging"
MARKER = ".tracecore-dataset"  # identifies a dataset: ingest writes only into one (or an empty folder)
STATE_DIR = ".state"  # ingest's own copy of the small tables, one folder per commit (see catalog.py)


LOCK_NAME = ".lock"  # the dataset lock (ingest/lock.py)
# A part file as `_files` names it; and the names of files tracecore writes beside part files (an
# upgrade's temporary, a copy where hard links fail): the only files under packets/ ingest deletes.
PART_PATH = re.compile(r"packets/run=[^/]+/worker=[^/]+/part-[0-9]+\.parquet")
_PART_OR_LEFTOVER = re.compile(
    r"packets/run=[^/]+/worker=[^/]+/(?:part-[0-9]+\.parquet(?:\.tmp)?|\.part-[0-9]+\.parquet\.upgrade\.parquet)"
)
# A part file of a trace table as `_trace_parts` names it (traces/<table>/run=…/part-N.parquet).
TRACE_PART_PATH = re.compile(r"traces/[a-z_]{1,40}/run=[^/]+/part-[0-9]+\.parquet")
_TRACE_PART_OR_LEFTOVER = re.compile(r"traces/[a-z_]{1,40}/run=[^/]+/part-[0-9]+\.parquet(?:\.tmp)?")
# Every name of the dataset's own at its top (the catalog's temporaries aside): none may be a link.
OWN_ENTRIES = (CATALOG_NAME, MARKER, LOCK_NAME, PACKETS_DIR, TRACES_DIR, TABLES_DIR, STATE_DIR, STAGING)
LINKED_TREES = (PACKETS_DIR, TRACES_DIR, TABLES_DIR, STATE_DIR)  # folders read or written below their top


def default_data_dir() -> Path:
    """$TRACECORE_DATA or ./tracecore-data (the one owner of that rule)."""
    return Path(os.environ.get("TRACECORE_DATA", "tracecore-data"))


_SAFE = "-_.+,@~"
KEY_MAX = 200  # bytes of an escaped partition value kept whole (file systems allow 255 per name)
KEY_PREFIX = 180  # bytes of escaped prefix kept of a longer one, before "~" and the hash


def partition(run: str, worker: str) -> str:
    """Relative hive folder of one worker; DuckDB and Polars both decode the %-escapes."""
    return f"{PACKETS_DIR}/run={partition_key(run)}/worker={partition_key(worker)}"


def trace_partition(table: str, run: str) -> str:
    """Relative hive folder of one run's part files of trace table `table`."""
    return f"{TRACES_DIR}/{table}/run={partition_key(run)}"


def is_part_path(rel: object) -> bool:
    """A path a catalog may name as a part file: under packets/ or traces/, in tracecore's form."""
    return (
        isinstance(rel, str)
        and bool(PART_PATH.fullmatch(rel) or TRACE_PART_PATH.fullmatch(rel))
        and "/../" not in f"/{rel}/"
    )


def partition_key(value: str) -> str:
    """A partition folder's value: the %-escaped value, or when that is longer than KEY_MAX bytes,
    the escaped prefix of whole characters that fits KEY_PREFIX, "~" and 16 hex digits of the
    value's SHA-256. Why: any legal folder name (255 bytes) may triple once escaped; the full name
    stays in the tables and the packets view maps the shortened one back (see `shortened_keys`)."""
    escaped = quote(value, safe=_SAFE)
    if len(escaped) <= KEY_MAX:
        return escaped
    prefix, size = [], 0
    for char in value:
        part = quote(char, safe=_SAFE)
        if size + len(part) > KEY_PREFIX:
            break
        prefix.append(part)
        size += len(part)
    import hashlib

    return "".join(prefix) + "~" + hashlib.sha256(value.encode()).hexdigest()[:16]


def shortened_keys(values: list[str]) -> dict[str, str]:
    """{decoded folder value: full value} for the values `partition_key` shortened."""
    from urllib.parse import unquote

    keys = {value: partition_key(value) for value in values}
    return {unquote(key): value for value, key in keys.items() if key != quote(value, safe=_SAFE)}


def claim(out: Path, verify: Callable[[Path], object] | None = None) -> None:
    """Mark `out` as a tracecore dataset, or refuse it with a DatasetError, writing nothing.

    Why: ingest deletes part files no catalog names and replaces tables/*.parquet, so pointed at a
    folder of someone's own files it would destroy them. An empty folder (or one holding only the
    lock file) becomes a dataset; one made before the marker existed (a catalog and packets/) is
    marked only once `verify(out)` has read its catalog whole (`catalog.load_state`: it raises a
    DatasetError on anything tracecore did not write); without `verify` such a folder is refused.
    Nothing is written, not even the lock, before the folder is confirmed a dataset.
    """
    from tracecore.errors import DatasetError

    refuse_links(out, deep=False)  # before the marker is believed or written
    marker = out / MARKER
    if marker.is_file():
        return
    try:
        names = {p.name for p in out.iterdir() if not p.name.startswith(f".{MARKER}.tmp")} - {
            LOCK_NAME,
            MARKER,
        }
        older = (out / CATALOG_NAME).is_file() and (out / PACKETS_DIR).is_dir()
        if names and not older:
            raise DatasetError(
                f"{out}: not a tracecore dataset (no {MARKER}) and not empty; "
                "give --out a new or empty folder, or an existing dataset"
            )
        if names:  # a file of that name is not enough: its catalog must read as one tracecore wrote
            if verify is None:
                raise DatasetError(
                    f"{out}: not a tracecore dataset (no {MARKER}) and not empty; "
                    "give --out a new or empty folder, or an existing dataset"
                )
            try:
                verify(out)
            except DatasetError as err:
                raise DatasetError(
                    f"{out}: not a tracecore dataset (no {MARKER}, and {CATALOG_NAME} is not a catalog "
                    "tracecore wrote); give --out a new or empty folder, or an existing dataset"
                ) from err
        # A name of this process and thread: two ingests claiming one new folder at once each write
        # their own file, and both renames give the same marker.
        tmp = out / f".{MARKER}.tmp-{os.getpid()}-{threading.get_ident()}"
        tmp.unlink(missing_ok=True)  # a leftover (or a planted link): written anew, never through it
        with open(tmp, "x") as fh:
            fh.write(f"tracecore dataset\nformat_version = {FORMAT_VERSION}\n")
        os.replace(tmp, marker)
    except OSError as err:
        raise DatasetError(f"{out}: cannot use the dataset directory: {err.strerror or err}") from err


def refuse_links(out: Path, deep: bool = True) -> None:
    """A DatasetError naming the first symbolic link among the dataset's own entries and, when `deep`,
    anywhere under packets/, tables/ and .state/.

    Why: tracecore makes no links, and a received dataset's links would aim its writes, deletes and
    reads elsewhere (`packets` → `../..` had ingest delete the user's *.parquet and write run=…
    folders there; a part file linked to another file had the views read it). Refusing them all,
    before anything is read or written, means no path under OUT needs resolving afterwards.
    """
    for link in _links(out, deep):
        raise link_refused(link, out)


def link_refused(link: Path, out: Path) -> DatasetError:
    """The one line for a symbolic link found inside the dataset `out`."""
    from tracecore.errors import DatasetError

    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return DatasetError(
        f"{link}: a symbolic link (to {target}) inside the dataset {out}; tracecore makes none and "
        "follows none: remove it, or ingest the captures into a new --out"
    )


def _links(out: Path, deep: bool) -> Iterator[Path]:
    for name in OWN_ENTRIES:
        if (out / name).is_symlink():
            yield out / name
    for name in LINKED_TREES if deep else ():
        folders = [str(out / name)]
        while folders:
            try:
                entries = list(os.scandir(folders.pop()))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_symlink():
                    yield Path(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)


class LinkCheck:
    """Which component of a path below `root` is a symbolic link, if any; each folder on the way is
    asked once (a dataset's part files share a few hundred folders)."""

    def __init__(self, root: Path):
        self.root = root
        self.folders: dict[str, Path | None] = {}  # folder (relative) → the link on its way, or None

    def link(self, rel: str) -> Path | None:
        """The first component of ROOT/rel that is a symbolic link, or None."""
        parent = rel.rpartition("/")[0]
        return (self._folder(parent) if parent else None) or self._own(rel)

    def _folder(self, rel: str) -> Path | None:
        if rel not in self.folders:
            parent = rel.rpartition("/")[0]
            self.folders[rel] = (self._folder(parent) if parent else None) or self._own(rel)
        return self.folders[rel]

    def _own(self, rel: str) -> Path | None:
        return self.root / rel if _is_link(self.root / rel) else None


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def foreign(st: os.stat_result, folder: os.stat_result, names: int = 1) -> str | None:
    """Why a file (`st`, from lstat or fstat) of the dataset whose folder is `folder` may be someone
    else's, or None: not a regular file, on another file system, or with more hard links than the
    `names` it has inside the dataset. Why: a symbolic-link check does not see a hard link, and
    `allowed_paths` or a write reach whatever file the name is a link of."""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_dev != folder.st_dev:
        return "on another file system than the dataset folder"
    if st.st_nlink > names:
        return f"a hard link ({st.st_nlink} names), which may be a file outside the dataset"
    return None


def foreign_refused(path: Path, why: str, out: Path) -> DatasetError:
    """The one line for a file of the dataset `out` that `foreign` finds may be someone else's."""
    from tracecore.errors import DatasetError

    return DatasetError(
        f"{path}: {why}; tracecore reads and writes only the dataset's own files: copy the dataset "
        f"with `cp -r` (not hard links), or ingest the captures into a new --out (dataset {out})"
    )


def check_own(path: Path, out: Path) -> None:
    """Refuse `path` (an existing file of the dataset `out`, reached through no symbolic link) when
    `foreign` finds it may be someone else's."""
    try:
        why = foreign(os.lstat(path), os.stat(out))
    except OSError:
        return  # gone: the reader that opens it says so
    if why is not None:
        raise foreign_refused(path, why, out)


def read_own(path: Path, out: Path) -> bytes:
    """The bytes of a file of the dataset `out`, opened without following a link and checked by
    `foreign` on the opened file (OSError when it cannot be read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        why = foreign(os.fstat(fd), os.stat(out))
        if why is not None:
            raise foreign_refused(path, why, out)
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read()
    finally:
        os.close(fd)


def readable_parts(out: Path) -> dict[str, str | None]:
    """Every file under packets/ and traces/ named as a part file, by its path relative to `out`,
    with why it may not be read (`foreign`, a symbolic link on its way) or None when it may.

    Why from the folder and not from the catalog: the query connection's `allowed_paths` is set
    before the catalog is attached (no byte of it is read before the connection is locked down), so
    which files it may read is found here. A part file's hard links inside packets/ (a relabelled
    worker's file and its retired name, `place`) count as its own names."""
    folder = os.stat(out)
    found: dict[str, os.stat_result | str] = {}
    for rel, entry in _part_entries(out):
        if entry.is_symlink():
            found[rel] = "a symbolic link"
            continue
        with contextlib.suppress(OSError):
            found[rel] = entry.stat(follow_symlinks=False)
    names: dict[tuple[int, int], int] = {}
    for st in found.values():
        if not isinstance(st, str):
            names[st.st_dev, st.st_ino] = names.get((st.st_dev, st.st_ino), 0) + 1
    return {
        rel: st if isinstance(st, str) else foreign(st, folder, names[st.st_dev, st.st_ino])
        for rel, st in found.items()
    }


def _part_entries(out: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """(path relative to `out`, entry) of every file named as a part file under packets/ and traces/
    (`PART_PATH`, `TRACE_PART_PATH`), folders reached through no link."""
    for run in _folders(out / PACKETS_DIR, "run="):
        for worker in _folders(Path(run.path), "worker="):
            for entry in _entries(Path(worker.path)):
                rel = f"{PACKETS_DIR}/{run.name}/{worker.name}/{entry.name}"
                if PART_PATH.fullmatch(rel):
                    yield rel, entry
    for table in _folders(out / TRACES_DIR, ""):
        for run in _folders(Path(table.path), "run="):
            for entry in _entries(Path(run.path)):
                rel = f"{TRACES_DIR}/{table.name}/{run.name}/{entry.name}"
                if TRACE_PART_PATH.fullmatch(rel):
                    yield rel, entry


def _folders(folder: Path, prefix: str) -> list[os.DirEntry]:
    """The folders in `folder` whose names start with `prefix`, links left out (never followed)."""
    return [e for e in _entries(folder) if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)]


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return []


def part_id(path: Path) -> tuple[int | None, str | None]:
    """(size, checksum) of a part file as it is now; (None, None) when it cannot be read."""
    try:
        fid = file_id(path)
    except OSError:
        return None, None
    return fid.size, fid.checksum


def part_changed(out: Path, part: dict) -> str | None:
    """How a committed part file differs from what ingest wrote ('deleted', 'changed'), or None.

    Why: the part files are plain files anyone can overwrite or delete (`tracecore sql --unsafe`,
    a cleanup script); an ingest that trusted them would call the capture unchanged forever.
    Parts of older datasets (no size recorded) are only checked to exist.
    """
    size, checksum = part_id(out / part["path"])
    if size is None:
        return "deleted or unreadable"
    if part.get("size") is not None and (size, checksum) != (part["size"], part.get("checksum")):
        return "changed"
    return None


def recover(out: Path, referenced: set[str]) -> int:
    """Sweep what an interrupted ingest left; returns how many stray part files were removed."""
    shutil.rmtree(out / STAGING, ignore_errors=True)
    for tmp in out.glob(f".{CATALOG_NAME}.tmp-*"):
        tmp.unlink(missing_ok=True)
    for tmp in (out / TABLES_DIR).glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    removed = 0
    packets = out / PACKETS_DIR
    if packets.is_dir():  # only names tracecore writes: never a file of the user's (`packets/b.parquet`)
        for path in packets.glob("run=*/worker=*/*part-*"):
            rel = path.relative_to(out).as_posix()
            if _PART_OR_LEFTOVER.fullmatch(rel) and rel not in referenced:
                path.unlink(missing_ok=True)
                removed += 1
        prune_empty(packets)
    traces = out / TRACES_DIR
    if traces.is_dir():
        for path in traces.glob("*/run=*/*part-*"):
            rel = path.relative_to(out).as_posix()
            if _TRACE_PART_OR_LEFTOVER.fullmatch(rel) and rel not in referenced:
                path.unlink(missing_ok=True)
                removed += 1
        prune_empty(traces)
    return removed


def prune_empty(folder: Path) -> None:
    """Remove empty partition folders, deepest first."""
    for path in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            path.rmdir()


def place(out: Path, src: Path, rel: str, link: bool) -> None:
    """Put `src` at OUT/rel: a rename (staged file) or a hard link (relabelled file)."""
    dst = out / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    if link:
        with contextlib.suppress(FileNotFoundError):
            dst.unlink()
        try:
            os.link(src, dst)
        except OSError:  # filesystems without hard links: a copy, renamed into place
            tmp = dst.with_name(dst.name + ".tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
    else:
        os.replace(src, dst)


def fsync(path: str | os.PathLike) -> None:
    """Flush a file's or a folder's contents to disk: a rename is durable only once its folder is."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_quietly(path: str | os.PathLike) -> None:
    """`fsync`, ignoring a file system that cannot sync (the commit stays atomic, only less durable)."""
    with contextlib.suppress(OSError):
        fsync(path)


def fsync_dirs(out: Path, rels: list[str]) -> None:
    for folder in {(out / r).parent for r in rels}:
        fsync_quietly(folder)


def delete(out: Path, rels: set[str]) -> None:
    for rel in rels:
        (out / rel).unlink(missing_ok=True)
        testpause.pause("deleting")
    for top in (PACKETS_DIR, TRACES_DIR):
        if rels and (out / top).is_dir():
            prune_empty(out / top)
