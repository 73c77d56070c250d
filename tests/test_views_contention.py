"""`contention` and `compare` on a catalog with a healthy run and a run with one link held down.

The runs are the embedded sample run (real 4-worker gloo DDP, sender-side captures) copied under
three names (tmp_path only): two unchanged copies (`normal` and `0`: both 0 % loss) and one whose W2
capture lost 3 of every 4 W2→W1 frames (those whose timestamp in µs is not a multiple of 4) during
0.5 s in the middle of training: the ring link W2→W1 carried a quarter of its bytes there, as if
another tenant had taken the link. The reference side is the sample's packets read with dpkt
(tests/test_views_support.py), the same frames dropped in pandas, and each view's rule applied
here in pandas from its header: never tracecore's SQL.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import dpkt
import numpy as np
import pandas as pd
import pytest

from tests.test_views_support import SAMPLE, packets, train_log, worker_labels
from tracecore import query
from tracecore.errors import UsageError
from tracecore.sample import sample_run

BASE = "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
ZERO = "torch_ddp-resnet8w8-sgd-16-gloo-0-ring"  # a second 0 % run: compare's groups
SLOW = "torch_ddp-resnet8w8-sgd-16-gloo-loss_1-ring"
W1, W2 = "192.168.17.50", "192.168.17.51"  # W2's capture is worker-1-tcpdump.pcap
THIN_FROM_S, THIN_TO_S = 0.6, 1.1  # seconds after the first logged step
WIDTH = 100_000_000  # contention's default bin


def _t_first_last() -> tuple[int, int]:
    log = train_log(SAMPLE)
    b = log[log.Type == "Batch"].ts_ns
    return int(b.min()), int(b.max())


def _thin_window() -> tuple[int, int]:
    t_first, _ = _t_first_last()
    return t_first + int(THIN_FROM_S * 1e9), t_first + int(THIN_TO_S * 1e9)


def _dropped(ts_ns: int, src: str | None, dst: str | None) -> bool:
    lo, hi = _thin_window()
    return src == W2 and dst == W1 and lo <= ts_ns < hi and (ts_ns // 1000) % 4 != 0


def _thin_capture(src: Path, dst: Path) -> int:
    """Copy the classic little-endian µs pcap `src` to `dst` without the dropped frames; returns how many."""
    data = src.read_bytes()
    assert data[:4] == b"\xd4\xc3\xb2\xa1", "the sample's captures are little-endian µs pcaps"
    out, off, dropped = [data[:24]], 24, 0
    while off + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack_from("<IIII", data, off)
        record = data[off : off + 16 + incl]
        off += 16 + incl
        eth = dpkt.ethernet.Ethernet(record[16:])
        ip = eth.data if isinstance(eth.data, dpkt.ip.IP) else None
        addrs = (
            (dpkt.utils.inet_to_str(ip.src), dpkt.utils.inet_to_str(ip.dst))
            if ip is not None
            else (None, None)
        )
        if _dropped(sec * 1_000_000_000 + usec * 1000, *addrs):
            dropped += 1
            continue
        out.append(record)
    dst.write_bytes(b"".join(out))
    return dropped


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    from tracecore.ingest import ingest, open_catalog

    root = tmp_path_factory.mktemp("contention")
    for name in (BASE, ZERO, SLOW):
        run = root / "runs" / name
        run.mkdir(parents=True)
        shutil.copy(sample_run() / "train_history.log", run)
        for i in range(4):
            capture = sample_run() / f"worker-{i}-tcpdump.pcap"
            if name == SLOW and i == 1:
                assert _thin_capture(capture, run / capture.name) > 100
            else:
                shutil.copy(capture, run)
    summary = ingest([root / "runs"], root / "data", jobs=1)
    assert not summary.failed, summary.failed
    connection = open_catalog(root / "data", read_only=True)
    yield connection
    connection.close()


def q(con, name: str, runs=None, **params) -> pd.DataFrame:
    return query.run_view(con, name, runs=runs, params=params).to_pandas()


def ref_packets(run: str) -> pd.DataFrame:
    p = packets(SAMPLE)
    if run == SLOW:
        keep = [not _dropped(t, s, d) for t, s, d in zip(p.ts_ns, p.src_ip, p.dst_ip, strict=True)]
        p = p[keep]
    return p


def ref_bins(run: str, width: int) -> pd.DataFrame:
    """Zero-filled bins per directed worker pair from the run's first to last packet, each marked steady."""
    p = ref_packets(run)
    k_lo, k_hi = p.ts_ns.min() // width, p.ts_ns.max() // width
    labels = worker_labels(SAMPLE)
    w = p[p.src_ip.isin(labels) & p.dst_ip.isin(labels)]
    sums = w.groupby([w.src_ip.map(labels), w.dst_ip.map(labels), w.ts_ns // width]).frame_len.sum()
    pairs = sorted(set(zip(w.src_ip.map(labels), w.dst_ip.map(labels), strict=True)))
    idx = pd.MultiIndex.from_tuples(
        [(s, d, k) for s, d in pairs for k in range(k_lo, k_hi + 1)], names=["src_worker", "dst_worker", "k"]
    )
    out = sums.reindex(idx, fill_value=0).rename("bytes").reset_index()
    out["bin_start_ns"] = out.k * width
    out["gbps"] = out.bytes * 8 / width
    t_first, t_last = _t_first_last()
    out["steady"] = (out.bin_start_ns >= t_first) & (out.bin_start_ns + width <= t_last)
    return out


def ref_contention(run: str, width: int = WIDTH, threshold: float = 0.8, min_bins: int = 3):
    """(bins with reference, ratio and below; held windows as (src, dst, first bin, last bin, busy bins))."""
    bins = ref_bins(run, width)
    busy = bins[bins.steady & (bins.bytes > 0)]
    reference = busy.groupby(["src_worker", "dst_worker"]).gbps.median().rename("reference_gbps")
    bins = bins.join(reference, on=["src_worker", "dst_worker"])
    bins["below"] = bins.steady & (bins.bytes > 0) & (bins.gbps < threshold * bins.reference_gbps)
    windows = []
    for (src, dst), link in bins[bins.steady & (bins.bytes > 0)].groupby(["src_worker", "dst_worker"]):
        run_of: list[int] = []
        for start, below in [*zip(link.bin_start_ns, link.below, strict=True), (None, False)]:
            if below:
                run_of.append(start)
                continue
            if len(run_of) >= min_bins:
                windows.append((src, dst, run_of[0], run_of[-1], len(run_of)))
            run_of = []
    return bins, sorted(windows)


def held_windows(got: pd.DataFrame) -> list[tuple]:
    held = got[got.held_bins.notna()]
    t0 = packets(SAMPLE).ts_ns.min()
    rows = {
        (
            r.src_worker,
            r.dst_worker,
            round(r.held_start_s * 1e9) + t0,
            round(r.held_end_s * 1e9) + t0 - r.bin_ns,
            r.held_bins,
        )
        for r in held.itertuples()
    }
    return sorted(rows)


def test_contention_flags_the_link_held_down(con) -> None:
    got = q(con, "contention", runs=[SLOW])
    bins, windows = ref_contention(SLOW)
    assert len(got) == len(bins)
    assert list(got.bin_start_ns) == list(bins.bin_start_ns)
    assert list(got.bytes) == list(bins.bytes)
    assert list(got.steady) == list(bins.steady)
    np.testing.assert_allclose(got.reference_gbps, bins.reference_gbps, rtol=1e-12)
    assert list(got.below) == list(bins.below)
    assert held_windows(got) == windows
    # by hand: one window, on W2→W1, over the bins the frames were dropped from
    assert [w[:2] for w in windows] == [("W2", "W1")]
    lo, hi = _thin_window()
    _, _, first, last, n = windows[0]
    assert lo - WIDTH < first <= lo + WIDTH
    assert hi - 2 * WIDTH <= last < hi
    assert n >= 3
    window = got[got.held_bins.notna()]
    assert (window.held_ratio < 0.5).all()  # a quarter of the frames were left
    assert window.held_ratio.iloc[0] == pytest.approx(window[window.bytes > 0].ratio.mean(), rel=1e-12)


def test_contention_leaves_a_healthy_run_alone(con) -> None:
    got = q(con, "contention", runs=[BASE])
    bins, windows = ref_contention(BASE)
    assert windows == []
    assert got.held_bins.isna().all()
    np.testing.assert_allclose(got.reference_gbps, bins.reference_gbps, rtol=1e-12)
    assert list(got.below) == list(bins.below)
    assert got.below.any()  # busy bins below 0.8 × reference exist, just never three in a row
    ring = got[(got.src_worker == "W2") & (got.dst_worker == "W1")].iloc[0]
    assert (
        ring.reference_bins
        == ((bins.src_worker == "W2") & (bins.dst_worker == "W1") & bins.steady & (bins.bytes > 0)).sum()
    )


def test_contention_short_bins_cut_the_bursts(con) -> None:
    """The header's warning: at 10 ms, well under the 65 ms step, the healthy run shows held windows."""
    got = q(con, "contention", runs=[BASE], bin_ns=10_000_000)
    bins, windows = ref_contention(BASE, width=10_000_000)
    # the reference is the median of busy bins only: most 10 ms bins are idle compute time
    np.testing.assert_allclose(got.reference_gbps, bins.reference_gbps, rtol=1e-12)
    assert (bins[bins.steady].bytes == 0).mean() > 0.5
    assert held_windows(got) == windows
    assert len({w[:2] for w in windows}) == 10


def test_contention_parameters(con) -> None:
    strict = q(con, "contention", runs=[SLOW], threshold=0.1)
    assert held_windows(strict) == ref_contention(SLOW, threshold=0.1)[1]
    long = q(con, "contention", runs=[SLOW], min_bins=50)
    every = q(con, "contention", runs=[SLOW])
    assert len(long) == len(every) > 0  # every bin, none of them held
    assert long.held_bins.isna().all()
    assert every.held_bins.notna().any()
    only = q(con, "contention", runs=[SLOW], held_only="true")
    assert len(only) > 0
    assert only.held_bins.notna().all()
    assert len(only) == every.held_bins.notna().sum()


# ---- compare ------------------------------------------------------------------------------------
def ref_run_metrics(run: str) -> dict[tuple[str, str | None, str | None], float]:
    """compare's metrics for one run, from the header's definitions."""
    p = ref_packets(run)
    t_first, t_last = _t_first_last()
    steps = (train_log(SAMPLE).Type == "Batch").sum() - 1
    w = p[(p.ts_ns > t_first) & (p.ts_ns <= t_last)]
    out = {
        ("steps", None, None): steps,
        ("train_s", None, None): (t_last - t_first) / 1e9,
        ("step_s", None, None): (t_last - t_first) / 1e9 / steps,
        ("bytes_per_step", None, None): w.frame_len.sum() / steps,
        ("payload_per_step", None, None): w.payload.sum() / steps,
    }
    tcp = p[p.ip_proto == 6]
    out["flows_4tuple", None, None] = len(tcp.groupby(["src_ip", "dst_ip", "src_port", "dst_port"]))
    ported = p[p.src_port.notna() & p.dst_port.notna()]
    five = set(
        zip(ported.src_ip, ported.dst_ip, ported.ip_proto, ported.src_port, ported.dst_port, strict=True)
    )
    out["flows_5tuple", None, None] = len(five)
    out["flows_connection", None, None] = len(
        {(pr, *sorted([(a, ap), (b, bp)])) for a, b, pr, ap, bp in five}
    )
    ip = p[p.src_ip.notna()]
    out["flows_hostpair", None, None] = len(
        {tuple(sorted(x)) for x in zip(ip.src_ip, ip.dst_ip, strict=True)}
    )
    labels = worker_labels(SAMPLE)
    pair = w[w.src_ip.isin(labels) & w.dst_ip.isin(labels)]
    for (s, d), g in pair.groupby([pair.src_ip.map(labels), pair.dst_ip.map(labels)]):
        out["pair_bytes_per_step", s, d] = g.frame_len.sum() / steps
        out["pair_payload_per_step", s, d] = g.payload.sum() / steps
    bins = ref_bins(run, 10_000_000)
    for (s, d), g in bins[bins.steady].groupby(["src_worker", "dst_worker"]):
        out["mean_gbps", s, d] = g.gbps.mean()
        out["peak_gbps", s, d] = g.gbps.max()
    return out


def _by_metric(got: pd.DataFrame) -> pd.DataFrame:
    keys = (
        [None if pd.isna(v) else v for v in got.src_worker],
        [None if pd.isna(v) else v for v in got.dst_worker],
    )
    return got.set_index(pd.MultiIndex.from_arrays([got.metric, *keys]))


def test_compare_two_runs(con) -> None:
    got = q(con, "compare", runs=[BASE, SLOW])
    assert set(got.a) == {BASE}
    assert set(got.b) == {SLOW}
    assert (got.a_runs == 1).all()
    assert (got.b_runs == 1).all()
    a, b = ref_run_metrics(BASE), ref_run_metrics(SLOW)
    rows = _by_metric(got)
    for key, value in a.items():
        row = rows.loc[key]
        assert row.value_a == pytest.approx(value, rel=1e-12), key
        assert row.value_b == pytest.approx(b[key], rel=1e-12), key
        assert row["diff"] == pytest.approx(b[key] - value, rel=1e-9, abs=1e-15), key
        if value:
            assert row.rel_diff == pytest.approx((b[key] - value) / value, rel=1e-9, abs=1e-15), key
    # what the dropped frames did: W2→W1 lost bytes per step, its mean load fell, the step did not change
    ring = rows.loc[("pair_bytes_per_step", "W2", "W1")]
    assert ring["diff"] < 0
    assert -0.3 < ring.rel_diff < -0.05
    assert rows.loc[("step_s", None, None)]["diff"] == 0
    assert rows.loc[("mean_gbps", "W2", "W1")].rel_diff < -0.05
    assert rows.loc[("flows_qp", None, None)].value_a == 0
    assert pd.isna(rows.loc[("flows_qp", None, None)].rel_diff)
    assert {k[0] for k in a} == set(got.metric) - {"flows_qp"}  # every metric but qp has a reference
    assert (
        rows.loc[("flows_5tuple", None, None)].value_a,
        rows.loc[("flows_connection", None, None)].value_a,
    ) == (
        22,
        11,
    )  # both directions of each TCP connection, each captured at its sender
    # the first run given is side a
    swapped = q(con, "compare", runs=[SLOW, BASE])
    assert set(swapped.a) == {SLOW}
    np.testing.assert_allclose(swapped["diff"], -got["diff"], rtol=1e-9, atol=1e-15)


def test_compare_groups_by_a_run_meta_column(con) -> None:
    got = q(con, "compare", group_by="loss_pct")
    assert set(got.a) == {"loss_pct=0.0"}
    assert set(got.b) == {"loss_pct=1.0"}
    assert (got.a_runs == 2).all()
    assert (got.b_runs == 1).all()
    by_run = _by_metric(q(con, "compare", runs=[BASE, SLOW]))
    rows = _by_metric(got)
    # the two 0 % runs are the same packets: their mean is either one
    np.testing.assert_allclose(rows.value_a, by_run.loc[rows.index].value_a, rtol=1e-12)
    np.testing.assert_allclose(rows.value_b, by_run.loc[rows.index].value_b, rtol=1e-12)
    # a selection narrows the groups
    narrowed = q(con, "compare", runs=[ZERO, SLOW], group_by="loss_pct")
    assert (narrowed.a_runs == 1).all()


def test_compare_refuses_a_column_run_meta_lacks(con) -> None:
    with pytest.raises(UsageError, match="run_meta has no column nope; group_by takes one of run, "):
        q(con, "compare", group_by="nope")


@pytest.mark.parametrize("name", ["contention", "compare"])
def test_a_too_fine_bin_is_refused_before_running(con, name) -> None:
    with pytest.raises(UsageError, match=r"would produce about [0-9,]+ rows .* or a larger --bin"):
        q(con, name, runs=[BASE], bin_ns="1us")
