"""Mutation check: one-line bugs in the views, the dedup rule and the reader kernel; does the suite kill them?

Each mutant replaces one exact line fragment of one file (queries/*.sql, tracecore/ingest/catalog.py,
tracecore/reader/kernel.py) in this checkout, runs the tests that cover that file (`pytest -x`,
bounded by --timeout), and restores the file. A mutant is *killed* when the tests fail. The
original text is restored in a `finally`, on SIGTERM/SIGHUP/SIGINT, and, should this process be
killed outright, at the start of the next run (from a backup written under the temp folder before
any file is touched). Kernel mutants run under numba's JIT (`TRACECORE_JIT=1`, a private
NUMBA_CACHE_DIR): the ahead-of-time module carries a fingerprint of kernel.py and is never used
for a changed kernel.

    python -m bench.mutants                       # every mutant, report in bench/results/mutants-latest.md
    python -m bench.mutants --only data_per_step  # mutants whose name contains the text
    python -m bench.mutants --tests tests/test_views_exact.py --no-kernel   # which mutants these tests kill

Before the mutants, the selected tests run once on the unmodified checkout and must pass.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

VIEW_TESTS = (
    "tests/test_views.py",
    "tests/test_views_exact.py",
    "tests/test_views_windows.py",
    "tests/test_views_duration.py",
    "tests/test_views_physics.py",
    "tests/test_dedup.py",
)
DEDUP_TESTS = ("tests/test_dedup.py", "tests/test_ingest.py")
KERNEL_TESTS = ("tests/test_reader_corpus.py", "tests/test_views_exact.py")
NCCL_TESTS = ("tests/test_views_nccl.py", "tests/test_views_nccl_socket.py")
WINDOW = "FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)"
WINDOW_NO_END = "FROM packets_window(runs := runs, from_ns := from_ns, to_ns := NULL)"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    bug: str
    tests: tuple[str, ...] = VIEW_TESTS

    @property
    def kernel(self) -> bool:
        return self.path.startswith("tracecore/reader/")


MUTANTS = [
    # ---- the five ----------------------------------------------------------------------
    Mutant(
        "link_series.dropped_last_bin",
        "queries/link_series.sql",
        "range(sp.k_lo, sp.k_hi + 1)",
        "range(sp.k_lo, sp.k_hi)",
        "the last bin of every pair (link_util) and run (link_total) is dropped",
    ),
    Mutant(
        "flow_matrix.swapped_src_dst",
        "queries/flow_matrix.sql",
        "any_value(src_ip) AS src_ip, any_value(dst_ip) AS dst_ip",
        "any_value(dst_ip) AS src_ip, any_value(src_ip) AS dst_ip",
        "source and destination swapped",
    ),
    Mutant(
        "link_ci.missing_1.96_low",
        "queries/link_ci.sql",
        "s.mean_gbps - 1.96 * s.std_gbps / sqrt(s.windows) AS ci_low_gbps",
        "s.mean_gbps - s.std_gbps / sqrt(s.windows) AS ci_low_gbps",
        "CI half-width without the 1.96",
    ),
    Mutant(
        "dedup.on_dst_ip",
        "tracecore/ingest/catalog.py",
        "f\" AND src_ip IN ({', '.join(map(_lit, others))}))\"",
        "f\" AND dst_ip IN ({', '.join(map(_lit, others))}))\"",
        "dedup on dst_ip: the receiver's copy is kept",
        DEDUP_TESTS,
    ),
    Mutant(
        "kernel.tcp_port_offset",
        "tracecore/reader/kernel.py",
        "dport = _u16be(buf, t + 2)\n            valid = np.int64(1)\n        if t + 14",
        "dport = _u16be(buf, t + 4)\n            valid = np.int64(1)\n        if t + 14",
        "destination port read at the wrong offset",
        KERNEL_TESTS,
    ),
    # ---- windows: the last bin is the one holding end − 1 ----------------------------------------
    Mutant(
        "link_series.last_bin_hi_div",
        "queries/link_series.sql",
        "coalesce((any_value(w.hi_ns) - 1) // bin_ns::BIGINT, max(b.k))",
        "coalesce(any_value(w.hi_ns) // bin_ns::BIGINT, max(b.k))",
        "last bin = hi // bin",
    ),
    Mutant(
        "burstiness.last_bin_hi_div",
        "queries/burstiness.sql",
        "(any_value(w.hi_ns) - 1) // r.width",
        "any_value(w.hi_ns) // r.width",
        "bins counted to hi // width",
    ),
    Mutant(
        "link_ci.windows_off_by_one",
        "queries/link_ci.sql",
        "(hi_ns - lo_ns) // window_ns::BIGINT AS n",
        "(hi_ns - lo_ns - 1) // window_ns::BIGINT AS n",
        "a span of exactly n windows counts n − 1",
    ),
    Mutant(
        "packets_window.inclusive_end",
        "queries/packets_window.sql",
        "p.ts_ns < w.hi_ns",
        "p.ts_ns <= w.hi_ns",
        "the window's end is inclusive",
    ),
    Mutant(
        "bytes_sent.window_end_ignored",
        "queries/bytes_sent.sql",
        WINDOW,
        WINDOW_NO_END,
        "to_ns not passed on",
    ),
    Mutant(
        "flow_counts.window_end_ignored",
        "queries/flow_counts.sql",
        WINDOW,
        WINDOW_NO_END,
        "to_ns not passed on",
    ),
    Mutant(
        "temporal_flows.window_end_ignored",
        "queries/temporal_flows.sql",
        WINDOW,
        WINDOW_NO_END,
        "to_ns not passed on",
    ),
    Mutant(
        "flow_matrix_mean.window_end_ignored",
        "queries/flow_matrix_mean.sql",
        "FROM flow_matrix(runs := runs, from_ns := from_ns, to_ns := to_ns)",
        "FROM flow_matrix(runs := runs, from_ns := from_ns, to_ns := NULL)",
        "to_ns not passed on",
    ),
    # ---- link labels and CIs ---------------------------------------------------------------------
    Mutant(
        "worker_pairs.swapped_direction",
        "queries/worker_pairs.sql",
        "xor(xor(hash(s.ip), hash(d.ip) >> 1), hash(s.run) >> 2) AS pair",
        "xor(xor(hash(d.ip), hash(s.ip) >> 1), hash(s.run) >> 2) AS pair",
        "link labels swapped",
    ),
    Mutant(
        "link_ci.missing_1.96_high",
        "queries/link_ci.sql",
        "s.mean_gbps + 1.96 * s.std_gbps / sqrt(s.windows) AS ci_high_gbps",
        "s.mean_gbps + s.std_gbps / sqrt(s.windows) AS ci_high_gbps",
        "CI half-width without the 1.96",
    ),
    Mutant(
        "link_ci.population_std",
        "queries/link_ci.sql",
        "(windows * (windows - 1))",
        "(windows * windows)",
        "ddof = 0 (the notebook's np.var)",
    ),
    # ---- data_per_step / train_window --------------------------------------------------------------
    Mutant(
        "data_per_step.step_s_steps_plus_1",
        "queries/data_per_step.sql",
        "(lw.t_last - lw.t_first) / 1e9 / lw.steps AS step_s",
        "(lw.t_last - lw.t_first) / 1e9 / (lw.steps + 1) AS step_s",
        "step_s divided by steps + 1",
    ),
    Mutant(
        "data_per_step.overhead_over_frames",
        "queries/data_per_step.sql",
        "(sum(bytes) - sum(payload)) / nullif(sum(payload), 0) AS header_overhead",
        "(sum(bytes) - sum(payload)) / nullif(sum(bytes), 0) AS header_overhead",
        "header overhead over frame bytes",
    ),
    Mutant(
        "data_per_step.payload_bytes_are_frames",
        "queries/data_per_step.sql",
        "sum(payload)::BIGINT AS payload_bytes",
        "sum(bytes)::BIGINT AS payload_bytes",
        "payload_bytes summed from frame bytes",
    ),
    Mutant(
        "data_per_step.rank_bytes_steps_plus_1",
        "queries/data_per_step.sql",
        "r.rank_bytes / lw.steps AS rank_bytes_per_step",
        "r.rank_bytes / (lw.steps + 1) AS rank_bytes_per_step",
        "per-rank bytes over steps + 1",
    ),
    Mutant(
        "train_window.steps_are_rows",
        "queries/train_window.sql",
        "count(*) - 1 AS steps",
        "count(*) AS steps",
        "steps = Batch rows, not rows − 1",
    ),
    # ---- bytes_sent --------------------------------------------------------------------------------
    Mutant(
        "bytes_sent.share_of_packets",
        "queries/bytes_sent.sql",
        "a.bytes / sum(a.bytes) OVER (PARTITION BY a.run) AS share",
        "a.packets / sum(a.packets) OVER (PARTITION BY a.run) AS share",
        "share from packet counts",
    ),
    Mutant(
        "bytes_sent.packets_with_payload",
        "queries/bytes_sent.sql",
        "count(*) AS packets",
        "count(*) FILTER (WHERE l4_payload_len > 0) AS packets",
        "packets counts data packets only",
    ),
    # ---- train_duration ------------------------------------------------------------------------------
    Mutant(
        "train_duration.baseline_wrong_alias",
        "queries/train_duration.sql",
        "ON coalesce(b.loss_pct, 0) = 0",
        "ON coalesce(x.loss_pct, 0) = 0",
        "baseline filter on the run, not on the baseline",
    ),
    Mutant(
        "train_duration.count_star",
        "queries/train_duration.sql",
        "count(b.run) AS baseline_runs",
        "count(*) AS baseline_runs",
        "a run without baseline counts 1",
    ),
    Mutant(
        "train_duration.min_baseline",
        "queries/train_duration.sql",
        "avg(b.duration_s) AS baseline_s",
        "min(b.duration_s) AS baseline_s",
        "fastest baseline instead of the mean",
    ),
    Mutant(
        "train_duration.ignores_n_workers",
        "queries/train_duration.sql",
        "AND b.n_workers IS NOT DISTINCT FROM x.n_workers",
        "AND true",
        "configuration without n_workers",
    ),
    Mutant(
        "train_duration.ignores_batch_size",
        "queries/train_duration.sql",
        "AND b.batch_size IS NOT DISTINCT FROM x.batch_size",
        "AND true",
        "configuration without batch size",
    ),
    # ---- topology_check ------------------------------------------------------------------------------
    Mutant(
        "topology_check.gloo_direction",
        "queries/topology_check.sql",
        "WHEN 'ring_prev' THEN d.rank = (s.rank + s.n - 1) % s.n",
        "WHEN 'ring_prev' THEN d.rank = (s.rank + 1) % s.n",
        "gloo ring predicted as i → i+1",
    ),
    # ---- NCCL's account against the wire -------------------------------------------------------------
    Mutant(
        "nccl_topology.clear_to_send_is_data",
        "queries/nccl_topology.sql",
        "    WHERE f.completes\n",
        "    WHERE true\n",
        "NCCL's clear-to-send writes and ACK-only flows counted as data edges",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_topology.qps_unchecked",
        "queries/nccl_topology.sql",
        "THEN list_has_all(e.declared_qps, e.measured_qps) END AS qp_agrees",
        "THEN true END AS qp_agrees",
        "measured QPs never compared with the logged ones",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_topology.any_tcp_is_nccl",
        "queries/nccl_topology.sql",
        "WHERE c.opened AND c.opening = [1, 4, 8] AND c.payload > 13",
        "WHERE c.payload > 13",
        "the bootstrap's and TCPStore's connections counted as NCCL socket data",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_topology.little_data_contradicts",
        "queries/nccl_topology.sql",
        "WHEN NOT expected AND little THEN qp_agrees IS NOT DISTINCT FROM false",
        "WHEN false THEN NULL",
        "a small all-reduce on the other algorithm's links taken for a contradiction",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_edges.tree_lines_beside_trees",
        "queries/nccl_edges.sql",
        "WHERE source IS DISTINCT FROM 'Tree' OR NOT has_trees",
        "WHERE true",
        "the trees as built (`Tree c`, more channels than kept) declared beside the `Trees` line",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_edges.ring_prev_reversed",
        "queries/nccl_edges.sql",
        "SELECT run, comm_id, 'ring', channel, prev_rank, rank, NULL",
        "SELECT run, comm_id, 'ring', channel, rank, prev_rank, NULL",
        "the edge into a rank from its ring predecessor read backwards",
        NCCL_TESTS,
    ),
    Mutant(
        "nccl_rank_workers.address_before_name",
        "queries/nccl_rank_workers.sql",
        "coalesce(r.worker, a.address_worker) AS worker",
        "coalesce(a.address_worker, r.worker) AS worker",
        "a log beside another worker's capture mapped by its address, hiding the misplacement's edges",
        NCCL_TESTS,
    ),
    Mutant(
        "topology_check.nccl_ring_from_trees",
        "queries/topology_check.sql",
        "WHEN 'nccl_ring' THEN coalesce(nd.ring, false)",
        "WHEN 'nccl_ring' THEN coalesce(nd.tree, false)",
        "NCCL's ring predicted from its trees",
        NCCL_TESTS,
    ),
    # ---- reader kernel ----------------------------------------------------------------------------------
    Mutant(
        "kernel.tcp_header_nibble",
        "tracecore/reader/kernel.py",
        "hdr = (np.int64(buf[t + 12]) >> 4) * 4",
        "hdr = (np.int64(buf[t + 12]) & 15) * 4",
        "TCP data offset from the low nibble",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel.ipv4_dst_offset",
        "tracecore/reader/kernel.py",
        "d_lo = U64(_u32(buf, q + 16, True))\n        if total == 0:",
        "d_lo = U64(_u32(buf, q + 12, True))\n        if total == 0:",
        "IPv4 destination read from the source field",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel.tcp_flags_past_the_cut",
        "tracecore/reader/kernel.py",
        "if t + 14 <= end:",
        "if t + 4 <= end:",
        "TCP flags and payload length read from a header the snap length cut before them",
        KERNEL_TESTS,
    ),
    Mutant(
        "kernel.inner_port_offset",
        "tracecore/reader/kernel.py",
        "dport = _u16be(buf, t + 2)\n            tvalid = np.int64(T_INNER_PORTS)",
        "dport = _u16be(buf, t + 4)\n            tvalid = np.int64(T_INNER_PORTS)",
        "a tunnelled packet's inner destination port read at the wrong offset",
        ("tests/test_reader_rdma.py",),
    ),
]


# ---- guaranteed restore ---------------------------------------------------------------------------
BACKUP = (
    Path(tempfile.gettempdir())
    / f"tracecore-mutants-{hashlib.sha1(str(REPO).encode()).hexdigest()[:12]}.json"
)


def restore_leftovers() -> list[str]:
    """Put back any file a killed earlier run left mutated; returns the files restored."""
    if not BACKUP.is_file():
        return []
    saved = json.loads(BACKUP.read_text(encoding="utf-8"))
    for rel, text in saved.items():
        (REPO / rel).write_text(text, encoding="utf-8")
    BACKUP.unlink()
    return sorted(saved)


class StopRequestedError(Exception):
    pass


def _on_signal(signum, _frame) -> None:
    raise StopRequestedError(f"signal {signum}")


def apply(m: Mutant) -> str:
    path = REPO / m.path
    text = path.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise SystemExit(f"mutant {m.name}: {m.old!r} occurs {text.count(m.old)} times in {m.path}, not once")
    BACKUP.write_text(json.dumps({m.path: text}), encoding="utf-8")
    path.write_text(text.replace(m.old, m.new), encoding="utf-8")
    return text


def revert(m: Mutant, text: str) -> None:
    (REPO / m.path).write_text(text, encoding="utf-8")
    BACKUP.unlink(missing_ok=True)


# ---- running tests ----------------------------------------------------------------------------------
def run_tests(tests: tuple[str, ...], timeout: float, jit: bool) -> tuple[str, float, str]:
    """(outcome, seconds, first failure): outcome is passed | failed | timeout | error."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    with tempfile.TemporaryDirectory(prefix="mutant-numba-") as cache:
        env["NUMBA_CACHE_DIR"] = cache
        if jit:
            env["TRACECORE_JIT"] = "1"
        cmd = [PY, "-m", "pytest", "-x", "-q", "-rf", "-p", "no:cacheprovider", *tests]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout", time.perf_counter() - t0, ""
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        wall = time.perf_counter() - t0
    first = next((line[len("FAILED ") :] for line in out.splitlines() if line.startswith("FAILED ")), "")
    first = first.split(" - ")[0]
    if not first:
        first = next((line for line in out.splitlines() if line.startswith("ERROR ")), "")
    outcome = {0: "passed", 1: "failed"}.get(proc.returncode, "error")
    if outcome == "error" and not first:
        first = out.strip().splitlines()[-1] if out.strip() else f"pytest exit {proc.returncode}"
    return outcome, wall, first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", default=[], help="run mutants whose name contains this text")
    ap.add_argument("--tests", nargs="+", help="run these test files for every mutant instead of its own set")
    ap.add_argument("--no-kernel", action="store_true", help="skip the reader-kernel mutants (JIT, slow)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant (default 300)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "mutants-latest.md")
    args = ap.parse_args(argv)

    leftovers = restore_leftovers()
    if leftovers:
        print(f"restored files a previous run left mutated: {', '.join(leftovers)}", flush=True)
    chosen = [m for m in MUTANTS if not args.only or any(o in m.name for o in args.only)]
    if args.no_kernel:
        chosen = [m for m in chosen if not m.kernel]
    if not chosen:
        raise SystemExit("no mutant selected")
    override = tuple(args.tests) if args.tests else None
    for m in chosen:  # every mutant applies to the current sources before anything runs
        if (REPO / m.path).read_text(encoding="utf-8").count(m.old) != 1:
            raise SystemExit(f"mutant {m.name}: its line is not (once) in {m.path}")

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, _on_signal)
    started = time.perf_counter()
    baseline_tests = override or tuple(dict.fromkeys(t for m in chosen for t in m.tests))
    outcome, wall, first = run_tests(baseline_tests, args.timeout * 3, jit=False)
    print(f"baseline ({len(baseline_tests)} files): {outcome} in {wall:.0f} s {first}", flush=True)
    if outcome != "passed":
        print("the unmodified checkout must pass the selected tests first", file=sys.stderr)
        return 2

    results = []
    try:
        for m in chosen:
            text = apply(m)
            try:
                outcome, wall, first = run_tests(override or m.tests, args.timeout, jit=m.kernel)
            finally:
                revert(m, text)
            status = {"failed": "killed", "passed": "SURVIVED"}.get(outcome, outcome)
            results.append((m, status, wall, first))
            print(f"{status:9} {wall:6.1f} s  {m.name}  {first}", flush=True)
    except StopRequestedError as err:
        print(f"interrupted ({err}); files restored", file=sys.stderr)
        return 130
    total = time.perf_counter() - started

    killed = sum(1 for _, s, _, _ in results if s == "killed")
    command = shlex.join(["python", "-m", "bench.mutants", *(sys.argv[1:] if argv is None else argv)])
    lines = [
        "# Mutation check (`python -m bench.mutants`, `make mutants`)",
        "",
        f"{killed} of {len(results)} mutants killed; wall time {total:.0f} s on this machine"
        f" (baseline run included; per mutant `pytest -x`, limit {args.timeout:.0f} s).",
        "",
        f"Command: `{command}`, {time.strftime('%Y-%m-%d', time.gmtime())}.",
        "",
        f"Tests: {', '.join(override)} for every mutant."
        if override
        else "Tests: each mutant's own set (below).",
        "",
        "| mutant | file | bug | result | s | first failing test |",
        "|---|---|---|---|---:|---|",
    ]
    for m, status, wall, first in results:
        cell = re.sub(r"\|", "\\|", first)
        lines.append(f"| {m.name} | {m.path} | {m.bug} | {status} | {wall:.0f} | `{cell}` |")
    if not override:
        lines += [
            "",
            "Test sets:",
            f"- views: {', '.join(VIEW_TESTS)}",
            f"- dedup: {', '.join(DEDUP_TESTS)}",
            f"- kernel (TRACECORE_JIT=1): {', '.join(KERNEL_TESTS)}",
        ]
        named = (VIEW_TESTS, DEDUP_TESTS, KERNEL_TESTS)
        lines += [f"- {m.name}: {', '.join(m.tests)}" for m, *_ in results if m.tests not in named]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{killed}/{len(results)} killed in {total:.0f} s; {args.out}", flush=True)
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
