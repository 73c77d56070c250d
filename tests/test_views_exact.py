"""Exact values of `data_per_step` and `bytes_sent`, column by column, against an independent reference.

The reference is tests/test_views_support.py's reading of the raw pcaps (dpkt and `struct`, never
tracecore's reader, ingest or SQL) and of train_history.log (Decimal timestamps), with the
gradient size from run.toml. Every column the views document is compared, not only some: a
plausible slip in any one of them (a step count off by one, a share from packet counts, overhead
over the wrong denominator) changes a value checked here.
"""

from __future__ import annotations

import pandas as pd
import pytest

from tests.test_views_support import BOTH, SAMPLE, open_dataset, packets, run_toml, train_log, worker_labels
from tracecore import query

RUNS = [SAMPLE, BOTH]


@pytest.fixture(scope="module")
def con():
    c = open_dataset()
    yield c
    c.close()


def view(con, name: str, run: str) -> pd.DataFrame:
    return query.run_view(con, name, runs=[run]).to_pandas()


# ---- data_per_step (Sec. VI) ----------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_data_per_step_every_column(con, run) -> None:
    log = train_log(run)
    batch = log[log.Type == "Batch"].ts_ns
    first, last = int(batch.min()), int(batch.max())
    steps = len(batch) - 1
    p = packets(run)
    win = p[(p.ts_ns > first) & (p.ts_ns <= last)]
    labels = worker_labels(run)
    sent = win[win.src_ip.isin(labels)].groupby("src_ip")
    rank_bytes = sent.frame_len.sum().reindex(list(labels), fill_value=0)
    rank_payload = sent.payload.sum().reindex(list(labels), fill_value=0)
    n = len(labels)
    grad = run_toml(run)["model"]["gradient_bytes"]
    expected_rank = 2 * (n - 1) / n * grad

    got = view(con, "data_per_step", run)
    assert len(got) == 1
    row = got.iloc[0]
    assert row.n_workers == n == 4
    assert row.steps == steps == {SAMPLE: 29, BOTH: 3}[run]
    assert row.step_s == pytest.approx((last - first) / 1e9 / steps, rel=1e-12)
    assert row.bytes == win.frame_len.sum()
    assert row.payload_bytes == win.payload.fillna(0).sum()
    assert row.mb_per_step == pytest.approx(win.frame_len.sum() / steps / 1e6, rel=1e-12)
    assert row.payload_mb_per_step == pytest.approx(win.payload.fillna(0).sum() / steps / 1e6, rel=1e-12)
    assert row.rank_bytes_per_step == pytest.approx(rank_bytes.mean() / steps, rel=1e-12)
    assert row.rank_payload_per_step == pytest.approx(rank_payload.mean() / steps, rel=1e-12)
    assert row.rank_payload_min == pytest.approx(rank_payload.min() / steps, rel=1e-12)
    assert row.rank_payload_max == pytest.approx(rank_payload.max() / steps, rel=1e-12)
    overhead = (rank_bytes.sum() - rank_payload.sum()) / rank_payload.sum()
    assert row.header_overhead == pytest.approx(overhead, rel=1e-12)
    assert row.grad_bytes == grad == 79816
    assert row.expected_rank_bytes == pytest.approx(expected_rank, rel=1e-12)
    assert row.payload_ratio == pytest.approx(rank_payload.mean() / steps / expected_rank, rel=1e-12)
    # the per-rank figures differ from one another, so swapping any two of them is seen
    assert len({rank_bytes.mean(), rank_payload.mean(), rank_payload.min(), rank_payload.max()}) == 4


def test_data_per_step_by_hand(con) -> None:
    """The sample run's figures, read once from its log and captures and written down."""
    row = view(con, "data_per_step", SAMPLE).iloc[0]
    log = train_log(SAMPLE)
    batch = log[log.Type == "Batch"].ts_ns
    assert (batch.min(), batch.max()) == (1_795_332_671_168_302_000, 1_795_332_672_993_467_000)
    assert row.step_s == pytest.approx(1.825165 / 29, rel=1e-12)
    assert row.expected_rank_bytes == 119724.0  # run.toml's bytes_per_rank_per_step


# ---- bytes_sent (Fig. 3) --------------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_bytes_sent_packets_and_share(con, run) -> None:
    labels = worker_labels(run)
    p = packets(run)
    sent = p[p.src_ip.isin(labels)].groupby("src_ip")
    ref = pd.DataFrame({"bytes": sent.frame_len.sum(), "packets": sent.size()})
    got = view(con, "bytes_sent", run).set_index("ip")
    assert list(got.worker) == sorted(labels.values())
    assert got.worker.to_dict() == labels
    assert got.packets.to_dict() == ref.packets.to_dict()
    assert got.bytes.to_dict() == ref.bytes.to_dict()
    assert (got.run_bytes == ref.bytes.sum()).all()
    for ip, share in got.share.items():
        assert share == pytest.approx(ref.bytes[ip] / ref.bytes.sum(), rel=1e-12), ip
    # a share of packets is measurably different on these runs: the check above can tell them apart
    packet_share = ref.packets / ref.packets.sum()
    assert (got.share - packet_share.reindex(got.index)).abs().max() > 1e-3
