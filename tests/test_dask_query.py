"""`query --scheduler` (issue 15, acceptance 1 for queries): every view split by run gives, through a
`LocalCluster` of 2 worker processes and through `dask scheduler` + 2 `dask worker` processes over
TCP, exactly the local result (rows, order, Arrow types) on the sample dataset and the corpus dataset
(the local cluster also on the RoCE runs of ../shared/corpus-rdma and an NCCL run with its logs), each
part computed by the cluster's workers; views that need every run at once run on the driver; the
errors of a split query.

Each cluster starts once per module. Parts are made small on purpose (`part_packets`), so every query
is cut into several parts and their join is what is compared.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from tests.test_dask_support import dask_processes, worker_tasks
from tracecore import partition, views
from tracecore.errors import ClusterError, DatasetError, UsageError
from tracecore.query import catalog_state, known_runs, query_dataset, run_part, run_view, with_dataset

BOUND_S = 60.0
SPLIT = [n for n in views.view_names() if partition.rules(n).by_run]
# The corpus's runs span up to 150 years of timestamps (odd captures): the binned views are asked
# for its runs of at most a minute, which also sends a `runs` selection through the cluster.
SHORT_S = 60.0
PARAMS = {  # a few parameters besides the defaults, to see them reach the workers
    "link_util": {"bin_ns": "100ms", "from_ns": "1s", "to_ns": "4s"},
    "burstiness": {"bins_ns": "1000000,50000000"},
    "link_util_ci": {"window_ns": "500ms", "src": "W2"},
    "flow_matrix_mean": {"from_ns": "2s"},
}


@pytest.fixture(scope="module")
def local_cluster(tmp_path_factory: pytest.TempPathFactory):
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",  # else its HTTP server takes :8787, and a second cluster warns
        local_directory=str(tmp_path_factory.mktemp("dask-local")),
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def tcp_cluster(tmp_path_factory: pytest.TempPathFactory):
    with dask_processes(tmp_path_factory.mktemp("dask-tcp"), [{}, {}]) as cluster:
        assert len(set(cluster.worker_pids.values())) == 2
        yield cluster.address


@pytest.fixture(scope="module")
def datasets(
    sample_dataset: Path, corpus_dataset: tuple, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, list[str] | None, int]]:
    """name → (dataset, the runs to ask for (None: all), packets per part: several parts each)."""
    from tests.rdma_corpus import rdma_dataset
    from tests.test_views_nccl import RING, ROTATED, nccl_run_folder
    from tracecore.ingest import ingest

    nccl = tmp_path_factory.mktemp("nccl")  # NCCL logs beside RoCE captures: the nccl_* views have rows
    nccl_run_folder(nccl / "runs", RING, {0: 0, 1: 1, 2: 2})
    nccl_run_folder(nccl / "runs", ROTATED, {0: 1, 1: 2, 2: 0})
    summary = ingest([nccl / "runs"], nccl / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    corpus = corpus_dataset[0]
    short = with_dataset(
        corpus,
        lambda con: [
            r for (r,) in con.execute(f"SELECT run FROM run_bounds WHERE duration_s <= {SHORT_S}").fetchall()
        ],
    )
    assert len(short) > 20
    return {
        "sample": (sample_dataset, None, 0),
        "corpus": (corpus, short, 300),
        "rdma": (rdma_dataset(), None, 300),  # 15 runs, 1 947 packets: 4 parts of 3 to 5 runs
        "nccl": (nccl / "data", None, 0),
    }


@functools.cache
def _local(data: Path, runs: tuple[str, ...] | None) -> dict[str, pa.Table | str]:
    """Every split view's local result over one connection (what `query_dataset` runs, minus the open)."""

    def every(con) -> dict[str, pa.Table | str]:
        return {v: _attempt(lambda v=v: run_view(con, v, runs and list(runs), PARAMS.get(v))) for v in SPLIT}

    return with_dataset(data, every)


def _attempt(call) -> pa.Table | str:
    try:
        return call()
    except UsageError as err:  # the same refusal (e.g. a grid too large) is part of the same result
        return f"UsageError: {err}"


