"""Largest first on a real cluster: an ingest's captures and a split query's parts start on the workers
in decreasing size, so the big ones never trail at the end.

A cluster of one worker process with one thread runs one task at a time; a worker plugin records, in
the order they start executing, what each task was given (a capture's path, a part's runs).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed import Client, LocalCluster, WorkerPlugin

from tests.test_dask_support import inputs
from tracecore import partition
from tracecore.ingest import ingest
from tracecore.query import known_runs, query_dataset, with_dataset


class StartOrder(WorkerPlugin):
    """Records each task's argument as it starts executing: `src` of a capture, `runs` of a part."""

    name = "tracecore-test-start-order"

    def setup(self, worker) -> None:
        self.worker = worker
        worker.tracecore_started = []

    def transition(self, key, start, finish, **kwargs) -> None:
        if finish != "executing":
            return
        spec = self.worker.state.tasks[key].run_spec
        for arg in getattr(spec, "args", ()):
            for attr in ("src", "runs"):
                if hasattr(arg, attr):
                    self.worker.tracecore_started.append(getattr(arg, attr))


def _started(dask_worker) -> list:
    return dask_worker.tracecore_started


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory):
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # else its HTTP server takes :8787, and a second cluster warns
            local_directory=str(tmp_path_factory.mktemp("dask-one")),
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.register_plugin(StartOrder())
        yield cluster.scheduler_address, client


def _take(client: Client) -> list:
    """What the one worker started since the last call."""
    (started,) = client.run(_started).values()
    taken = list(started)
    client.run(lambda dask_worker: dask_worker.tracecore_started.clear())
    return taken


def test_an_ingest_submits_its_captures_largest_first(one_at_a_time, tmp_path: Path) -> None:
    address, client = one_at_a_time
    summary = ingest(inputs(), tmp_path / "data", scheduler=address)
    started = _take(client)
    assert len(started) == len(summary.captures) == len(set(started)) > 8
    sizes = [Path(src).stat().st_size for src in started]
    assert sizes == sorted(sizes, reverse=True), list(zip(started, sizes, strict=True))
    assert sizes[0] > 10 * sizes[-1]  # not all alike: the order is a real one


def test_a_split_query_submits_its_parts_largest_first(one_at_a_time, corpus_dataset: tuple) -> None:
    address, client = one_at_a_time
    data = corpus_dataset[0]
    query_dataset(data, "flow_counts", scheduler=address, part_packets=100)
    started = _take(client)
    sql = "SELECT run, sum(packets)::BIGINT FROM workers GROUP BY run"
    packets = dict(with_dataset(data, lambda con: con.execute(sql).fetchall()))
    runs = with_dataset(data, known_runs)
    assert sorted(r for part in started for r in part) == sorted(runs)  # every run in exactly one part
    assert [list(p) for p in started] != partition.plan_parts(runs, packets, 100)  # not in run order
    sizes = [sum(packets.get(r, 0) for r in part) for part in started]
    assert sizes == sorted(sizes, reverse=True)
