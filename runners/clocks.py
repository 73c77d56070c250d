"""Each host's clock offset from this machine, measured before a run and recorded in run.toml.

Why: every capture is timestamped by its own host's clock (the paper never synchronised them), so
a reader comparing packets across workers needs to know how far apart the clocks were. The backend
names a command that starts a small loop on the host (`CLOCK_LOOP`: one `date +%s%N` per line read;
over ssh, in the namespace for netns); one exchange writes a line and reads the answer, bracketed by
this machine's clock t0 and t1: offset = host − (t0 + t1)/2, uncertain by up to half the round trip
t1 − t0. The loop keeps its connection open, so an exchange costs a network round trip, not a new
ssh session (whose set-up would sit on one side of the bracket only). The first exchange warms the
loop up and is not counted; of the next few the one with the shortest round trip is kept, as NTP
does.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import time
from collections.abc import Callable

from tracecore.runners.launchers import Host

SAMPLES = 5
TIMEOUT_S = 30.0  # for one answer, the first included (it may open an ssh session)
# The host's side: its clock in ns since the epoch (GNU date) for every line it reads, until EOF.
CLOCK_LOOP = "while read -r _; do date +%s%N || exit; done"


def parse_clock_ns(text: str, where: str) -> int:
    """`date +%s%N`'s answer as an int; anything else (busybox prints a literal N) is a ValueError."""
    value = text.strip()
    if not value.isdigit() or len(value) < 19:
        raise ValueError(f"{where}: `date +%s%N` gave {value[:40]!r}, not nanoseconds (GNU date needed)")
    return int(value)


def measure_offsets(
    argv_of: Callable[[Host], list[str] | None], hosts: list[Host], samples: int = SAMPLES
) -> dict[int, dict]:
    """Per host index: `clock_offset_ns` (host − this machine) and `clock_rtt_ns` (the offset is known
    to ± half of it), or `clock_error` when the host's clock cannot be read; {} when `argv_of` gives
    no command (a backend that reads no clocks)."""
    found: dict[int, dict] = {}
    for host in hosts:
        argv = argv_of(host)
        if argv is None:
            return {}
        try:
            offset, rtt = _exchange(argv, host.name, samples)
        except ValueError as err:
            found[host.index] = {"clock_error": str(err)}
        else:
            found[host.index] = {"clock_offset_ns": offset, "clock_rtt_ns": rtt}
    return found


def _exchange(argv: list[str], where: str, samples: int) -> tuple[int, int]:
    """(offset, round trip) of the best of `samples` exchanges with the loop `argv` starts."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    assert proc.stdout is not None
    best: tuple[int, int] | None = None
    try:
        for i in range(samples + 1):
            t0 = time.time_ns()
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            line = _read_line(proc, where)
            t1 = time.time_ns()
            remote = parse_clock_ns(line, where)
            if i and (best is None or t1 - t0 < best[1]):
                best = (remote - (t0 + t1) // 2, t1 - t0)
    except OSError:  # the loop is gone (its stdin closed): say why, as an end seen on stdout does
        raise _ended(proc, where) from None
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()
    assert best is not None
    return best


def _read_line(proc: subprocess.Popen, where: str) -> str:
    """One line of the loop's output, within TIMEOUT_S; its end or silence is a ValueError."""
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    data = b""
    deadline = time.monotonic() + TIMEOUT_S
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise ValueError(f"{where}: no clock reading within {TIMEOUT_S:g} s")
        chunk = os.read(fd, 64)
        if not chunk:
            raise _ended(proc, where)
        data += chunk
    return data.decode(errors="replace")


def _ended(proc: subprocess.Popen, where: str) -> ValueError:
    """Why the loop ended: the last line it wrote to stderr (ssh's reason), else its exit code."""
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait(timeout=5)
    err = proc.stderr.read().decode(errors="replace").strip()  # type: ignore[union-attr]
    return ValueError(f"{where}: the clock loop ended ({err.splitlines()[-1] if err else f'exit {code}'})")
