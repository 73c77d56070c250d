"""tracecore beside Meta's Holistic Trace Analysis (HTA 0.5.0) on the same job traces, in one run: how long
each takes to load them and how much memory its processes hold, then whether their answers agree.

    .venv/bin/python -m bench.hta_side_by_side SET [SET ...] --hta-python .venv-hta/bin/python
    .venv/bin/python -m bench.hta_side_by_side --smoke --hta-python .venv-hta/bin/python   # < 1 min

SET: a folder of kineto-rank*.json[.gz], as bench/make_job_traces.py writes them (its manifest.json gives
the JSON bytes, the events and the planted stragglers; without one they are counted). Per set, one tool at
a time:
* tracecore: `tracecore ingest SET --data DS` as a whole process; then, in another process, its answers
  from the views: step_breakdown, collective_stragglers and collective_calls, profiler_kernels;
* HTA in its own venv (`make .venv-hta/.installed`), once per parser backend asked (default: json, HTA's
  default and its fastest on these traces, and ijson_batch_and_compress, which its docs recommend and
  which held the least memory; bench/results/hta-side-by-side.md has all four on 8 ranks):
  TraceAnalysis(trace_files=...) in a child process; the first backend that survives also answers:
  get_temporal_breakdown and get_comm_comp_overlap over the trace and over each iteration
  (bench/hta_breakdown.py), get_gpu_kernel_breakdown and get_potential_stragglers.
Memory is the sum of the RSS of a tool's whole process tree (HTA parses ranks on a fork Pool, tracecore
on spawned parsers), sampled from /proc every 50 ms, with the sum of PSS (shared pages split between the
processes that map them) every 0.5 s and GNU time's %M (the largest single process) beside it. A tree
past --limit-gb is killed and its cell reads "exceeded". The answers are compared where HTA's and
tracecore's definitions coincide, as a share of the step (or of HTA's window for whole-trace sums);
DEFINITIONS says where they differ. Results: bench/results/hta-side-by-side.{json,md}, updated per set.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "hta-side-by-side"
HTA_DEFAULT, HTA_LEAN = "json", "ijson_batch_and_compress"
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_S, PSS_EVERY = 0.05, 10  # RSS every 50 ms, PSS every tenth sample
GIB = 1 << 30
TOLERANCE = 0.01  # of the step: the agreement the issue asks for

# --- measuring a process tree ----------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
    return out


def tree(pid: int) -> list[int]:
    """`pid` and every process descended from it, now."""
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(_children(p))
    return seen


def _rss(pid: int) -> int:
    with contextlib.suppress(OSError, IndexError, ValueError), open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * PAGE
    return 0


def _pss(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Measured:
    """One command's wall time and its process tree's memory."""

    wall_s: float
    rc: int | None
    peak_rss: int  # the largest sum of RSS over the tree seen, bytes
    peak_pss: int  # the same of PSS (sampled less often)
    max_rss_one: int | None  # GNU time's %M: the largest single process, bytes
    cpu_s: float | None  # GNU time's %U + %S: user and system CPU of the tree (processes waited for)
    processes: int  # the most processes seen in the tree at once
    exceeded: bool = False  # killed past the limit
    timed_out: bool = False
    mark_s: float | None = None  # when the child said it had loaded, s after start
    mark_peak_rss: int | None = None  # the peak up to then
    mark_peak_pss: int | None = None
    marked: dict | None = None  # what the child wrote in its mark
    stderr_tail: str = ""


def measure(cmd: list[str], *, limit: int, timeout: float, mark: Path | None = None, env=None) -> Measured:
    """Run `cmd` under GNU time in its own session, sampling its tree until it ends; past `limit` bytes of
    tree RSS or `timeout` s the whole session is killed. `mark`: a file the child writes a
    JSON object into when its load is done (HTA; "t": its time.monotonic()), to split the load's peak
    from the analyses'."""
    with tempfile.TemporaryDirectory(prefix="hsbs-") as tmp:
        timing, err = Path(tmp) / "time", Path(tmp) / "stderr"
        with open(err, "wb") as err_fh:
            start = time.monotonic()
            proc = subprocess.Popen(
                ["/usr/bin/time", "-f", "%M %U %S", "-o", str(timing), *cmd],
                stdout=subprocess.DEVNULL,
                stderr=err_fh,
                start_new_session=True,
                cwd=REPO,
                env=env,
            )
            samples: list[tuple[float, int, int]] = []
            peak = peak_pss = most = n = 0
            exceeded = timed_out = False
            pss = 0
            while proc.poll() is None:
                pids = tree(proc.pid)
                rss = sum(_rss(p) for p in pids)
                if n % PSS_EVERY == 0:
                    pss = sum(_pss(p) for p in pids)
                n += 1
                now = time.monotonic()
                samples.append((now, rss, pss))
                peak, peak_pss, most = max(peak, rss), max(peak_pss, pss), max(most, len(pids))
                if rss > limit or now - start > timeout:
                    exceeded, timed_out = rss > limit, not rss > limit
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(SAMPLE_S)
            wall = time.monotonic() - start
        gnu = _gnu_time(timing)
        out = Measured(
            wall_s=round(wall, 2),
            rc=proc.returncode,
            peak_rss=peak,
            peak_pss=peak_pss,
            max_rss_one=gnu[0],
            cpu_s=gnu[1],
            processes=most,
            exceeded=exceeded,
            timed_out=timed_out,
            stderr_tail=err.read_text(errors="replace")[-2000:],
        )
        if mark is not None and mark.is_file() and mark.read_text().strip():
            out.marked = json.loads(mark.read_text())
            at = out.marked["t"]
            before = [s for s in samples if s[0] <= at] or samples[:1]
            out.mark_s = round(at - start, 2)
            out.mark_peak_rss = max((s[1] for s in before), default=0)
            out.mark_peak_pss = max((s[2] for s in before), default=0)
        return out


