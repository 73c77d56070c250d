"""Each host's clock offset from this machine, measured before a run and recorded in run.toml.

Why: every capture is timestamped by its own host's clock (the paper never synchronised them), so
a reader comparing packets across workers needs to know how far apart the clocks were. One
exchange: read this machine's clock (t0), the host's (through the backend: `date +%s%N` over ssh, in
the namespace for netns), this machine's again (t1); offset = host − (t0 + t1)/2, uncertain by up to
half the round trip t1 − t0. Of a few exchanges the one with the shortest round trip is kept, as NTP
does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tracecore.runners.launchers import Host

SAMPLES = 5
DATE_ARGV = ("date", "+%s%N")  # GNU date: the clock in ns since the epoch


def parse_clock_ns(text: str, where: str) -> int:
    """`date +%s%N`'s answer as an int; anything else (busybox prints a literal N) is a ValueError."""
    value = text.strip()
    if not value.isdigit() or len(value) < 19:
        raise ValueError(f"{where}: `date +%s%N` gave {value[:40]!r}, not nanoseconds (GNU date needed)")
    return int(value)


def measure_offsets(
    read: Callable[[Host], int], hosts: list[Host], samples: int = SAMPLES
) -> dict[int, dict]:
    """Per host index: `clock_offset_ns` (host − this machine) and `clock_rtt_ns` (its uncertainty is
    half of it), or `clock_error` when the host's clock cannot be read; {} when the backend reads none."""
    found: dict[int, dict] = {}
    for host in hosts:
        best: tuple[int, int] | None = None
        try:
            for _ in range(samples):
                t0 = time.time_ns()
                remote = read(host)
                t1 = time.time_ns()
                if best is None or t1 - t0 < best[1]:
                    best = (remote - (t0 + t1) // 2, t1 - t0)
        except NotImplementedError:
            return {}
        except ValueError as err:
            found[host.index] = {"clock_error": str(err)}
            continue
        assert best is not None
        found[host.index] = {"clock_offset_ns": best[0], "clock_rtt_ns": best[1]}
    return found
