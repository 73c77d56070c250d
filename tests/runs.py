"""What the `tracecore run` tests check in a run folder and its run.toml, written once for every backend.

Why shared: the netns and ssh backends drive the same lifecycle, so a finished (or failed) run must
look the same whichever ran it; one helper keeps their tests from drifting apart.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from syrupy.extensions.amber import AmberSnapshotExtension

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
# The test's own netem probe (not the runner's): a netem qdisc on lo of a throw-away network namespace.
NETEM_PROBE = ["unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "5%"]


class RunnerSnapshot(AmberSnapshotExtension):
    """Runner snapshots in tests/snapshots/<test module>/, reviewed like the figure specs."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOTS / Path(test_location.filepath).stem)


def netem_works() -> bool:
    """Whether this machine's kernel can add a netem qdisc (this project's machine cannot)."""
    return subprocess.run(NETEM_PROBE, capture_output=True, timeout=30, check=False).returncode == 0


# What a loss test says in the summary (conftest's `untested`) where netem_works() is false.
NETEM_NOT_RUN = (
    "runners/loss.py's netem branch did not run: this machine's kernel has no sch_netem (only netem's "
    "refusal and auto's fallback to nftables were tested)"
)


def check_ok_ddp_run(run_dir: Path, ips: list[str], min_packets: int = 50) -> dict:
    """A finished run of the built-in DDP workload on len(ips) hosts; returns its run.toml."""
    import torch  # a hard requirement of the tests that run the workload, never a skip

    n = len(ips)
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "logs", "run.toml", "train_history.log", *(f"worker-{i}-tcpdump.pcap" for i in range(n))
    ]  # fmt: skip
    meta = tomllib.loads((run_dir / "run.toml").read_text())
    assert meta["result"]["status"] == "ok"
    assert meta["result"]["start_unix"] < meta["capture"]["start_unix"] < meta["capture"]["end_unix"]
    assert meta["capture"]["end_unix"] <= meta["result"]["end_unix"]
    assert meta["run"]["n_workers"] == n
    assert [h["exit_code"] for h in meta["hosts"]] == [0] * n
    assert [h["ip"] for h in meta["hosts"]] == ips
    assert [h["interface"] for h in meta["hosts"]] == ["eth1"] * n
    workers = meta["capture"]["worker"]
    assert [w["dropped_by_kernel"] for w in workers] == [0] * n
    assert all(w["packets"] >= min_packets for w in workers), workers
    assert [w["bytes"] for w in workers] == [(run_dir / w["file"]).stat().st_size for w in workers]
    assert meta["model"]["gradient_bytes"] == 4 * meta["model"]["n_params"]
    assert meta["versions"]["torch"] == torch.__version__
    check_clocks(meta)
    return meta


def check_clocks(meta: dict, max_rtt_ns: int = 5_000_000_000) -> None:
    """Every host's clock was read before the run; on one machine all share one clock, so the host's
    reading lies inside the bracket and the offset is at most half the round trip."""
    for host in meta["hosts"]:
        rtt, offset = host["clock_rtt_ns"], host["clock_offset_ns"]
        assert 0 < rtt < max_rtt_ns, host
        assert abs(offset) <= rtt // 2 + 1, host


def check_loss(meta: dict, loss_pct: float, requested: str = "nftables") -> None:
    """run.toml's [loss] says which method ran: the one requested, `auto`'s netem where the kernel has
    it and nftables where not."""
    chosen = ("netem" if netem_works() else "nftables") if requested == "auto" else requested
    method = chosen if loss_pct > 0 else "none"
    assert meta["loss"]["method"] == method
    assert meta["loss"]["requested"] == requested
    assert meta["loss"]["loss_pct"] == loss_pct
    assert meta["network"]["loss_method"] == method
    assert (meta["network"]["frames_dropped_by_loss_rule"] > 0) is (loss_pct > 0)


def check_failed_run(out: Path, reason: str, exit_codes: list[int]) -> tuple[Path, dict]:
    """The one run of `out` failed: kept apart in `_failed/`, run.toml naming why and every exit code."""
    assert [p.name for p in out.iterdir()] == ["_failed"]
    (failed,) = (out / "_failed").iterdir()
    meta = tomllib.loads((failed / "run.toml").read_text())
    assert meta["result"]["status"] == "failed"
    assert meta["result"]["reason"] == reason
    assert [h["exit_code"] for h in meta["hosts"]] == exit_codes
    return failed, meta
