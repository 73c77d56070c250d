"""Collectives joined to their packets on the real GPU corpus (../shared/corpus-gpu): NCCL 2.28.9 over
TCP sockets, two and four ranks on one GPU each in its own namespace, sender-side captures, with
PyTorch profiler traces, NCCL's example profiler plugin (cnn3m runs) and NCCL Inspector (mlp25m).

What the data shows (README of the corpus, issue 28): on cnn3m each step's all-reduce puts the 12,254,760
B bucket plus 64 B of NCCL framing (4 B before each of the 16 messages of its 2 channels) on each
link; on mlp25m two buckets go back to back on the same sockets, so time windows over-count by up to
5.7 % and only the order of each connection's byte stream tells them apart.
"""

from __future__ import annotations

import statistics
from pathlib import Path

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


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    for folder in (PROFILERS, FOUR):
        if not folder.is_dir():
            pytest.fail(f"corpus missing: {folder} (the shared/ folder must sit beside the checkout)")
    out = tmp_path_factory.mktemp("gpu") / "data"
    summary = ingest([PROFILERS, FOUR], out, jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    connection = open_catalog(out)
    yield connection
    connection.close()


def rows(con, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


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
    assert statistics.median(r["bytes"] for r in plugin) == BUCKET + FRAMING
    # a boundary packet (at most one 65,160 B TSO frame) may fall to a neighbour, never more
    assert all(abs(r["bytes"] - BUCKET - FRAMING) <= 65160 for r in plugin)
    kineto = [r["bytes"] for r in got if r["source"] == "pytorch_profiler"]
    assert kineto == [BUCKET + FRAMING] * 6  # steps 4–6, both links


def test_mlp25m_byte_order_separates_back_to_back_buckets_that_time_windows_mix(con) -> None:
    got = rows(
        con,
        "SELECT source, window_bytes / predicted_bytes AS window_ratio, ratio FROM collective_wire "
        "WHERE run = ? AND op = 'all_reduce' AND message_bytes > 1e7",
        [MLP],
    )
    kineto = [r for r in got if r["source"] == "pytorch_profiler"]
    inspector = [r for r in got if r["source"] == "nccl_inspector"]
    assert (len(kineto), len(inspector)) == (2 * 6, 2 * 23)  # + the 100 MB first step, both directions
    # the union of both ranks' kernel windows over-counts by up to 5.7 % (README); the Inspector's
    # host-seen kernel windows are wider still
    assert round(max(r["window_ratio"] for r in kineto), 3) == 1.057
    assert round(max(r["window_ratio"] for r in inspector), 3) == 1.083
    # byte order: every bucket within 0.13 % (a boundary frame) of its prediction
    assert max(abs(r["ratio"] - 1) for r in got) < 0.0013


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
        "SELECT k.run, k.rank, k.seq, count(o.seq) AS matches, max(abs(k.start_ns - o.start_ns)) AS apart "
        "FROM collective_calls AS k LEFT JOIN collective_calls AS o ON o.run = k.run AND o.rank = k.rank "
        "AND o.op = k.op AND o.bytes = k.bytes AND o.source <> k.source "
        "AND o.start_ns < k.end_ns AND k.start_ns < o.end_ns "
        "WHERE k.source = 'pytorch_profiler' GROUP BY ALL",
    )
    assert len(got) == 2 * 3 + 2 * 6 + 4 * 3
    assert {r["matches"] for r in got} == {1}
    assert max(r["apart"] for r in got) < 1_000_000
