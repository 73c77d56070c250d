"""A Dask cluster as tracecore uses it: a checked client, and functions run on its workers.

Why one module: ingest (`ingest/cluster.py`, captures as tasks) and queries (`query.run_part`, views
split by run) reach a cluster the same way: one connect with a one-line error, the same refusal of
a cluster without workers or with workers running another tracecore. This module and
`ingest/cluster.py` are the only ones that import `distributed`, and only when a scheduler is given.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, CancelledError, Future, wait
from typing import Any

from tracecore.errors import ClusterError, Interrupted
from tracecore.schema import SCHEMA_VERSION
from tracecore.version import __version__

try:
    import dask.config
    import dask.utils
    import distributed
except ImportError as err:  # pragma: no cover - the error names the extra to install
    raise ClusterError("--scheduler needs Dask distributed: pip install 'tracecore[dask]'") from err


def connect(scheduler: str) -> distributed.Client:
    """A client of the scheduler at `scheduler`, or a ClusterError in one line after Dask's
    `distributed.comm.timeouts.connect` (30 s; e.g. DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s)."""
    try:
        return distributed.Client(scheduler, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler}: {err}") from err


def worker_versions() -> tuple[str, int]:
    """(tracecore version, schema version) of the process it runs in: a worker's, via `Client.run`."""
    return __version__, SCHEMA_VERSION


def check_workers(client: distributed.Client, scheduler: str) -> None:
    """Refuse a cluster without workers (none within Dask's connect timeout) or whose workers run
    another tracecore: their parts would carry another format than the catalog this driver writes,
    and their views might not be this driver's."""
    try:
        wait_s = dask.utils.parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
        client.wait_for_workers(1, timeout=wait_s)
        versions = client.run(worker_versions)
    except TimeoutError as err:
        raise ClusterError(f"the Dask scheduler at {scheduler} has no workers") from err
    except Exception as err:  # a worker cannot unpickle tracecore's function: not installed there
        raise ClusterError(f"the Dask workers of {scheduler} cannot run tracecore: {err}") from err
    wrong = sorted(
        f"{w} ({v[0]}, schema {v[1]})" for w, v in versions.items() if tuple(v) != worker_versions()
    )
    if wrong:
        raise ClusterError(
            f"Dask workers run another tracecore than this one ({__version__}, schema {SCHEMA_VERSION}): "
            + ", ".join(wrong)
        )


def run_on_cluster(scheduler: str, fn: Callable[[Any], Any], tasks: list[Any], sizes: list[int]) -> list[Any]:
    """`fn(task)` for every task on the workers of the scheduler at `scheduler`, results in the order
    of `tasks`.

    Largest first: tasks are submitted in decreasing `sizes`, each with its rank as Dask priority
    (an idle worker starts the first task that arrives; the rest wait in priority order), so the
    biggest parts start first and the small ones fill in at the end. A task's own error (a
    TracecoreError from a worker) is raised as it is; a lost scheduler or workers that kept dying
    are a ClusterError; Ctrl-C (or any early exit) cancels every future, so nothing is left queued.
    """
    client = connect(scheduler)
    futures: list[Future] = []
    try:
        check_workers(client, scheduler)
        pool = client.get_executor(pure=False)
        order = sorted(range(len(tasks)), key=lambda i: -sizes[i])
        submitted = {i: pool.submit(fn, tasks[i], priority=len(tasks) - rank) for rank, i in enumerate(order)}
        futures = list(submitted.values())
        wait(futures, return_when=FIRST_EXCEPTION)
        return [submitted[i].result() for i in range(len(tasks))]
    except KeyboardInterrupt as err:
        raise Interrupted(
            "Interrupted: the query's tasks on the Dask cluster were cancelled; nothing was written."
        ) from err
    except distributed.KilledWorker as err:
        raise ClusterError(
            f"the Dask workers of {scheduler} running part of this work died too often "
            "(distributed.scheduler.allowed-failures); check the workers' memory and logs"
        ) from err
    except (OSError, CancelledError, distributed.comm.CommClosedError) as err:
        if any(f.done() and not f.cancelled() and f.exception() is err for f in futures):
            raise  # a task's own error, not the cluster's
        raise ClusterError(f"lost the Dask scheduler at {scheduler}: {err or type(err).__name__}") from err
    finally:
        try:
            for f in futures:
                f.cancel()
        finally:
            client.close()
