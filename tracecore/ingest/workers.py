"""Which address is each worker, and its label W1..Wn.

Why "dominant address": a worker's capture holds its own IP in (nearly) every packet — as the
source in a sender-only capture (`tcpdump src <ip>`), as source or destination in a both-direction one
— while each peer appears in only a share. So the IP with the most appearances (src + dst), ties
broken by appearances as source, is the worker's. run.toml can pin it. Labels follow numeric IP order
(the paper: 192.168.17.50 → W1 … .53 → W4); workers without any IP traffic sort last.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field

RX_SHARE = 0.005  # a capture whose rows are addressed to its own IP above this share has inbound traffic


@dataclass
class WorkerInfo:
    key: str
    files: list[str]
    counts: dict[str, list[int]] = field(default_factory=dict)  # ip → [as src, as dst], all its files
    packets: int = 0
    bytes: int = 0
    ip: str | None = None
    ip_source: str = "none"
    label: str = ""
    dup_rows: int = 0
    claimed: str | None = None  # the address this capture says is its own: pinned, else dominant

    @property
    def receives(self) -> bool:
        own = self.counts.get(self.ip or "", [0, 0])
        return self.packets > 0 and own[1] > RX_SHARE * self.packets


def _natural(key: str) -> tuple:
    """`worker-2` before `worker-10`: runs of digits compare as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", key))


def _ip_order(ip: str | None) -> tuple:
    if ip is None:
        return (1, 0, 0)
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return (0, 9, ip)
    return (0, addr.version, int(addr))


def assign(captures: list[dict], pinned: dict[str, str]) -> tuple[dict[str, WorkerInfo], list[str]]:
    """Workers of one run from its captures rows (with `ip_counts` JSON); returns (by key, warnings).

    `pinned` maps a capture file name or worker key to an IP (run.toml).
    """
    workers: dict[str, WorkerInfo] = {}
    for cap in captures:
        w = workers.setdefault(cap["capture"], WorkerInfo(cap["capture"], []))
        w.files.append(cap["file"])
        w.packets += cap["packets"] or 0
        w.bytes += cap["bytes"] or 0
        for ip, (src, dst) in json.loads(cap["ip_counts"] or "{}").items():
            acc = w.counts.setdefault(ip, [0, 0])
            acc[0] += src
            acc[1] += dst
    warnings: list[str] = []
    taken: set[str] = set()
    ranked = {
        k: sorted(w.counts, key=lambda ip, w=w: (-(w.counts[ip][0] + w.counts[ip][1]), -w.counts[ip][0], ip))
        for k, w in workers.items()
    }
    for w in workers.values():
        pin = pinned.get(w.key) or next((pinned[f] for f in w.files if f in pinned), None)
        w.claimed = pin or (ranked[w.key][0] if ranked[w.key] else None)
        if pin:
            w.ip, w.ip_source = pin, "run.toml"
            taken.add(pin)
            if ranked[w.key] and ranked[w.key][0] != pin:
                warnings.append(
                    f"{w.key}: run.toml gives IP {pin}, the capture's dominant address is {ranked[w.key][0]}"
                )

    def confidence(w: WorkerInfo) -> float:
        cands = ranked[w.key]
        if not cands:
            return 0.0
        top = w.counts[cands[0]]
        return (top[0] + top[1]) / max(w.packets, 1)

    for w in sorted(workers.values(), key=lambda w: (-confidence(w), w.key)):
        if w.ip is not None or not ranked[w.key]:
            continue
        free = [ip for ip in ranked[w.key] if ip not in taken]
        w.ip, w.ip_source = (free[0] if free else ranked[w.key][0]), "inferred"
        if not free:
            warnings.append(f"{w.key}: dominant address {w.ip} is also another worker's; pin it in run.toml")
        taken.add(w.ip)
    ordered = sorted(workers.values(), key=lambda w: (_ip_order(w.ip), _natural(w.key)))
    ips = {w.ip for w in ordered if w.ip}
    for i, w in enumerate(ordered, 1):
        w.label = f"W{i}"
        w.dup_rows = sum(w.counts.get(ip, [0, 0])[0] for ip in ips - {w.ip})
    return workers, warnings


def without_captures(names: list[str], pinned: dict[str, str]) -> tuple[dict[str, WorkerInfo], list[str]]:
    """Workers of a run that has no capture: one per `worker-<i>` name among its files (`names`: the
    counter sampler's `worker-<i>-counters.tsv`, a rank's log) and per worker run.toml pins, keyed by
    that stem so a pinned `worker-0-tcpdump.pcap` and `worker-0-counters.tsv` are one worker.

    Why: views place a rank's records and a sampler's counters on workers by these names and addresses,
    as they would with captures."""
    from tracecore.ingest.discover import worker_key, worker_stem

    rows = []
    for name in [*names, *pinned]:
        key = worker_stem(name) or (worker_key(name)[0] if name in pinned else None)
        if key is not None:
            rows.append({"capture": key, "file": name, "packets": 0, "bytes": 0, "ip_counts": None})
    workers, warnings = assign(rows, pinned)
    for w in workers.values():
        w.files = []  # workers.n_files counts capture files
    return workers, warnings


def from_nccl_logs(addresses: list[list[str]]) -> dict[str, WorkerInfo]:
    """Workers of a run with neither captures nor `worker-<i>` names nor pins: one per address its NCCL
    logs name first for a process (the RoCE GID, else the NET/Socket device, else the bootstrap
    interface), so ranks on one host share a worker; keyed and labelled by that address.

    Why: NCCL's log is what a traces-only run says of where each rank ran; `nccl_rank_workers` then
    pairs every rank with the worker of its address, as it would with captures."""
    found = sorted({a[0] for a in addresses if a}, key=_ip_order)
    workers = {}
    for i, ip in enumerate(found, 1):
        workers[ip] = WorkerInfo(ip, [], ip=ip, ip_source="nccl log", label=f"W{i}", claimed=ip)
    return workers


def shared_addresses(workers: dict[str, WorkerInfo]) -> dict[str, list[str]]:
    """Addresses that more than one worker claims as its own (pinned or dominant) → their capture keys.

    Why it matters: views join packets to workers by address, so a shared one (every capture on
    loopback 127.0.0.1, or one capture copied twice) would count each packet once per claimant.
    """
    by_ip: dict[str, list[str]] = {}
    for w in workers.values():
        if w.claimed is not None:
            by_ip.setdefault(w.claimed, []).append(w.key)
    return {ip: sorted(keys) for ip, keys in sorted(by_ip.items()) if len(keys) > 1}


def shared_address_message(shared: dict[str, list[str]]) -> str:
    """What is wrong and the two ways out, for the run's problem line."""
    which = "; ".join(f"{', '.join(keys)} all claim {ip}" for ip, keys in shared.items())
    return (
        f"workers share an address ({which}), so every view would count their packets once per worker;"
        " this run was not ingested. Pin each worker's IP in run.toml ([[capture.worker]] file = ..., ip ="
        " ...), or set [capture] shared_addresses = true to ingest it anyway"
    )


def capture_mode(workers: dict[str, WorkerInfo]) -> str:
    """sender-only | both | mixed | empty | none: whether captures also hold inbound packets (none: the
    run has no capture file)."""
    if not any(w.files for w in workers.values()):
        return "none"
    modes = {w.receives for w in workers.values() if w.packets}
    if not modes:
        return "empty"
    if modes == {False}:
        return "sender-only"
    return "both" if modes == {True} else "mixed"
