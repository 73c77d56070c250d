"""The collectives' join without a GPU: a 3-rank gloo DDP run with PyTorch's profiler, trained and
captured in a network-namespace testbed (tests/gloo_profiled.py), ingested, and joined to its packets.

gloo's ring all-reduce sends 2(N−1)/N · S = 4/3 · S per link, plus gloo's own headers, and passes its
ring to the left: rank r sends to rank r − 1 (mod N), so W1→W3, W2→W1 and W3→W2 carry the data and the
other three links only ACKs (two ranks could not tell the directions apart). One DDP bucket per step,
so each socket carries the steps in order.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.gloo_profiled import PROFILED, RUN, gradient_bytes, make_run
from tracecore.ingest import ingest, open_catalog

pytestmark = pytest.mark.slow

RANKS = 3
LEFT = {"W1": "W3", "W2": "W1", "W3": "W2"}  # each worker's data link: rank r sends to rank r − 1


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    if importlib.util.find_spec("torch") is None:  # a missing tool fails, never skips the module
        pytest.fail(
            "torch is missing: `make .venv/.bench-deps` installs bench/requirements.txt (the CPU wheel)"
        )
    root = tmp_path_factory.mktemp("gloo")
    run = make_run(root / "runs", ranks=RANKS)
    assert sorted(p.name for p in run.iterdir()) == [  # named as the GPU corpus's runs
        *(f"kineto-rank{r}.json" for r in range(RANKS)),
        "run.toml",
        "train_history.log",
        *(f"worker-{r}-tcpdump.pcap" for r in range(RANKS)),
    ]
    summary = ingest([root / "runs"], root / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    connection = open_catalog(root / "data")
    yield connection
    connection.close()


def rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def test_gloo_collectives_come_from_the_profiler_traces(con) -> None:
    got = rows(
        con, "SELECT rank, worker, backend, op, bytes, step, time_source FROM collective_calls ORDER BY ALL"
    )
    assert [(r["rank"], r["worker"], r["step"]) for r in got] == [
        (rank, f"W{rank + 1}", step) for rank in range(RANKS) for step in PROFILED
    ]
    assert {(r["backend"], r["op"], r["bytes"], r["time_source"]) for r in got} == {
        ("gloo", "all_reduce", gradient_bytes(), "backend_work")
    }
    assert rows(con, "SELECT count(*) AS n FROM host_clocks") == [{"n": RANKS}]


def test_gloo_all_reduces_are_their_message_on_each_link(con) -> None:
    got = rows(
        con,
        "SELECT src_worker, dst_worker, predicted_bytes, ratio, window_bytes, bytes, connections "
        "FROM collective_wire",
    )
    assert len(got) == RANKS * len(PROFILED)
    assert {(r["src_worker"], r["dst_worker"]) for r in got} == set(LEFT.items())
    assert {r["predicted_bytes"] for r in got} == {2 * (RANKS - 1) / RANKS * gradient_bytes()}
    assert all(abs(r["ratio"] - 1) < 0.001 for r in got), got
    assert all(r["connections"] == 1 for r in got), got  # gloo: one socket per pair (the store's is small)
    coverage = rows(con, "SELECT * FROM collective_coverage")
    assert len(coverage) == RANKS
    assert all(r["matched"] == r["collectives"] == len(PROFILED) for r in coverage), coverage
    # the span's payload counts every copy of a re-sent segment, and so do the collectives' matched bytes:
    # a loaded machine drops frames between the namespaces (one run here re-sent 59 segments, 85 kB,
    # 0.26 % of the link's payload), and they are no traffic of unknown origin
    unexplained = [r["payload_bytes"] - r["matched_bytes"] for r in coverage]
    assert all(u < 0.001 * r["payload_bytes"] for u, r in zip(unexplained, coverage, strict=True)), coverage
    assert [r["ok"] for r in rows(con, "SELECT ok FROM collective_clock_check")] == [True] * RANKS


def test_gloo_steps_have_communication_but_no_device_compute(con) -> None:
    got = rows(con, f"SELECT * FROM step_breakdown WHERE run = '{RUN}' ORDER BY worker, step")
    assert [(r["worker"], r["step"], r["timed_by"]) for r in got] == [
        (w, s, "pytorch_profiler") for w in LEFT for s in PROFILED
    ]
    for r in got:
        assert r["compute_ns"] is None  # a CPU-only trace has no kernels
        assert r["exposed_ns"] is None
        assert 0 < r["communication_ns"] < r["step_ns"]
        assert r["busiest_link"] == LEFT[r["worker"]]  # its data link, never the one it only ACKs on
        assert 0 < r["link_busy_share"] < 1
    stragglers = rows(con, "SELECT seq, ranks, last_rank, spread_ns, wait_ns FROM collective_stragglers")
    assert len(stragglers) == len(PROFILED)
    assert all(r["ranks"] == RANKS for r in stragglers)
    starts: dict[int, list[int]] = {}
    for c in rows(con, "SELECT seq, start_ns FROM collective_calls"):
        starts.setdefault(c["seq"], []).append(c["start_ns"])
    for r in stragglers:  # every rank waits from its own start to the last one's
        t = starts[r["seq"]]
        assert (r["spread_ns"], r["wait_ns"]) == (max(t) - min(t), sum(max(t) - s for s in t))


def test_gloo_timeline_figure(con) -> None:
    from tracecore import figures

    spec = figures.build(con, "collective_timeline", [RUN]).to_dict()
    (block,) = spec["vconcat"]
    lanes = {s["lane"] for s in block["vconcat"][0]["data"]["values"]}
    assert lanes == {
        *(f"rank {r} (W{r + 1})" for r in range(RANKS)),
        *(f"{s}→{d} wire" for s, d in LEFT.items()),
    }
