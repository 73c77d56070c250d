"""`tracecore.runners.signals`: SIGTERM and SIGHUP raise like Ctrl-C once, real signals sent to this
process; handlers the program set (or SIG_IGN, as under nohup) stay; the defaults come back after."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from tracecore.errors import ExitCode, Terminated
from tracecore.runners.signals import HANDLED, as_interrupts


@pytest.fixture
def default_actions():
    """SIGTERM and SIGHUP at their default action for the test, whatever pytest had."""
    saved = {sig: signal.getsignal(sig) for sig in HANDLED}
    for sig in HANDLED:
        signal.signal(sig, signal.SIG_DFL)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _signalled(sig: signal.Signals, cleanups: list[str]) -> None:
    """Send sig to this process under `as_interrupts`, then every handled signal again in the cleanup."""
    with as_interrupts():
        assert signal.getsignal(sig) is not signal.SIG_DFL  # else the kill below ends pytest
        try:
            os.kill(os.getpid(), sig)
            time.sleep(30)  # not reached: the handler raises first
        finally:
            for again in HANDLED:  # ignored: the cleanup is not cut short
                os.kill(os.getpid(), again)
            cleanups.append("done")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_first_signal_raises_later_ones_let_the_cleanup_finish(
    default_actions, sig: signal.Signals, code: int
) -> None:
    cleanups: list[str] = []
    with pytest.raises(Terminated) as caught:
        _signalled(sig, cleanups)
    assert cleanups == ["done"]
    err = caught.value
    assert isinstance(err, KeyboardInterrupt)  # every Ctrl-C path applies
    assert (err.signal_name, err.exit_code, str(err)) == (
        sig.name,
        ExitCode(code),
        f"Interrupted by {sig.name}",
    )
    assert [signal.getsignal(s) for s in HANDLED] == [signal.SIG_DFL, signal.SIG_DFL]


def test_a_handled_or_ignored_signal_is_left_alone(default_actions) -> None:
    def own(_signum: int, _frame: object) -> None:
        return None

    signal.signal(signal.SIGTERM, own)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    with as_interrupts():
        assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == (own, signal.SIG_IGN)
        os.kill(os.getpid(), signal.SIGHUP)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == (own, signal.SIG_IGN)


def test_outside_the_main_thread_nothing_is_installed(default_actions) -> None:
    seen = []

    def body() -> None:
        with as_interrupts():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(timeout=10)
    assert seen == [signal.SIG_DFL]


def test_nested_the_outer_handler_stays_in_charge(default_actions) -> None:
    """A Testbed inside `tracecore run`: the inner `as_interrupts` installs nothing, one handler raises."""
    with as_interrupts():
        outer = signal.getsignal(signal.SIGTERM)
        with as_interrupts():
            assert signal.getsignal(signal.SIGTERM) is outer
        assert signal.getsignal(signal.SIGTERM) is outer
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