def _gnu_time(timing: Path) -> tuple[int | None, float | None]:
    """GNU time's (%M in bytes, %U + %S in s); Nones when it was killed before writing them."""
    with contextlib.suppress(OSError, ValueError):
        words = timing.read_text().split()
        if len(words) >= 3:  # after a signal GNU time writes "Command terminated by signal 9" first
            return int(words[-3]) * 1024, round(float(words[-2]) + float(words[-1]), 2)
    return None, None


# --- the traces ------------------------------------------------------------------------------------


def trace_files(folder: Path) -> list[Path]:
    """The set's Kineto traces, by name."""
    return sorted([*folder.glob("kineto-rank*.json"), *folder.glob("kineto-rank*.json.gz")])


def _count_events(path: Path) -> tuple[int, int]:
    """(JSON bytes, events) of a trace without a manifest: each event has exactly one "ph" key."""
    opener = gzip.open if path.suffix == ".gz" else open
    size = events = 0
    tail = b""
    with opener(path, "rb") as fh:
        while chunk := fh.read(1 << 22):
            size += len(chunk)
            buf = tail + chunk
            events += buf.count(b'"ph"') - tail.count(b'"ph"')
            tail = buf[-3:]
    return size, events


def describe(folder: Path) -> dict:
    """Ranks, bytes on disk and of JSON, events and planted stragglers of a set."""
    files = trace_files(folder)
    if not files:
        raise SystemExit(f"{folder}: no kineto-rank*.json[.gz]")
    manifest = folder / "manifest.json"
    out = {"set": str(folder), "ranks": len(files), "disk_bytes": sum(p.stat().st_size for p in files)}
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        out |= {
            "json_bytes": m["total"]["json_bytes"],
            "events": m["total"]["events"],
            "steps": m["steps"],
            "rank_mb": m["rank_mb"],
            "gzip": m.get("gzip_level") is not None,
            "stragglers": m["stragglers"],
            "straggler_delay_ns": m["straggler_delay_ns"],
            "skew_us": m["skew_us"],
        }
    else:
        counted = [_count_events(p) for p in files]
        out |= {"json_bytes": sum(c[0] for c in counted), "events": sum(c[1] for c in counted)}
        out |= {"stragglers": None, "gzip": files[0].suffix == ".gz"}
    return out


# --- HTA's side (runs in .venv-hta) ----------------------------------------------------------------


def hta_child(folder: Path, backend: str, out: Path, mark: Path, answers: bool) -> None:
    """Load the set with HTA's `backend` as a user does, say when loaded, then (with `answers`) ask HTA
    the questions tracecore answers; JSON to `out`."""
    import logging
    import warnings

    t0 = time.monotonic()
    logging.disable(logging.WARNING)  # HTA logs every file it parses
    warnings.simplefilter("ignore", FutureWarning)  # pandas 2 on HTA's replace()
    from hta.configs.parser_config import ParserBackend, ParserConfig
    from hta.trace_analysis import TraceAnalysis

    cfg = ParserConfig.get_default_cfg()
    cfg.set_parser_backend(ParserBackend(backend))
    ParserConfig.set_default_cfg(cfg)  # TraceAnalysis takes no parser config in 0.5.0
    t1, cpu1 = time.monotonic(), _cpu_s()
    analysis = TraceAnalysis(trace_files=[str(p) for p in trace_files(folder)], trace_dir=str(folder))
    t2, cpu2 = time.monotonic(), _cpu_s()
    result = {
        "backend": backend,
        "import_s": round(t1 - t0, 2),
        "load_s": round(t2 - t1, 2),
        "load_cpu_s": round(cpu2 - cpu1, 2),
        "rows": sum(len(df) for df in analysis.t.traces.values()),
    }
    mark.write_text(json.dumps({"t": t2, **result}))
    if answers:
        result["answers"] = hta_answers(analysis)
    out.write_text(json.dumps(result))


