"""Every answer view gives the same rows, in the same order, on any number of DuckDB threads.

Why: a view whose answer depends on how DuckDB split the work (a tie that a window's ORDER BY or an
as-of join breaks either way, a float sum whose last digit depends on the order of its terms) gives
two users of one dataset two answers; tcp_health once gave out-of-order totals 1,308, 1,311, 1,308 and
1,310 in four runs. Each view of `queries/` with `Kind: answer` runs with its default parameters on the
embedded sample and on the GPU corpus' 4-rank NCCL run (collectives, profiler traces, NCCL logs) at
several thread counts, and every row must equal the first run's, to the last bit of every float.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecore.ingest import ingest, open_catalog
from tracecore.views import installed_views

REPO = Path(__file__).resolve().parent.parent
FOUR_RANKS = REPO.parent / "shared" / "corpus-gpu" / "gpu-nccl-4rank"
ANSWERS = [name for name in installed_views().names if installed_views().kind(name) == "answer"]
THREADS = (1, 2, 8)
# findings answers from most other views (seconds per run): two thread counts keep the suite's time
FEWER_THREADS = {"findings": (1, 8)}
# not vacuous: views that answer something on these datasets
ANSWERED = {
    ("gpu", v) for v in ("tcp_health", "collective_wire", "collective_verdicts", "findings", "contention")
} | {("sample", v) for v in ("tcp_health", "contention", "flow_matrix", "link_util")}


@pytest.fixture(scope="module")
def datasets(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not FOUR_RANKS.is_dir():
        pytest.fail(f"corpus missing: {FOUR_RANKS} (the shared/ folder must sit beside the checkout)")
    gpu = tmp_path_factory.mktemp("gpu") / "data"
    summary = ingest([FOUR_RANKS], gpu, jobs=1)
    assert not summary.failed, summary.failed
    return {"sample": sample_dataset, "gpu": gpu}


@pytest.fixture(scope="module")
def connections(datasets: dict[str, Path]):
    # unsafe: a locked-down connection may not change its thread count; these datasets are the test's own
    cons = {name: open_catalog(path, read_only=True, unsafe=True) for name, path in datasets.items()}
    yield cons
    for con in cons.values():
        con.close()


def answer(con, sql: str, threads: int) -> list[str]:
    """The rows of `sql` on `threads` threads, each as its repr (NaN equals NaN; floats to the last bit)."""
    con.execute(f"SET threads = {threads}")
    return [repr(row) for row in con.execute(sql).fetchall()]


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["sample", "gpu"])
@pytest.mark.parametrize("view", ANSWERS)
def test_a_view_gives_the_same_rows_on_any_number_of_threads(connections, dataset: str, view: str) -> None:
    con = connections[dataset]
    first, *others = FEWER_THREADS.get(view, THREADS)
    want = answer(con, f"SELECT * FROM {view}", first)
    assert want or (dataset, view) not in ANSWERED
    for threads in others:  # the first differing row named
        got = answer(con, f"SELECT * FROM {view}", threads)
        assert len(got) == len(want), (view, dataset, threads)
        diff = next((i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w), None)
        where = f"{view} on {dataset}, {threads} threads, row {diff}"
        assert diff is None, f"{where}: {got[diff]}, not {want[diff]}"


def test_the_views_under_test_are_every_answer_view() -> None:
    assert len(ANSWERS) >= 28
    assert {"tcp_health", "contention", "collective_verdicts", "findings"} <= set(ANSWERS)


def test_every_bin_of_a_held_window_names_it_alike(con) -> None:
    """contention: the bins of one held window carry one held_start_s and held_end_s (each bin added its
    own offset to its own t_s, so one window started at 7.382916 and at 7.382916000000001), the start
    being its first bin's t_s. On the sample, 10 ms bins find held windows (see contention's header)."""
    rows = con.execute(
        "SELECT run, src_worker, dst_worker, t_s, held_start_s, held_end_s, held_bins, held_ratio "
        "FROM contention(bin_ns := 10000000, held_only := true)"
    ).fetchall()
    firsts = [r for r in rows if r[3] == r[4]]
    windows = {(r[0], r[1], r[2], r[4]) for r in rows}
    assert len(firsts) >= 10, len(firsts)
    assert len(windows) == len(firsts), (len(windows), len(firsts))
    assert len({(r[0], r[1], r[2], r[4], r[5], r[6], r[7]) for r in rows}) == len(firsts)
    assert all(r[4] <= r[3] < r[5] for r in rows)
