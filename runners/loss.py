"""How a run's packet loss is made: an nftables drop rule by default, netem where asked and the hosts'
kernel has it.

Why a choice: the paper ran `tc qdisc add dev eth1 root netem loss X%` on every VM; kernels built
without `sch_netem` (this project's machine among them) cannot, and an nftables `numgen random`
rule drops the same share of frames. `[loss] method` says which: `nftables` (the default: the path
tracecore's tests run), `auto` (netem when a probe on every host shows it works, else nftables),
`netem` (refused before any run where it does not work), or `none` (tracecore applies nothing: the
loss values only name the runs). The method is settled once per experiment, before the first run,
and each run's `run.toml` records it.

The netem branch has never run on this project's machines: their kernel has no `sch_netem`, so the
tests see only its refusal and the fallback (`NETEM_UNTESTED`, said when a run chooses netem).

The probe adds a netem qdisc to `lo` inside a throw-away network namespace (`unshare --net`), so it
works exactly when the run's own `tc qdisc add … netem` would, and changes nothing on the host.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tracecore.errors import ExitCode, TracecoreError
from tracecore.runners.backend import Step

NETEM_PROBE = ("unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "1%")
NETEM_UNTESTED = (
    "loss: netem (the paper's method), which tracecore's own tests have never run: their machines' kernel "
    'has no sch_netem; method = "nftables" is the tested one'
)


class LossMethodError(TracecoreError):
    """The experiment asks for netem and a host's kernel cannot do it (exit 6, before any run starts)."""

    exit_code = ExitCode.TESTBED


def netem_add_argv(interface: str, loss_pct: float) -> list[str]:
    """The paper's loss command: random loss of `loss_pct` % on the interface's egress."""
    return ["tc", "qdisc", "add", "dev", interface, "root", "netem", "loss", f"{loss_pct:g}%"]


def netem_del_argv(interface: str) -> list[str]:
    return ["tc", "qdisc", "del", "dev", interface, "root", "netem"]


def netem_show_argv(interface: str) -> list[str]:
    return ["tc", "-s", "qdisc", "show", "dev", interface]


def netem_dropped(text: str) -> int:
    """Packets the netem qdisc dropped, from `tc -s qdisc show` (0 when there is none)."""
    m = re.search(r"qdisc netem .*?\n\s*Sent \d+ bytes \d+ pkt \(dropped (\d+)", text)
    return int(m.group(1)) if m else 0


def choose_method(requested: str, netem_missing: Callable[[], str | None], experiment: Path) -> str:
    """The method a run uses for `requested`; `netem_missing()` probes the hosts (None: netem works).

    Only the refusal of `netem` and the fallback of `auto` to nftables run on this project's
    machines (no `sch_netem`); a "netem" answer is never exercised there, so the caller says
    `NETEM_UNTESTED` when it gets one."""
    if requested in ("none", "nftables"):
        return requested
    why = netem_missing()
    if why is None:
        return "netem"
    if requested == "netem":
        raise LossMethodError(
            f'{experiment}: loss.method = netem, but {why}; use method = "auto" (falls back to'
            ' nftables) or "nftables"'
        )
    return "nftables"


def loss_steps(choice: str, probe: list[Step], netem: list[Step], nftables: list[Step]) -> list[Step]:
    """A dry run's loss commands for the requested method; `auto` shows the probe and both outcomes."""
    if choice in ("none", "nftables"):
        return [] if choice == "none" else nftables
    probe = [replace(s, what="loss probe (netem?)") for s in probe]
    if choice == "netem":
        return probe + netem
    return (
        probe
        + [replace(s, what="loss if netem works") for s in netem]
        + [replace(s, what="loss else (nftables)") for s in nftables]
    )
