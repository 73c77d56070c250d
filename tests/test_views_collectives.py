"""Collectives joined to their packets on the real GPU corpus (../shared/corpus-gpu): NCCL 2.28.9 over
TCP sockets, two and four ranks on one GPU each in its own namespace, sender-side captures, with
PyTorch profiler traces, NCCL's example profiler plugin (cnn3m runs) and NCCL Inspector (mlp25m).

What the data shows (README of the corpus, issue 28): on cnn3m each step's all-reduce puts the 12,254,760
B bucket plus 64 B of NCCL framing (4 B before each of the 16 messages of its 2 channels) on each
link; on mlp25m two buckets go back to back on the same sockets, so time windows over-count by up to
5.7 % and only the order of each connection's byte stream tells them apart.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from itertools import pairwise
from pathlib import Path

import dpkt
import pytest

from tracecore.ingest import ingest, open_catalog

REPO = Path(__file__).resolve().parent.parent
GPU = REPO.parent / "shared" / "corpus-gpu"
PROFILERS = GPU / "gpu-nccl-profilers"
FOUR = GPU / "gpu-nccl-4rank"
CNN = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
MLP = "torch_ddp-mlp25m-sgd-32-nccl-normal-ring"
W4 = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
BUCKET = 12254760  # cnn3m's one DDP bucket, bytes
FRAMING = 64
SIZES = {CNN: 2, MLP: 2, W4: 4}  # ranks of each run's communicator
HTA_PYTHON = REPO / ".venv-hta" / "bin" / "python"  # `make .venv-hta/.installed` (make test builds it)


@pytest.fixture(scope="module")
def gpu_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for folder in (PROFILERS, FOUR):
        if not folder.is_dir():
            pytest.fail(f"corpus missing: {folder} (the shared/ folder must sit beside the checkout)")
    out = tmp_path_factory.mktemp("gpu") / "data"
    summary = ingest([PROFILERS, FOUR], out, jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    return out


@pytest.fixture(scope="module")
def con(gpu_data: Path):
    connection = open_catalog(gpu_data)
    yield connection
    connection.close()


def rows(con, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def ingested_rows(runs: Path, data: Path, **queries: str) -> dict[str, list[dict]]:
    """Ingest the run folders under `runs` into `data` (no problems allowed) and answer each query."""
    summary = ingest([runs], data, jobs=1)
    assert not summary.problems, summary.problems
    con = open_catalog(data)
    try:
        return {name: rows(con, sql) for name, sql in queries.items()}
    finally:
        con.close()


def test_every_source_file_gives_collectives_with_its_worker(con) -> None:
    got = rows(
        con,
        "SELECT run, source, rank, any_value(worker) AS worker, count(DISTINCT worker) AS workers, "
        "count(*) AS n FROM collective_calls GROUP BY ALL ORDER BY ALL",
    )
    by_key = {(r["run"], r["source"], r["rank"]): r for r in got}
    assert {k: (r["worker"], r["n"]) for k, r in by_key.items() if k[0] == MLP} == {
        (MLP, "nccl_inspector", 0): ("W1", 25),
        (MLP, "nccl_inspector", 1): ("W2", 25),
        (MLP, "pytorch_profiler", 0): ("W1", 6),
        (MLP, "pytorch_profiler", 1): ("W2", 6),
    }
    assert {k[2]: r["worker"] for k, r in by_key.items() if k[:2] == (W4, "nccl_profiler")} == {
        0: "W1",
        1: "W2",
        2: "W3",
        3: "W4",
    }
    assert all(r["workers"] == 1 for r in got)


def test_cnn3m_each_step_all_reduce_is_its_bucket_plus_framing_on_each_link(con) -> None:
    got = rows(
        con,
        "SELECT source, seq, src_worker, bytes, window_bytes, predicted_bytes FROM collective_wire "
        "WHERE run = ? AND op = 'all_reduce' AND message_bytes = ? ORDER BY ALL",
        [CNN, BUCKET],
    )
    plugin = [r for r in got if r["source"] == "nccl_profiler"]
    assert len(plugin) == 2 * 16  # 16 steps, both directions
    assert {r["predicted_bytes"] for r in got} == {BUCKET}
    assert [r["bytes"] for r in plugin] == [BUCKET + FRAMING] * 32  # to the byte, every step and link
    kineto = [r["bytes"] for r in got if r["source"] == "pytorch_profiler"]
    assert kineto == [BUCKET + FRAMING] * 6  # steps 4–6, both links


def sequence_count(con, run: str, gap_ns: int = 2_000_000) -> list[dict]:
    """Each directed worker link's bursts of new bytes, counted by TCP sequence number in Python from
    the packets (independent of collective_wire): per data connection (≥ 10 % of its link's busiest),
    runs of segments no more than `gap_ns` apart, each byte once."""
    got = rows(
        con,
        "SELECT s.worker AS src, d.worker AS dst, p.src_port, p.dst_port, p.ts_ns, p.tcp_seq, "
        "p.l4_payload_len FROM packets AS p JOIN workers AS s ON s.run = p.run AND s.ip = p.src_ip "
        "JOIN workers AS d ON d.run = p.run AND d.ip = p.dst_ip "
        "WHERE p.run = ? AND p.ip_proto = 6 AND p.l4_payload_len > 0 ORDER BY p.ts_ns, p.tcp_seq",
        [run],
    )
    conns: dict[tuple, list[dict]] = {}
    for r in got:
        conns.setdefault((r["src"], r["dst"], r["src_port"], r["dst_port"]), []).append(r)
    top: dict[tuple, int] = {}
    for key, segs in conns.items():
        top[key[:2]] = max(top.get(key[:2], 0), sum(r["l4_payload_len"] for r in segs))
    bursts = []
    for key, segs in conns.items():
        if sum(r["l4_payload_len"] for r in segs) < 0.1 * top[key[:2]]:
            continue
        base, reached, burst, last = segs[0]["tcp_seq"], 0, None, None
        for r in segs:
            off = (r["tcp_seq"] - base) % 2**32  # these connections carry far less than 4 GiB
            new = max(0, off + r["l4_payload_len"] - max(off, reached))
            reached = max(reached, off + r["l4_payload_len"])
            if burst is None or r["ts_ns"] - last > gap_ns:
                burst = {"src": key[0], "dst": key[1], "first": r["ts_ns"], "last": r["ts_ns"], "bytes": 0}
                bursts.append(burst)
            burst["last"], burst["bytes"], last = r["ts_ns"], burst["bytes"] + new, r["ts_ns"]
    return bursts


@pytest.mark.parametrize("run", [CNN, W4])
def test_every_collective_is_its_bytes_by_sequence_number(con, run: str) -> None:
    """Issue 35: on the runs whose steps are apart in time, every (collective, link) row of at least
    1 MB is, to the byte, the bytes its connections' sequence numbers put between its first and last
    frame; re-sent segments count once."""
    bursts = sequence_count(con, run)
    got = rows(
        con,
        "SELECT source, seq, src_worker, dst_worker, first_byte_ns, last_byte_ns, bytes FROM collective_wire "
        "WHERE run = ? AND message_bytes >= 1000000",
        [run],
    )
    # the 4 MiB marker on every link, the weights' broadcast down the chain (one link fewer), 16 steps
    # of the plugin and 3 of the PyTorch trace on every link
    links = {CNN: 2, W4: 4}[run]
    assert len(got) == links + (links - 1) + links * (16 + 3)
    for r in got:
        inside = [
            b for b in bursts
            if (b["src"], b["dst"]) == (r["src_worker"], r["dst_worker"])
            and b["last"] >= r["first_byte_ns"] and b["first"] <= r["last_byte_ns"]
        ]  # fmt: skip
        assert r["bytes"] == sum(b["bytes"] for b in inside), r


def test_mlp25m_byte_order_separates_back_to_back_buckets_that_time_windows_mix(con) -> None:
    got = rows(
        con,
        "SELECT source, window_bytes / predicted_bytes AS window_ratio, ratio, predicted_bytes "
        "FROM collective_wire WHERE run = ? AND op = 'all_reduce' AND message_bytes > 1e7",
        [MLP],
    )
    kineto = [r for r in got if r["source"] == "pytorch_profiler"]
    inspector = [r for r in got if r["source"] == "nccl_inspector"]
    assert (len(kineto), len(inspector)) == (2 * 6, 2 * 23)  # + the 100 MB first step, both directions
    # the union of both ranks' kernel windows over-counts by up to 5.7 % (README); the Inspector's
    # host-seen kernel windows are wider still
    assert round(max(r["window_ratio"] for r in kineto), 3) == 1.057
    assert round(max(r["window_ratio"] for r in inspector), 3) == 1.083
    # byte order: every bucket is its prediction plus NCCL's framing (4 B a message: 55–57 messages of a
    # 50 MB bucket, 104 of the first step's 100 MB), back-to-back buckets parted at a message boundary
    framing = {
        (r["predicted_bytes"] > 6e7, round(r["ratio"] * r["predicted_bytes"]) - r["predicted_bytes"])
        for r in got
    }
    assert framing == {(False, 220), (False, 224), (False, 228), (True, 416)}, framing


def test_gpu_busbw_is_algbw_times_the_ring_factor_of_the_communicator_size(con) -> None:
    """Issue 34: every source's all-reduce bus bandwidth is its algorithm bandwidth × 2(N−1)/N with the
    communicator's real N. NCCL's example plugin prints no size (its 126 rows read 0 GB/s with N taken
    as 1): N comes from NCCL's log of its communicator, whose commId is the plugin's CommHash."""
    got = rows(
        con,
        "SELECT run, source, n_ranks, gpu_algbw_gbs AS alg, gpu_busbw_gbs AS bus FROM collective_wire "
        "WHERE op = 'all_reduce'",
    )
    assert {(r["run"], r["source"], r["n_ranks"]) for r in got} == {
        (CNN, "nccl_profiler", 2),
        (CNN, "pytorch_profiler", 2),
        (MLP, "nccl_inspector", 2),
        (MLP, "pytorch_profiler", 2),
        (W4, "nccl_profiler", 4),
        (W4, "pytorch_profiler", 4),
    }
    assert sum(r["source"] == "nccl_profiler" for r in got) == 126
    for r in got:
        n = SIZES[r["run"]]
        assert r["alg"] > 0
        assert r["bus"] == pytest.approx(r["alg"] * 2 * (n - 1) / n, rel=1e-12)
    sizes = rows(con, "SELECT DISTINCT run, source, n_ranks, n_ranks_from FROM collective_calls ORDER BY ALL")
    assert {(r["run"], r["source"]): (r["n_ranks"], r["n_ranks_from"]) for r in sizes} == {
        (CNN, "nccl_profiler"): (2, "nccl log"),
        (CNN, "pytorch_profiler"): (2, "source"),
        (MLP, "nccl_inspector"): (2, "source"),
        (MLP, "pytorch_profiler"): (2, "source"),
        (W4, "nccl_profiler"): (4, "nccl log"),
        (W4, "pytorch_profiler"): (4, "source"),
    }
    # the Inspector's own busbw is the same formula of its own algbw (gpu_busbw_gbs is the Inspector's)
    inspector = rows(
        con,
        "SELECT algbw_gbs, busbw_gbs, n_ranks FROM collective_calls WHERE source = 'nccl_inspector' "
        "AND op = 'all_reduce'",
    )
    assert len(inspector) == 48
    assert all(
        r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * 2 * (r["n_ranks"] - 1) / r["n_ranks"])
        for r in inspector
    )


def test_gpu_bandwidths_of_all_gathers_and_broadcasts_use_nccl_tests_factors(con) -> None:
    """nccl-tests' figures: an all-gather's algorithm bandwidth is its N·S output over the sender's
    span and its bus bandwidth (N−1)/N of that, a broadcast's both S over the span: every such row of
    NCCL's plugin, from its call's times (2 and 4 ranks, so neither factor is 1/2 by chance)."""
    got = rows(
        con,
        "SELECT w.op, w.n_ranks AS n, w.message_bytes AS s, c.end_ns - c.start_ns AS span, "
        "w.gpu_algbw_gbs AS alg, w.gpu_busbw_gbs AS bus FROM collective_wire AS w "
        "JOIN collective_calls AS c ON c.run = w.run AND c.source = w.source AND c.comm = w.comm "
        "AND c.seq = w.seq AND c.rank = w.src_rank "
        "WHERE w.source = 'nccl_profiler' AND w.op IN ('all_gather', 'broadcast')",
    )
    assert sorted({(r["op"], r["n"]) for r in got}) == [
        ("all_gather", 2), ("all_gather", 4), ("broadcast", 2), ("broadcast", 4)
    ]  # fmt: skip
    for r in got:
        gather = r["op"] == "all_gather"
        assert r["alg"] == pytest.approx(r["s"] * (r["n"] if gather else 1) / r["span"], rel=1e-12), r
        assert r["bus"] == pytest.approx(r["alg"] * ((r["n"] - 1) / r["n"] if gather else 1), rel=1e-12), r


def test_without_nccl_logs_the_plugins_communicator_size_is_the_ranks_that_recorded_it(
    tmp_path: Path,
) -> None:
    run = tmp_path / "runs" / W4
    shutil.copytree(FOUR / W4, run, ignore=shutil.ignore_patterns("nccl.*.log", "kineto-rank*.json"))
    answers = ingested_rows(
        tmp_path / "runs",
        tmp_path / "data",
        sizes="SELECT DISTINCT source, n_ranks, n_ranks_from FROM collective_calls",
        wire="SELECT gpu_algbw_gbs AS alg, gpu_busbw_gbs AS bus FROM collective_wire WHERE op = 'all_reduce'",
    )
    assert answers["sizes"] == [{"source": "nccl_profiler", "n_ranks": 4, "n_ranks_from": "ranks seen"}]
    # each of the 19 all-reduces on the 4 links of the rank-order ring (no log declares NCCL's rings)
    assert len(answers["wire"]) == 19 * 4
    assert all(r["bus"] == pytest.approx(r["alg"] * 1.5, rel=1e-12) for r in answers["wire"])


def test_coverage_spans_from_the_first_start_less_the_stated_clock_error(con) -> None:
    """A source covers the link from its first collective's start, less the clock error its files
    state (bytes of the first collective may leave that early), to its last attributed frame."""
    got = rows(
        con,
        "SELECT c.run, c.source, c.span_start_ns, c.span_end_ns, "
        "  (SELECT min(w.start_ns) FROM collective_wire AS w WHERE w.run = c.run AND w.source = c.source "
        "   AND w.src_worker = c.src_worker AND w.dst_worker = c.dst_worker) AS first_ns, "
        "  (SELECT max(w.last_byte_ns) FROM collective_wire AS w WHERE w.run = c.run AND w.source = c.source "
        "   AND w.src_worker = c.src_worker AND w.dst_worker = c.dst_worker) AS last_ns, "
        "  (SELECT max(k.error_ns) FROM collective_clocks AS k "
        "   WHERE k.run = c.run AND k.source = c.source) AS err "
        "FROM collective_coverage AS c",
    )
    assert len(got) >= 16
    assert {r["err"] > 1000 for r in got} == {True}  # every source states an error of its own
    for r in got:
        assert r["span_start_ns"] == r["first_ns"] - r["err"], r
        assert r["span_end_ns"] == r["last_ns"], r


def test_acceptance_every_all_reduce_matched_and_within_two_percent(con) -> None:
    """Issue 28, point 4, per run and source: every all-reduce has bytes on the wire, each above 1 MB is
    within 2 % of its algorithm's prediction on every link, and the matched bytes are within 1 % of
    the TCP payload over the span the source covers."""
    instances = rows(
        con,
        "SELECT run, source, count(DISTINCT seq) AS n, "
        "count(DISTINCT seq) FILTER (WHERE frames > 0) AS linked "
        "FROM collective_wire WHERE op = 'all_reduce' GROUP BY ALL ORDER BY ALL",
    )
    assert {(r["run"], r["source"]): (r["n"], r["linked"]) for r in instances} == {
        (CNN, "nccl_profiler"): (19, 19),
        (CNN, "pytorch_profiler"): (3, 3),
        (MLP, "nccl_inspector"): (24, 24),
        (MLP, "pytorch_profiler"): (6, 6),
        (W4, "nccl_profiler"): (19, 19),
        (W4, "pytorch_profiler"): (3, 3),
    }
    worst = rows(
        con,
        "SELECT max(abs(ratio - 1)) AS worst, count(*) AS n FROM collective_wire "
        "WHERE op = 'all_reduce' AND message_bytes > 1e6",
    )[0]
    assert worst["n"] == 2 * (17 + 3 + 24 + 6) + 4 * (17 + 3)  # markers and step all-reduces, per link
    assert worst["worst"] < 0.02
    coverage = rows(
        con,
        "SELECT run, source, src_worker, dst_worker, matched_share FROM collective_coverage "
        "WHERE matched_bytes > 1e6 ORDER BY ALL",
    )
    assert len(coverage) == 2 * 2 + 2 * 2 + 4 * 2  # the ring links of each run, per source
    assert min(r["matched_share"] for r in coverage) > 0.99


def test_the_sources_agree_where_they_overlap(con) -> None:
    """Each collective of a PyTorch trace is one collective of NCCL's plugin (or Inspector) of the same
    rank, operation and size whose GPU span overlaps it; their starts differ by the two clocks' offset
    (CUPTI's host-converted time vs the GPU's global timer), well under a millisecond."""
    got = rows(
        con,
        "SELECT k.run, k.rank, k.seq, count(o.seq) AS matches, max(abs(k.start_ns - o.start_ns)) AS apart, "
        "count(o.seq) FILTER (WHERE o.step = k.step) AS same_step "
        "FROM collective_calls AS k LEFT JOIN collective_calls AS o ON o.run = k.run AND o.rank = k.rank "
        "AND o.op = k.op AND o.bytes = k.bytes AND o.source <> k.source "
        "AND o.start_ns < k.end_ns AND k.start_ns < o.end_ns "
        "WHERE k.source = 'pytorch_profiler' GROUP BY ALL",
    )
    assert len(got) == 2 * 3 + 2 * 6 + 4 * 3
    assert {r["matches"] for r in got} == {1}
    # the same step: the trace's ProfilerStep#, the plugin's and Inspector's from the training log's
    # Batch lines (train_steps: step k ends at the k-th Batch line)
    assert {r["same_step"] for r in got} == {1}
    assert max(r["apart"] for r in got) < 1_000_000


def test_every_source_clock_agrees_with_the_capture(con) -> None:
    got = rows(con, "SELECT run, file, ok, lead_ns, error_ns, checked FROM collective_clock_check")
    assert len(got) == 2 + 2 + 4 + 4 + 2 + 2  # every file with collectives of 64 KiB or more
    assert all(r["ok"] for r in got)
    # NCCL's plugin times kernels with the GPU's global timer, 0.23 ms ahead of the host clock here
    assert max(r["lead_ns"] for r in got) < 250_000


def test_a_rank_clock_shifted_by_50_ms_fails_the_check_with_a_clear_message(tmp_path: Path) -> None:
    run = tmp_path / "runs" / CNN
    shutil.copytree(PROFILERS / CNN, run, ignore=shutil.ignore_patterns("nccl-profiler-example_*"))
    trace = run / "kineto-rank1.json"
    text = trace.read_text()
    assert text.count('"baseTimeNanoseconds": 1790857026000000000') == 1
    trace.write_text(
        text.replace(
            '"baseTimeNanoseconds": 1790857026000000000', '"baseTimeNanoseconds": 1790857026050000000'
        )
    )
    summary = ingest([tmp_path / "runs"], tmp_path / "data", jobs=1)
    assert not summary.problems, summary.problems
    con = open_catalog(tmp_path / "data")
    try:
        got = {r["rank"]: r for r in rows(con, "SELECT * FROM collective_clock_check")}
    finally:
        con.close()
    assert got[0]["ok"]
    assert not got[1]["ok"]
    assert got[1]["lead_ns"] > 30_000_000
    assert got[1]["message"].startswith(
        "kineto-rank1.json rank 1 (W2): the bytes of all_reduce #1 left 32.784 ms before the collective's "
        "recorded start, more than the 1.000 ms its clock mapping (baseTimeNanoseconds) allows"
    )


def test_stragglers_name_the_rank_that_started_last(con) -> None:
    got = rows(
        con,
        "SELECT seq, step, ranks, last_rank, last_worker, spread_ns, wait_ns FROM collective_stragglers "
        "WHERE run = ? AND source = 'pytorch_profiler' ORDER BY seq",
        [CNN],
    )
    # on cnn3m rank 0 reaches every profiled all-reduce 15-16 ms after rank 1, which waits
    assert [(r["step"], r["ranks"], r["last_rank"], r["last_worker"]) for r in got] == [
        (4, 2, 0, "W1"),
        (5, 2, 0, "W1"),
        (6, 2, 0, "W1"),
    ]
    assert [round(r["spread_ns"] / 1e6, 1) for r in got] == [14.7, 15.0, 16.5]
    four = rows(con, "SELECT count(*) AS n, sum(ranks) AS r FROM collective_stragglers WHERE run = ?", [W4])[
        0
    ]
    assert four == {"n": 3 + 24, "r": 4 * (3 + 24)}


def test_step_breakdown_splits_each_profiled_step(con) -> None:
    got = rows(
        con,
        "SELECT worker, step, timed_by, step_ns, compute_ns, communication_ns, overlap_ns, exposed_ns, "
        "busiest_link, link_busy_ns FROM step_breakdown WHERE run = ? ORDER BY worker, step",
        [CNN],
    )
    assert [(r["worker"], r["step"], r["timed_by"]) for r in got] == [
        (w, s, "pytorch_profiler") for w in ("W1", "W2") for s in (4, 5, 6)
    ]
    w1 = got[0]
    assert w1["step_ns"] == 17280881  # gpu_user_annotation ProfilerStep#4 (dur 17,280.881 µs)
    assert w1["communication_ns"] == 7475659  # its one NCCL kernel
    assert w1["overlap_ns"] == 0  # cnn3m's one bucket is reduced after the backward pass's kernels
    assert w1["exposed_ns"] == w1["communication_ns"]
    assert w1["busiest_link"] == "W2"
    for r in got:
        assert 0 < r["compute_ns"] < r["step_ns"]
        assert 0 <= r["overlap_ns"] <= min(r["compute_ns"], r["communication_ns"])
        assert 0 < r["link_busy_ns"] < r["step_ns"]


def test_step_breakdown_gives_the_iteration_beside_the_gpu_span_and_the_gpu_idle_time(con) -> None:
    """Issue 34: on the 4-rank run the GPU span of rank 0's step 4 is 37 ms of a 70 ms iteration; the
    step's GPU idle time and shares are given beside it."""
    got = rows(con, "SELECT * FROM step_breakdown ORDER BY run, rank, step")
    assert len(got) == 2 * 3 + 2 * 3 + 4 * 3
    r = next(r for r in got if (r["run"], r["rank"], r["step"]) == (W4, 0, 4))
    assert r["step_ns"] == 37264241  # gpu_user_annotation ProfilerStep#4 (dur 37,264.241 µs)
    assert r["iteration_ns"] == 70284281  # user_annotation ProfilerStep#4 on the host (70,284.281 µs)
    assert (r["compute_ns"], r["memory_ns"], r["communication_ns"]) == (858328, 39649, 23118770)
    assert r["gpu_idle_ns"] == 13247494  # the rest of the span: no kernel, memcpy or memset
    assert round(r["gpu_idle_share"], 4) == 0.3555
    assert round(r["iteration_idle_share"], 4) == 0.6583  # 1 − 24.0 ms busy / 70.3 ms
    for r in got:
        busy = r["step_ns"] - r["gpu_idle_ns"]
        assert 0 < r["gpu_idle_ns"] < r["step_ns"] < r["iteration_ns"]
        assert max(r["compute_ns"], r["communication_ns"], r["memory_ns"]) <= busy
        assert busy <= r["compute_ns"] + r["communication_ns"] + r["memory_ns"]
        assert r["gpu_idle_share"] + r["compute_share"] + r["non_compute_share"] == pytest.approx(1)
        assert r["communication_share"] == r["communication_ns"] / r["step_ns"]
        assert r["hidden_share"] == r["overlap_ns"] / r["communication_ns"]
        assert r["gpu_idle_share"] < r["iteration_idle_share"] < 1
    # the iteration is the host's step-to-step period: each step starts as the one before ends
    starts = rows(con, "SELECT run, rank, step, start_ns FROM profiler_steps ORDER BY ALL")
    period = {
        (a["run"], a["rank"], a["step"]): b["start_ns"] - a["start_ns"]
        for a, b in pairwise(starts)
        if (a["run"], a["rank"]) == (b["run"], b["rank"])
    }
    assert len(period) == 2 * 2 + 2 * 2 + 4 * 2
    assert all(
        abs(r["iteration_ns"] - period[(r["run"], r["rank"], r["step"])]) < 100_000
        for r in got
        if (r["run"], r["rank"], r["step"]) in period
    )


@pytest.fixture(scope="module")
def hta() -> dict[str, dict]:
    """Meta's HTA 0.5.0 on the corpus traces (bench/hta_breakdown.py in HTA's own venv), as a user runs
    it ('default': each event rounded inwards to whole µs) and with HTA_DISABLE_NS_ROUNDING=1 ('exact')."""
    if not HTA_PYTHON.is_file():
        pytest.fail(
            f"{HTA_PYTHON} is missing: `make .venv-hta/.installed` builds HTA's venv (make test does)"
        )
    runs = [str(PROFILERS / CNN), str(PROFILERS / MLP), str(FOUR / W4)]
    proc = subprocess.run(
        [str(HTA_PYTHON), str(REPO / "bench" / "hta_breakdown.py"), *runs],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["runs"]


@pytest.mark.slow
def test_step_breakdown_is_htas_temporal_breakdown_of_each_iteration(con, hta) -> None:
    """Issue 34, point 6: per step, GPU idle, compute and non-compute time and the comm/comp overlap are
    HTA's for the iteration's GPU events: to the ns without HTA's rounding, within 1 % of the step with
    it; over the whole trace (HTA's per-rank report, without the last step) compute and non-compute are
    the sums over those steps, while HTA's idle adds the gaps between steps (README)."""
    steps = {(r["run"], r["rank"], r["step"]): r for r in rows(con, "SELECT * FROM step_breakdown")}
    for mode in ("exact", "default"):
        compared = 0
        for run, both in hta.items():
            result = both[mode]
            for it in result["iterations"]:
                s = steps[(run, it["rank"], it["step"])]
                non_compute = s["step_ns"] - s["compute_ns"] - s["gpu_idle_ns"]
                ours = (s["step_ns"], s["gpu_idle_ns"], s["compute_ns"], non_compute, s["overlap_ns"])
                theirs = (
                    it["kernel_us"] * 1e3,
                    it["idle_us"] * 1e3,
                    it["compute_us"] * 1e3,
                    it["non_compute_us"] * 1e3,
                    it["overlap_ratio"] * s["communication_ns"],  # HTA's ratio, in % to 2 decimals
                )
                if mode == "exact":
                    assert max(abs(a - b) for a, b in zip(ours[:4], theirs[:4], strict=True)) <= 100, (
                        run,
                        it,
                    )
                    assert abs(ours[4] - theirs[4]) <= 1e-4 * s["communication_ns"]
                else:
                    worst = max(abs(a - b) for a, b in zip(ours, theirs, strict=True))
                    assert worst <= 0.01 * s["step_ns"], (run, it, s)
                compared += 1
            for whole in result["trace"]:
                kept = sorted((k for k in steps if k[:2] == (run, whole["rank"])), key=lambda k: k[2])[:-1]
                compute = sum(steps[k]["compute_ns"] for k in kept)
                span = steps[kept[-1]]["end_ns"] - steps[kept[0]]["start_ns"]
                tolerance = 1000 if mode == "exact" else 0.01 * span
                assert abs(whole["compute_us"] * 1e3 - compute) <= tolerance, (mode, run, whole)
                non_compute = sum(
                    steps[k]["step_ns"] - steps[k]["compute_ns"] - steps[k]["gpu_idle_ns"] for k in kept
                )
                assert abs(whole["non_compute_us"] * 1e3 - non_compute) <= 0.001 * span, (mode, run, whole)
                # HTA's idle also counts the gaps between the steps' GPU spans, which no step holds
                gaps = sum(steps[b]["start_ns"] - steps[a]["end_ns"] for a, b in pairwise(kept))
                assert gaps > 0
                idle = sum(steps[k]["gpu_idle_ns"] for k in kept)
                assert whole["idle_us"] * 1e3 >= idle + gaps - tolerance, (mode, run, whole)
        assert compared == 2 * 3 + 2 * 3 + 4 * 3


def test_without_nccl_logs_each_rank_is_the_capture_of_its_number(tmp_path: Path) -> None:
    """A run without NCCL's logs (gloo, or logs not collected) pairs a trace's rank with the capture of
    its number, as the runners name them: worker-0-tcpdump.pcap is rank 0's host."""
    run = tmp_path / "runs" / CNN
    shutil.copytree(
        PROFILERS / CNN, run, ignore=shutil.ignore_patterns("nccl-profiler-example_*", "nccl.*.log")
    )
    answers = ingested_rows(
        tmp_path / "runs",
        tmp_path / "data",
        got="SELECT DISTINCT rank, worker, worker_from FROM collective_calls ORDER BY rank",
        captures="SELECT capture, worker FROM workers ORDER BY capture",
    )
    got, captures = answers["got"], answers["captures"]
    assert [(c["capture"], c["worker"]) for c in captures] == [
        ("worker-0-tcpdump", "W1"),
        ("worker-1-tcpdump", "W2"),
    ]
    assert got == [
        {"rank": 0, "worker": "W1", "worker_from": "capture"},
        {"rank": 1, "worker": "W2", "worker_from": "capture"},
    ]


WIRE_FRAMES = (
    "SELECT seq, src_worker, frames, bytes, first_byte_ns, last_byte_ns FROM collective_wire "
    "WHERE source = 'pytorch_profiler' ORDER BY seq, src_worker"
)


def test_run_toml_host_clock_offsets_put_the_ranks_on_one_clock(con, tmp_path: Path) -> None:
    """`tracecore run` records each host's clock − the runner's in run.toml [[hosts]]; stragglers compare
    the ranks' starts on the runner's clock. Declaring W1's host 2 ms ahead and W2's 5 ms behind moves
    rank 0's starts 2 ms earlier there and rank 1's 5 ms later, so rank 0 (which started last) trails
    by 7 ms less. collective_wire reads
    each link in its sender's capture, on that host's own clock: its frames are those found without
    offsets."""
    run = tmp_path / "runs" / CNN
    shutil.copytree(PROFILERS / CNN, run, ignore=shutil.ignore_patterns("nccl-profiler-example_*"))
    hosts = [("w0", "10.77.0.1", 2_000_000, 40_000), ("w1", "10.77.0.2", -5_000_000, 60_000)]
    toml = (run / "run.toml").read_text() + "".join(
        f'\n[[hosts]]\nname = "{n}"\nip = "{ip}"\nclock_offset_ns = {off}\nclock_rtt_ns = {rtt}\n'
        for n, ip, off, rtt in hosts
    )
    (run / "run.toml").write_text(toml)
    answers = ingested_rows(
        tmp_path / "runs",
        tmp_path / "data",
        clocks="SELECT host, ip, offset_ns, rtt_ns FROM host_clocks ORDER BY host",
        spreads="SELECT * FROM collective_stragglers ORDER BY seq",
        checks="SELECT ok FROM collective_clock_check",
        calls="SELECT seq, rank, start_ns, end_ns, call_start_ns, clock_offset_ns, instance_start_ns "
        "FROM collective_calls WHERE source = 'pytorch_profiler' ORDER BY seq, rank",
        wire=WIRE_FRAMES,
    )
    clocks, spreads, checks, calls = (answers[k] for k in ("clocks", "spreads", "checks", "calls"))
    assert clocks == [dict(zip(("host", "ip", "offset_ns", "rtt_ns"), h, strict=True)) for h in hosts]
    # an instance spans its ranks on the runner's clock: each rank's start less its host's offset
    by_seq: dict[int, list[dict]] = {}
    for c in calls:
        by_seq.setdefault(c["seq"], []).append(c)
    assert sorted(by_seq) == [0, 1, 2]
    for ranks in by_seq.values():
        assert [c["clock_offset_ns"] for c in ranks] == [2_000_000, -5_000_000]
        assert {c["instance_start_ns"] for c in ranks} == {
            min(c["start_ns"] - c["clock_offset_ns"] for c in ranks)
        }
    assert [(r["last_rank"], round(r["spread_ns"] / 1e6, 1)) for r in spreads] == [
        (0, 7.7),
        (0, 8.0),
        (0, 9.5),
    ]
    for s in spreads:  # every start, end and call on the runner's clock
        ranks = by_seq[s["seq"]]
        t, e, k = (
            {c["rank"]: c[col] - c["clock_offset_ns"] for c in ranks}
            for col in ("start_ns", "end_ns", "call_start_ns")
        )
        assert (s["first_start_ns"], s["last_start_ns"]) == (min(t.values()), max(t.values()))
        assert s["wait_ns"] == sum(max(t.values()) - v for v in t.values())
        assert (s["last_rank"], s["last_caller_rank"]) == (max(t, key=t.get), max(k, key=k.get))
        assert s["call_spread_ns"] == max(k.values()) - min(k.values())
        assert s["end_spread_ns"] == max(e.values()) - min(e.values())
    assert [r["ok"] for r in checks] == [True, True]  # each rank's bytes still follow its own start
    assert answers["wire"] == rows(con, WIRE_FRAMES.replace("WHERE", "WHERE run = ? AND"), [CNN])


def test_the_timeline_figure_draws_a_step_of_collectives_above_the_link_load(con) -> None:
    from tracecore import figures
    from tracecore.figures import render

    chart = figures.build(con, "collective_timeline", [MLP])
    spec = chart.to_dict()
    (block,) = spec["vconcat"]
    spans, load = (part["data"]["values"] for part in block["vconcat"])
    assert block["vconcat"][0]["title"] == f"{MLP} · step 5 · nccl_inspector"
    assert {s["lane"] for s in spans} == {"rank 0 (W1)", "rank 1 (W2)", "W1→W2 wire", "W2→W1 wire"}
    # step 5's two buckets on each rank and on each link, one after the other
    assert sorted(s["what"] for s in spans if s["lane"] == "W2→W1 wire") == [
        "all_reduce #11 (50.43 MB)",
        "all_reduce #12 (50.35 MB)",
    ]
    assert {r["link"] for r in load} == {"W1→W2", "W2→W1"}
    assert max(r["gbps"] for r in load) > 20
    # the ranks' collectives in time order, the same spec every time (collective_calls has no order)
    starts = [(s["t0_ms"], s["t1_ms"]) for s in spans if s["kind"] == "collective"]
    assert len(starts) == 4
    assert starts == sorted(starts)
    assert render.to_png(chart, scale=1)[:8] == b"\x89PNG\r\n\x1a\n"
    assert figures.get("collective_timeline").shown_when(con, [MLP])


def test_the_report_draws_the_timeline_for_runs_with_collectives(gpu_data: Path, tmp_path: Path) -> None:
    from tracecore.report import write_report

    page = write_report(gpu_data, tmp_path / "report", [CNN]).read_text(encoding="utf-8")
    assert 'id="fig-collective_timeline"' in page
    assert f"{CNN} · step 5 · nccl_profiler" in page


def test_ingest_reports_bad_records_with_their_file_and_line(tmp_path: Path) -> None:
    run = tmp_path / "runs" / CNN
    shutil.copytree(PROFILERS / CNN, run, ignore=shutil.ignore_patterns("nccl-profiler-example_*"))
    lines = (run / "kineto-rank1.json").read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if '"name": "record_param_comms"' in line)
    lines[at + 1] = lines[at + 1].replace('"ts": ', '"ts": ,')
    (run / "kineto-rank1.json").write_text("\n".join(lines))
    (run / "nccl-inspector").mkdir()
    good = (PROFILERS / MLP / "nccl-inspector" / "vm-pid974.log").read_text().splitlines()[0]
    (run / "nccl-inspector" / "vm-pid1.log").write_text(good + '\n{"header": {"rank": \n')
    summary = ingest([tmp_path / "runs"], tmp_path / "data", jobs=1)
    assert summary.runs == [CNN]  # ingested, with the two files' bad lines reported
    problems = {Path(path).name: why for path, why in summary.problems}
    assert problems["kineto-rank1.json"].startswith(f"1 unparseable line(s); first: line {at}: ")
    assert problems["vm-pid1.log"].startswith("1 unparseable line(s); first: line 2: ")
    con = open_catalog(tmp_path / "data")
    try:
        files = rows(con, "SELECT file, count(*) AS n FROM collectives GROUP BY file ORDER BY file")
    finally:
        con.close()
    # the good data stays: rank 1's first call survives through its nccl:all_reduce annotation
    assert files == [
        {"file": "kineto-rank0.json", "n": 3},
        {"file": "kineto-rank1.json", "n": 3},
        {"file": "nccl-inspector/vm-pid1.log", "n": 1},
    ]


# ---- columns checked against the packets (issue 35, item 5) -----------------------------------------
def data_frames(con, run: str) -> dict[tuple[str, str], list[int]]:
    """Times of each directed worker link's TCP payload frames on its data connections (those carrying
    at least 10 % of the link's busiest connection's payload), sorted, from the packets in Python."""
    got = rows(
        con,
        "SELECT s.worker AS src, d.worker AS dst, p.src_port, p.dst_port, p.ts_ns, p.l4_payload_len AS n "
        "FROM packets AS p JOIN workers AS s ON s.run = p.run AND s.ip = p.src_ip "
        "JOIN workers AS d ON d.run = p.run AND d.ip = p.dst_ip "
        "WHERE p.run = ? AND p.ip_proto = 6 AND p.l4_payload_len > 0 ORDER BY p.ts_ns",
        [run],
    )
    payload: dict[tuple, int] = {}
    for r in got:
        key = (r["src"], r["dst"], r["src_port"], r["dst_port"])
        payload[key] = payload.get(key, 0) + r["n"]
    top: dict[tuple, int] = {}
    for key, n in payload.items():
        top[key[:2]] = max(top.get(key[:2], 0), n)
    frames: dict[tuple[str, str], list[int]] = {}
    for r in got:
        key = (r["src"], r["dst"], r["src_port"], r["dst_port"])
        if payload[key] >= 0.1 * top[key[:2]]:
            frames.setdefault(key[:2], []).append(r["ts_ns"])
    return frames


def busy(times: list[int], idle_ns: int = 1_000_000) -> int:
    """The gaps of at most idle_ns between consecutive frames, summed (the views' busy time)."""
    return sum(b - a for a, b in pairwise(times) if b - a <= idle_ns)


@pytest.mark.parametrize("run", [CNN, W4])
def test_every_collective_is_busy_in_the_gaps_of_its_frames_and_its_gbps_is_in_bits(con, run: str) -> None:
    """On the runs whose steps are apart in time, the frames of a collective of at least 1 MB on a link
    are the link's data frames from its first to its last; busy_ns is their gaps of at most 1 ms and
    gbps its bytes·8 over that (the veth links of the corpus ran at 16-36 Gbit/s)."""
    frames = data_frames(con, run)
    got = rows(
        con,
        "SELECT src_worker, dst_worker, first_byte_ns, last_byte_ns, frames, bytes, busy_ns, gbps "
        "FROM collective_wire WHERE run = ? AND message_bytes >= 1000000",
        [run],
    )
    assert len(got) == {CNN: 41, W4: 83}[run]
    for r in got:
        link = (r["src_worker"], r["dst_worker"])
        times = [t for t in frames[link] if r["first_byte_ns"] <= t <= r["last_byte_ns"]]
        assert r["frames"] == len(times), r
        assert r["busy_ns"] == busy(times), r
        assert r["gbps"] == pytest.approx(r["bytes"] * 8 / busy(times), rel=1e-12), r
        assert 15 < r["gbps"] < 40, r


def test_an_ll_collective_puts_twice_its_data_on_the_wire(con) -> None:
    """NCCL's LL protocol sends a flag word with every data word: the 416 B broadcast (LL, one channel)
    down each link of its chain is predicted 832 B and carries those plus NCCL's 4 B message frame; the
    4-rank run's 8 B all-gather puts 3 · 8 · 2 = 48 B and three frames on each link of its ring."""
    got = rows(
        con,
        "SELECT w.run, w.op, w.src_worker, w.predicted_bytes, w.bytes, c.protocol FROM collective_wire AS w "
        "JOIN (SELECT DISTINCT run, source, seq, protocol FROM collective_calls) AS c "
        "ON c.run = w.run AND c.source = w.source AND c.seq = w.seq "
        "WHERE w.source = 'nccl_profiler' "
        "AND (w.op, w.message_bytes) IN (('broadcast', 416), ('all_gather', 8))",
    )
    assert {r["protocol"] for r in got} == {"LL"}
    assert sorted((r["run"], r["op"], r["src_worker"], r["predicted_bytes"], r["bytes"]) for r in got) == [
        (CNN, "all_gather", "W1", 16, 20),
        (CNN, "all_gather", "W2", 16, 20),
        (CNN, "broadcast", "W1", 832, 836),
        (W4, "all_gather", "W1", 48, 60),
        (W4, "all_gather", "W2", 48, 60),
        (W4, "all_gather", "W3", 48, 60),
        (W4, "all_gather", "W4", 48, 60),
        (W4, "broadcast", "W1", 832, 836),
        (W4, "broadcast", "W2", 832, 836),
        (W4, "broadcast", "W3", 832, 836),
    ]


def instance_starts(con, where: str = "") -> dict[tuple, dict[int, dict]]:
    """Each instance's ranks: their start, end and call start less their host's clock offset."""
    got = rows(
        con,
        "SELECT run, source, comm, seq, rank, start_ns - coalesce(clock_offset_ns, 0) AS t, "
        "end_ns - coalesce(clock_offset_ns, 0) AS e, call_start_ns - coalesce(clock_offset_ns, 0) AS c "
        f"FROM collective_calls WHERE start_ns IS NOT NULL {where}",
    )
    out: dict[tuple, dict[int, dict]] = {}
    for r in got:
        out.setdefault((r["run"], r["source"], r["comm"], r["seq"]), {})[r["rank"]] = r
    return out


def test_stragglers_wait_is_every_ranks_wait_for_the_last(con) -> None:
    """wait_ns sums each rank's wait from its own start to the last rank's (two ranks: the spread; the
    4-rank run's three waiting ranks wait more than the spread in every collective)."""
    expected = {
        key: (max(r["t"] for r in ranks.values()) - min(r["t"] for r in ranks.values()),
              sum(max(r["t"] for r in ranks.values()) - r["t"] for r in ranks.values()))
        for key, ranks in instance_starts(con).items()
        if len(ranks) >= 2
    }  # fmt: skip
    got = rows(con, "SELECT run, source, comm, seq, ranks, spread_ns, wait_ns FROM collective_stragglers")
    assert {
        (r["run"], r["source"], r["comm"], r["seq"]): (r["spread_ns"], r["wait_ns"]) for r in got
    } == expected
    four = [r for r in got if r["run"] == W4]
    assert len(four) == 27
    assert all(r["wait_ns"] > r["spread_ns"] for r in four)


def test_step_breakdown_busiest_link_is_the_one_its_data_frames_keep_busy_longest(con) -> None:
    """Per step and worker, each link's busy time is the gaps of at most 1 ms between the frames with
    payload the worker sent on it in the step; the busiest is the longest. On the 4-rank run each worker
    sends its data to its ring successor and ACKs to its predecessor: ACK-only links are never busy."""
    got = rows(
        con,
        "SELECT run, worker, step, start_ns, end_ns, busiest_link, link_busy_ns FROM step_breakdown "
        "WHERE run IN (?, ?)",
        [CNN, W4],
    )
    assert len(got) == 2 * 3 + 4 * 3
    for run in (CNN, W4):
        sent = rows(
            con,
            "SELECT s.worker AS src, d.worker AS dst, p.ts_ns FROM packets AS p "
            "JOIN workers AS s ON s.run = p.run AND s.ip = p.src_ip JOIN workers AS d ON d.run = p.run "
            "AND d.ip = p.dst_ip WHERE p.run = ? AND p.l4_payload_len > 0 ORDER BY p.ts_ns",
            [run],
        )
        for r in (r for r in got if r["run"] == run):
            per_link = {
                dst: busy([s["ts_ns"] for s in sent if (s["src"], s["dst"]) == (r["worker"], dst)
                           and r["start_ns"] <= s["ts_ns"] <= r["end_ns"]])
                for dst in {s["dst"] for s in sent if s["src"] == r["worker"]}
            }  # fmt: skip
            assert r["link_busy_ns"] == max(per_link.values()), (r, per_link)
            assert per_link[r["busiest_link"]] == r["link_busy_ns"], (r, per_link)
            assert sorted([0, *per_link.values()])[-2] < r["link_busy_ns"]  # one busiest
    ring = {"W1": "W2", "W2": "W3", "W3": "W4", "W4": "W1"}  # NCCL's declared ring of the 4-rank run
    assert {(r["worker"], r["busiest_link"]) for r in got if r["run"] == W4} == set(ring.items())
    acks = rows(
        con,
        "SELECT s.worker AS src, d.worker AS dst, count(*) FILTER (WHERE p.l4_payload_len = 0) AS acks "
        "FROM packets AS p JOIN workers AS s ON s.run = p.run AND s.ip = p.src_ip "
        "JOIN workers AS d ON d.run = p.run AND d.ip = p.dst_ip WHERE p.run = ? GROUP BY ALL",
        [W4],
    )
    # each worker ACKs its predecessor's data in thousands of frames: a link the ACKs alone would make busiest
    assert all(a["acks"] > 2500 for a in acks if ring[a["dst"]] == a["src"])


LATE = f"{CNN}-late"  # both traces' clocks moved 0.5 ms back: within the 1 ms their mapping states
UDP = f"{CNN}-udp"  # UDP datagrams from W1 to W2 in W1's capture; a second communicator of two ranks
SECOND_COMM = "0x5eed00005eed0000"


def _with_datagrams(pcap: Path, every_ns: int, payload: int) -> int:
    """Rewrite the classic µs pcap `pcap` with a UDP datagram of `payload` bytes from W1 to W2 every
    `every_ns` from its first packet to its last, in time order, cut at the capture's 128 B snap
    length as tcpdump cut the rest; returns how many."""
    data = pcap.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1", "the corpus' captures are little-endian µs pcaps"
    records, off = [], 24
    while off + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, off)
        records.append(((sec * 1_000_000 + usec) * 1000, data[off : off + 16 + incl]))
        off += 16 + incl
    ether = next(r[16:30] for _, r in records if r[16 + 26 : 16 + 34] == bytes([10, 77, 0, 1, 10, 77, 0, 2]))
    udp = dpkt.udp.UDP(sport=40000, dport=40001, data=b"u" * payload)
    ip = dpkt.ip.IP(src=bytes([10, 77, 0, 1]), dst=bytes([10, 77, 0, 2]), p=17, ttl=64, data=udp)
    frame = ether + bytes(ip)
    first, last = records[0][0], records[-1][0]
    added = [
        (t, struct.pack("<IIII", t // 10**9, t % 10**9 // 1000, 128, len(frame)) + frame[:128])
        for t in range(first + every_ns // 2, last, every_ns)
    ]
    merged = sorted(records + added, key=lambda r: r[0])  # stable: a datagram after a packet of its µs
    pcap.write_bytes(data[:24] + b"".join(r for _, r in merged))
    return len(added)


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory):
    """cnn3m's traces, logs and captures (without NCCL's plugin) as two runs, ingested once: LATE with
    both traces' baseTimeNanoseconds 0.5 ms early, UDP with datagrams between the workers and, in both
    ranks' NCCL logs, a second communicator of two ranks set up after the first (as a second process
    group of the same ranks would be: its commId made up)."""
    root = tmp_path_factory.mktemp("crafted")
    for name in (LATE, UDP):
        shutil.copytree(
            PROFILERS / CNN, root / "runs" / name, ignore=shutil.ignore_patterns("nccl-profiler-*")
        )
    for rank in (0, 1):
        trace = root / "runs" / LATE / f"kineto-rank{rank}.json"
        text = trace.read_text()
        assert text.count('"baseTimeNanoseconds": 1790857026000000000') == 1
        trace.write_text(text.replace("1790857026000000000", "1790857025999500000", 1))
    assert _with_datagrams(root / "runs" / UDP / "worker-0-tcpdump.pcap", 10_000_000, 1000) > 700
    for rank, (pid, ptr) in enumerate([(822, "0xe0e0e0e0"), (823, "0xe1e1e1e1")]):
        log = root / "runs" / UDP / f"nccl.vm.{pid}.log"
        init = (
            f"vm:{pid}:{pid + 100} [0] NCCL INFO ncclCommInitRankConfig comm {ptr} rank {rank} nranks 2 "
            f"cudaDev 0 nvmlDev 0 busId 60 commId {SECOND_COMM} - Init "
        )
        log.write_text(log.read_text() + f"{init}START\n{init}COMPLETE\n")
    summary = ingest([root / "runs"], root / "data", jobs=1)
    assert not summary.problems, summary.problems
    connection = open_catalog(root / "data")
    yield connection
    connection.close()


def test_a_clock_error_within_the_stated_one_keeps_every_frame(con, crafted) -> None:
    """Both traces' clocks 0.5 ms early (their mapping states 1 ms): the W2→W1 all-reduces' last frames
    leave after the instance's recorded end, and still belong to it (a kernel cannot end before the
    bytes sent to it arrived, up to the clock error): the same frames and bytes as the true clocks."""
    shifted = rows(crafted, WIRE_FRAMES.replace("WHERE", "WHERE run = ? AND"), [LATE])
    assert shifted == rows(con, WIRE_FRAMES.replace("WHERE", "WHERE run = ? AND"), [CNN])
    ends = rows(
        crafted,
        "SELECT src_worker, last_byte_ns - end_ns AS past FROM collective_wire WHERE run = ? "
        "AND source = 'pytorch_profiler'",
        [LATE],
    )
    assert {r["src_worker"] for r in ends if r["past"] > 0} == {"W2"}
    assert all(0 < r["past"] < 500_000 for r in ends if r["src_worker"] == "W2")
    assert [
        r["ok"] for r in rows(crafted, "SELECT ok FROM collective_clock_check WHERE run = ?", [LATE])
    ] == [
        True,
        True,
    ]


def test_coverage_counts_the_udp_the_link_carried_in_the_span(con, crafted) -> None:
    """collective_coverage compares the collectives' bytes with all TCP and UDP payload the link carried
    in the span: W1→W2's datagrams in it, counted here from the packets, are payload no collective
    explains; W2→W1 is as without them."""
    got = {
        r["src_worker"]: r
        for r in rows(crafted, "SELECT * FROM collective_coverage WHERE run = ? ORDER BY src_worker", [UDP])
    }
    plain = {
        r["src_worker"]: r
        for r in rows(
            con, "SELECT * FROM collective_coverage WHERE run = ? AND source = 'pytorch_profiler'", [CNN]
        )
    }
    assert {w: r["source"] for w, r in got.items()} == {"W1": "pytorch_profiler", "W2": "pytorch_profiler"}
    packets = rows(
        crafted,
        "SELECT src_ip, dst_ip, ip_proto, ts_ns, l4_payload_len AS n FROM packets WHERE run = ? "
        "AND l4_payload_len > 0",
        [UDP],
    )
    ips = {"W1": "10.77.0.1", "W2": "10.77.0.2"}
    for src, dst in (("W1", "W2"), ("W2", "W1")):
        r = got[src]
        inside = [
            p for p in packets
            if (p["src_ip"], p["dst_ip"]) == (ips[src], ips[dst])
            and r["span_start_ns"] <= p["ts_ns"] <= r["span_end_ns"]
        ]  # fmt: skip
        assert r["payload_bytes"] == sum(p["n"] for p in inside), r
        udp = sum(p["n"] for p in inside if p["ip_proto"] == 17)
        assert udp == (1000 * len([p for p in inside if p["ip_proto"] == 17]) if src == "W1" else 0)
        assert r["payload_bytes"] == plain[src]["payload_bytes"] + udp
        assert r["matched_bytes"] == plain[src]["matched_bytes"]
    assert got["W1"]["payload_bytes"] - plain["W1"]["payload_bytes"] >= 5_000  # the datagrams in the span


def test_a_process_with_two_communicators_of_one_size_takes_the_first_for_its_default_group(crafted) -> None:
    """A PyTorch trace names its process group, not NCCL's commId; of the communicators of its size the
    process set up, the first (PyTorch's default group) is its NCCL communicator."""
    comms = rows(
        crafted,
        "SELECT DISTINCT pid, comm_id, nranks FROM nccl_ranks WHERE run = ? ORDER BY pid, comm_id",
        [UDP],
    )
    assert [(r["pid"], r["comm_id"]) for r in comms] == [
        (822, SECOND_COMM),
        (822, "0x646a81e6f9a7c4d2"),
        (823, SECOND_COMM),
        (823, "0x646a81e6f9a7c4d2"),
    ]
    got = rows(crafted, "SELECT DISTINCT rank, comm, nccl_comm FROM collective_calls WHERE run = ?", [UDP])
    assert sorted((r["rank"], r["comm"], r["nccl_comm"]) for r in got) == [
        (0, "0", "0x646a81e6f9a7c4d2"),
        (1, "0", "0x646a81e6f9a7c4d2"),
    ]
