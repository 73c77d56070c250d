"""What to ingest: input paths → runs → workers → capture files (and text logs).

Why by content as well as by name: the paper's captures are `worker-<i>-tcpdump.pcap`, testbeds write
`w<i>.pcap`, tcpdump rotation writes `x.pcap0`, `x.pcap1`…, and archives add `.gz`/`.zst`/`.xz`; any
file whose first bytes are a pcap/pcapng magic (or a compressed stream whose name says capture) is one.
Rotated and compressed parts of one capture share a worker key: the name without those suffixes.
"""

from __future__ import annotations

import errno
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from tracecore.ingest.runname import RunMeta, apply_run_toml, parse_run_name
from tracecore.logs import looks_like_text, wide_encoding
from tracecore.reader.formats import container_of
from tracecore.reader.source import compression_in

_COMPRESSION_EXT = re.compile(r"\.(gz|xz|zst|zstd)$", re.IGNORECASE)
_CAPTURE_EXT = re.compile(r"\.(pcapng|pcap|cap|dmp)(\d*)$", re.IGNORECASE)
RUN_TOML = "run.toml"


@dataclass
class CaptureFile:
    path: Path
    file: str  # name relative to the run folder (identity within the run)
    key: str  # worker key: rotated/compressed parts of one capture share it
    part: int  # rotation index (0 for the unrotated file)
    unreadable: str | None = None  # why a file named like a capture cannot be read (reported, not read)


@dataclass
class RunSource:
    """One run folder (or a lone capture file) as found on disk."""

    name: str
    path: Path
    meta: RunMeta
    captures: list[CaptureFile] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)
    complete: bool = True  # the whole folder was scanned: captures missing now were deleted
    warnings: list[str] = field(default_factory=list)
    # text files one folder down (NCCL Inspector's dump folder), offered to the event-source parsers only
    nested_logs: list[Path] = field(default_factory=list)


@dataclass
class Discovery:
    runs: list[RunSource] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): unreadable inputs
    warnings: list[str] = field(default_factory=list)


def _holds_runs(folder: Path) -> bool:
    """Whether some subfolder of `folder` directly holds a capture (a run one level too deep)."""
    try:
        subs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
        return any(_is_capture(f, sniff(f)) for sub in subs for f in sub.iterdir() if f.is_file())
    except OSError:
        return False


# How far and how much the "runs sit deeper" hint looks: it names folders, it reads nothing.
HINT_DEPTH = 4  # run folders up to this many levels below the folder given
HINT_ENTRIES = 5000  # folder entries looked at, all levels together
HINT_SHOWN = 8  # folders named in the message


def _folders_of_runs(folder: Path) -> list[Path]:
    """The folders under `folder` that hold run folders (folders with a capture file), breadth first,
    at most HINT_DEPTH levels down and HINT_ENTRIES entries looked at.

    Why: `ingest DIR` reads DIR's run folders one level down only; a corpus grouped one level more
    (DIR/group/run/) would otherwise be answered "no capture files" without saying where they are."""
    holders: list[Path] = []
    level, budget = [folder], HINT_ENTRIES
    for _depth in range(HINT_DEPTH):
        below: list[Path] = []
        for parent in level:
            try:
                subs = sorted(p for p in parent.iterdir() if not p.name.startswith((".", "_")))
            except OSError:
                continue
            for sub in subs:
                budget -= 1
                if budget < 0:
                    return holders
                if not sub.is_dir():
                    continue
                try:
                    files = [f for f in sub.iterdir() if f.is_file() and not f.name.startswith(".")]
                except OSError:
                    continue
                looked = files[: max(budget, 0)]
                budget -= len(looked)
                if any(_is_capture(f, sniff(f)) for f in looked):
                    if parent not in holders:
                        holders.append(parent)
                else:
                    below.append(sub)
        level = below
    return holders


NO_RUN = "no capture files or traces (profiler, NCCL Inspector, NIC counters) in it or in its subfolders"


def _no_captures(path: Path) -> str:
    """Why a folder gave no run: and where its runs are, when they sit deeper than ingest reads."""
    holders = [h for h in _folders_of_runs(path) if h != path]
    if not holders:
        return NO_RUN
    levels = {len(h.relative_to(path).parts) + 1 for h in holders}
    where = f"{levels.pop()} levels down" if len(levels) == 1 else "deeper"
    shown = " ".join(str(h) for h in holders[:HINT_SHOWN])
    more = f" (and {len(holders) - HINT_SHOWN} more)" if len(holders) > HINT_SHOWN else ""
    return (
        f"{NO_RUN}, but run folders sit {where}: pass the folders "
        f"that hold them: tracecore ingest {shown}{more}"
    )


