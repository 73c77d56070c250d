"""Shared by the view, query, figure and report tests: the real dataset and an independent reading of it.

The dataset is the embedded sample (a real 4-worker gloo DDP run captured sender-only, like the
paper) plus the both-direction sample run (every packet captured twice), ingested once per test
process with the ingest library. The reference side reads the same pcaps with dpkt and plain
`struct` (never tracecore's reader, ingest or SQL) into pandas, so each view is checked against
an independent computation of the notebook's formula.
"""

from __future__ import annotations

import atexit
import functools
import ipaddress
import os
import shutil
import struct
import tempfile
import tomllib
from decimal import Decimal
from pathlib import Path

import dpkt
import pandas as pd

from tracecore.sample import both_directions_root, both_directions_run, sample_root, sample_run

SAMPLE = sample_run().name
BOTH = both_directions_run().name
RUN_DIRS = {SAMPLE: sample_run(), BOTH: both_directions_run()}


# A dataset this function made in another process, copied instead of ingesting again: bench/mutants.py
# makes it once for its many short test runs of mutated views (each copy's catalog is rebuilt with the
# views of its checkout when opened, as for any moved dataset).
PREBUILT_ENV = "TRACECORE_TEST_SAMPLE_DATASET"


@functools.cache
def dataset_dir() -> Path:
    """Both sample runs ingested into a fresh dataset (once per process; removed at exit), or a copy
    of $TRACECORE_TEST_SAMPLE_DATASET."""
    from tracecore.ingest import ingest

    out = Path(tempfile.mkdtemp(prefix="tracecore-views-"))
    atexit.register(shutil.rmtree, out, True)
    if os.environ.get(PREBUILT_ENV):
        shutil.copytree(os.environ[PREBUILT_ENV], out / "data")
        return out / "data"
    summary = ingest([sample_root(), both_directions_root()], out / "data", jobs=1)
    assert not summary.failed, summary.failed
    return out / "data"


def t_half_width(values, n: int | None = None, s: float | None = None) -> float:
    """The 95 % Student's t half-width of `values` (or of n values with sample deviation s); scipy is
    imported here, not at module level, as it doubles the import time of a test module."""
    import math

    import numpy as np
    from scipy import stats

    if n is None:
        n, s = len(values), float(np.std(values, ddof=1))
    return float(stats.t.ppf(0.975, n - 1)) * s / math.sqrt(n)


def open_dataset():
    from tracecore.ingest import open_catalog

    return open_catalog(dataset_dir(), read_only=True)


def run_toml(run: str) -> dict:
    return tomllib.loads((RUN_DIRS[run] / "run.toml").read_text(encoding="utf-8"))


def worker_labels(run: str) -> dict[str, str]:
    """ip → W1..Wn in numeric order of address (the contract's labelling)."""
    ips = sorted((w["ip"] for w in run_toml(run)["capture"]["worker"]), key=ipaddress.ip_address)
    return {ip: f"W{i + 1}" for i, ip in enumerate(ips)}


def _pcap_records(path: Path):
    """(ts_ns, orig_len, frame bytes) of a classic pcap, straight from its headers."""
    data = path.read_bytes()
    magic = data[:4]
    endian = {
        b"\xd4\xc3\xb2\xa1": "<",
        b"\xa1\xb2\xc3\xd4": ">",
        b"\x4d\x3c\xb2\xa1": "<",
        b"\xa1\xb2\x3c\x4d": ">",
    }
    order = endian[magic]
    nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, orig = struct.unpack_from(order + "IIII", data, off)
        off += 16
        yield sec * 1_000_000_000 + frac * (1 if nano else 1000), orig, data[off : off + incl]
        off += incl


@functools.cache
def packets(run: str) -> pd.DataFrame:
    """Every packet of a run once, as the notebook saw them (sender's copy of duplicates).

    Columns: worker (capturing worker's label), ts_ns, frame_len, src_ip, dst_ip, ip_proto,
    src_port, dst_port, payload (transport payload per the IP lengths).
    """
    meta = run_toml(run)
    labels = worker_labels(run)
    rows = []
    for w in meta["capture"]["worker"]:
        own = w["ip"]
        for ts, orig, frame in _pcap_records(RUN_DIRS[run] / w["file"]):
            eth = dpkt.ethernet.Ethernet(frame)
            ip = eth.data if isinstance(eth.data, dpkt.ip.IP) else None
            src = dst = proto = sport = dport = payload = None
            if ip is not None:
                src = str(ipaddress.ip_address(ip.src))
                dst = str(ipaddress.ip_address(ip.dst))
                proto = ip.p
                l4 = ip.data
                ip_payload = ip.len - ip.hl * 4
                if isinstance(l4, dpkt.tcp.TCP):
                    sport, dport, payload = l4.sport, l4.dport, ip_payload - l4.off * 4
                elif isinstance(l4, dpkt.udp.UDP):
                    sport, dport, payload = l4.sport, l4.dport, ip_payload - 8
                else:
                    payload = ip_payload
            # both-direction captures: a packet from another captured worker is that worker's copy
            if src is not None and src != own and src in labels:
                continue
            rows.append((labels[own], ts, orig, src, dst, proto, sport, dport, payload))
    df = pd.DataFrame(
        rows,
        columns=[
            "worker",
            "ts_ns",
            "frame_len",
            "src_ip",
            "dst_ip",
            "ip_proto",
            "src_port",
            "dst_port",
            "payload",
        ],
    )
    return df.sort_values("ts_ns", kind="stable").reset_index(drop=True)


@functools.cache
def train_log(run: str) -> pd.DataFrame:
    """train_history.log with exact integer-ns timestamps (Decimal, no float rounding)."""
    log = pd.read_csv(RUN_DIRS[run] / "train_history.log", dtype={"Timestamp": str})
    log["ts_ns"] = [int(Decimal(t) * 1_000_000_000) for t in log["Timestamp"]]
    return log