def _cpu_s() -> float:
    """User and system CPU of this process and its children reaped so far (HTA's Pool is, when it ends)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class _OldNcclNames:
    """HTA's symbol table as its straggler finder reads it, with NCCL's ncclDevKernel_* (2.19 on) spelled
    ncclKernel_*, the only prefix the finder looks for; ids unchanged."""

    def __init__(self, table: object) -> None:
        new, old = "ncclDevKernel", "ncclKernel"
        self.names = [old + s[len(new) :] if s.startswith(new) else s for s in table.get_sym_table()]
        self.ids = {name: i for i, name in enumerate(self.names)}

    def get_sym_table(self) -> list[str]:
        return self.names

    def get_sym_id_map(self) -> dict[str, int]:
        return self.ids


def _stragglers_old_names(analysis: object) -> dict:
    """HTA's own straggler finder through its straggler_identification_impl hook, reading the kernels'
    names as NCCL before 2.19 wrote them."""
    from hta.analyzers.straggler import find_stragglers_with_late_start_comm_kernels

    def finder(df: object, table: object, n: int, visualize: bool) -> object:
        return find_stragglers_with_late_start_comm_kernels(df, _OldNcclNames(table), n, visualize)

    try:
        return {
            "ranks": sorted(
                int(r) for r in analysis.get_potential_stragglers(straggler_identification_impl=finder)
            )
        }
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def hta_answers(analysis: object) -> dict:
    """HTA's answers on a loaded TraceAnalysis: per rank over its default window (every step but the last)
    and per iteration, with each analysis's seconds."""
    from bench.hta_breakdown import _breakdown, _IterationView

    trace, timings = analysis.t, {}
    t = time.monotonic()
    whole = _breakdown(trace)  # get_temporal_breakdown + get_comm_comp_overlap, per rank
    timings["temporal_breakdown_and_overlap_s"] = round(time.monotonic() - t, 2)
    t = time.monotonic()
    types, kernels = analysis.get_gpu_kernel_breakdown(visualize=False)
    timings["gpu_kernel_breakdown_s"] = round(time.monotonic() - t, 2)
    sums = kernels.groupby(["rank", "kernel_type"])["sum (us)"].sum()
    t = time.monotonic()
    try:
        stragglers = {"ranks": [int(r) for r in analysis.get_potential_stragglers()]}
    except Exception as e:  # HTA's finder raises on traces it cannot read: the answer is that error
        stragglers = {"error": f"{type(e).__name__}: {e}"}
    timings["potential_stragglers_s"] = round(time.monotonic() - t, 2)
    stragglers["old_names"] = _stragglers_old_names(analysis)
    t = time.monotonic()
    by_step: dict[int, dict] = {}
    for rank, df in trace.traces.items():
        gpu = df[df["stream"].ne(-1) & df["iteration"].ge(0)]
        for step, frame in gpu.groupby("iteration"):
            by_step.setdefault(int(step), {})[rank] = frame
    iterations = [
        {"rank": rank, "step": step, **row}
        for step, frames in sorted(by_step.items())
        for rank, row in sorted(_breakdown(_IterationView(trace, frames)).items())
    ]
    timings["per_iteration_s"] = round(time.monotonic() - t, 2)
    return {
        "whole": [{"rank": rank, **row} for rank, row in sorted(whole.items())],
        "kernel_types": types.to_dict("records"),
        "kernel_sums_us": [{"rank": int(r), "type": k, "us": float(v)} for (r, k), v in sums.items()],
        "stragglers": stragglers,
        "iterations": iterations,
        "seconds": timings,
    }


# --- tracecore's side (runs in .venv) --------------------------------------------------------------

STEPS_SQL = """SELECT rank, step, start_ns, end_ns, step_ns, compute_ns, gpu_idle_ns, communication_ns,
    overlap_ns, memory_ns FROM step_breakdown ORDER BY rank, step"""
# HTA's window: GPU work launched before the last ProfilerStep; here, work starting before its GPU span
KERNELS_SQL = """WITH cut AS (
    SELECT file, arg_max(coalesce(gpu_start_ns, start_ns), step) AS t FROM profiler_steps GROUP BY file)
SELECT k.rank, k.kind, count(*) AS kernels, sum(k.end_ns - k.start_ns)::BIGINT AS ns
FROM profiler_kernels AS k JOIN cut AS c ON c.file = k.file
WHERE k.start_ns < c.t GROUP BY ALL ORDER BY ALL"""
LAST_SQL = """SELECT last_rank, count(*) AS instances, median(spread_ns)::BIGINT AS median_spread_ns
FROM collective_stragglers GROUP BY last_rank ORDER BY instances DESC, last_rank"""
# a rank late to an instance started at least half its spread after the first (collective_stragglers'
# clock: collective_calls' start less the host's offset)
LATE_SQL = """WITH c AS (
    SELECT run, source, comm, seq, rank, start_ns - coalesce(clock_offset_ns, 0) AS t
    FROM collective_calls WHERE start_ns IS NOT NULL),
i AS (SELECT run, source, comm, seq, min(t) AS t0, max(t) AS t1 FROM c GROUP BY ALL HAVING count(*) >= 2)
SELECT c.rank, count(*) FILTER (WHERE c.t - i.t0 >= (i.t1 - i.t0) / 2 AND i.t1 > i.t0) AS late,
       count(*) AS instances
FROM c JOIN i USING (run, source, comm, seq) GROUP BY c.rank ORDER BY c.rank"""


def tc_child(data: Path, out: Path) -> None:
    """tracecore's answers from a dataset's views, with each query's seconds; JSON to `out`."""
    from tracecore.ingest import open_catalog

    con = open_catalog(data, read_only=True)
    result: dict[str, list] = {}
    seconds = {}
    try:
        queries = {"steps": STEPS_SQL, "kernels": KERNELS_SQL, "last": LAST_SQL, "late": LATE_SQL}
        for name, sql in queries.items():
            t = time.monotonic()
            cur = con.execute(sql)
            cols = [d[0] for d in cur.description]
            result[name] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
            seconds[name] = round(time.monotonic() - t, 2)
    finally:
        con.close()
    out.write_text(json.dumps({**result, "seconds": seconds}))


# --- the comparison --------------------------------------------------------------------------------