def worker_key(name: str) -> tuple[str, int]:
    """`worker-0-tcpdump.pcap3.gz` → (`worker-0-tcpdump`, 3); `w1.pcap` → (`w1`, 0)."""
    base = _COMPRESSION_EXT.sub("", name)
    m = _CAPTURE_EXT.search(base)
    if m:
        return base[: m.start()], int(m.group(2) or 0)
    return base, 0


_WORKER_STEM = re.compile(r"^(worker-\d+|w\d+)(?=[-_.]|$)")


def worker_stem(name: str) -> str | None:
    """`worker-0-tcpdump.pcap`, `worker-0-nccl.log` → `worker-0`; `w1.pcap` → `w1`; else None.

    Why: a run folder's per-worker files share this stem, so a log named by it belongs to the worker
    whose capture has it (runners name captures `worker-<i>-tcpdump.pcap`)."""
    m = _WORKER_STEM.match(name)
    return m.group(1) if m else None


def sniff(path: Path) -> str:
    """'capture', 'compressed', 'text', 'wide text' (UTF-16/32), 'empty', 'other' or 'unreadable', from
    the first bytes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return "unreadable"
    if container_of(head):
        return "capture"
    if compression_in(head):
        return "compressed"
    if not head:
        return "empty"
    if wide_encoding(head) is not None:
        return "wide text"  # a log in UTF-16 or UTF-32, which the parsers read as such
    if b"\x00" not in head or looks_like_text(head.decode("utf-8", "replace")):
        return "text"  # NULs in text: the blocks a crash leaves in a log being written
    return "other"


def _is_capture(path: Path, kind: str) -> bool:
    if kind == "capture":
        return True
    # A compressed file is a capture when its name says so (x.pcap.gz, x.pcapng.zst, x.pcap3.xz).
    return kind == "compressed" and bool(_CAPTURE_EXT.search(_COMPRESSION_EXT.sub("", path.name)))


def _named_like_capture(name: str) -> bool:
    return bool(_CAPTURE_EXT.search(_COMPRESSION_EXT.sub("", name)))


def _not_readable(path: Path) -> str | None:
    """Why an entry of a run folder is not a file tracecore can read, or None for a regular file.

    Why asked before opening: a FIFO named like a capture would block `open` forever, and a broken
    link or a capture replaced by something unreadable must be reported, not passed over.
    """
    try:
        mode = path.stat().st_mode
    except OSError as err:
        if not path.is_symlink():
            return f"cannot open the file: {err.strerror}"
        return "symbolic link loop" if err.errno == errno.ELOOP else "symbolic link to a missing file"
    if stat.S_ISREG(mode):
        try:
            with open(path, "rb"):
                return None
        except OSError as err:
            return f"cannot open the file: {err.strerror}"
    if stat.S_ISDIR(mode):
        return "is a directory, not a capture file"
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"not a regular file ({kind}); not read"


def _scan_folder(folder: Path, problems: list[tuple[str, str]]) -> tuple[list[CaptureFile], list[Path]]:
    captures: list[CaptureFile] = []
    logs: list[Path] = []
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as err:
        problems.append((str(folder), f"cannot list the folder: {err.strerror}"))
        return captures, logs
    for p in entries:
        why = _not_readable(p)
        if why is not None:
            if _named_like_capture(p.name):  # a capture: its rows ingested before are kept (pipeline)
                key, part = worker_key(p.name)
                captures.append(CaptureFile(p, p.name, key, part, unreadable=why))
            elif p.is_symlink() and not p.exists():  # a broken link, whatever it was meant to be
                problems.append((str(p), why))
            continue
        kind = sniff(p)
        if _is_capture(p, kind):
            key, part = worker_key(p.name)
            captures.append(CaptureFile(p, p.name, key, part))
        elif _named_like_capture(p.name):
            what = "empty file (0 bytes)" if kind == "empty" else "unknown magic bytes"
            problems.append((str(p), f"named like a capture but not pcap/pcapng ({what})"))
        elif (kind in ("text", "wide text") and p.name != RUN_TOML) or (kind == "compressed" and _is_gzip(p)):
            logs.append(p)  # a .json.gz profiler trace is read through gzip
    captures.sort(key=lambda c: (c.key, c.part, c.file))
    return captures, logs


def _holds_traces(logs: list[Path]) -> bool:
    """Whether one of a folder's text files is a trace (`logs.TRACE_TABLES`): such a folder is a run
    without captures."""
    from tracecore.logs import TRACE_TABLES, detect_parser

    return any((found := detect_parser(path)) is not None and found.table in TRACE_TABLES for path in logs)


def _is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _nested_logs(folder: Path) -> list[Path]:
    """Text and gzip files in the run folder's subfolders, one level down (names starting with '.' or
    '_' are passed over, as at the top): NCCL Inspector writes its records into a folder of its own."""
    found: list[Path] = []
    try:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    except OSError:
        return found
    for sub in subs:
        try:
            entries = sorted(p for p in sub.iterdir() if not p.name.startswith((".", "_")))
        except OSError:
            continue
        for p in entries:
            if _not_readable(p) is None and not _named_like_capture(p.name):
                kind = sniff(p)
                if kind in ("text", "wide text") or (kind == "compressed" and _is_gzip(p)):
                    found.append(p)
    return found


def _make_run(
    folder: Path, name: str, captures: list[CaptureFile], logs: list[Path], complete: bool
) -> RunSource:
    meta = parse_run_name(name)
    warnings: list[str] = []
    toml = folder / RUN_TOML
    if toml.is_file():
        warnings += apply_run_toml(meta, toml)
    if not meta.name_parsed and not any(getattr(meta, f) is not None for f in ("framework", "model")):
        warnings.append(
            f"{folder}: run name {name!r} is not framework-model-optimizer-batchsize-backend-loss-topology;"
            f" ingested with empty metadata. Give it in {folder / RUN_TOML}: [run] framework, model,"
            " optimizer, batch_size, backend, loss, topology (and name); [model] gradient_bytes or n_params;"
            " [[capture.worker]] file + ip to pin addresses. `tracecore init RUN_DIR` writes a template"
        )
    run = meta.name or name
    nested = _nested_logs(folder) if complete else []
    return RunSource(run, folder.resolve(), meta, captures, logs, complete, warnings, nested)


def discover(paths: list[Path]) -> Discovery:
    """Runs under the given paths: a capture file, a run folder, or a folder of run folders."""
    found = Discovery()
    for path in paths:
        if not path.exists():
            found.problems.append((str(path), "no such file or directory"))
        elif not path.is_file() and not path.is_dir():
            found.problems.append((str(path), _not_readable(path) or "not a regular file or folder"))
        elif path.is_file():
            kind = sniff(path)
            if not _is_capture(path, kind) and kind != "compressed":
                reasons = {
                    "unreadable": "cannot open the file",
                    "empty": "empty file (0 bytes): not a capture",
                }
                reason = reasons.get(kind, "not a pcap or pcapng capture")
                found.problems.append((str(path), reason))
                continue
            parent = path.resolve().parent
            key, part = worker_key(path.name)
            in_run = parse_run_name(parent.name).name_parsed or (parent / RUN_TOML).is_file()
            name = parent.name if in_run else key
            found.runs.append(_make_run(parent, name, [CaptureFile(path, path.name, key, part)], [], False))
        else:
            captures, logs = _scan_folder(path, found.problems)
            if captures or _holds_traces(logs):
                found.runs.append(_make_run(path, path.resolve().name, captures, logs, True))
                continue
            try:
                subdirs = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
            except OSError as err:
                found.problems.append((str(path), f"cannot list the folder: {err.strerror}"))
                continue
            before = len(found.runs)
            for sub in subdirs:
                if sub.name.startswith("_"):  # scratch by convention: never a run unless named
                    if _scan_folder(sub, [])[0]:
                        found.problems.append(
                            (
                                str(sub),
                                "holds captures but its name starts with '_', which marks a "
                                "folder that is not a run: not ingested (pass it by name to ingest it)",
                            )
                        )
                    continue
                captures, logs = _scan_folder(sub, found.problems)
                if captures or _holds_traces(logs):
                    found.runs.append(_make_run(sub, sub.name, captures, logs, True))
                elif _holds_runs(sub):
                    found.warnings.append(
                        f"{sub}: a folder of run folders inside {path}; not ingested (pass it)"
                    )
            if len(found.runs) == before:
                found.problems.append((str(path), _no_captures(path)))
    return _merge_duplicates(found)


def _merge_duplicates(found: Discovery) -> Discovery:
    """Two inputs naming the same run folder become one; two folders with one name are an error."""
    by_name: dict[str, RunSource] = {}
    runs: list[RunSource] = []
    for run in found.runs:
        seen = by_name.get(run.name)
        if seen is None:
            by_name[run.name] = run
            runs.append(run)
        elif seen.path == run.path:
            known = {c.file for c in seen.captures}
            seen.captures += [c for c in run.captures if c.file not in known]
            seen.complete = seen.complete or run.complete
        else:
            found.problems.append(
                (str(run.path), f"run name {run.name!r} is already used by {seen.path}; skipped")
            )
    found.runs = runs
    return found