def _differences(data: Path, runs: list[str] | None, part_packets: int, scheduler: str) -> list[str]:
    """What differs between the local and the split result of each view (a few queries at a time:
    the driver's planning overlaps the workers' parts), and whether the cluster's workers computed
    every part of every view that was split (not the driver, the cluster bypassed)."""

    def split(view: str) -> pa.Table | str:
        return _attempt(
            lambda: query_dataset(
                data, view, runs, PARAMS.get(view), scheduler=scheduler, part_packets=part_packets
            )
        )

    with worker_tasks(scheduler) as computed, ThreadPoolExecutor(3) as pool:
        results = dict(zip(SPLIT, pool.map(split, SPLIT), strict=True))
    wrong = []
    answered = sum(not isinstance(got, str) for got in results.values())  # a refused one has no part
    parts = len(partition.plan_parts(runs or with_dataset(data, known_runs), _packets(data), part_packets))
    if [f for f, _ in computed] != ["run_part"] * answered * parts:
        wrong.append(f"the workers computed {len(computed)} tasks, not {answered} views × {parts} parts")
    for view, got in results.items():
        local = _local(data, runs and tuple(runs))[view]
        if isinstance(local, str) or isinstance(got, str):
            if local != got:
                wrong.append(f"{view}: {local!r} vs {got!r}")
            continue
        if got.schema != local.schema:
            wrong.append(f"{view}: types {got.schema} vs {local.schema}")
        elif partition.order_keys(views.installed_views(), view):
            if not got.equals(local):
                wrong.append(f"{view}: rows or their order differ")
        elif sorted(got.to_pylist(), key=repr) != sorted(local.to_pylist(), key=repr):
            wrong.append(f"{view}: rows differ (its rows are not ordered, so compared as a set)")
    return wrong


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sample", "corpus", "rdma", "nccl"])
def test_a_local_cluster_gives_the_local_result_for_every_view_split_by_run(
    local_cluster, datasets, name
) -> None:
    data, runs, part_packets = datasets[name]
    packets = _packets(data)
    assert len(partition.plan_parts(runs or sorted(packets), packets, part_packets)) >= 2
    assert _differences(data, runs, part_packets, local_cluster) == []


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sample", "corpus"])
def test_scheduler_and_worker_processes_over_tcp_give_the_local_result(tcp_cluster, datasets, name) -> None:
    data, runs, part_packets = datasets[name]
    assert _differences(data, runs, part_packets, tcp_cluster) == []


def test_the_comparison_sees_a_part_missing(local_cluster, datasets) -> None:
    """The equality above is not vacuous: parts are several, and one run fewer is a difference."""
    data, runs, _ = datasets["corpus"]
    whole = query_dataset(data, "flow_counts", runs)
    fewer = query_dataset(data, "flow_counts", runs[1:], scheduler=local_cluster, part_packets=300)
    assert fewer.num_rows < whole.num_rows
    groups = partition.plan_parts(runs, _packets(data), 300)
    assert len(groups) >= 3
    assert [r for g in groups for r in g] == runs


def _packets(data: Path) -> dict[str, int]:
    sql = "SELECT run, sum(packets)::BIGINT FROM workers GROUP BY run"
    return dict(with_dataset(data, lambda con: con.execute(sql).fetchall()))


def test_a_view_needing_every_run_runs_on_the_driver_without_the_cluster(sample_dataset: Path) -> None:
    assert [n for n in views.view_names() if not partition.rules(n).by_run] == [
        "compare",
        "findings",
        "grid_check",
        "grid_rows",
        "train_duration",
    ]
    nobody = f"tcp://127.0.0.1:{_free_port()}"  # never contacted
    for name, rows in (("train_duration", 2), ("compare", 58)):
        here = query_dataset(sample_dataset, name, scheduler=nobody)
        assert here.equals(query_dataset(sample_dataset, name))
        assert here.num_rows == rows


def test_a_part_refuses_another_commit_or_a_missing_dataset(sample_dataset: Path, tmp_path: Path) -> None:
    state = with_dataset(sample_dataset, catalog_state)
    assert state is not None
    assert '"generation"' in state
    runs = ("torch_ddp-resnet8w8-sgd-16-gloo-normal-ring",)
    good = run_part(partition.PartTask(str(sample_dataset), "run_bounds", runs, {}, state))
    assert good.column("run").to_pylist() == list(runs)
    host = socket.gethostname()
    with pytest.raises(DatasetError) as err:
        run_part(partition.PartTask(str(sample_dataset), "run_bounds", runs, {}, state + " "))
    assert str(err.value) == (
        f"on Dask worker host {host}: {sample_dataset} is not the dataset the query was planned on (an "
        "ingest committed meanwhile, or the folder is not one shared by the driver and the workers); "
        "run it again"
    )
    with pytest.raises(DatasetError, match=f"^on Dask worker host {host}: no dataset at {tmp_path}"):
        run_part(partition.PartTask(str(tmp_path), "run_bounds", runs, {}, state))


