"""`ingest()`: discover → plan (skip unchanged) → read captures → assemble tables → place → commit.

Why this order: everything slow (reading captures, writing Parquet) happens in `OUT/.staging/`, where a
crash harms nothing; the dataset changes only in `_commit`, whose one atomic step is the catalog rename
(see layout.py and catalog.py). The whole ingest holds `OUT/.lock`, so two ingests never interleave.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.errors import (
    DatasetError,
    DatasetVersionError,
    IngestCancelledError,
    Interrupted,
    NoInputError,
)
from tracecore.ingest import executor, interrupt, layout, link_bins, testpause
from tracecore.ingest.arrow_pool import system_pool
from tracecore.ingest.control import IngestControl
from tracecore.ingest.discover import CaptureFile, RunSource, discover
from tracecore.ingest.fileid import file_id
from tracecore.ingest.lock import dataset_lock
from tracecore.ingest.summary import CaptureOutcome, IngestSummary
from tracecore.ingest.upgrade import add_link_bins, upgrade_parts
from tracecore.ingest.workers import (
    assign,
    capture_mode,
    from_nccl_logs,
    shared_address_message,
    shared_addresses,
    without_captures,
)
from tracecore.ingest.writer import CaptureResult, CaptureTask
from tracecore.schema import SCHEMA_VERSION, part_metadata

if TYPE_CHECKING:
    from tracecore.ingest.catalog import CatalogDraft
    from tracecore.ingest.dataset_tables import State
    from tracecore.ingest.trace_parts import Spill
    from tracecore.logs import LogParser, ParsedLog

# Below this much capture data one process is faster than a pool: each spawned worker pays ~1-2 s of
# imports and numba cache loading, and one process already overlaps decode with Parquet encoding
# (2 cores, 2 GB 4-worker testbed capture: 3.1 s in one process, 7 s in two; 16.7 GB: 5.3 s vs 9.3 s).
POOL_MIN_BYTES = 3 << 30


@dataclass
class _RunPlan:
    source: RunSource
    kept: list[dict] = field(default_factory=list)  # captures rows carried over unchanged
    new: list[tuple[CaptureFile, dict]] = field(default_factory=list)  # (file, row being built)


def ingest(
    paths: list[Path | str],
    out: Path | str | None = None,
    *,
    jobs: int | None = None,
    force: bool = False,
    progress: bool = False,
    wait_s: float = 0.0,
    parallel_min_bytes: int = POOL_MIN_BYTES,
    control: IngestControl | None = None,
    scheduler: str | None = None,
) -> IngestSummary:
    """Ingest capture files / run folders / folders of runs into the dataset at `out`.

    Unchanged captures (same size and checksum) are skipped unless `force`; changed ones replace
    their partitions. Bad inputs are reported in the summary (`summary.failed`), never raised;
    a DatasetError is raised only when the dataset itself cannot be used (locked, unreadable).
    `jobs` is the number of CPU cores to use (default: all): up to `jobs` captures are read at once
    on threads of this process; when the captures to read total `parallel_min_bytes` or more, they
    are read in `jobs // 2` worker processes instead (each keeps two cores busy: decode + encode).
    `control` cancels this ingest from another thread (IngestCancelledError, nothing committed) and
    receives its progress ticks. `scheduler` (a Dask scheduler's address, e.g. tcp://host:8786) reads
    the captures on that cluster's workers instead (`out` must be on a filesystem they all see).
    """
    start = time.perf_counter()
    out = Path(out) if out is not None else layout.default_data_dir()
    found = discover([Path(p) for p in paths])
    if not found.runs:  # a mistyped path creates nothing: no folder, no lock, no marker
        reasons = "; ".join(f"{path}: {reason}" for path, reason in found.problems) or "no input given"
        raise NoInputError(f"nothing to ingest ({reasons}); {out} was not touched")
    if scheduler is not None:  # without the dask extra: its one line, before anything is created
        import tracecore.cluster  # noqa: F401
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DatasetError(f"{out}: cannot create the dataset directory: {err.strerror or err}") from err
    out = out.resolve()
    layout.claim(out, verify=_older_dataset)
    jobs = jobs or os.cpu_count() or 1
    control = control or IngestControl()
    summary = IngestSummary(out, problems=list(found.problems), warnings=list(found.warnings))
    with _warm_up(found.runs), system_pool(), dataset_lock(out, wait_s), interrupt.watch() as sigint:
        layout.refuse_links(out)  # before anything under OUT is read, written or deleted
        had_dataset = (out / layout.CATALOG_NAME).is_file()
        state = _load_state(out, force)
        stage = out / layout.STAGING / uuid.uuid4().hex[:12]
        try:
            named = (
                state.tables["_files"]["path"].to_pylist() + state.tables["_trace_parts"]["path"].to_pylist()
            )
            layout.recover(out, set(named) | set(state.retired))
            if state.schema_version < SCHEMA_VERSION:
                upgrade_parts(out, state)
                state.schema_version = SCHEMA_VERSION  # what the commit records
            add_link_bins(out, state)
            stage.mkdir(parents=True)
        except OSError as err:
            raise DatasetError(f"{out}: cannot prepare the dataset directory: {err.strerror or err}") from err
        plans = [_plan(run, state, force, summary, out) for run in found.runs]
        draft = _DraftOnThread(out) if plans else None
        try:
            with _no_cyclic_gc():
                results = _read_all(plans, stage, jobs, progress, parallel_min_bytes, control, scheduler)
            if control.cancelled:
                raise IngestCancelledError(f"{out}: ingest cancelled; the dataset is unchanged")
            _commit(out, state, plans, results, summary, draft, jobs, progress)
        except BaseException as err:
            if sigint.seen:  # whatever the interrupt surfaced as (DuckDB and Arrow have their own)
                raise Interrupted(
                    _interrupted(out, draft is not None and draft.committed, had_dataset)
                ) from err
            raise
        finally:
            if draft is not None:
                draft.abandon()  # a no-op once committed
            shutil.rmtree(out / layout.STAGING, ignore_errors=True)
    summary.runs = [p.source.name for p in plans]
    summary.seconds = time.perf_counter() - start
    return summary


def _interrupted(out: Path, committed: bool, had_dataset: bool) -> str:
    """The one line a Ctrl-C leaves: which state the dataset is in."""
    if committed:
        return f"Interrupted after the commit: the dataset at {out} holds the new state (this ingest's)."
    if not had_dataset:
        return f"Interrupted before the commit: nothing was committed; {out} holds no dataset yet."
    return f"Interrupted before the commit: the dataset at {out} is unchanged (its previous state)."


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """No cyclic garbage collection while captures are read: every batch allocates Python objects,
    which would trigger collections that walk all of them (~2% of the read's CPU) and find nothing:
    the batches are freed by reference counting."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _warm_up(runs: list[RunSource]) -> Iterator[None]:
    """numba's one-off start-up when the JIT kernels are used (nothing with the ahead-of-time ones),
    paid on a thread while the captures are planned instead of delaying the first read; joined on
    the way out. Nothing imports pandas any more (tracecore.arrow_rows), so pyarrow's first
    conversion of Python objects is no longer warmed here (costs: bench/results/reader-notes.md)."""
    if not any(run.captures for run in runs):
        yield
        return
    from tracecore.reader import compiled

    def run() -> None:
        with contextlib.suppress(Exception):  # only a head start: the real first calls report errors
            compiled.warm_up()

    thread = threading.Thread(target=run, name="warm-up", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()


def _older_dataset(out: Path) -> None:
    """Reads the catalog of a folder made before the dataset marker whole (DatasetError when it is
    not one tracecore wrote): `layout.claim` marks the folder only then."""
    from tracecore.ingest.catalog import load_state

    load_state(out)


def _load_state(out: Path, force: bool) -> State:
    """The committed state; a fresh dataset's without importing DuckDB (which the draft thread does)."""
    from tracecore.ingest.dataset_tables import State

    if not (out / layout.CATALOG_NAME).is_file():
        return State()
    from tracecore.ingest.catalog import load_state

    try:
        return load_state(out)
    except DatasetVersionError:
        raise
    except DatasetError:
        if not force:
            raise
        return State()


class _DraftOnThread:
    """The next catalog (a CatalogDraft with its views installed), prepared on a thread while the
    captures are read: importing DuckDB and binding the views cost ~0.3 s that would otherwise
    come after the last capture. Errors surface when the commit asks for the draft."""

    def __init__(self, out: Path):
        self.out = out
        self.draft: CatalogDraft | None = None
        self.thread = threading.Thread(target=self._prepare, name="catalog-draft", daemon=True)
        self.thread.start()

    def _prepare(self) -> None:
        draft = None
        try:
            from tracecore.ingest.catalog import CatalogDraft

            draft = CatalogDraft(self.out)
            self.draft = draft.prepare()
        except Exception:  # redone by `get`, on the committing thread, which then raises the error
            if draft is not None:
                draft.abandon()

    def get(self) -> CatalogDraft:
        """The prepared draft; prepared here, with its real error, when the thread failed."""
        self.thread.join()
        if self.draft is None:
            from tracecore.ingest.catalog import CatalogDraft

            self.draft = CatalogDraft(self.out).prepare()
        return self.draft

    @property
    def committed(self) -> bool:
        """Whether the catalog rename, the commit point, has happened."""
        return self.draft is not None and self.draft.committed

    def abandon(self) -> None:
        self.thread.join()
        if self.draft is not None:
            self.draft.abandon()


def _plan(run: RunSource, state: State, force: bool, summary: IngestSummary, out: Path) -> _RunPlan:
    """Split a run's captures into unchanged (kept) and to-read (new); record deleted ones.

    A capture is unchanged only when its part files are too: one deleted or overwritten by hand
    since the commit is a reason to read the capture again.
    """
    summary.warnings += run.warnings
    plan = _RunPlan(run)
    old = {r["file"]: r for r in state.rows("captures") if r["run"] == run.name}
    old_parts: dict[str, list[dict]] = {}
    for part in state.rows("_files"):
        if part["run"] == run.name:
            old_parts.setdefault(part["file"], []).append(part)
    seen = set()
    for cap in run.captures:
        seen.add(cap.file)
        prev = old.get(cap.file)
        try:
            if cap.unreadable is not None:
                raise OSError(cap.unreadable)
            fid = file_id(cap.path)
        except OSError as err:
            why = err.strerror or str(err)
            summary.captures.append(
                CaptureOutcome(run.name, cap.file, "failed", message=f"{cap.path}: {why}")
            )
            if prev is not None:
                plan.kept.append(prev)  # the data read before stays until the file is readable again
            continue
        row = {
            "run": run.name,
            "capture": cap.key,
            "file": cap.file,
            "path": str(cap.path.resolve()),
            "size": fid.size,
            "mtime_ns": fid.mtime_ns,
            "checksum": fid.checksum,
        }
        unchanged = (
            prev is not None
            and not force
            and prev["size"] == fid.size
            and prev["checksum"] == fid.checksum
            and prev["status"] != "failed"
        )
        if unchanged:
            for part in old_parts.get(cap.file, []):
                why = layout.part_changed(out, part)
                if why is not None:
                    unchanged = False
                    summary.warnings.append(
                        f"{out / part['path']}: part file {why} since it was written; re-reading {cap.path}"
                    )
        if unchanged:
            plan.kept.append({**prev, **row})
            summary.captures.append(
                CaptureOutcome(
                    run.name, cap.file, "unchanged", prev["worker"], prev["packets"], prev["bytes"], fid.size
                )
            )
        else:
            plan.new.append((cap, row))
    if not run.complete:  # a lone file: the run's other captures stay as they are
        plan.kept += [r for f, r in old.items() if f not in seen]
    else:
        for f, r in old.items():
            if f not in seen:
                summary.captures.append(
                    CaptureOutcome(run.name, f, "removed", r["worker"], r["packets"], r["bytes"])
                )
    return plan


def _read_all(
    plans: list[_RunPlan],
    stage: Path,
    jobs: int,
    progress: bool,
    min_pool: int,
    control: IngestControl,
    scheduler: str | None = None,
) -> dict[int, CaptureResult]:
    """Read every changed capture into staged Parquet; results by task index."""
    tasks: list[CaptureTask] = []
    rows: list[dict] = []
    for plan in plans:
        for cap, row in plan.new:
            row["_task"] = len(tasks)
            meta = part_metadata(plan.source.name, cap.file)
            tasks.append(CaptureTask(len(tasks), str(cap.path), str(stage), metadata=meta))
            rows.append(row)
    tasks.sort(key=lambda t: -rows[t.index]["size"])
    results: dict[int, CaptureResult] = {}
    total = sum(r["size"] for r in rows)
    procs = max(1, jobs // 2) if total >= min_pool else 1
    from tracecore.ingest.progress import IngestProgress

    with IngestProgress(total, len(tasks), progress) as bar:

        def tick(nbytes: int, packets: int) -> None:
            bar.tick(nbytes, packets)
            if control.on_progress is not None:
                control.on_progress(nbytes, packets)

        if scheduler is not None:
            from tracecore.ingest.cluster import on_cluster  # imports `distributed`: only when asked

            done = on_cluster(scheduler, tasks, control, tick)
        else:
            done = executor.run_tasks(tasks, procs, jobs, control, tick)
        # closed on the way out, also when the loop is left early (Ctrl-C here): the captures still
        # running stop at their next batch and are joined before the staging folder is removed
        with contextlib.closing(done):
            for res in done:
                results[res.index] = res
                bar.file_done()
                testpause.pause("reading")
    return results


def _commit(
    out: Path,
    state: State,
    plans: list[_RunPlan],
    results: dict[int, CaptureResult],
    summary: IngestSummary,
    draft: _DraftOnThread | None,
    jobs: int = 1,
    progress: bool = False,
) -> None:
    """Assemble the new tables (logs parsed on up to `jobs` processes, with a bar when `progress`),
    place the part files, commit the catalog, drop replaced files."""
    if draft is None:  # no plans: nothing was asked for
        return
    import duckdb

    from tracecore.arrow_rows import table_from_rows
    from tracecore.ingest import trace_parts
    from tracecore.ingest.catalog import export_tables
    from tracecore.ingest.dataset_tables import BASE_SCHEMAS

    old_files = state.rows("_files")
    old_paths = {f["path"] for f in old_files} | set(state.tables["_trace_parts"]["path"].to_pylist())
    spill = trace_parts.Spill(out / layout.STAGING / f"traces-{uuid.uuid4().hex[:12]}")
    old_ids = {f["path"]: (f.get("size"), f.get("checksum")) for f in old_files}
    files_by_cap = {}
    for f in old_files:
        files_by_cap.setdefault((f["run"], f["file"]), []).append(f)
    touched = {p.source.name for p in plans}
    new_tables: dict[str, list[dict]] = {
        "runs": [],
        "workers": [],
        "captures": [],
        "train_log": [],
        "_files": [],
        "host_clocks": [],
    }
    extra: dict[str, list] = {}
    run_bins: list = []  # each touched run's `_link_bins` rows
    moves: list[tuple[Path, str, bool]] = []  # (source, destination rel, hard link?)
    now = time.time_ns()
    for plan in plans:
        run = plan.source
        caps = list(plan.kept)
        staged: dict[str, list[tuple[str, int, bool]]] = {}
        new_bins = {}
        for cap, row in plan.new:
            res = results[row.pop("_task")]
            new_bins[cap.file] = res.link_bins
            row.update(
                status=res.status,
                packets=res.packets,
                bytes=res.bytes,
                first_ts_ns=res.first_ts_ns,
                last_ts_ns=res.last_ts_ns,
                warnings=res.warnings,
                error=res.error,
                ip_counts=json.dumps(res.ip_counts, sort_keys=True),
                ingested_at_ns=now,
            )
            caps.append(row)
            staged[cap.file] = res.parts
            summary.captures.append(
                CaptureOutcome(
                    run.name,
                    cap.file,
                    "ingested" if res.status == "ok" else res.status,
                    None,
                    res.packets,
                    res.bytes,
                    row["size"],
                    res.seconds,
                    f"{cap.path}: {res.error}" if res.error else None,
                )
            )
            summary.warnings += res.warnings
        logs_parsed = False
        if caps:
            workers, warns = assign(caps, run.meta.worker_ips)
        else:  # traces or counters alone: workers from the files' names and run.toml, else NCCL's logs
            workers, warns = without_captures([p.name for p in run.logs], run.meta.worker_ips)
            if not workers:
                _parse_logs(run, new_tables, extra, summary, {}, jobs, progress, spill)
                logs_parsed = True
                workers = from_nccl_logs(_logged_addresses(extra.get("nccl_ranks", []), run.name))
        summary.warnings += [f"{run.name}: {w}" for w in warns]
        shared = shared_addresses(workers)
        if shared and not run.meta.shared_addresses:  # the run keeps its last committed state
            summary.problems.append((str(run.path), shared_address_message(shared)))
            touched.discard(run.name)
            for o in summary.captures:
                if o.run == run.name and o.status == "ingested":
                    o.status = "failed"
            continue
        if shared:
            summary.warnings.append(f"{run.name}: workers share an address (run.toml shared_addresses)")
        for row in caps:
            row["worker"] = workers[row["capture"]].label
        for o in summary.captures:
            if o.run == run.name and o.worker is None and o.status != "removed":
                o.worker = next((r["worker"] for r in caps if r["file"] == o.file), None)
        for row in caps:
            rel_dir = layout.partition(run.name, row["worker"])
            if row["file"] in staged:
                parts = [(Path(p), n, False, layers, SCHEMA_VERSION) for p, n, layers in staged[row["file"]]]
            else:
                parts = [
                    (out / f["path"], f["rows"], True, f["layers"], f["read_version"])
                    for f in files_by_cap.get((run.name, row["file"]), [])
                ]
            for src, nrows, is_old, layers, read_version in parts:
                rel = src.relative_to(out).as_posix() if is_old else None
                size, checksum = old_ids.get(rel, (None, None)) if is_old else (None, None)
                if size is None:
                    size, checksum = layout.part_id(src)
                if rel is None or not rel.startswith(rel_dir + "/"):
                    rel = f"{rel_dir}/part-{state.next_part}.parquet"
                    state.next_part += 1
                    moves.append((src, rel, is_old))
                new_tables["_files"].append(
                    {
                        "path": rel,
                        "run": run.name,
                        "worker": row["worker"],
                        "file": row["file"],
                        "rows": nrows,
                        "size": size,
                        "checksum": checksum,
                        "layers": layers,
                        "read_version": read_version,
                    }
                )
        new_tables["captures"] += caps
        run_bins.append(link_bins.of_run(state.tables["_link_bins"], run.name, caps, new_bins))
        for w in workers.values():
            new_tables["workers"].append(
                {
                    "run": run.name,
                    "worker": w.label,
                    "ip": w.ip,
                    "capture": w.key,
                    "ip_source": w.ip_source,
                    "n_files": len(w.files),
                    "packets": w.packets,
                    "bytes": w.bytes,
                    "dup_rows": w.dup_rows,
                }
            )
        new_tables["host_clocks"] += [{"run": run.name, **h} for h in run.meta.host_clocks]
        new_tables["runs"].append(
            {
                "run": run.name,
                **run.meta.columns(),
                "n_workers": len(workers),
                "path": str(run.path),
                "capture_mode": capture_mode(workers),
            }
        )
        if not logs_parsed:
            labels = {w.key: w.label for w in workers.values()}
            _parse_logs(run, new_tables, extra, summary, labels, jobs, progress, spill)
    for name, rows in new_tables.items():
        state.replace_runs(name, touched, rows)
    state.replace_runs("_link_bins", touched, link_bins.concat(run_bins))
    trace_parts.convert_legacy(state, spill, touched)
    state.tables["_trace_parts"] = table_from_rows(
        trace_parts.commit_rows(state, spill, touched, moves), BASE_SCHEMAS["_trace_parts"]
    )
    for name in set(extra) | (set(state.tables) - set(new_tables) - {"_link_bins", "_trace_parts"}):
        # other parsers' tables: a touched run's rows are replaced (or dropped when its log is gone)
        state.replace_runs(name, touched, _concat(extra[name]) if name in extra else [])
    # Files this commit stops naming stay one commit longer, for readers still planning on the old
    # catalog; those the previous commit retired are deleted once this one is in place.
    live = set(state.tables["_files"]["path"].to_pylist()) | set(
        state.tables["_trace_parts"]["path"].to_pylist()
    )
    expired = set(state.retired) - live
    state.retired = sorted(old_paths - live)
    try:
        for src, rel, link in moves:
            layout.place(out, src, rel, link)
        layout.fsync_dirs(out, [rel for _, rel, _ in moves])
        testpause.pause("placed")
        summary.warnings += draft.get().commit(state)
        try:
            testpause.pause("committed")
        finally:  # even on Ctrl-C: tables/ always follows the catalog just committed
            with interrupt.deferred():
                export_tables(out, state)
    except (OSError, duckdb.Error) as err:  # disk full, permissions: the old state stays committed
        raise DatasetError(f"{out}: cannot write the dataset: {str(err).splitlines()[0]}") from err
    layout.delete(out, expired)


def _parse_logs(
    run: RunSource,
    tables: dict[str, list],
    extra: dict[str, list],
    summary: IngestSummary,
    labels: dict[str, str],
    jobs: int = 1,
    progress: bool = False,
    spill: Spill | None = None,
) -> None:
    """Offer each text file of the run to the log parsers (on up to `jobs` processes: log_pool);
    bad lines are reported per file; the rows of the big trace tables go to `spill` (trace_parts).

    `labels` maps each capture's worker key to its label: a parser table with a `worker` column gets
    the worker whose capture shares the log's `worker-<i>` stem (NULL when none or several do)."""

    from tracecore.ingest.discover import worker_stem
    from tracecore.ingest.log_pool import parse_in_order
    from tracecore.ingest.progress import TraceProgress
    from tracecore.logs import detect_parser

    by_stem: dict[str, list[str]] = {}
    for key, label in labels.items():
        stem = worker_stem(key)
        if stem is not None:
            by_stem.setdefault(stem, []).append(label)
    offered = [(path, False) for path in run.logs] + [(path, True) for path in run.nested_logs]
    detected = []
    for path, nested in offered:
        parser = detect_parser(path, nested=nested)
        if parser is None:
            if path.suffix.lower() in (".log", ".csv") and not nested:
                summary.warnings.append(f"{path}: not a log format tracecore knows; skipped")
            continue
        detected.append((path, nested, parser))
    owner: dict[tuple, str] = {}
    parsed_files = parse_in_order([(path, parser) for path, _, parser in detected], jobs)
    sizes = [_size_of(path) for path, _, _ in detected]
    with TraceProgress(run.name, sum(sizes), len(detected), progress) as bar:
        for (path, nested, parser), parsed, size in zip(detected, parsed_files, sizes, strict=True):
            bar.file_done(size)
            _add_parsed(run, path, nested, parser, parsed, owner, by_stem, tables, extra, summary, spill)


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _add_parsed(
    run: RunSource,
    path: Path,
    nested: bool,
    parser: LogParser,
    parsed: ParsedLog | str,
    owner: dict[tuple, str],
    by_stem: dict[str, list[str]],
    tables: dict[str, list],
    extra: dict[str, list],
    summary: IngestSummary,
    spill: Spill | None,
) -> None:
    """One parsed log file's rows into the run's tables (the big trace tables' staged in `spill`),
    its problems and warnings into the summary."""
    import pyarrow as pa

    from tracecore.arrow_rows import array  # not pa.array: it imports pandas
    from tracecore.ingest.dataset_tables import SPILLED_SCHEMAS
    from tracecore.ingest.discover import worker_stem
    from tracecore.logs._collectives import claim_ranks

    if isinstance(parsed, str):
        summary.problems.append((str(path), parsed))
        return
    refused = claim_ranks(owner, str(path), {parser.table: parsed.table, **parsed.more})
    if refused is not None:
        kept, (source, comm, rank) = refused
        what = "steps" if comm == "steps" else f"communicator {comm}"
        summary.warnings.append(
            f"{path}: records rank {rank} of {source} {what}, as {kept} does; not read (one file per"
            " rank and source: its collectives would count twice)"
        )
        return
    if parsed.bad_lines:
        example = parsed.first_bad[0] if parsed.first_bad else ""
        summary.problems.append((str(path), f"{parsed.bad_lines} unparseable line(s); first: {example}"))
    summary.warnings += [f"{path}: {warning}" for warning in parsed.warnings]
    stem = worker_stem(path.name)
    owners = by_stem.get(stem, []) if stem is not None else []
    worker = owners[0] if len(owners) == 1 else None
    relative = f"{path.parent.name}/{path.name}" if nested else None
    for name, table in ((parser.table, parsed.table), *parsed.more.items()):
        if "worker" in table.column_names:
            at = table.column_names.index("worker")
            table = table.set_column(at, "worker", array([worker] * table.num_rows, pa.string()))
        if relative is not None and "file" in table.column_names:  # the file's place in its run
            at = table.column_names.index("file")
            table = table.set_column(at, "file", array([relative] * table.num_rows, pa.string()))
        table = table.add_column(0, "run", array([run.name] * table.num_rows, pa.string()))
        if spill is not None and name in SPILLED_SCHEMAS:
            spill.add(run.name, name, relative or path.name, table)
        elif name in tables:
            tables[name] += table.to_pylist()
        else:
            extra.setdefault(name, []).append(table)


def _logged_addresses(tables: list, run: str) -> list[list[str]]:
    """The `addresses` lists of the run's rows of table nccl_ranks (as parsed, before the commit)."""
    return [
        row["addresses"] or []
        for table in tables
        for row in table.select(["run", "addresses"]).to_pylist()
        if row["run"] == run
    ]


def _concat(tables: list) -> object:
    import pyarrow as pa

    return pa.concat_tables(tables, promote_options="permissive")
