"""Mutation check: one-line bugs in the views, the dedup rule and the reader kernel; does the suite kill them?

Each mutant replaces one exact line fragment of one file (queries/*.sql, tracecore/ingest/catalog.py,
tracecore/reader/kernel.py) and runs the tests that cover it (`pytest -x`, bounded by --timeout). A
mutant is *killed* when the tests fail (pytest's exit status 1: a test failed or errored; the
baseline run below rules out failures the mutant did not cause). Mutants never touch this checkout:
each runs in a private copy of it (the packages, queries/, tests/, bench/ and pyproject.toml, beside a
link to ../shared) made under the temp folder, so the suite can run meanwhile, several mutants can
run at once (--jobs), and a run stopped early leaves nothing behind but that folder. A view mutant's
tests run in a child forked from a server process per copy that imported pytest, pandas and tracecore
once (`--serve`; a view's SQL is read when a catalog opens, never at import); a mutant of Python code
gets a fresh interpreter. Kernel mutants
run under numba's JIT (`TRACECORE_JIT=1`, a private NUMBA_CACHE_DIR): the ahead-of-time module
carries a fingerprint of kernel.py and is never used for a changed kernel.

Two sets: every mutant against the test modules of its area (`make mutants`, report
bench/results/mutants-latest.md), and the CI subset (`--ci`: at least one mutant of every view file in
queries/, the dedup rule and the kernel, each against the few tests that kill it; report
bench/results/mutants-ci.md; tests/test_bench_mutants.py runs it in `make test`).

    python -m bench.mutants --jobs 2              # every mutant, report in bench/results/mutants-latest.md
    python -m bench.mutants --ci                  # the CI subset, report in bench/results/mutants-ci.md
    python -m bench.mutants --only data_per_step  # mutants whose name contains the text
    python -m bench.mutants --tests tests/test_views_exact.py --no-kernel   # which mutants these tests kill

Before the mutants, the selected tests run once on the unmodified copy and must pass.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
# What a private copy holds: everything the tests import or read from the checkout.
# README.md and docs/: tests/test_explain.py checks the README's explain block against what explain prints
COPIED = ("tracecore", "cli", "runners", "queries", "tests", "bench", "pyproject.toml", "README.md", "docs")

VIEW_TESTS = (
    "tests/test_views.py",
    "tests/test_views_exact.py",
    "tests/test_views_windows.py",
    "tests/test_views_duration.py",
    "tests/test_views_physics.py",
    "tests/test_dedup.py",
    "tests/test_views_contention.py",
)
DEDUP_TESTS = ("tests/test_dedup.py", "tests/test_ingest.py")
KERNEL_TESTS = ("tests/test_reader_corpus.py", "tests/test_views_exact.py")
NCCL_TESTS = ("tests/test_views_nccl.py", "tests/test_views_nccl_socket.py")
COLLECTIVE_TESTS = ("tests/test_views_collectives.py",)
EXPLAIN_TESTS = ("tests/test_explain.py",)
# the verdicts and findings on the real 4-rank NCCL run: seconds, where the module's testbed runs take minutes
EXPLAIN_GPU_TEST = (
    "tests/test_explain.py::test_the_four_rank_runs_slowest_all_reduce_is_start_skew_with_its_late_rank"
)
README_EXPLAIN_TEST = "tests/test_explain.py::test_the_readmes_explain_output_is_what_explain_prints"
TCP_HEALTH_TESTS = ("tests/test_views_tcp_health.py",)
BOUND_TESTS = ("tests/test_hardening_bounds.py",)
LINK_BINS_TESTS = ("tests/test_link_bins.py", "tests/test_views.py")
RDMA_TESTS = ("tests/test_views_rdma.py",)
COUNTER_TESTS = ("tests/test_nic_counters.py",)
SAMPLE_COUNTERS_TEST = (
    "tests/test_nic_counters.py::test_nic_util_and_counter_check_on_the_sample_run_with_a_counter_file"
)
COLLECTIVE_NIC_TEST = "tests/test_nic_counters.py::test_collective_nic_on_a_gpu_run_given_counter_files"
SHARED_QP_TEST = (
    "tests/test_views_rdma.py::test_a_flow_is_told_apart_by_its_receiver_when_receivers_share_a_qp_number"
)
PREBUILT_ENV = "TRACECORE_TEST_SAMPLE_DATASET"  # tests/test_views_support.py's
RUNNING: set[subprocess.Popen] = set()  # the test runs going now, killed when this run stops early
WINDOW = "FROM packets_window(runs := runs, from_ns := from_ns, to_ns := to_ns)"
WINDOW_NO_END = "FROM packets_window(runs := runs, from_ns := from_ns, to_ns := NULL)"


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str
    old: str
    new: str
    bug: str
    tests: tuple[str, ...] = VIEW_TESTS  # the full run's tests: the modules of the mutant's area
    ci: tuple[str, ...] = ()  # the CI subset's tests (pytest node ids that kill it); empty: not in it

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
        ci=("tests/test_views.py::test_link_util[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-10000000]",),
    ),
    Mutant(
        "flow_matrix.swapped_src_dst",
        "queries/flow_matrix.sql",
        "any_value(src_ip) AS src_ip, any_value(dst_ip) AS dst_ip",
        "any_value(dst_ip) AS src_ip, any_value(src_ip) AS dst_ip",
        "source and destination swapped",
        ci=("tests/test_views.py::test_flow_matrix[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",),
    ),
    Mutant(
        "link_ci.missing_quantile_low",
        "queries/link_ci.sql",
        "coalesce(bs.lo, s.mean_gbps - q.q * s.std_gbps / sqrt(s.windows))",
        "coalesce(bs.lo, s.mean_gbps - s.std_gbps / sqrt(s.windows))",
        "CI half-width without the quantile (t or 1.96)",
        ci=("tests/test_views.py::test_throughput_ci",),
    ),
    Mutant(
        "dedup.on_dst_ip",
        "tracecore/ingest/catalog.py",
        "f\" AND src_ip IN ({', '.join(map(_lit, others))}))\"",
        "f\" AND dst_ip IN ({', '.join(map(_lit, others))}))\"",
        "dedup on dst_ip: the receiver's copy is kept",
        DEDUP_TESTS,
        ci=("tests/test_dedup.py::test_hidden_rows_are_the_copies_received_from_other_workers",),
    ),
    Mutant(
        "kernel.tcp_port_offset",
        "tracecore/reader/kernel.py",
        "dport = _u16be(buf, t + 2)\n            valid = np.int64(1)\n        if t + 16",
        "dport = _u16be(buf, t + 4)\n            valid = np.int64(1)\n        if t + 16",
        "destination port read at the wrong offset",
        KERNEL_TESTS,
        ci=("tests/test_reader_corpus.py::test_matches_tshark[arkime__ssl-selfsign.pcap]",),
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
        "(w.hi_ns - 1) // s.width",
        "w.hi_ns // s.width",
        "bins counted to hi // width",
        ci=(
            "tests/test_views_windows.py::test_burstiness_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-bin_edge]",
        ),
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
        ci=(
            "tests/test_views_windows.py::test_link_util_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-on_packet-10000000]",
        ),
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
        ci=(
            "tests/test_views_windows.py::test_temporal_flows_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-bin_edge]",
        ),
    ),
    Mutant(
        "flow_matrix_mean.window_end_ignored",
        "queries/flow_matrix_mean.sql",
        "FROM flow_matrix(runs := runs, from_ns := from_ns, to_ns := to_ns)",
        "FROM flow_matrix(runs := runs, from_ns := from_ns, to_ns := NULL)",
        "to_ns not passed on",
        ci=(
            "tests/test_views_windows.py::test_flow_matrix_mean_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-bin_edge]",
        ),
    ),
    # ---- link labels and CIs ---------------------------------------------------------------------
    Mutant(
        "worker_pairs.swapped_direction",
        "queries/worker_pairs.sql",
        "xor(xor(hash(s.ip), hash(d.ip) >> 1), hash(s.run) >> 2) AS pair",
        "xor(xor(hash(d.ip), hash(s.ip) >> 1), hash(s.run) >> 2) AS pair",
        "link labels swapped",
        ci=("tests/test_views.py::test_link_util[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-10000000]",),
    ),
    Mutant(
        "link_ci.missing_quantile_high",
        "queries/link_ci.sql",
        "coalesce(bs.hi, s.mean_gbps + q.q * s.std_gbps / sqrt(s.windows))",
        "coalesce(bs.hi, s.mean_gbps + s.std_gbps / sqrt(s.windows))",
        "CI half-width without the quantile (t or 1.96)",
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
        ci=(
            "tests/test_views_exact.py::test_data_per_step_every_column[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",
        ),
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
        ci=("tests/test_views.py::test_data_per_step[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",),
    ),
    # ---- bytes_sent --------------------------------------------------------------------------------
    Mutant(
        "bytes_sent.share_of_packets",
        "queries/bytes_sent.sql",
        "a.bytes / sum(a.bytes) OVER (PARTITION BY a.run) AS share",
        "a.packets / sum(a.packets) OVER (PARTITION BY a.run) AS share",
        "share from packet counts",
        ci=(
            "tests/test_views_exact.py::test_bytes_sent_packets_and_share[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",
        ),
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
        ci=(
            "tests/test_views_duration.py::test_train_duration_normalizes_by_the_zero_loss_runs_of_the_configuration",
        ),
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
        ci=(
            "tests/test_views_physics.py::test_topology_check_shows_the_gloo_ring[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",
        ),
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
        ci=("tests/test_views_nccl.py::test_rotated_logs_keep_the_ring_shape_but_not_its_qps",),
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
        ci=("tests/test_views_nccl.py::test_the_measured_graph_equals_the_declared_ring_qp_by_qp",),
    ),
    Mutant(
        "nccl_rank_workers.address_before_name",
        "queries/nccl_rank_workers.sql",
        "coalesce(r.worker, a.address_worker) AS worker",
        "coalesce(a.address_worker, r.worker) AS worker",
        "a log beside another worker's capture mapped by its address, hiding the misplacement's edges",
        NCCL_TESTS,
        ci=(
            "tests/test_views_nccl.py::test_a_log_beside_the_wrong_capture_is_reported_with_the_wrong_edges",
        ),
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
    # ---- the views no mutant reached before (issue 25) ---------------------------------------------------
    Mutant(
        "accuracy_vs_data.cum_gb_in_gib",
        "queries/accuracy_vs_data.sql",
        "OVER (PARTITION BY s.run ORDER BY s.step) / 1e9 AS cum_gb",
        "OVER (PARTITION BY s.run ORDER BY s.step) / 1073741824 AS cum_gb",
        "cumulative data in GiB, not GB",
        ci=("tests/test_views.py::test_accuracy_vs_data[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring]",),
    ),
    Mutant(
        "run_bounds.last_packet_outside",
        "queries/run_bounds.sql",
        "coalesce(to_ns::BIGINT, end_ns + 1 - start_ns)",
        "coalesce(to_ns::BIGINT, end_ns - start_ns)",
        "a run's window ends at its last packet, leaving that packet out",
        ci=("tests/test_views.py::test_run_bounds",),
    ),
    Mutant(
        "run_meta.phantom_run",
        "queries/run_meta.sql",
        "NULL::VARCHAR AS extra WHERE false",
        "NULL::VARCHAR AS extra WHERE true",
        "the typed empty row set adds a row: a run of NULLs",
        ci=("tests/test_views.py::test_every_view_is_documented_and_runs",),
    ),
    Mutant(
        "run_summary.log_steps_count_epochs",
        "queries/run_summary.sql",
        "count(*) FILTER (WHERE type = 'Batch') AS log_steps",
        "count(*) AS log_steps",
        "logged steps count the Epoch rows too",
        ci=("tests/test_views.py::test_run_summary",),
    ),
    Mutant(
        "throughput_ci.window_end_ignored",
        "queries/throughput_ci.sql",
        "to_ns := to_ns, by_pair := false, method := method)",
        "to_ns := NULL, by_pair := false, method := method)",
        "to_ns not passed on",
        ci=("tests/test_views.py::test_throughput_ci",),
    ),
    Mutant(
        "link_total.window_end_ignored",
        "queries/link_total.sql",
        "to_ns := to_ns, by_pair := false)",
        "to_ns := NULL, by_pair := false)",
        "to_ns not passed on",
        ci=(
            "tests/test_views_windows.py::test_link_total_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-bin_edge]",
        ),
    ),
    Mutant(
        "link_util.window_end_ignored",
        "queries/link_util.sql",
        "to_ns := to_ns, by_pair := true)",
        "to_ns := NULL, by_pair := true)",
        "to_ns not passed on",
        ci=(
            "tests/test_views_windows.py::test_link_util_window[torch_ddp-resnet8w8-sgd-16-gloo-normal-ring-bin_edge-10000000]",
        ),
    ),
    Mutant(
        "link_util_ci.src_dst_swapped",
        "queries/link_util_ci.sql",
        "src := src, dst := dst,",
        "src := dst, dst := src,",
        "the asked link's ends swapped",
        ci=("tests/test_views.py::test_link_util_ci",),
    ),
    Mutant(
        "congestion.marks_on_reverse_link",
        "queries/congestion.sql",
        "SELECT xor(xor(hash(src_ip), hash(dst_ip) >> 1), hash(run) >> 2) AS pair",
        "SELECT xor(xor(hash(dst_ip), hash(src_ip) >> 1), hash(run) >> 2) AS pair",
        "ECN-CE marks and CNPs put on the reverse link",
        RDMA_TESTS,
        ci=("tests/test_views_rdma.py::test_congestion_counts_marks_and_cnps_per_link_and_bin[10000000]",),
    ),
    Mutant(
        "nic_util.delta_not_shared",
        "queries/nic_util.sql",
        "sum(p.delta * p.overlap_ns / (p.t1 - p.t0)) AS bytes,",
        "sum(p.delta) AS bytes,",
        "a sample's whole delta in every bin its span touches",
        COUNTER_TESTS,
        ci=(SAMPLE_COUNTERS_TEST,),
    ),
    Mutant(
        "collective_nic.touching_collectives_apart",
        "queries/collective_nic.sql",
        "CASE WHEN k0 > max(k1) OVER",
        "CASE WHEN k0 >= max(k1) OVER",
        "collectives that share their first sample with the previous one's last start a group of their own"
        " (the sample's bytes counted in both groups)",
        COUNTER_TESTS,
        ci=(COLLECTIVE_NIC_TEST,),
    ),
    Mutant(
        "nic_tx.netdev_beside_rdma",
        "queries/nic_tx.sql",
        "r.source = 'rdma')))",
        "r.source = 'none')))",
        "the interface's tx_bytes beside the RDMA port's port_xmit_data: a RoCE NIC's bytes counted twice",
        COUNTER_TESTS,
        ci=(COLLECTIVE_NIC_TEST,),
    ),
    Mutant(
        "counter_check.directions_swapped",
        "queries/counter_check.sql",
        "CASE WHEN p.src_ip = w.ip THEN 'tx' ELSE 'rx' END",
        "CASE WHEN p.src_ip = w.ip THEN 'rx' ELSE 'tx' END",
        "captured frames set against the other direction's counter",
        COUNTER_TESTS,
        ci=(SAMPLE_COUNTERS_TEST,),
    ),
    Mutant(
        "roce_congestion.pfc_sent_as_received",
        "queries/roce_congestion.sql",
        "'^tx_prio[0-7]_pause$') THEN 'pfc_pauses_tx'",
        "'^tx_prio[0-7]_pause$') THEN 'pfc_pauses_rx'",
        "PFC pauses sent counted as received",
        COUNTER_TESTS,
        ci=("tests/test_nic_counters.py::test_roce_congestion_sums_each_steps_signals_per_worker",),
    ),
    Mutant(
        "rdma_flows.qp_without_dst",
        "queries/rdma_flows.sql",
        "SELECT hash(run, src_ip, dst_ip, rdma_dest_qp) AS flow",
        "SELECT hash(run, src_ip, rdma_dest_qp) AS flow",
        "flows keyed by (src, QP): two receivers whose QPs share a number merge",
        RDMA_TESTS,
        ci=(SHARED_QP_TEST,),
    ),
    Mutant(
        "flow_counts.qp_without_dst",
        "queries/flow_counts.sql",
        "count(DISTINCT (src_ip, dst_ip, rdma_dest_qp))",
        "count(DISTINCT (src_ip, rdma_dest_qp))",
        "qp flows counted by (src, QP): two receivers whose QPs share a number count once",
        RDMA_TESTS,
        ci=(SHARED_QP_TEST,),
    ),
    # ---- collectives joined to their packets (issue 28) ------------------------------------------------
    Mutant(
        "collective_calls.instance_without_clock_offset",
        "queries/collective_calls.sql",
        "min(p.start_ns - coalesce(p.clock_offset_ns, 0)) OVER instance AS instance_start_ns",
        "min(p.start_ns) OVER instance AS instance_start_ns",
        "an instance's start on each rank's own clock, not on one clock",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_run_toml_host_clock_offsets_put_the_ranks_on_one_clock",),
    ),
    Mutant(
        "collective_rank_workers.capture_numbered_from_one",
        "queries/collective_rank_workers.sql",
        "([-_.]|$)', 1) AS INTEGER), NULL,",
        "([-_.]|$)', 1) AS INTEGER) - 1, NULL,",
        "captures read as numbered from 1: worker-1 taken for rank 0",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_without_nccl_logs_each_rank_is_the_capture_of_its_number",
        ),
    ),
    Mutant(
        "train_steps.numbered_from_one",
        "queries/train_steps.sql",
        "SELECT run, row_number() OVER (PARTITION BY run ORDER BY ts_ns, id) - 1 AS step,",
        "SELECT run, row_number() OVER (PARTITION BY run ORDER BY ts_ns, id) AS step,",
        "logged steps numbered from 1, the profiler's from 0",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_the_sources_agree_where_they_overlap",),
    ),
    Mutant(
        "collective_links.all_reduce_without_the_2",
        "queries/collective_links.sql",
        "WHEN op = 'all_reduce' THEN 2.0 * (n - 1) / n * bytes * share",
        "WHEN op = 'all_reduce' THEN (n - 1) / n * bytes * share",
        "a ring all-reduce predicted as one pass (reduce-scatter only)",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_acceptance_every_all_reduce_matched_and_within_two_percent",
        ),
    ),
    Mutant(
        "collective_wire.ratio_of_the_time_window",
        "queries/collective_wire.sql",
        "coalesce(w.bytes, 0) / l.predicted_bytes AS ratio, cn.connections,",
        "coalesce(wn.window_bytes, 0) / l.predicted_bytes AS ratio, cn.connections,",
        "the ratio from the bytes inside the time window, not those attributed by byte order",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_acceptance_every_all_reduce_matched_and_within_two_percent",
        ),
    ),
    Mutant(
        "collective_coverage_of.span_without_end",
        "queries/collective_coverage_of.sql",
        "AND p.ts_ns BETWEEN s.span_start_ns AND s.span_end_ns",
        "AND p.ts_ns >= s.span_start_ns",
        "the payload counted to the end of the capture, past the source's last collective",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_acceptance_every_all_reduce_matched_and_within_two_percent",
        ),
    ),
    Mutant(
        "collective_clock_check_of.lead_sign_flipped",
        "queries/collective_clock_check_of.sql",
        "max(sender_start_ns - bulk_start_ns) AS lead_ns",
        "max(bulk_start_ns - sender_start_ns) AS lead_ns",
        "the lead of the first bytes over the start measured the wrong way round",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_a_rank_clock_shifted_by_50_ms_fails_the_check_with_a_clear_message",
        ),
    ),
    Mutant(
        "collective_clock_check.wire_of_every_run",
        "queries/collective_clock_check.sql",
        "SELECT * FROM collective_clock_check_of(wire := 'checked_wire', runs := runs, err_ns := err_ns)",
        "SELECT * FROM collective_clock_check_of(wire := 'checked_wire', runs := runs, err_ns := 0)",
        "the check allows no clock error, whatever each file's mapping states",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_every_source_clock_agrees_with_the_capture",),
    ),
    Mutant(
        "collective_coverage.error_dropped",
        "queries/collective_coverage.sql",
        "SELECT * FROM collective_coverage_of(wire := 'covered_wire', runs := runs, err_ns := err_ns)",
        "SELECT * FROM collective_coverage_of(wire := 'covered_wire', runs := runs, err_ns := 1)",
        "the span a source covers starts at its first collective's start, without the clock error",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_coverage_spans_from_the_first_start_less_the_stated_clock_error",
        ),
    ),
    Mutant(
        "collective_wire.resent_bytes_counted_again",
        "queries/collective_wire.sql",
        "count(*) AS frames, sum(fresh)::BIGINT AS bytes,",
        "count(*) AS frames, sum(len)::BIGINT AS bytes,",
        "a re-sent segment's bytes counted a second time",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_every_collective_is_its_bytes_by_sequence_number",),
    ),
    Mutant(
        "collective_wire.boundary_not_snapped",
        "queries/collective_wire.sql",
        "WHEN abs(near - b) <= p / 100 AND near > coalesce(lag(a) OVER w, -1) AND near >= a - p / 100",
        "WHEN false AND near > coalesce(lag(a) OVER w, -1) AND near >= a - p / 100",
        "back-to-back collectives parted by prediction alone, not at NCCL's message boundary",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::"
            "test_mlp25m_byte_order_separates_back_to_back_buckets_that_time_windows_mix",
        ),
    ),
    Mutant(
        "collective_verdicts.busy_without_idle_gaps",
        "queries/collective_verdicts.sql",
        "(SELECT * FROM collective_wire(runs := runs, idle_ns := idle_ns))",
        "(SELECT * FROM collective_wire(runs := runs, idle_ns := 1000))",
        "the links' busy time counts only gaps of 1 µs, not the idle_ns the verdicts were asked with",
        EXPLAIN_TESTS,
        ci=(EXPLAIN_GPU_TEST,),
    ),
    Mutant(
        "collective_verdicts_of.first_rank_is_late",
        "queries/collective_verdicts_of.sql",
        "arg_max(rank, t0) AS late_rank, arg_max(worker, t0) AS late_worker,",
        "arg_min(rank, t0) AS late_rank, arg_max(worker, t0) AS late_worker,",
        "the rank that started first named as the late one",
        EXPLAIN_TESTS,
        ci=(EXPLAIN_GPU_TEST,),
    ),
    Mutant(
        "collective_verdicts_of.straggler_share_ignored",
        "queries/collective_verdicts_of.sql",
        "WHEN late_ns >= min_late_ns AND spread_ns >= straggler_share * duration_ns THEN 'late rank'",
        "WHEN late_ns >= min_late_ns THEN 'late rank'",
        "any late rank a straggler, however little of the collective the others waited",
        EXPLAIN_TESTS,
    ),
    Mutant(
        "findings.skew_costs_its_longest_wait",
        "queries/findings.sql",
        "           sum(v.spread_ns)::BIGINT AS cost_ns,",
        "           max(v.spread_ns)::BIGINT AS cost_ns,",
        "start skew costs only its longest wait, not every collective's",
        EXPLAIN_TESTS,
        ci=(README_EXPLAIN_TEST,),  # the README's block shows the skew's cost; the GPU test does not
    ),
    Mutant(
        "findings.one_hiccup_is_a_straggler",
        "queries/findings.sql",
        "HAVING count(*) >= min_count_share * any_value(s.n_big) AND sum(v.late_ns) >= min_share",
        "HAVING true AND sum(v.late_ns) >= min_share",
        "a rank late in a single collective reported as the run's straggler",
        EXPLAIN_TESTS,
        ci=(EXPLAIN_GPU_TEST,),
    ),
    Mutant(
        "collective_stragglers.first_rank_named",
        "queries/collective_stragglers.sql",
        "arg_max(rank, t_start) AS last_rank, arg_max(worker, t_start) AS last_worker,",
        "arg_min(rank, t_start) AS last_rank, arg_max(worker, t_start) AS last_worker,",
        "the rank that started first named as the straggler",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_stragglers_name_the_rank_that_started_last",),
    ),
    Mutant(
        "step_breakdown.overlap_is_either",
        "queries/step_breakdown.sql",
        "coalesce(sum(dt) FILTER (WHERE c > 0 AND p > 0), 0)::BIGINT AS overlap_ns",
        "coalesce(sum(dt) FILTER (WHERE c > 0 OR p > 0), 0)::BIGINT AS overlap_ns",
        "overlap counted where either compute or communication runs",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_step_breakdown_splits_each_profiled_step",),
    ),
    # ---- held links and run comparison (issue 27) ---------------------------------------------------
    Mutant(
        "contention.reference_over_idle_bins",
        "queries/contention.sql",
        "    WHERE steady AND bytes > 0",
        "    WHERE steady",
        "the reference is the median over idle bins too",
        ci=("tests/test_views_contention.py::test_contention_short_bins_cut_the_bursts",),
    ),
    Mutant(
        "contention.window_one_bin_longer",
        "queries/contention.sql",
        "HAVING count(*) >= min_bins",
        "HAVING count(*) > min_bins",
        "a held window needs one bin more than min_bins",
    ),
    Mutant(
        "compare.group_sums",
        "queries/compare.sql",
        "list_avg(list(r.value ORDER BY r.run)) AS value",
        "list_sum(list(r.value ORDER BY r.run)) AS value",
        "a group's value is the sum of its runs', not their mean",
        ci=("tests/test_views_contention.py::test_compare_groups_by_a_run_meta_column",),
    ),
    Mutant(
        "link_steady.last_partial_bin_steady",
        "queries/link_steady.sql",
        "s.bin_start_ns + s.bin_ns <= tw.t_last",
        "s.bin_start_ns <= tw.t_last",
        "the training window's last, partial bin counted as steady",
        ci=("tests/test_views_contention.py::test_contention_leaves_a_healthy_run_alone",),
    ),
    # ---- TCP health (issue 27) ---------------------------------------------------------------------
    Mutant(
        "tcp_segments.sequence_end_includes_itself",
        "queries/tcp_segments.sql",
        "before AS (f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)",
        "before AS (f ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
        "the highest sequence end sent before a segment includes the segment itself",
        TCP_HEALTH_TESTS,
        ci=("tests/test_views_tcp_health.py::test_every_tcp_flow_of_the_corpus_matches_tshark",),
    ),
    Mutant(
        "tcp_segments.dup_ack_any_ack",
        "queries/tcp_segments.sql",
        "AND ak = prev_ak AND rel = nxt AS dup_ack,",
        "AND true AND rel = nxt AS dup_ack,",
        "a duplicate ACK need not repeat the previous acknowledgment number",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_health.rtt_without_karn",
        "queries/tcp_health.sql",
        "WHERE m.span > 0 AND m.sends_of_end = 1",
        "WHERE m.span > 0 AND m.sends_of_end >= 1",
        "RTT sampled from segments sent twice (Karn's rule dropped)",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.ack_of_keep_alive_is_dup",
        "queries/tcp_segments.sql",
        "SELECT c.* REPLACE (c.dup_ack AND NOT coalesce(k.keep_alive, false) AS dup_ack)",
        "SELECT c.* REPLACE (c.dup_ack AS dup_ack)",
        "an ACK answering a keep-alive (a zero-window probe) counted as a duplicate ACK",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_health.zero_window_is_one",
        "queries/tcp_health.sql",
        "count(*) FILTER (win = 0 AND fl & 7 = 0) AS zero_window",
        "count(*) FILTER (win = 1 AND fl & 7 = 0) AS zero_window",
        "zero-window events counted at window 1",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_health.parts_of_version_4_answered",
        "queries/tcp_health.sql",
        "WHERE read_version < 5 AND (runs IS NULL OR list_contains(runs, run))",
        "WHERE read_version < 4 AND (runs IS NULL OR list_contains(runs, run))",
        "a run read as schema version 4 (no TCP sequence numbers) answered with no flows, not refused",
        ("tests/test_dataset_versions.py",),
    ),
    # ---- tcp_health = tshark, deterministic views, a capture read to its end (issue 35) ----------------
    Mutant(
        "tcp_segments.out_of_order_before_spurious",
        "queries/tcp_segments.sql",
        "       soon AND NOT spurious_retransmission AND NOT fast_retransmission AS ooo,",
        "       soon AND NOT fast_retransmission AS ooo,",
        "data already acknowledged, re-sent soon after `next`, also out-of-order (tshark tests it first)",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.spurious_only_when_behind",
        "queries/tcp_segments.sql",
        "           c.len > 0 AND NOT c.keep_alive AND coalesce(r.ak, 0) <> 0",
        "           c.len > 0 AND c.behind AND coalesce(r.ak, 0) <> 0",
        "a re-sent segment the capture missed the first time, already acknowledged, is no retransmission",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.next_minus_one_is_behind",
        "queries/tcp_segments.sql",
        "               AND NOT (len > 1 AND rel = nxt - 1) AS behind,",
        "               AS behind,",
        "new data from next - 1 (after a zero-window probe) taken for out-of-order",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.first_rtt_of_zero_kept",
        "queries/tcp_segments.sql",
        "    ANTI JOIN syn AS s ON s.conn = a.conn AND s.ts_ns = a.ts_ns",
        "    ANTI JOIN syn AS s ON s.conn = a.conn AND false",
        "an ACK in its SYN's microsecond ends the first RTT (tshark takes 0 for none and measures again)",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.ordered_by_raw_sequence",
        "queries/tcp_segments.sql",
        "row_number() OVER (PARTITION BY flow, epoch ORDER BY ts_ns, rel, span, ak, fl, win) AS k",
        "row_number() OVER (PARTITION BY flow, epoch ORDER BY ts_ns, sq, span, ak, fl, win) AS k",
        "a microsecond's segments in raw 32-bit order: a wrapped one first, the one before it out-of-order",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.ties_in_input_order",
        "queries/tcp_segments.sql",
        "row_number() OVER (PARTITION BY flow, epoch ORDER BY ts_ns, rel, span, ak, fl, win) AS k",
        "row_number() OVER (PARTITION BY flow, epoch ORDER BY ts_ns, rel) AS k",
        "packets equal in time and sequence number taken in whatever order DuckDB's threads give",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.as_of_any_packet_of_a_microsecond",
        "queries/tcp_segments.sql",
        "    ASOF LEFT JOIN (SELECT flow, ts_ns, ak, dups FROM counted WHERE last_at_ts) AS r",
        "    ASOF LEFT JOIN (SELECT flow, ts_ns, ak, dups FROM counted) AS r",
        "the reverse flow's last packet before a segment is any packet of its last microsecond",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.next_reached_again",
        "queries/tcp_segments.sql",
        "max(ts_ns) FILTER (WHERE nxt IS NULL OR rel + reach > nxt) OVER earlier AS nxt_ns,",
        "max(ts_ns) FILTER (WHERE nxt IS NULL OR rel + reach >= nxt) OVER earlier AS nxt_ns,",
        "`next`'s time moved by a retransmission ending at it (tshark keeps the first packet's)",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.no_epochs",
        "queries/tcp_segments.sql",
        "    SELECT s.*, coalesce(r.epoch, 0) AS epoch,",
        "    SELECT s.*, 0 AS epoch,",
        "a SYN+ACK after a refused SYN's RST (sequence number 0) unwrapped below it: all it sends is behind",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_segments.fin_always_reaches",
        "queries/tcp_segments.sql",
        "span - (fl & 1 <> 0 AND alone AND sent > 10000)::BIGINT AS reach",
        "span AS reach",
        "a FIN after 10,000 segments of a flow without its reverse moves `next` by 1 (not in tshark)",
        TCP_HEALTH_TESTS,
    ),
    Mutant(
        "tcp_health.spurious_counts_fast",
        "queries/tcp_health.sql",
        "count(*) FILTER (spurious_retransmission) AS spurious_retransmissions,",
        "count(*) FILTER (fast_retransmission) AS spurious_retransmissions,",
        "spurious_retransmissions counts the fast ones",
        TCP_HEALTH_TESTS,
        ci=("tests/test_views_tcp_health.py::test_tsharks_rules_on_crafted_segments",),
    ),
    Mutant(
        "contention.held_start_per_bin",
        "queries/contention.sql",
        "    h.first_s AS held_start_s,",
        "    s.t_s + (h.first_ns - s.bin_start_ns) / 1e9 AS held_start_s,",
        "each bin of a held window computes its start from its own t_s (the last digit differs)",
        ("tests/test_views_deterministic.py",),
        ci=("tests/test_views_deterministic.py::test_every_bin_of_a_held_window_names_it_alike",),
    ),
    Mutant(
        "kernel.late_clock_uncounted",
        "tracecore/reader/kernel.py",
        "                    late += 1  # the previous packet's time",
        "                    late += 0  # the previous packet's time",
        "pcapng packets with a time past int64 ns carried silently, without the warning",
        KERNEL_TESTS,
    ),
    # ---- collective views' columns against the packets (issue 35, item 5) ------------------------------
    Mutant(
        "collective_wire.gbps_in_bytes",
        "queries/collective_wire.sql",
        "w.bytes * 8.0 / nullif(w.busy_ns, 0) AS gbps",
        "w.bytes * 1.0 / nullif(w.busy_ns, 0) AS gbps",
        "the achieved rate in GB/s under the name Gbit/s",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::test_every_collective_is_busy_in_the_gaps_of_its_frames_and_its_"
            "gbps_is_in_bits[torch_ddp-cnn3m-sgd-32-nccl-normal-ring]",
        ),
    ),
    Mutant(
        "collective_wire.sender_clock_offset_sign",
        "queries/collective_wire.sql",
        "l.instance_start_ns + coalesce(l.clock_offset_ns, 0) AS instance_start_ns,",
        "l.instance_start_ns - coalesce(l.clock_offset_ns, 0) AS instance_start_ns,",
        "the instance's start moved onto the sender's clock the wrong way",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_run_toml_host_clock_offsets_put_the_ranks_on_one_clock",),
    ),
    Mutant(
        "collective_links.ll_without_its_flags",
        "queries/collective_links.sql",
        "WHEN 'LL' THEN 2.0",
        "WHEN 'LL' THEN 1.0",
        "NCCL's LL protocol predicted without its flag words (half its bytes on the wire)",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_an_ll_collective_puts_twice_its_data_on_the_wire",),
    ),
    Mutant(
        "collective_stragglers.wait_of_the_first_rank",
        "queries/collective_stragglers.sql",
        "sum(t_last - t_start)::BIGINT AS wait_ns",
        "max(t_last - t_start)::BIGINT AS wait_ns",
        "all ranks' waiting taken as the earliest rank's alone (the spread)",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_stragglers_wait_is_every_ranks_wait_for_the_last",),
    ),
    Mutant(
        "collective_stragglers.last_start_offset_sign",
        "queries/collective_stragglers.sql",
        "max(start_ns - coalesce(clock_offset_ns, 0)) OVER",
        "max(start_ns + coalesce(clock_offset_ns, 0)) OVER",
        "the last rank's start that the others wait for moved by its host's offset the wrong way",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_run_toml_host_clock_offsets_put_the_ranks_on_one_clock",),
    ),
    Mutant(
        "step_breakdown.acks_keep_a_link_busy",
        "queries/step_breakdown.sql",
        "WHERE (runs IS NULL OR list_contains(runs, p.run)) AND p.l4_payload_len > 0",
        "WHERE (runs IS NULL OR list_contains(runs, p.run))",
        "frames without payload (ACKs) counted as a link's busy time",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::"
            "test_step_breakdown_busiest_link_is_the_one_its_data_frames_keep_busy_longest",
        ),
    ),
    Mutant(
        "collective_wire.frames_after_the_end_without_clock_error",
        "queries/collective_wire.sql",
        "OR s.ts_ns <= r.instance_end_ns + r.err)",
        "OR s.ts_ns <= r.instance_end_ns)",
        "a frame after the instance's recorded end dropped, though the clocks may err by err_ns",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_a_clock_error_within_the_stated_one_keeps_every_frame",),
    ),
    Mutant(
        "collective_coverage_of.tcp_only",
        "queries/collective_coverage_of.sql",
        "p.ip_proto IN (6, 17)",
        "p.ip_proto = 6",
        "the link's UDP payload left out of what the collectives are compared with",
        COLLECTIVE_TESTS,
        ci=("tests/test_views_collectives.py::test_coverage_counts_the_udp_the_link_carried_in_the_span",),
    ),
    Mutant(
        "collective_calls.last_communicator_of_the_size",
        "queries/collective_calls.sql",
        "arg_min(r.comm_id, r.line) FILTER",
        "arg_max(r.comm_id, r.line) FILTER",
        "of a process's communicators of one size, the last set up taken for its default group",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::"
            "test_a_process_with_two_communicators_of_one_size_takes_the_first_for_its_default_group",
        ),
    ),
    Mutant(
        "compare.pair_payload_is_frame_bytes",
        "queries/compare.sql",
        "unnest([bytes / steps, payload_bytes / steps])",
        "unnest([bytes / steps, bytes / steps])",
        "a worker pair's payload per step taken as its frame bytes",
    ),
    Mutant(
        "arrow_pool.worker_replaces_the_users_pool",
        "tracecore/ingest/arrow_pool.py",
        "    if not os.environ.get(CHOSEN_BY_USER):",
        "    if True:",
        "ingest's worker processes replace the Arrow pool the user chose with the system allocator",
        ("tests/test_arrow_pool.py::test_worker_processes_use_the_system_pool_unless_the_user_chose_one",),
    ),
    Mutant(
        "lock.follows_a_link",
        "tracecore/ingest/lock.py",
        "_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW",
        "_FLAGS = os.O_RDWR | os.O_CREAT",
        "a .lock that is a symbolic link opened through it: the file it names truncated and written",
        ("tests/test_hardening_links.py::test_the_lock_is_never_opened_through_a_link",),
    ),
    Mutant(
        "preflight.custom_program_unchecked",
        "runners/preflight.py",
        ", *((program,) if program and not builtin else ()))",
        ",)",
        "a custom launcher's program never looked for: the run fails on the hosts instead",
        ("tests/test_runners_gpu.py::test_preflight_looks_for_a_custom_launchers_program",),
    ),
    Mutant(
        "nccl_env.inspector_quiet",
        "runners/nccl_env.py",
        'NCCL_INSPECTOR_DUMP_VERBOSE="1",',
        'NCCL_INSPECTOR_DUMP_VERBOSE="0",',
        "NCCL Inspector asked for its short records, without the per-channel kernel times the views read",
        (
            "tests/test_runners_gpu.py::"
            "test_a_profiler_plugin_gets_both_reference_plugins_settings_and_run_toml_says_who_set_each",
        ),
    ),
    Mutant(
        "nccl_env.users_settings_as_tracecores",
        "runners/nccl_env.py",
        '"set_by_tracecore": sorted(k for k in first if k.startswith("NCCL_") and k not in user_env),',
        '"set_by_tracecore": sorted(k for k in first if k.startswith("NCCL_")),',
        "run.toml credits tracecore with the NCCL settings the experiment made",
        (
            "tests/test_runners_gpu.py::"
            "test_a_profiler_plugin_gets_both_reference_plugins_settings_and_run_toml_says_who_set_each",
        ),
    ),
    Mutant(
        "grid_rows.window_end_unclipped",
        "queries/grid_rows.sql",
        "least(to_ns::BIGINT, span)",
        "to_ns::BIGINT",
        "a window ending past the run sized to its end: a query over the whole run refused as too large",
        BOUND_TESTS,
        ci=("tests/test_hardening_bounds.py::test_a_window_ending_past_the_run_is_sized_by_the_run",),
    ),
    Mutant(
        "nccl_topology.little_is_a_tenth_of_a_percent",
        "queries/nccl_topology.sql",
        "AND m.data_bytes * 100 < sum(m.data_bytes)",
        "AND m.data_bytes * 1000 < sum(m.data_bytes)",
        "a link of the other algorithm with 0.1-1 % of the run's data taken for a contradiction",
        NCCL_TESTS,
        ci=(
            "tests/test_views_nccl_socket.py::"
            "test_a_tree_link_under_one_percent_of_the_data_is_little_even_in_a_short_capture",
        ),
    ),
    Mutant(
        "pytorch_profiler.reduce_scatter_by_its_input",
        "tracecore/logs/pytorch_profiler.py",
        'side = "Out" if op == "reduce_scatter" else "In"',
        'side = "In" if op == "reduce_scatter" else "In"',
        "a reduce-scatter's message counted by all ranks' input (N times NCCL's count)",
        ("tests/test_logs_collectives.py::test_pytorch_profiler_reduce_scatter_counts_each_ranks_output",),
    ),
    Mutant(
        "collective_links.gloo_ring_to_the_right",
        "queries/collective_links.sql",
        "CASE WHEN c.gloo THEN c.n - 1 ELSE 1 END",
        "CASE WHEN c.gloo THEN c.n + 1 ELSE 1 END",
        "gloo's ring taken to the right, as NCCL's rank order: rank r sends to r + 1",
        ("tests/test_collectives_gloo.py",),
    ),
    Mutant(
        "step_breakdown.quietest_link_busiest",
        "queries/step_breakdown.sql",
        "SELECT run, worker, step, arg_max(dst, busy_ns) AS busiest_link",
        "SELECT run, worker, step, arg_min(dst, busy_ns) AS busiest_link",
        "the link a worker kept busy least named its busiest",
        ("tests/test_collectives_gloo.py",),
    ),
    Mutant(
        "collective_wire.all_gather_busbw_as_all_reduce",
        "queries/collective_wire.sql",
        "WHEN l.op IN ('all_gather', 'reduce_scatter') THEN (g.n - 1.0) / g.n",
        "WHEN l.op IN ('all_gather', 'reduce_scatter') THEN 2.0 * (g.n - 1) / g.n",
        "an all-gather's bus bandwidth with the all-reduce's factor 2(N-1)/N",
        COLLECTIVE_TESTS,
        ci=(
            "tests/test_views_collectives.py::"
            "test_gpu_bandwidths_of_all_gathers_and_broadcasts_use_nccl_tests_factors",
        ),
    ),
    # ---- the grids' size bound (issue 25, item 13) ---------------------------------------------------
    Mutant(
        "grid_check.limit_a_zero_too_many",
        "queries/grid_check.sql",
        "SELECT 5000000::BIGINT AS max_rows",
        "SELECT 50000000::BIGINT AS max_rows",
        "the grid limit ten times what the project states",
        BOUND_TESTS,
        ci=("tests/test_hardening_bounds.py::test_a_too_fine_bin_is_refused_before_running",),
    ),
    Mutant(
        "grid_rows.series_are_workers",
        "queries/grid_rows.sql",
        "CASE WHEN by_pair THEN greatest(workers * (workers - 1), 1) ELSE 1 END AS series",
        "CASE WHEN by_pair THEN greatest(workers, 1) ELSE 1 END AS series",
        "a per-pair grid sized by workers, not by directed pairs",
        BOUND_TESTS,
        ci=("tests/test_hardening_bounds.py::test_a_too_fine_bin_is_refused_before_running",),
    ),
    # ---- the bins ingest keeps for the link views ------------------------------------------------------
    Mutant(
        "kernel.bins_keep_latest_timestamp",
        "tracecore/reader/kernel.py",
        "    if t < acc[k, 2]:\n        acc[k, 2] = t",
        "    if t > acc[k, 2] or acc[k, 1] == 1:\n        acc[k, 2] = t",
        "each millisecond bin keeps its latest timestamp, not its earliest",
        LINK_BINS_TESTS,
    ),
    Mutant(
        "kernel.bins_slot_not_emptied",
        "tracecore/reader/kernel.py",
        "        acc[slot, 1] = 0\n",
        "        acc[slot, 1] = 1\n",
        "a written-out slot still counts as touched: its pair's later milliseconds are never written",
        LINK_BINS_TESTS,
    ),
    Mutant(
        "link_series.bins_at_the_wrong_width",
        "queries/link_series.sql",
        "ms // (bin_ns::BIGINT // 1000000) AS k",
        "ms // (bin_ns::BIGINT // 100000) AS k",
        "the stored millisecond bins grouped ten to a bin instead of bin_ns / 1 ms",
        LINK_BINS_TESTS,
    ),
    Mutant(
        "catalog.unbinned_capture_ignored",
        "tracecore/ingest/catalog.py",
        '        " OR EXISTS (SELECT 1 FROM _link_bins WHERE ms IS NULL)"',
        '        " OR false"',
        "a capture left unbinned is ignored: the link views miss its bytes",
        LINK_BINS_TESTS,
    ),
]


def ci_subset() -> list[Mutant]:
    return [m for m in MUTANTS if m.ci]


# ---- private copies of the checkout -----------------------------------------------------------------
class StopRequestedError(Exception):
    pass


def _on_signal(signum, _frame) -> None:
    raise StopRequestedError(f"signal {signum}")


def make_copy(parent: Path) -> Path:
    """A copy of the checkout's code and tests under `parent`, with ../shared reachable as from here.

    Why a copy works: `python -m pytest` puts its working directory first on sys.path, so the copy's
    tracecore, tests and bench are the ones imported (views find queries/ beside the package)."""
    root = parent / REPO.name
    root.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(src, root / name)
    shared = REPO.parent / "shared"
    if shared.exists():
        (parent / "shared").symlink_to(shared)
    hta = REPO / ".venv-hta"  # HTA's own venv (make test builds it): the step breakdown's reference
    if hta.exists():
        (root / ".venv-hta").symlink_to(hta)
    return root


def apply(m: Mutant, root: Path) -> str:
    path = root / m.path
    text = path.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise SystemExit(f"mutant {m.name}: {m.old!r} occurs {text.count(m.old)} times in {m.path}, not once")
    path.write_text(text.replace(m.old, m.new), encoding="utf-8")
    return text


def revert(m: Mutant, root: Path, text: str) -> None:
    (root / m.path).write_text(text, encoding="utf-8")


# ---- running tests ----------------------------------------------------------------------------------
def _clean_env() -> dict[str, str]:
    """This process's environment without pytest's and tracecore's own variables (a run inside the
    suite must not hand its xdist worker's or its JIT choice on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TRACECORE_"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def prebuild_sample(root: Path, dest: Path) -> None:
    """The view tests' sample dataset, ingested once by the unmutated copy at `root` into `dest`
    (tests/test_views_support.py copies it instead of ingesting in each run of a view mutant)."""
    code = (
        "import shutil, sys\nfrom tests.test_views_support import dataset_dir\n"
        "shutil.copytree(dataset_dir(), sys.argv[1])"
    )
    subprocess.run([PY, "-c", code, str(dest)], cwd=root, env=_clean_env(), check=True, capture_output=True)