def test_bad_parameters_are_refused_before_the_cluster_is_asked(sample_dataset: Path) -> None:
    nobody = f"tcp://127.0.0.1:{_free_port()}"
    with pytest.raises(UsageError, match=r"^view flow_matrix has no parameter 'bin_ns'"):
        query_dataset(sample_dataset, "flow_matrix", params={"bin_ns": 5}, scheduler=nobody)
    with pytest.raises(UsageError, match=r"^unknown run 'nope'"):
        query_dataset(sample_dataset, "flow_matrix", ["nope"], scheduler=nobody)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(args: list[str], env: dict[str, str], cwd: Path, **kw) -> subprocess.Popen:
    code = (
        "import sys\nfrom tracecore.cli.app import app\ntry:\n    app()\nfinally:\n"
        "    print('distributed' in sys.modules)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_scheduler_option_help_error_and_no_import_without_it(sample_dataset: Path, tmp_path: Path) -> None:
    helped, _ = _cli(["query", "--help"], {}, tmp_path).communicate(timeout=BOUND_S)
    assert "--scheduler" in helped
    assert "TRACECORE_SCHEDULER" in helped
    local = _cli(["query", "flow_matrix", "--data", str(sample_dataset), "-f", "csv"], {}, tmp_path)
    out, err = local.communicate(timeout=BOUND_S)
    assert local.returncode == 0, err
    assert out.splitlines()[-1] == "False"  # no --scheduler: distributed never imported
    address = f"tcp://127.0.0.1:{_free_port()}"
    env = {"TRACECORE_SCHEDULER": address, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    lost = _cli(["query", "flow_matrix", "--data", str(sample_dataset)], env, tmp_path)
    out, err = lost.communicate(timeout=BOUND_S)
    assert lost.returncode == 1
    assert out.strip() == "True"
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: cannot reach the Dask scheduler at {address}: ")


def _pausing(tmp: Path) -> dict[str, str]:
    return {"TRACECORE_TEST_PAUSE_AT": "query", "TRACECORE_TEST_PAUSE_MARKER": str(tmp / "paused")}


def _wait_for(marker: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + BOUND_S
    while not marker.is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    assert marker.read_text().split()[0] == "query"


def test_ctrl_c_cancels_the_querys_futures(sample_dataset: Path, tmp_path: Path) -> None:
    from distributed import Client

    with dask_processes(tmp_path / "dask", [_pausing(tmp_path)]) as cluster:
        proc = _cli(
            ["query", "flow_matrix", "--data", str(sample_dataset)],
            {"TRACECORE_SCHEDULER": cluster.address},
            tmp_path,
        )
        _wait_for(tmp_path / "paused", proc)  # the one worker holds the part: the driver waits
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=BOUND_S)
        with Client(cluster.address, set_as_default=False) as client:
            deadline = time.monotonic() + BOUND_S
            while client.run_on_scheduler(_task_count) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert client.run_on_scheduler(_task_count) == 0  # every future was cancelled
    assert proc.returncode == 130
    assert err.strip().splitlines() == [
        "Interrupted: the query's tasks on the Dask cluster were cancelled; nothing was written."
    ]


def _task_count(dask_scheduler: object) -> int:
    """Tasks the scheduler still holds (Dask passes itself by this parameter's name)."""
    return len(dask_scheduler.tasks)  # type: ignore[attr-defined]


def test_a_scheduler_lost_mid_query_is_one_cluster_error(sample_dataset: Path, tmp_path: Path) -> None:
    import threading

    import dask

    box: dict[str, BaseException] = {}
    with dask_processes(tmp_path / "dask", [_pausing(tmp_path)]) as cluster:

        def run() -> None:
            try:
                with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
                    query_dataset(sample_dataset, "flow_matrix", scheduler=cluster.address)
            except BaseException as err:
                box["error"] = err

        thread = threading.Thread(target=run, name="query")
        thread.start()
        deadline = time.monotonic() + BOUND_S
        while not (tmp_path / "paused").is_file() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        scheduler = cluster.procs[0]
        os.kill(scheduler.pid, signal.SIGKILL)
        scheduler.wait(timeout=BOUND_S)
        thread.join(BOUND_S)
    assert not thread.is_alive()
    assert isinstance(box.get("error"), ClusterError), box
    assert str(box["error"]).startswith(f"lost the Dask scheduler at {cluster.address}: ")
