"""SIGTERM and SIGHUP unwind like Ctrl-C while tracecore drives hosts: the one handler for both.

Why: a `kill`, a batch system ending the runner (SIGTERM) or a closed terminal (SIGHUP) would end the
process where it stands, leaving tcpdump, loss rules and training on the hosts until their dead-man
switch. Under `as_interrupts()` either signal raises `tracecore.errors.Terminated`, a KeyboardInterrupt,
at whatever line runs, so every `finally` and every Ctrl-C path runs as for Ctrl-C. `tracecore run`
holds it while it drives hosts, a `Testbed` for its lifetime (inside `tracecore run` the outer one
stays in charge).

Only Python's default action is replaced, and only in the main thread (the only one that receives
signals): a signal the program already handles or ignores (`nohup`) stays so. The first signal raises;
later ones are ignored until the handlers are restored, so the cleanup it starts is not cut short by a
second one (on a closed terminal the shell resends SIGHUP to its jobs); SIGKILL still ends it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

from tracecore.errors import Terminated

HANDLED = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `Terminated` in the body; the previous handlers are restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handle(signum: int, _frame: FrameType | None) -> None:
        nonlocal raised
        if not raised:
            raised = True
            raise Terminated(signum)

    replaced = [sig for sig in HANDLED if signal.getsignal(sig) is signal.SIG_DFL]
    for sig in replaced:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig in replaced:
            signal.signal(sig, signal.SIG_DFL)