def _pytest_args(basetemp: str) -> list[str]:
    return ["-x", "-q", "-rfE", "-p", "no:cacheprovider", "--basetemp", basetemp]


def _outcome(returncode: int, out: str, wall: float) -> tuple[str, float, str]:
    """(outcome, seconds, first failure) from pytest's exit status and output."""
    failures = [
        line.split(" ", 1)[1].split(" - ")[0]
        for line in out.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]
    if returncode == 0:
        return "passed", wall, ""
    if returncode == 1:
        return "failed", wall, failures[0] if failures else ""
    return "error", wall, (out.strip().splitlines() or [f"pytest exit {returncode}"])[-1]


def run_tests(
    root: Path, tests: tuple[str, ...], timeout: float, jit: bool, extra_env: dict[str, str] | None = None
) -> tuple[str, float, str]:
    """(outcome, seconds, first failure) of the tests in the copy at `root`: outcome is passed |
    failed (a test failed or errored) | error (pytest could not run them: collection, usage) | timeout."""
    env = {**_clean_env(), **(extra_env or {})}
    with tempfile.TemporaryDirectory(prefix="mutant-run-") as tmp:
        env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba")
        if jit:
            env["TRACECORE_JIT"] = "1"
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [PY, "-m", "pytest", *_pytest_args(f"{tmp}/pytest"), *tests],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        RUNNING.add(proc)
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
        finally:
            RUNNING.discard(proc)
        return _outcome(proc.returncode, out, time.perf_counter() - t0)