DEFINITIONS = """\
Where the definitions coincide (the 1 % criterion applies):
* Per iteration (rank, step): HTA's get_temporal_breakdown and get_comm_comp_overlap run on the GPU
  events of one iteration (HTA's `iteration`: the ProfilerStep#N the launch ran in; window from the first
  to the last of them) = step_breakdown's step (Kineto's GPU ProfilerStep#N span): span (HTA's
  kernel_time), idle, compute, non-compute = span - compute - idle, and overlap time (HTA's ratio, which
  it rounds to 0.01 %, times step_breakdown's communication_ns); differences as a share of the step.
* Per rank over HTA's default window (every step but the last): compute and non-compute are the sums of
  step_breakdown's steps but the last; the overlap ratio is their overlap_ns over their communication_ns;
  differences as a share of HTA's window (kernel_time).
* Kernel breakdown: HTA's get_gpu_kernel_breakdown sums each kernel's duration per kernel type and rank
  (COMMUNICATION: a name matching ^nccl.*Kernel; MEMORY: Memcpy/Memset; COMPUTATION: the rest) over the
  GPU work it keeps (launched before the last ProfilerStep); tracecore: the sum of end_ns - start_ns of
  profiler_kernels by kind (communication, compute, memcpy + memset), of the kernels that start before
  the last step's GPU span; differences as a share of HTA's window.
Where they differ (shown, not held to 1 %):
* HTA's per-rank idle is its window (first to last GPU event it keeps) less the union of GPU work: it
  counts the gaps between one step's GPU span and the next, which no step holds; tracecore's line is the
  window from the first kept step's GPU start to the last kept step's GPU end less the steps' busy time.
* HTA rounds every event inwards to whole µs by default (about 1 µs per kernel); tracecore keeps the ns.
* Stragglers: HTA's get_potential_stragglers takes, per iteration, the num_candidates (2) ranks whose last
  long communication kernel (a name starting ncclKernel, >= 1 % of an iteration) starts last, and ranks
  them by how often. NCCL 2.19 on names its kernels ncclDevKernel_*: HTA finds no communication kernel
  and raises; run again through its straggler_identification_impl hook with those names read as
  ncclKernel_* (HTA's algorithm unchanged), its answer is shown too. tracecore names a rank that started
  at least half the instance's spread after the first rank in more than half the collective instances
  (collective_calls, on collective_stragglers' clock); collective_stragglers' last_rank says who started
  last on each instance.
"""


def _share(a: float, b: float, of: float) -> float:
    return abs(a - b) / of if of else 0.0


def compare(tc: dict, hta: dict, described: dict) -> dict:
    """Where tracecore's answers and HTA's agree: the worst difference per quantity as a share of the
    step (per iteration) or of HTA's window (per rank), and the stragglers each names."""
    steps = {(r["rank"], r["step"]): r for r in tc["steps"]}
    last = {}
    for rank, step in steps:
        last[rank] = max(last.get(rank, step), step)
    worst = {"span": 0.0, "idle": 0.0, "compute": 0.0, "non_compute": 0.0, "overlap": 0.0}
    compared = missing = over = cut = 0
    for it in hta["iterations"]:
        if it["step"] >= last.get(it["rank"], it["step"] + 1):
            cut += 1  # HTA's default load keeps of the last step only work launched before it
            continue
        s = steps.get((it["rank"], it["step"]))
        if s is None or s["compute_ns"] is None:
            missing += 1
            continue
        step = s["step_ns"]
        ratio = it["overlap_ratio"] or 0.0
        non_compute = step - s["compute_ns"] - s["gpu_idle_ns"]
        got = {
            "span": _share(it["kernel_us"] * 1e3, step, step),
            "idle": _share(it["idle_us"] * 1e3, s["gpu_idle_ns"], step),
            "compute": _share(it["compute_us"] * 1e3, s["compute_ns"], step),
            "non_compute": _share(it["non_compute_us"] * 1e3, non_compute, step),
            "overlap": _share(ratio * s["communication_ns"], s["overlap_ns"], step),
        }
        over += max(got.values()) > TOLERANCE
        worst = {k: max(worst[k], got[k]) for k in worst}
        compared += 1
    per_rank = _compare_ranks(tc, hta)
    return {
        "iterations": {
            "compared": compared,
            "missing": missing,
            "last_step_cut": cut,
            "over_1pct": over,
            "worst_share": worst,
        },
        "ranks": per_rank,
        "stragglers": _stragglers(tc, hta, described),
    }


def _kept(tc: dict) -> dict[int, list[dict]]:
    by_rank: dict[int, list[dict]] = {}
    for r in tc["steps"]:
        by_rank.setdefault(r["rank"], []).append(r)
    return {rank: sorted(rows, key=lambda r: r["step"])[:-1] for rank, rows in by_rank.items()}


