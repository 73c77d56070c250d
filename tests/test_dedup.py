"""De-duplication of both-direction captures (ARCHITECTURE.md): `packets` keeps the sender's copy.

Every worker-to-worker packet of the both-direction sample run is in two captures: the sender's
(src_ip = its own address) and the receiver's. The reference here reads each capture with the
reader alone (`read_capture`) and applies the rule by hand with the worker addresses of run.toml:
for each directed pair the kept rows must be the sender capture's rows (its worker label, its
timestamps and lengths), and the hidden count is the number of rows whose source is another
captured worker. Counts and byte sums alone cannot tell the copies apart (they are equal at both
ends), so the timestamps and the worker label are compared row by row.
"""

from __future__ import annotations

import functools
import ipaddress
import tomllib

import pandas as pd
import pytest

from tests.test_views_support import BOTH, open_dataset
from tracecore.reader import read_capture
from tracecore.sample import both_directions_run

ROW = ["ts_ns", "frame_len", "src_port", "dst_port", "l4_payload_len"]


@pytest.fixture(scope="module")
def con():
    c = open_dataset()
    yield c
    c.close()


@functools.cache
def captures() -> dict[str, tuple[str, pd.DataFrame]]:
    """worker label → (its address, every row of its capture), straight from the reader."""
    run = both_directions_run()
    meta = tomllib.loads((run / "run.toml").read_text(encoding="utf-8"))
    ws = sorted(meta["capture"]["worker"], key=lambda w: ipaddress.ip_address(w["ip"]))
    out = {}
    for i, w in enumerate(ws):
        df = read_capture(run / w["file"]).to_pandas()
        df["src_ip"] = df.src_ip.astype(object)
        df["dst_ip"] = df.dst_ip.astype(object)
        out[f"W{i + 1}"] = (w["ip"], df)
    return out


def _rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(tuple(int(x) if pd.notna(x) else -1 for x in r) for r in df[ROW].itertuples(index=False))


def test_hidden_rows_are_the_copies_received_from_other_workers(con) -> None:
    caps = captures()
    ips = {ip for ip, _ in caps.values()}
    expected_hidden = {w: int(df.src_ip.isin(ips - {ip}).sum()) for w, (ip, df) in caps.items()}
    stored = {w: len(df) for w, (_, df) in caps.items()}
    assert expected_hidden == {"W1": 741, "W2": 752, "W3": 735, "W4": 678}
    got = dict(
        con.execute("SELECT worker, dup_rows FROM workers WHERE run = ? ORDER BY worker", [BOTH]).fetchall()
    )
    assert got == expected_hidden
    kept = dict(
        con.execute("SELECT worker, count(*) FROM packets WHERE run = ? GROUP BY worker", [BOTH]).fetchall()
    )
    assert kept == {w: stored[w] - expected_hidden[w] for w in caps}
    everything = con.execute("SELECT count(*) FROM packets_all WHERE run = ?", [BOTH]).fetchone()[0]
    assert everything == sum(stored.values()) == 5836


def test_each_pair_keeps_the_senders_rows(con) -> None:
    """For every directed worker pair: kept rows = the sender capture's rows, labelled with the sender."""
    caps = captures()
    compared = 0
    for sender, (src, sent) in caps.items():
        for receiver, (dst, received) in caps.items():
            if sender == receiver:
                continue
            at_sender = sent[(sent.src_ip == src) & (sent.dst_ip == dst)]
            at_receiver = received[(received.src_ip == src) & (received.dst_ip == dst)]
            got = con.execute(
                f"SELECT worker, {', '.join(ROW)} FROM packets WHERE run = ? AND src_ip = ? AND dst_ip = ?",
                [BOTH, src, dst],
            ).df()
            assert set(got.worker) == ({sender} if len(at_sender) else set()), (sender, receiver)
            assert _rows(got) == _rows(at_sender), (sender, receiver)
            if len(at_sender):
                # the receiver's copy is a different row set (its own clock): the check can tell them apart
                assert _rows(at_receiver) != _rows(at_sender), (sender, receiver)
                compared += 1
    assert compared == 12  # the gloo full mesh: every ordered pair carries traffic


def test_rows_from_uncaptured_hosts_and_without_address_are_kept(con) -> None:
    caps = captures()
    ips = {ip for ip, _ in caps.values()}
    for w, (ip, df) in caps.items():
        keep = df[~df.src_ip.isin(ips - {ip})]
        got = con.execute(
            f"SELECT {', '.join(ROW)} FROM packets WHERE run = ? AND worker = ?", [BOTH, w]
        ).df()
        assert _rows(got) == _rows(keep), w
        assert int(keep.src_ip.isna().sum()) == 6  # ARP rows: no IP source, never hidden