# ---- the fork server: view mutants without a fresh interpreter each ---------------------------------
# What every view test imports; loaded once in the server. Only Python that no view mutant changes
# (a view mutant changes a queries/*.sql file, read when a catalog is opened, never at import).
PRELOAD = (
    "pytest",
    "numpy",
    "pandas",
    "pyarrow",
    "duckdb",
    "dpkt",
    "typer.testing",
    "tracecore.ingest",
    "tracecore.query",
    "tracecore.sample",
    "cli.app",
)


def serve() -> int:
    """`--serve`: load PRELOAD, then run each request's tests (a JSON line on stdin) in a forked child
    and answer its exit status as a JSON line: a view mutant's run starts in ~0.1 s, not the 2 s
    of an interpreter importing pytest, pandas and tracecore (bench/results/mutants-ci.md)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    from tracecore.views import installed_views

    if installed_views.cache_info().currsize:
        print("the views were read before forking: a mutant's SQL would not be seen", file=sys.stderr)
        return 2
    import pytest

    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child, in the server's process group: output to the request's log
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            code = 3
            try:
                code = int(pytest.main(request["args"]))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
    return 0


class ForkServer:
    """A `--serve` process in one copy; `run` has the interface of run_tests (one request at a time).
    The server and its children share one process group, killed as one on a timeout or a stop."""

    def __init__(self, root: Path, extra_env: dict[str, str], tmp: Path) -> None:
        self.root, self.tmp = root, tmp
        self.env = {**_clean_env(), **extra_env, "NUMBA_CACHE_DIR": str(tmp / "numba")}
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "bench.mutants", "--serve"],
            cwd=self.root,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        RUNNING.add(self.proc)
        self._buffer = b""

    def _answer(self, deadline: float | None) -> dict | None:
        """The server's next JSON line, or None when the deadline passes first."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
            if not select.select([fd], [], [], wait)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SystemExit(f"the mutant fork server stopped (exit {self.proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, tests: tuple[str, ...], timeout: float) -> tuple[str, float, str]:
        with tempfile.TemporaryDirectory(prefix="mutant-run-", dir=self.tmp) as tmp:
            log = Path(tmp) / "pytest.log"
            request = {"args": [*_pytest_args(f"{tmp}/pytest"), *tests], "log": str(log)}
            t0 = time.perf_counter()
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            answer = self._answer(t0 + timeout)
            if answer is None:
                self.close()
                self._start()
                return "timeout", time.perf_counter() - t0, ""
            return _outcome(answer["rc"], log.read_text(errors="replace"), time.perf_counter() - t0)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        RUNNING.discard(self.proc)


def _kill_running() -> None:
    """End the test runs still going (their process groups), before their copies are removed."""
    for proc in list(RUNNING):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _run_mutants(
    chosen: list[Mutant], copies: list[Path], selection, timeout: float, say, servers: list[ForkServer]
) -> list[tuple[Mutant, str, float, str]]:
    """Each mutant in one of the copies (one thread per copy), results in the order of `chosen`. A
    mutant of a view runs in the copy's fork server (which has the prebuilt sample dataset: a view is
    not read by ingest); a mutant of Python code in a fresh interpreter."""
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i, m in enumerate(chosen):
        todo.put((i, m))
    results: dict[int, tuple] = {}
    stop = threading.Event()

    def work(root: Path, server: ForkServer) -> None:
        while not stop.is_set():
            try:
                i, m = todo.get_nowait()
            except queue.Empty:
                return
            text = apply(m, root)
            try:
                if m.path.startswith("queries/"):
                    outcome, wall, first = server.run(selection(m), timeout)
                else:
                    outcome, wall, first = run_tests(root, selection(m), timeout, m.kernel)
            finally:
                revert(m, root, text)
            status = {"failed": "killed", "passed": "SURVIVED"}.get(outcome, outcome)
            results[i] = (m, status, wall, first)
            say(f"{status:9} {wall:6.1f} s  {m.name}  {first}")

    threads = [
        threading.Thread(target=work, args=pair, daemon=True) for pair in zip(copies, servers, strict=True)
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    finally:
        stop.set()
        _kill_running()
    if len(results) != len(chosen):
        raise SystemExit(f"{len(chosen) - len(results)} mutant(s) did not run (see the errors above)")
    return [results[i] for i in sorted(results)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ci", action="store_true", help="the CI subset, each against the node ids that kill it")
    ap.add_argument("--only", action="append", default=[], help="run mutants whose name contains this text")
    ap.add_argument("--tests", nargs="+", help="run these tests for every mutant instead of its own set")
    ap.add_argument("--no-kernel", action="store_true", help="skip the reader-kernel mutants (JIT, slow)")
    ap.add_argument(
        "--jobs", type=int, default=1, help="mutants run at once, each in its own copy (default 1)"
    )
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant (default 300)")
    ap.add_argument(
        "--out", type=Path, help="the report (default bench/results/mutants-latest.md, --ci: -ci.md)"
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # ForkServer's process
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    out = args.out or REPO / "bench" / "results" / ("mutants-ci.md" if args.ci else "mutants-latest.md")

    chosen = [
        m
        for m in (ci_subset() if args.ci else MUTANTS)
        if not args.only or any(o in m.name for o in args.only)
    ]
    if args.no_kernel:
        chosen = [m for m in chosen if not m.kernel]
    if not chosen:
        raise SystemExit("no mutant selected")
    override = tuple(args.tests) if args.tests else None

    def selection(m: Mutant) -> tuple[str, ...]:
        return override or (m.ci if args.ci else m.tests)

    for m in chosen:  # every mutant applies to the current sources before anything runs
        if (REPO / m.path).read_text(encoding="utf-8").count(m.old) != 1:
            raise SystemExit(f"mutant {m.name}: its line is not (once) in {m.path}")

    def say(line: str) -> None:
        print(line, flush=True)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="tracecore-mutants-") as tmp:
            jobs = max(1, min(args.jobs, len(chosen)))
            copies = [make_copy(Path(tmp) / f"copy{i}") for i in range(jobs)]
            prebuild_sample(copies[0], Path(tmp) / "sample-data")
            sample = {PREBUILT_ENV: str(Path(tmp) / "sample-data")}
            servers = [ForkServer(root, sample, root.parent) for root in copies]
            try:
                baseline_tests = tuple(dict.fromkeys(t for m in chosen for t in selection(m)))
                outcome, wall, first = servers[0].run(baseline_tests, args.timeout * 3)
                say(f"baseline ({len(baseline_tests)} test selections): {outcome} in {wall:.0f} s {first}")
                if outcome != "passed":
                    print("the unmodified checkout must pass the selected tests first", file=sys.stderr)
                    return 2
                results = _run_mutants(chosen, copies, selection, args.timeout, say, servers)
            finally:
                for server in servers:
                    server.close()
    except (StopRequestedError, KeyboardInterrupt) as err:
        print(f"interrupted ({err or 'Ctrl-C'}); the checkout was never touched", file=sys.stderr)
        return 130
    total = time.perf_counter() - started
    write_report(out, results, total, args, override, argv)
    killed = sum(1 for _, s, _, _ in results if s == "killed")
    say(f"{killed}/{len(results)} killed in {total:.0f} s; {out}")
    return 0 if killed == len(results) else 1


def write_report(out: Path, results: list, total: float, args, override, argv: list[str] | None) -> None:
    """The Markdown report: one row per mutant (name, file, bug, result, seconds, first failing test)."""
    killed = sum(1 for _, s, _, _ in results if s == "killed")
    command = shlex.join(["python", "-m", "bench.mutants", *(sys.argv[1:] if argv is None else argv)])
    what = "the CI subset (`--ci`)" if args.ci else "every mutant (`make mutants`)"
    lines = [
        f"# Mutation check: {what}",
        "",
        f"{killed} of {len(results)} mutants killed; wall time {total:.0f} s on this machine with {args.jobs}"
        f" job(s) (baseline run included; per mutant `pytest -x`, limit {args.timeout:.0f} s).",
        "",
        f"Command: `{command}`, {time.strftime('%Y-%m-%d', time.gmtime())}.",
        "",
        f"Tests: {', '.join(override)} for every mutant."
        if override
        else "Tests: each mutant's own " + ("node ids (below)." if args.ci else "set (below)."),
        "",
        "| mutant | file | bug | result | s | first failing test |",
        "|---|---|---|---|---:|---|",
    ]
    for m, status, wall, first in results:
        cell = re.sub(r"\|", "\\|", first)
        lines.append(f"| {m.name} | {m.path} | {m.bug} | {status} | {wall:.0f} | `{cell}` |")
    if not override and args.ci:
        lines += ["", "Test selections:"] + [f"- {m.name}: {', '.join(m.ci)}" for m, *_ in results]
    elif not override:
        lines += [
            "",
            "Test sets:",
            f"- views: {', '.join(VIEW_TESTS)}",
            f"- dedup: {', '.join(DEDUP_TESTS)}",
            f"- kernel (TRACECORE_JIT=1): {', '.join(KERNEL_TESTS)}",
        ]
        named = (VIEW_TESTS, DEDUP_TESTS, KERNEL_TESTS)
        lines += [f"- {m.name}: {', '.join(m.tests)}" for m, *_ in results if m.tests not in named]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