def _compare_ranks(tc: dict, hta: dict) -> dict:
    kept = _kept(tc)
    sums = {(k["rank"], k["kind"]): k["ns"] for k in tc["kernels"]}
    hta_sums = {(k["rank"], k["type"]): k["us"] * 1e3 for k in hta["kernel_sums_us"]}
    kinds = {"COMPUTATION": ("compute",), "COMMUNICATION": ("communication",), "MEMORY": ("memcpy", "memset")}
    rows, worst = [], {"compute": 0.0, "non_compute": 0.0, "overlap": 0.0, "kernels": 0.0, "idle": 0.0}
    for w in hta["whole"]:
        steps = kept.get(w["rank"], [])
        if not steps:
            continue
        window = w["kernel_us"] * 1e3
        compute = sum(s["compute_ns"] for s in steps)
        non_compute = sum(s["step_ns"] - s["compute_ns"] - s["gpu_idle_ns"] for s in steps)
        comm = sum(s["communication_ns"] for s in steps)
        overlap = sum(s["overlap_ns"] for s in steps)
        span = steps[-1]["end_ns"] - steps[0]["start_ns"]
        idle = span - sum(s["step_ns"] - s["gpu_idle_ns"] for s in steps)
        kernel_diff = {
            t: _share(hta_sums.get((w["rank"], t), 0.0), sum(sums.get((w["rank"], k), 0) for k in ks), window)
            for t, ks in kinds.items()
        }
        row = {
            "rank": w["rank"],
            "hta": {k: v for k, v in w.items() if k != "rank"},
            "tracecore": {
                "window_us": span / 1e3,
                "idle_us": idle / 1e3,
                "compute_us": compute / 1e3,
                "non_compute_us": non_compute / 1e3,
                "overlap_ratio": overlap / comm if comm else None,
            },
            "share": {
                "compute": _share(w["compute_us"] * 1e3, compute, window),
                "non_compute": _share(w["non_compute_us"] * 1e3, non_compute, window),
                "overlap": _share((w["overlap_ratio"] or 0.0) * comm, overlap, window),
                "kernels": max(kernel_diff.values()),
                "idle": _share(w["idle_us"] * 1e3, idle, window),
            },
            "kernels_hta_us": {t: hta_sums.get((w["rank"], t), 0.0) / 1e3 for t in kinds},
            "kernels_tracecore_us": {
                t: sum(sums.get((w["rank"], k), 0) for k in ks) / 1e3 for t, ks in kinds.items()
            },
        }
        worst = {k: max(worst[k], row["share"][k]) for k in worst}
        rows.append(row)
    return {"compared": len(rows), "worst_share": worst, "rows": rows}


def _stragglers(tc: dict, hta: dict, described: dict) -> dict:
    named = sorted(r["rank"] for r in tc["late"] if r["late"] * 2 > r["instances"])
    return {
        "planted": described.get("stragglers"),
        "tracecore": named,
        "tracecore_last_rank": [[r["last_rank"], r["instances"]] for r in tc["last"]],
        "hta": hta["stragglers"],
    }


# --- the run ---------------------------------------------------------------------------------------


@dataclass
class Options:
    hta_python: Path
    backends: list[str]
    limit: int
    timeout: float
    jobs: int | None
    work: Path
    keep: bool = False
    notes: list[str] = field(default_factory=list)


def _tool_row(tool: str, setting: str, m: Measured, seconds: float | None, described: dict) -> dict:
    """One measurement's row; `loaded`: its load finished (HTA's may be killed in its analyses after)."""
    ok = m.rc == 0 and not m.exceeded and not m.timed_out
    row = {"tool": tool, "setting": setting, "ok": ok, **asdict(m), "load_s": seconds}
    row["loaded"] = bool(seconds) and (ok or m.marked is not None)
    if row["loaded"]:
        row["json_mb_per_s"] = round(described["json_bytes"] / 1e6 / seconds, 2)
        row["events_per_s"] = round(described["events"] / seconds)
    return row


def bench_set(folder: Path, opts: Options) -> dict:
    """Both tools on one set, one measurement at a time."""
    described = describe(folder)
    print(f"{folder}: {described['ranks']} ranks, {described['json_bytes'] / 1e6:.0f} MB of JSON", flush=True)
    rows, answers = [], {}
    data = opts.work / "tracecore-data"
    shutil.rmtree(data, ignore_errors=True)
    tracecore = Path(sys.executable).parent / "tracecore"
    cmd = [str(tracecore), "ingest", str(folder), "--data", str(data), "--quiet"]
    if opts.jobs:
        cmd += ["--jobs", str(opts.jobs)]
    load = os.getloadavg()
    m = measure(cmd, limit=opts.limit, timeout=opts.timeout)
    setting = "ingest" + (f" --jobs {opts.jobs}" if opts.jobs else "")
    rows.append(_tool_row("tracecore", setting, m, m.wall_s, described))
    rows[-1]["load_avg_before"] = [round(x, 2) for x in load]
    _say(rows[-1])
    if rows[-1]["ok"]:
        out = opts.work / "tc.json"
        load = os.getloadavg()
        m = measure(
            [sys.executable, "-m", "bench.hta_side_by_side", "--tc-child", str(data), "--out", str(out)],
            limit=opts.limit,
            timeout=opts.timeout,
        )
        rows.append(_tool_row("tracecore", "answers (views)", m, None, described))
        rows[-1]["load_avg_before"] = [round(x, 2) for x in load]
        if m.rc == 0:
            answers["tracecore"] = json.loads(out.read_text())
            rows[-1]["query_s"] = answers["tracecore"]["seconds"]
        _say(rows[-1])
    if not opts.keep:
        shutil.rmtree(data, ignore_errors=True)
    for backend in opts.backends:
        ask = "hta" not in answers
        out, mark = opts.work / f"hta-{backend}.json", opts.work / f"hta-{backend}.mark"
        out.unlink(missing_ok=True)
        mark.unlink(missing_ok=True)
        cmd = [str(opts.hta_python), "-m", "bench.hta_side_by_side", "--hta-child", str(folder)]
        cmd += ["--backend", backend, "--out", str(out), "--mark", str(mark)] + (["--answers"] if ask else [])
        load = os.getloadavg()
        m = measure(cmd, limit=opts.limit, timeout=opts.timeout, mark=mark)
        got = json.loads(out.read_text()) if m.rc == 0 and out.is_file() else (m.marked or {})
        row = _tool_row("HTA 0.5.0", backend, m, got.get("load_s"), described)
        row |= {"load_avg_before": [round(x, 2) for x in load], "import_s": got.get("import_s")}
        row["load_cpu_s"] = got.get("load_cpu_s")
        row["hta_rows"] = got.get("rows")
        if got.get("answers"):
            answers["hta"] = got["answers"]
            row["answered"] = True
            row["analysis_s"] = got["answers"]["seconds"]
        rows.append(row)
        _say(row)
    result = {**described, "tools": rows, "ratios": _ratios(rows)}
    if "tracecore" in answers and "hta" in answers:
        result["agreement"] = compare(answers["tracecore"], answers["hta"], described)
    return result


