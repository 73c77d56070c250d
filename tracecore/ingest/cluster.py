"""Capture tasks on a Dask cluster: the same `executor.results_from` loop, with `Client.get_executor()`.

Why Dask and this shape: a `distributed` client's executor is a `concurrent.futures.Executor`, so the
cluster runs exactly the tasks threads and process pools run (`executor.attempt`), and the driver keeps
the one atomic catalog commit. What differs is only the channel: workers send progress as Dask events
on one topic (`PROGRESS_TOPIC`, tagged with this ingest's id, relayed by the scheduler to this client)
and read a cancel from a Dask `Event` named after the ingest. Dask runs a task at least once: each
attempt stages into a folder of its own and the commit takes only the parts of the returned result; a
capture whose attempts keep killing workers (`KilledWorker`, after `allowed-failures`) becomes a failed
capture. The dataset folder must be on a filesystem every worker and the driver see (rename is atomic
only within one). This module imports `distributed`; only `ingest(..., scheduler=...)` imports it. The
client and its checks are `tracecore/cluster.py`'s, shared with queries.

Test hook: a worker process started with `TRACECORE_TEST_PAUSE_AT=reading` pauses in its first capture
after the first batch (testpause.py), so a test can SIGKILL it mid-task.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import CancelledError
from dataclasses import dataclass, field

from tracecore.cluster import check_workers, connect
from tracecore.errors import ClusterError
from tracecore.ingest import testpause
from tracecore.ingest.control import IngestControl
from tracecore.ingest.executor import POLL_S, results_from
from tracecore.ingest.writer import CaptureResult, CaptureTask

try:
    import distributed
except ImportError as err:  # pragma: no cover - the error names the extra to install
    raise ClusterError("--scheduler needs Dask distributed: pip install 'tracecore[dask]'") from err

PROGRESS_TOPIC = "tracecore-ingest-progress"
CANCEL_CHECK_S = 0.5  # how often a task asks the scheduler whether its ingest was cancelled


@dataclass
class ClusterChannel:
    """The channel of tasks on Dask workers: holds only names, so it pickles to any worker."""

    ingest_id: str
    _checked: float = field(default=0.0, repr=False)
    _cancelled: bool = field(default=False, repr=False)

    def report(self, index: int, nbytes: int, packets: int) -> None:
        try:
            distributed.get_worker().log_event(PROGRESS_TOPIC, (self.ingest_id, index, nbytes, packets))
        except ValueError:  # not on a worker (a task run in the client's process): nothing to send
            return
        testpause.pause("reading")

    def cancelled(self) -> bool:
        now = time.monotonic()
        if not self._cancelled and now - self._checked >= CANCEL_CHECK_S:
            self._checked = now
            self._cancelled = distributed.Event(cancel_event(self.ingest_id)).is_set()
        return self._cancelled


def cancel_event(ingest_id: str) -> str:
    """The name of the Dask Event that cancels ingest `ingest_id` (the one owner of the name)."""
    return f"tracecore-cancel-{ingest_id}"


def lost_capture(err: BaseException) -> str | None:
    """A task error that fails only its capture: its workers died reading it (None: a real error)."""
    if isinstance(err, distributed.KilledWorker):
        allowed = err.args[2] if len(err.args) == 3 and isinstance(err.args[2], int) else None
        times = f"{allowed + 1} time(s)" if allowed is not None else "too often"
        return f"the Dask workers reading it died {times}; not retried: check the workers' memory and logs"
    return None


def on_cluster(
    scheduler: str, tasks: list[CaptureTask], control: IngestControl, tick: Callable[[int, int], None]
) -> Iterator[CaptureResult]:
    """Results of `tasks` run on the workers of the Dask scheduler at `scheduler`, as they finish.

    Tasks are submitted in the order given (largest first): the scheduler starts equal-priority
    tasks in submission order. Leaving early (cancel, Ctrl-C, an error) cancels the futures and sets
    the ingest's cancel event, so running attempts stop at their next batch.
    """
    ingest_id = uuid.uuid4().hex
    ticks: queue.SimpleQueue = queue.SimpleQueue()

    def on_event(event: tuple[float, tuple]) -> None:  # on the client's event-loop thread
        msg = event[1]
        if isinstance(msg, tuple | list) and len(msg) == 4 and msg[0] == ingest_id:
            ticks.put((msg[2], msg[3]))

    def poll() -> None:
        while True:
            try:
                tick(*ticks.get_nowait())
            except queue.Empty:
                return

    client = connect(scheduler)
    try:
        check_workers(client, scheduler)
    except BaseException:
        client.close()
        raise
    cancel = distributed.Event(cancel_event(ingest_id), client=client)
    finished = False
    try:
        client.subscribe_topic(PROGRESS_TOPIC, on_event)
        pool = client.get_executor(pure=False)
        yield from results_from(pool, tasks, ClusterChannel(ingest_id), control.stop, poll, lost_capture)
        poll()
        finished = not control.cancelled
    except (OSError, CancelledError, distributed.comm.CommClosedError) as err:
        if control.cancelled:
            raise
        raise ClusterError(f"lost the Dask scheduler at {scheduler}: {err or type(err).__name__}") from err
    finally:
        try:
            if client.status == "running":  # a lost scheduler holds neither the event nor the topic
                _stop_attempts(client, cancel, stop=not finished)
        finally:
            client.close()


def _stop_attempts(client: distributed.Client, cancel: distributed.Event, stop: bool) -> None:
    """Let running attempts see the cancel (when `stop`), then remove this ingest's event and topic."""
    if stop:
        cancel.set()
        time.sleep(2 * CANCEL_CHECK_S + POLL_S)  # every running attempt checks it once more
    cancel.clear()
    client.unsubscribe_topic(PROGRESS_TOPIC)