def _say(row: dict) -> None:
    peak = row["mark_peak_rss"] if row.get("mark_peak_rss") is not None else row["peak_rss"]
    state = _outcome(row)
    print(
        f"  {row['tool']:10} {row['setting']:26} wall {row['wall_s']:8.1f} s"
        f"  load {row.get('load_s') or 0:8.1f} s  tree peak {peak / GIB:6.2f} GiB  {state}",
        flush=True,
    )
    if not row["ok"]:
        print("    " + row["stderr_tail"][-600:].replace("\n", "\n    "), flush=True)


def _ratios(rows: list[dict]) -> dict:
    """HTA's load time and peak over tracecore's ingest's, per HTA backend that finished."""
    ingest = next((r for r in rows if r["tool"] == "tracecore" and r["setting"].startswith("ingest")), None)
    if not ingest or not ingest["ok"]:
        return {}
    out = {}
    for r in rows:
        if r["tool"].startswith("HTA") and r["loaded"]:
            out[r["setting"]] = {
                "time": round(r["load_s"] / ingest["wall_s"], 1),
                "cpu": round(r["load_cpu_s"] / ingest["cpu_s"], 1)
                if r.get("load_cpu_s") and ingest["cpu_s"]
                else None,
                "peak_rss": round(r["mark_peak_rss"] / ingest["peak_rss"], 1),
                "peak_pss": round(r["mark_peak_pss"] / max(ingest["peak_pss"], 1), 1),
            }
    return out


# --- the report ------------------------------------------------------------------------------------


def _gib(n: int | None) -> str:
    return "" if n is None else f"{n / GIB:.2f}"


def _cpu(row: dict) -> str:
    """CPU seconds of the load: HTA's counted in its process around TraceAnalysis, tracecore's by GNU time."""
    cpu = row.get("load_cpu_s") if row["tool"].startswith("HTA") else row.get("cpu_s")
    return "—" if cpu is None else f"{cpu:.1f}"


def _outcome(row: dict) -> str:
    """ok, or how the measurement ended and whether the load had finished by then."""
    if row["ok"]:
        return "ok"
    when = " after its load, in its analyses" if row.get("loaded") else ""
    if row["exceeded"]:
        return f"exceeded {row.get('limit_gb', 16):g} GB{when} (killed)"
    if row["timed_out"]:
        return f"timed out after {row['wall_s']:.0f} s{when}"
    return f"failed (rc {row['rc']}){when}"


def render(results: dict) -> str:
    """The markdown page of all sets measured."""
    out = [
        "# tracecore beside HTA 0.5.0 on job-scale traces",
        "",
        "`.venv/bin/python -m bench.hta_side_by_side SET ... --hta-python .venv-hta/bin/python`"
        " (bench/hta_side_by_side.py; traces from bench/make_job_traces.py). One tool at a time, under"
        " `nice -n 5`, on a shared 2-core machine (23 GB RAM, no swap; the load average before each"
        " measurement is in the JSON).",
        "",
        "Load: HTA's `TraceAnalysis(trace_files=...)` construction (parse every rank on its fork Pool,"
        " align, filter), timed inside its process, without its ~5 s of imports; tracecore's whole"
        " `tracecore ingest` process (imports, parse, Parquet, catalog). CPU s: HTA's user + system seconds"
        " in its process and its Pool's around the same construction; tracecore's from GNU time (less"
        " sensitive than wall to the load of the shared machine). Peak: the largest sum of RSS over"
        " the tool's process tree (HTA's up to the end of its load), sampled every 50 ms; PSS the same with"
        " shared pages split; %M: GNU time's largest single process (for HTA the whole child run, analyses"
        " included). Ratio: HTA's over tracecore's.",
        "",
    ]
    sets = sorted(results["sets"].values(), key=lambda s: (s["ranks"], s["json_bytes"], s["set"]))
    out += _render_summary(sets)
    if results.get("notes"):
        out += ["## Notes", "", *results["notes"], ""]
    for s in sets:
        out += _render_set(s)
    out += ["## Definitions", "", DEFINITIONS]
    return "\n".join(out)


def _load_cell(row: dict | None) -> str:
    """A tool's load on one line: seconds and tree peak, or how it ended."""
    if row is None:
        return "not run"
    if not (row["ok"] or row.get("loaded")):
        return _outcome(row)
    hta = row["tool"].startswith("HTA")
    peak = row["mark_peak_rss"] if hta else row["peak_rss"]
    return f"{row['load_s']:.0f} s, {_gib(peak)} GiB" + ("" if row["ok"] else f" ({_outcome(row)})")


def _render_summary(sets: list[dict]) -> list[str]:
    """One line per set: each tool's load and peak and HTA's over tracecore's."""
    out = [
        "## Summary",
        "",
        "| set | ranks | MB of JSON | events | tracecore ingest | HTA json (default)"
        " | HTA ijson_batch_and_compress | HTA json ÷ tracecore: time, CPU, RSS | answers within 1 % |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in sets:
        rows = {r["setting"]: r for r in s["tools"]}
        ingest = next((r for k, r in rows.items() if k.startswith("ingest")), None)
        ratio = s["ratios"].get(HTA_DEFAULT)
        agree = s.get("agreement")
        held = "—"
        if agree:
            it, ranks = agree["iterations"], agree["ranks"]["worst_share"]
            worst = max(
                [*it["worst_share"].values(), *(ranks[k] for k in ("compute", "non_compute", "overlap"))]
            )
            worst = max(worst, ranks["kernels"])
            held = f"{'yes' if worst <= TOLERANCE else 'no'} (worst {_pct(worst)})"
        times = f"{ratio['time']}×, {ratio.get('cpu')}×, {ratio['peak_rss']}×" if ratio else "—"
        name = f"{Path(s['set']).parent.name}/{Path(s['set']).name}"
        out.append(
            f"| {name} | {s['ranks']} | {s['json_bytes'] / 1e6:,.0f} | {s['events']:,} | {_load_cell(ingest)}"
            f" | {_load_cell(rows.get(HTA_DEFAULT))} | {_load_cell(rows.get(HTA_LEAN))} | {times}"
            f" | {held} |"
        )
    return [*out, ""]


def _render_set(s: dict) -> list[str]:
    name = Path(s["set"]).name
    planted = s.get("stragglers")
    head = (
        f"## {name}: {s['ranks']} ranks, {s['json_bytes'] / 1e6:,.0f} MB of JSON"
        f" ({s['disk_bytes'] / 1e6:,.0f} MB on disk{', gzip' if s.get('gzip') else ''}),"
        f" {s['events']:,} events"
    )
    if s.get("steps"):
        head += f", {s['steps']} steps, planted stragglers {planted}"
    out = [head, "", f"Measured {s.get('measured', '')}; `{s['set']}`.", ""]
    out += [
        "| tool | setting | load s | process wall s | CPU s | tree peak RSS GiB | tree peak PSS GiB | %M GiB"
        " | MB/s of JSON | events/s | HTA ÷ tracecore (time, CPU, RSS) | outcome |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in s["tools"]:
        hta = r["tool"].startswith("HTA")
        peak = r["mark_peak_rss"] if hta else r["peak_rss"]
        pss = r["mark_peak_pss"] if hta else r["peak_pss"]
        ratio = s["ratios"].get(r["setting"]) if hta else None
        load = r.get("load_s")
        if not hta and r["setting"].startswith("answers"):
            load = None
        measured = r["ok"] or r.get("loaded")
        cells = [
            r["tool"],
            r["setting"],
            f"{load:.1f}" if load and measured else "—",
            f"{r['wall_s']:.1f}",
            _cpu(r),
            _gib(peak) if measured else f"> {r['limit_gb']:g}" if r["exceeded"] else "—",
            _gib(pss) if measured else "—",
            _gib(r["max_rss_one"]),
            f"{r['json_mb_per_s']:.1f}" if r.get("json_mb_per_s") else "—",
            f"{r['events_per_s']:,}" if r.get("events_per_s") else "—",
            f"{ratio['time']}×, {ratio.get('cpu')}×, {ratio['peak_rss']}×" if ratio else "",
            _outcome(r),
        ]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    analysis = next((r for r in s["tools"] if r.get("answered")), None)
    tc = next((r for r in s["tools"] if r["setting"].startswith("answers")), None)
    if analysis or tc:
        parts = []
        if analysis:
            took = ", ".join(f"{k} {v}" for k, v in analysis["analysis_s"].items())
            parts.append(f"HTA's analyses after the load: {took}")
        if tc and tc.get("query_s"):
            parts.append(
                f"tracecore's answers: {tc['wall_s']:.1f} s process wall (queries: "
                + ", ".join(f"{k} {v} s" for k, v in tc["query_s"].items())
                + f"), tree peak {_gib(tc['peak_rss'])} GiB"
            )
        out += ["; ".join(parts) + ".", ""]
    if "agreement" in s:
        out += _render_agreement(s["agreement"])
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.3f} %"


def _render_agreement(a: dict) -> list[str]:
    it, ranks, st = a["iterations"], a["ranks"], a["stragglers"]
    w = it["worst_share"]
    verdict = "yes" if it["over_1pct"] == 0 and it["compared"] else f"no ({it['over_1pct']} over)"
    out = [
        "| answer | compared | worst difference | within 1 % |",
        "|---|---|---|---|",
        f"| per iteration: span, idle, compute, non-compute, overlap (of the step) | {it['compared']}"
        f" rank-steps (+{it['last_step_cut']} last steps cut by HTA, {it['missing']} missing)"
        f" | {', '.join(_pct(w[k]) for k in w)} | {verdict} |",
    ]
    rw = ranks["worst_share"]
    for key, label in (
        ("compute", "per rank, HTA's window: compute"),
        ("non_compute", "per rank, HTA's window: non-compute"),
        ("overlap", "per rank, HTA's window: comm/comp overlap time"),
        ("kernels", "kernel breakdown: Σ kernel time per type (communication, computation, memory)"),
    ):
        ok = "yes" if rw[key] <= TOLERANCE else "no"
        out.append(f"| {label} (of the window) | {ranks['compared']} ranks | {_pct(rw[key])} | {ok} |")
    out.append(
        f"| per rank, HTA's window: idle (definitions differ) | {ranks['compared']} ranks"
        f" | {_pct(rw['idle'])} | — |"
    )
    hta = st["hta"].get("ranks", st["hta"].get("error"))
    old = st["hta"].get("old_names")
    if old is not None:
        hta = f"{hta}; HTA reading ncclDevKernel_* as ncclKernel_*: {old.get('ranks', old.get('error'))}"
    last = ", ".join(f"rank {r} × {n}" for r, n in st["tracecore_last_rank"])
    named = st["planted"] is not None and st["tracecore"] == sorted(st["planted"])
    out += [
        f"| stragglers | planted {st['planted']} | HTA: {hta}; tracecore: {st['tracecore']}"
        f" (last to start: {last}) | {'tracecore names the planted' if named else ''} |",
        "",
    ]
    if ranks["rows"]:
        out += _render_ranks(ranks["rows"])
    return out


def _render_ranks(rows: list[dict]) -> list[str]:
    """The per-rank answers of a few ranks (the first two, the last)."""
    pick = rows[:2] + rows[-1:] if len(rows) > 3 else rows
    out = [
        "| rank | tool | window ms | idle % | compute % | non-compute % | overlap % | Σ comm kernels ms"
        " | Σ compute kernels ms | Σ memory ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in pick:
        h, t = r["hta"], r["tracecore"]
        window = h["kernel_us"]
        for tool, v, k, own in (
            ("HTA", h, r["kernels_hta_us"], window),
            ("tracecore", t, r["kernels_tracecore_us"], t["window_us"]),
        ):
            ov = v["overlap_ratio"]
            out.append(
                f"| {r['rank']} | {tool} | {own / 1e3:.1f}"
                f" | {100 * v['idle_us'] / window:.2f} | {100 * v['compute_us'] / window:.2f}"
                f" | {100 * v['non_compute_us'] / window:.2f} | {'—' if ov is None else f'{100 * ov:.2f}'}"
                f" | {k['COMMUNICATION'] / 1e3:.2f} | {k['COMPUTATION'] / 1e3:.2f}"
                f" | {k['MEMORY'] / 1e3:.2f} |"
            )
    out += ["", "(Shares of HTA's window for both tools; tracecore's window in its own column.)", ""]
    return out


# --- entry points ----------------------------------------------------------------------------------


def smoke(opts: Options) -> dict:
    """A tiny generated set (2 ranks, 3 steps) through both tools and the comparison."""
    out = opts.work / "smoke-traces"
    cmd = [sys.executable, "-m", "bench.make_job_traces", str(out), "--ranks", "2", "--steps", "3"]
    cmd += ["--rank-mb", "0", "--jobs", "1", "--force"]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return bench_set(out / "job-2r", opts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", type=Path, help="folders of kineto-rank*.json[.gz]")
    ap.add_argument("--hta-python", type=Path, default=REPO / ".venv-hta" / "bin" / "python")
    ap.add_argument("--backends", default=f"{HTA_DEFAULT},{HTA_LEAN}", help="HTA parser backends")
    ap.add_argument("--limit-gb", type=float, default=16, help="kill a tool whose process tree passes this")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="kill a tool after this many seconds")
    ap.add_argument("--jobs", type=int, help="tracecore ingest --jobs (default: its own, all cores)")
    ap.add_argument("--results", type=Path, default=RESULTS, help="results path without suffix (.json/.md)")
    ap.add_argument("--smoke", action="store_true", help="a generated set of 2 ranks x 3 steps")
    ap.add_argument("--note", action="append", default=[], help="a line for the page's notes")
    ap.add_argument("--render", action="store_true", help="only write the page again from the results' JSON")
    ap.add_argument("--hta-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--tc-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--mark", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--answers", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hta_child:
        hta_child(args.hta_child, args.backend, args.out, args.mark, args.answers)
        return 0
    if args.tc_child:
        tc_child(args.tc_child, args.out)
        return 0
    if args.render:
        results = json.loads(args.results.with_suffix(".json").read_text())
        results["notes"] = sorted({*results.get("notes", []), *args.note})
        args.results.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
        args.results.with_suffix(".md").write_text(render(results))
        return 0
    if not args.hta_python.is_file():
        raise SystemExit(f"{args.hta_python} is missing: `make .venv-hta/.installed` builds HTA's venv")
    if not (args.sets or args.smoke):
        ap.error("give SET folders or --smoke")
    with tempfile.TemporaryDirectory(prefix="hsbs-work-", dir=os.environ.get("HSBS_WORK")) as work:
        opts = Options(
            hta_python=args.hta_python,
            backends=args.backends.split(","),
            limit=int(args.limit_gb * GIB),
            timeout=args.timeout,
            jobs=args.jobs,
            work=Path(work),
        )
        path = args.results.with_suffix(".json")
        results = json.loads(path.read_text()) if path.is_file() and not args.smoke else {"sets": {}}
        results["notes"] = sorted({*results.get("notes", []), *args.note})
        for folder in [None] if args.smoke else args.sets:
            got = smoke(opts) if folder is None else bench_set(folder.resolve(), opts)
            got["measured"] = time.strftime("%Y-%m-%d %H:%M")
            for row in got["tools"]:
                row["limit_gb"] = args.limit_gb
            results["sets"][got["set"]] = got
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(results, indent=1) + "\n")
            args.results.with_suffix(".md").write_text(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
