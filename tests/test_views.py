"""Every analysis view against an independent pandas computation of the notebook's formula (bugs fixed).

Data: the embedded sample runs (real gloo DDP captures made by bench/), ingested into a fresh
dataset; the reference reads the same pcaps with dpkt into pandas (tests/test_views_support.py).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from tests.test_views_support import BOTH, SAMPLE, packets, t_half_width, train_log, worker_labels
from tracecore import query, views
from tracecore.errors import UsageError

RUNS = [SAMPLE, BOTH]


def q(con, name: str, runs=None, **params) -> pd.DataFrame:
    return query.run_view(con, name, runs=runs, params=params).to_pandas()


def worker_pairs(df: pd.DataFrame, run: str) -> pd.DataFrame:
    """Packets between two workers of the run, labelled."""
    labels = worker_labels(run)
    out = df[df.src_ip.isin(labels) & df.dst_ip.isin(labels)].copy()
    out["src_worker"] = out.src_ip.map(labels)
    out["dst_worker"] = out.dst_ip.map(labels)
    return out


# ---- the catalog --------------------------------------------------------------------------------
# Rows of each view (default parameters) over the two sample runs: 2 runs × 4 workers, 12 directed worker
# pairs, 661 + 419 10 ms bins from each run's first to last packet (dpkt), 17,027 + 2,930 packets kept.
VIEW_ROWS = {
    "accuracy_vs_data": 34,
    "burstiness": 96,
    "bytes_sent": 2 * 4,
    # the sample runs have no profiler traces (tests/test_views_collectives.py has runs that do)
    "collective_calls": 0,
    "collective_clock_check": 0,
    "collective_clock_check_of": 0,
    "collective_coverage": 0,
    "collective_coverage_of": 0,
    "collective_links": 0,
    "collective_rank_workers": 2 * 4,  # the sample captures are named worker-<i>-…
    "collective_stragglers": 0,
    "collective_verdicts": 0,
    "collective_verdicts_of": 0,
    "collective_wire": 0,
    "compare": 58,  # the 16-batch run against the 8-batch one: 14 metrics, 4 of them per pair (12)
    "congestion": 12 * (661 + 419),  # link_util's rows, with zero marks: the sample runs are TCP
    "contention": 12 * (67 + 43),  # link_util's rows at 100 ms
    "data_per_step": 2,
    "findings": 0,  # nothing worth a finding on the sample runs (tests/test_explain.py has runs with)
    "flow_counts": 2 * 5,  # 4tuple, 5tuple, connection, hostpair, qp
    "flow_matrix": 2 * 12,
    "flow_matrix_mean": 12,
    "grid_check": 1,  # its limit
    "grid_rows": 1,  # the estimate over every run
    "link_ci": 2 * 12,
    "link_series": 12 * (661 + 419),
    "link_steady": 12 * (661 + 419),
    "link_total": 661 + 419,
    "link_util": 12 * (661 + 419),
    "counter_check": 0,  # no counter sampler files in the sample either
    "roce_congestion": 0,  # nor here
    "collective_nic": 0,  # nor collectives (tests/test_nic_counters.py has runs with both)
    "nic_tx": 0,
    "nic_util": 0,  # no counter sampler files in the sample (tests/test_nic_counters.py has runs that do)
    "link_util_ci": 2 * 12,
    "nccl_edges": 0,  # the sample runs have no NCCL logs (tests/test_views_nccl.py has runs that do)
    "nccl_rank_workers": 0,
    "nccl_topology": 0,
    "packets_window": 17027 + 2930,
    "rdma_flows": 0,
    "run_bounds": 2,
    "run_meta": 2,
    "run_summary": 2,
    "step_breakdown": 0,
    "tcp_health": 40,  # directed TCP flows of both runs, each with its reverse (both-directions captures)
    "tcp_segments": 17015 + 2906,  # the TCP packets of both runs, a row each (the rest: ARP, UDP)
    "temporal_flows": 76,
    "throughput_ci": 2,
    "topology_check": 2 * 12,
    "train_duration": 2,
    "train_steps": 29 + 3,  # 30 and 4 Batch rows in the sample runs; step 0 has no start
    "train_window": 2,
    "worker_pairs": 2 * 12,
}


def test_every_view_is_documented_and_runs(con) -> None:
    assert {"flow_matrix", "link_util", "link_total", "bytes_sent", "flow_counts", "temporal_flows"} <= set(
        views.view_names()
    )
    assert {"throughput_ci", "link_util_ci", "train_duration", "accuracy_vs_data", "data_per_step"} <= set(
        views.view_names()
    )
    assert {"burstiness", "topology_check", "flow_matrix_mean"} <= set(views.view_names())
    for name in views.view_names():
        sql = views.view_sql(name)
        assert views.view_purpose(name), name
        assert "-- Parameters:" in sql, name
        assert "-- Columns" in sql, name
        # installed in the catalog: plain ad hoc SQL sees it, with its rows on the sample runs
        assert con.sql(f"SELECT count(*) FROM {name}").fetchall()[0][0] == VIEW_ROWS[name], name


def test_macro_and_view_of_the_same_name(con) -> None:
    plain = con.sql("SELECT * FROM link_util ORDER BY ALL").fetchall()
    called = con.sql("SELECT * FROM link_util(bin_ns := 10000000) ORDER BY ALL").fetchall()
    assert plain == called
    assert len(con.sql("SELECT * FROM link_util(bin_ns := 1000000)").fetchall()) > 5 * len(plain)


def test_run_bounds(con) -> None:
    got = q(con, "run_bounds").set_index("run")
    for run in RUNS:
        p = packets(run)
        assert got.loc[run, "start_ns"] == p.ts_ns.min()
        assert got.loc[run, "end_ns"] == p.ts_ns.max()
        assert got.loc[run, "packets"] == len(p)
        assert got.loc[run, "lo_ns"] == p.ts_ns.min()
        assert got.loc[run, "hi_ns"] == p.ts_ns.max() + 1
    win = q(con, "run_bounds", runs=[SAMPLE], from_ns=2_000_000_000, to_ns=10**12).iloc[0]
    assert win.lo_ns == packets(SAMPLE).ts_ns.min() + 2_000_000_000
    assert win.hi_ns == packets(SAMPLE).ts_ns.max() + 1  # clipped to the run


# ---- Fig. 4 / Fig. 3 ----------------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_flow_matrix(con, run) -> None:
    p = packets(run).dropna(subset=["src_ip", "dst_ip"])
    ref = p.groupby(["src_ip", "dst_ip"]).agg(bytes=("frame_len", "sum"), packets=("frame_len", "size"))
    got = q(con, "flow_matrix", runs=[run]).set_index(["src_ip", "dst_ip"])
    assert set(got.index) == set(ref.index)
    assert (got.bytes == ref.bytes.reindex(got.index)).all()
    assert (got.packets == ref.packets.reindex(got.index)).all()
    labels = worker_labels(run)
    for (src, dst), row in got.iterrows():
        assert row.src_worker == labels.get(src) or (pd.isna(row.src_worker) and src not in labels)
        assert row.dst_worker == labels.get(dst) or (pd.isna(row.dst_worker) and dst not in labels)


def test_flow_matrix_window(con) -> None:
    p = packets(SAMPLE).dropna(subset=["src_ip", "dst_ip"])
    t0 = packets(SAMPLE).ts_ns.min()
    w = p[(p.ts_ns >= t0 + 1_000_000_000) & (p.ts_ns < t0 + 3_500_000_000)]
    ref = w.groupby(["src_ip", "dst_ip"]).frame_len.sum()
    got = q(con, "flow_matrix", runs=[SAMPLE], from_ns=1_000_000_000, to_ns=3_500_000_000)
    got = got.set_index(["src_ip", "dst_ip"]).bytes
    assert got.sort_index().to_dict() == ref.sort_index().to_dict()
    assert got.sum() < q(con, "flow_matrix", runs=[SAMPLE]).bytes.sum()


def test_flow_matrix_mean_over_runs(con) -> None:
    # Fig. 4: sum of the per-run src×dst pivots (missing pairs = 0) / (#runs), by worker label
    total = None
    for run in RUNS:
        pv = pd.pivot_table(
            worker_pairs(packets(run), run),
            values="frame_len",
            index="src_worker",
            columns="dst_worker",
            aggfunc="sum",
        )
        total = pv.fillna(0) if total is None else total.add(pv.fillna(0), fill_value=0)
    ref = (total / len(RUNS)).stack()
    ref = ref[ref > 0]
    got = q(con, "flow_matrix_mean").set_index(["src_worker", "dst_worker"])
    assert (got.n_runs == 2).all()
    assert set(got.index) == set(ref.index)
    for key, value in ref.items():
        assert got.loc[key, "mean_bytes"] == pytest.approx(value, rel=1e-12)
        assert got.loc[key, "mean_gb"] == pytest.approx(value / 1e9, rel=1e-12)


@pytest.mark.parametrize("run", RUNS)
def test_bytes_sent(con, run) -> None:
    labels = worker_labels(run)
    p = packets(run)
    ref = p[p.src_ip.isin(labels)].groupby("src_ip").frame_len.sum()
    got = q(con, "bytes_sent", runs=[run]).set_index("ip")
    assert got.bytes.to_dict() == ref.to_dict()
    assert (got.worker == got.index.map(labels)).all()
    assert (got.run_bytes == ref.sum()).all()
    assert got.share.sum() == pytest.approx(1.0)


# ---- Figs. 7, 9: link utilization ---------------------------------------------------------------
def ref_link_util(run: str, bin_ns: int, lo: int | None = None, hi: int | None = None) -> pd.DataFrame:
    """Bytes per directed worker pair per epoch-aligned bin, every bin from first to last packet."""
    allp = packets(run)
    t0 = allp.ts_ns.min()
    lo_ns = t0 if lo is None else t0 + lo
    hi_ns = allp.ts_ns.max() + 1 if hi is None else min(t0 + hi, allp.ts_ns.max() + 1)
    p = worker_pairs(allp[(allp.ts_ns >= lo_ns) & (allp.ts_ns < hi_ns)], run)
    inwin = allp[(allp.ts_ns >= lo_ns) & (allp.ts_ns < hi_ns)]
    k_lo = (lo_ns if lo is not None else inwin.ts_ns.min()) // bin_ns
    k_hi = (hi_ns - 1 if hi is not None else inwin.ts_ns.max()) // bin_ns
    p["k"] = p.ts_ns // bin_ns
    sums = p.groupby(["src_worker", "dst_worker", "k"]).frame_len.sum()
    pairs = sorted(set(zip(p.src_worker, p.dst_worker, strict=True)))
    idx = pd.MultiIndex.from_tuples(
        [(s, d, k) for s, d in pairs for k in range(k_lo, k_hi + 1)], names=["src_worker", "dst_worker", "k"]
    )
    out = sums.reindex(idx, fill_value=0).rename("bytes").reset_index()
    out["bin_start_ns"] = out.k * bin_ns
    out["gbps"] = out.bytes * 8 / bin_ns
    out["t_s"] = (out.bin_start_ns - t0) / 1e9
    return out


@pytest.mark.parametrize(("run", "bin_ns"), [(SAMPLE, 10_000_000), (SAMPLE, 100_000), (BOTH, 1_000_000)])
def test_link_util(con, run, bin_ns) -> None:
    ref = ref_link_util(run, bin_ns)
    got = q(con, "link_util", runs=[run], bin_ns=bin_ns)
    assert len(got) == len(ref)
    assert (got.bin_ns == bin_ns).all()
    cols = ["src_worker", "dst_worker", "bin_start_ns", "bytes"]
    assert got[cols].reset_index(drop=True).equals(ref[cols].reset_index(drop=True).astype(got[cols].dtypes))
    np.testing.assert_allclose(got.gbps, ref.gbps, rtol=1e-12)
    np.testing.assert_allclose(got.t_s, ref.t_s, rtol=0, atol=1e-9)
    # contiguous and zero-filled: every pair has the same number of bins, consecutive
    per_pair = got.groupby(["src_worker", "dst_worker"]).bin_start_ns
    assert per_pair.count().nunique() == 1
    for _, starts in per_pair:
        assert set(np.diff(starts.to_numpy())) == {bin_ns}
    assert (got.bytes == 0).any()


def test_link_util_window(con) -> None:
    ref = ref_link_util(SAMPLE, 1_000_000, lo=3_500_000_000, hi=4_000_000_000)
    got = q(con, "link_util", runs=[SAMPLE], bin_ns=1_000_000, from_ns=3_500_000_000, to_ns=4_000_000_000)
    cols = ["src_worker", "dst_worker", "bin_start_ns", "bytes"]
    assert got[cols].reset_index(drop=True).equals(ref[cols].reset_index(drop=True).astype(got[cols].dtypes))
    assert 500 <= got.groupby(["src_worker", "dst_worker"]).size().iloc[0] <= 501


def test_link_total(con) -> None:
    for bin_ns in (10_000_000, 1_000_000_000):
        p = packets(SAMPLE)
        k = p.ts_ns // bin_ns
        ref = p.groupby(k).frame_len.sum().reindex(range(k.min(), k.max() + 1), fill_value=0)
        got = q(con, "link_total", runs=[SAMPLE], bin_ns=bin_ns)
        assert list(got.bin_start_ns) == [i * bin_ns for i in ref.index]
        assert list(got.bytes) == list(ref.values)
        np.testing.assert_allclose(got.gbps, ref.values * 8 / bin_ns, rtol=1e-12)


# ---- Fig. 5 / Fig. 6: flows ---------------------------------------------------------------------
@pytest.mark.parametrize("run", RUNS)
def test_flow_counts(con, run) -> None:
    p = packets(run).dropna(subset=["src_ip", "dst_ip"])
    ported = p.dropna(subset=["src_port", "dst_port"])
    tcp = ported[ported.ip_proto == 6]
    fwd = list(
        zip(ported.ip_proto, ported.src_ip, ported.src_port, ported.dst_ip, ported.dst_port, strict=True)
    )
    ref = {
        # the paper's: len(groupby(ip.src, ip.dst, tcp.srcport, tcp.dstport))
        "4tuple": len(tcp.groupby(["src_ip", "dst_ip", "src_port", "dst_port"]).size()),
        "5tuple": len(ported.groupby(["src_ip", "dst_ip", "ip_proto", "src_port", "dst_port"]).size()),
        "connection": len({(pr, *sorted([(a, ap), (b, bp)])) for pr, a, ap, b, bp in fwd}),
        "hostpair": len({tuple(sorted(x)) for x in zip(p.src_ip, p.dst_ip, strict=True)}),
        "qp": 0,  # no RoCE in these TCP runs (tests/test_views_rdma.py counts QP flows)
    }
    got = q(con, "flow_counts", runs=[run])
    assert list(got.definition) == ["4tuple", "5tuple", "connection", "hostpair", "qp"]
    assert dict(zip(got.definition, got.flows, strict=True)) == ref
    # each TCP connection is counted twice by the paper's definition (both directions captured)
    assert ref["4tuple"] == 2 * ref["connection"]


def test_temporal_flows(con) -> None:
    bin_ns = 1_000_000_000
    p = packets(SAMPLE)
    tcp = p[(p.ip_proto == 6) & p.src_port.notna()].copy()
    tcp["k"] = tcp.ts_ns // bin_ns
    keys = ["src_ip", "dst_ip", "src_port", "dst_port"]
    sums = tcp.groupby([*keys, "k"]).frame_len.sum()
    rows = []
    for flow_id, (key, grp) in enumerate(sums.groupby(level=[0, 1, 2, 3]), start=1):
        ks = grp.index.get_level_values("k")
        for k in range(ks.min(), ks.max() + 1):
            rows.append((flow_id, *key, k * bin_ns, int(grp.get((*key, k), 0))))
    ref = pd.DataFrame(rows, columns=["flow_id", *keys, "bin_start_ns", "bytes"])
    got = q(con, "temporal_flows", runs=[SAMPLE], bin_ns=bin_ns)
    assert len(got) == len(ref)
    assert list(got.flow_id) == list(ref.flow_id)
    assert list(got.bin_start_ns) == list(ref.bin_start_ns)
    assert list(got.bytes) == list(ref.bytes)
    assert list(got.src_port) == [int(x) for x in ref.src_port]
    np.testing.assert_allclose(got.load, ref.bytes / ref.bytes.max())


# ---- Tables I and II ----------------------------------------------------------------------------
def ci(values: np.ndarray) -> tuple[float, float, float]:
    """Student's t interval (the views' default method), its lower bound clipped at 0 Gbit/s."""
    m = float(np.mean(values))
    h = t_half_width(values)
    return max(0.0, m - h), m, m + h


def test_throughput_ci(con) -> None:
    for bin_ns, lo, hi in ((1_000_000_000, None, None), (250_000_000, 1_000_000_000, 5_000_000_000)):
        p = packets(SAMPLE)
        t0 = p.ts_ns.min()
        lo_ns = t0 + (lo or 0)
        hi_ns = t0 + hi if hi else p.ts_ns.max() + 1
        n = (hi_ns - lo_ns) // bin_ns
        w = p[(p.ts_ns >= lo_ns) & (p.ts_ns < lo_ns + n * bin_ns)]
        per_bin = w.groupby((w.ts_ns - lo_ns) // bin_ns).frame_len.sum().reindex(range(n), fill_value=0)
        lo_ci, mean, hi_ci = ci(per_bin.to_numpy() * 8 / bin_ns)
        got = q(con, "throughput_ci", runs=[SAMPLE], bin_ns=bin_ns, from_ns=lo, to_ns=hi).iloc[0]
        assert got.n == n
        assert got.mean_gbps == pytest.approx(mean, rel=1e-12)
        assert got.ci_low_gbps == pytest.approx(lo_ci, rel=1e-9)
        assert got.ci_high_gbps == pytest.approx(hi_ci, rel=1e-9)
        assert got.from_s == pytest.approx((lo or 0) / 1e9)
        assert got.to_s == pytest.approx((lo or 0) / 1e9 + n * bin_ns / 1e9)


def test_link_util_ci(con) -> None:
    window = 500_000_000
    p = packets(SAMPLE)
    t0 = p.ts_ns.min()
    lo, hi = t0 + 1_000_000_000, t0 + 5_000_000_000
    n = (hi - lo) // window
    link = worker_pairs(p, SAMPLE)
    link = link[
        (link.src_worker == "W2") & (link.dst_worker == "W1") & (link.ts_ns >= lo) & (link.ts_ns < hi)
    ]
    per = link.groupby((link.ts_ns - lo) // window).frame_len.sum().reindex(range(n), fill_value=0)
    lo_ci, mean, hi_ci = ci(per.to_numpy() * 8 / window)
    got = q(
        con,
        "link_util_ci",
        runs=[SAMPLE],
        window_ns=window,
        src="W2",
        dst="W1",
        from_ns=10**9,
        to_ns=5 * 10**9,
    )
    assert len(got) == 1
    row = got.iloc[0]
    assert (row.src_worker, row.dst_worker, row.windows) == ("W2", "W1", n)
    assert row.mean_gbps == pytest.approx(mean, rel=1e-12)
    assert (row.ci_low_gbps, row.ci_high_gbps) == pytest.approx((lo_ci, hi_ci), rel=1e-9)
    # with no link given, one row per directed worker pair that carries traffic
    every_link = q(con, "link_util_ci", runs=[SAMPLE])
    pairs = q(con, "link_util", runs=[SAMPLE]).groupby(["src_worker", "dst_worker"]).ngroups
    assert len(every_link) == pairs


def _bootstrap(values: np.ndarray, replicates: int = 1000) -> tuple[float, float]:
    """The 2.5 % and 97.5 % quantiles (lower inverse-CDF, as quantile_disc) of the means of the draws
    link_ci.sql documents: replicate r's i-th draw is window mix(r·1000003 + i + 1) mod n."""
    n, mask = len(values), (1 << 64) - 1
    means = []
    for r in range(replicates):
        picks = []
        for i in range(n):
            x = ((r * 1000003 + i + 1) * 11400714819323198485) & mask
            x = ((x ^ (x >> 29)) * 2685821657736338717) & mask
            picks.append((x ^ (x >> 32)) % n)
        means.append(float(values[picks].sum()) / n)
    ordered = sorted(means)
    return ordered[math.ceil(0.025 * replicates) - 1], ordered[math.ceil(0.975 * replicates) - 1]


def test_ci_methods_name_themselves_and_clip_at_zero(con) -> None:
    """t (default), the paper's normal 1.96 and a bootstrap of fixed draws; a lower bound under 0 Gbit/s
    is 0: the sample's first 4 s are set-up with a few busy windows, so m − h < 0 there."""
    window, span = 250_000_000, 4_000_000_000
    p = packets(SAMPLE)
    t0 = p.ts_ns.min()
    n = span // window
    w = p[(p.ts_ns >= t0) & (p.ts_ns < t0 + n * window)]
    per_bytes = w.groupby((w.ts_ns - t0) // window).frame_len.sum().reindex(range(n), fill_value=0)
    per = per_bytes.to_numpy() * 8 / window
    m, s = float(np.mean(per)), float(np.std(per, ddof=1))
    got = {
        method: q(con, "throughput_ci", runs=[SAMPLE], bin_ns=window, to_ns=span, method=method).iloc[0]
        for method in ("t", "normal", "bootstrap")
    }
    assert {k: v.ci_method for k, v in got.items()} == {
        "t": "t",
        "normal": "normal",
        "bootstrap": "bootstrap",
    }
    t_half = t_half_width(None, n, s)
    assert m - t_half < 0  # the case clipping is for
    assert got["t"].ci_low_gbps == 0.0
    assert got["t"].ci_high_gbps == pytest.approx(m + t_half, rel=1e-9)
    assert got["normal"].ci_low_gbps == max(0.0, m - 1.96 * s / math.sqrt(n))
    assert got["normal"].ci_high_gbps == pytest.approx(m + 1.96 * s / math.sqrt(n), rel=1e-12)
    low, high = _bootstrap(per)
    assert (got["bootstrap"].ci_low_gbps, got["bootstrap"].ci_high_gbps) == pytest.approx(
        (low, high), rel=1e-12
    )
    assert 0 <= low < m < high
    links = q(con, "link_util_ci", runs=[SAMPLE], method="bootstrap")
    assert (links.ci_low_gbps >= 0).all()
    assert (links.ci_low_gbps <= links.mean_gbps).all()
    assert (links.ci_method == "bootstrap").all()
    with pytest.raises(UsageError, match="method must be t, normal or bootstrap, not z"):
        q(con, "throughput_ci", runs=[SAMPLE], method="z")


# ---- Fig. 10, Fig. 8, Sec. VI: joined with the training log -------------------------------------
def test_train_duration(con) -> None:
    got = q(con, "train_duration").set_index("run")
    for run in RUNS:
        log = train_log(run)
        assert got.loc[run, "duration_s"] == pytest.approx(
            (log.ts_ns.max() - log.ts_ns.min()) / 1e9, rel=1e-12
        )
        assert got.loc[run, "steps"] == (log.Type == "Batch").sum()
        # each sample run is the 0%-loss run of its own configuration (batch 16 vs 8)
        assert got.loc[run, "baseline_runs"] == 1
        assert got.loc[run, "normalized"] == pytest.approx(1.0)


@pytest.mark.parametrize("run", RUNS)
def test_accuracy_vs_data(con, run) -> None:
    log = train_log(run)
    batches = log[log.Type == "Batch"].sort_values("ts_ns")
    ts = np.sort(packets(run).ts_ns.to_numpy())
    cum_frames = np.concatenate([[0], np.cumsum(packets(run).sort_values("ts_ns").frame_len.to_numpy())])
    ref_cum = cum_frames[np.searchsorted(ts, batches.ts_ns.to_numpy(), side="right")]
    got = q(con, "accuracy_vs_data", runs=[run])
    assert list(got.step) == list(range(1, len(batches) + 1))
    assert list(got.cum_bytes) == list(ref_cum)
    np.testing.assert_allclose(got.accuracy, batches.Accuracy)
    np.testing.assert_allclose(got.cum_gb, ref_cum / 1e9)
    epochs = (log.Type == "Epoch").cumsum().shift(fill_value=0)[log.Type == "Batch"]
    assert list(got.epoch) == list(epochs)


@pytest.mark.parametrize("run", RUNS)
def test_data_per_step(con, run) -> None:
    log = train_log(run)
    b = log[log.Type == "Batch"].ts_ns
    first, last, steps = b.min(), b.max(), len(b) - 1
    p = packets(run)
    w = p[(p.ts_ns > first) & (p.ts_ns <= last)]
    labels = worker_labels(run)
    per_rank = w[w.src_ip.isin(labels)].groupby("src_ip").payload.sum().reindex(list(labels), fill_value=0)
    got = q(con, "data_per_step", runs=[run]).iloc[0]
    assert got.steps == steps
    assert got.bytes == w.frame_len.sum()
    assert got.mb_per_step == pytest.approx(w.frame_len.sum() / steps / 1e6, rel=1e-12)
    assert got.rank_payload_per_step == pytest.approx(per_rank.mean() / steps, rel=1e-12)
    assert got.rank_payload_min == pytest.approx(per_rank.min() / steps, rel=1e-12)
    assert got.rank_payload_max == pytest.approx(per_rank.max() / steps, rel=1e-12)


# ---- burstiness ---------------------------------------------------------------------------------
def test_burstiness(con) -> None:
    widths = [100_000, 1_000_000, 10_000_000, 100_000_000]
    got = q(con, "burstiness", runs=[SAMPLE]).set_index(["src_worker", "dst_worker", "bin_ns"])
    allp = packets(SAMPLE)
    lo, hi = allp.ts_ns.min(), allp.ts_ns.max()
    p = worker_pairs(allp, SAMPLE)
    for (src, dst), link in p.groupby(["src_worker", "dst_worker"]):
        for width in widths:
            per_bin = link.groupby(link.ts_ns // width).frame_len.sum()
            bins = hi // width - lo // width + 1
            mean = per_bin.sum() * 8 / (bins * width)
            peak = per_bin.max() * 8 / width
            row = got.loc[(src, dst, width)]
            assert row.bins == bins
            assert row.busy_bins == len(per_bin)
            assert row.mean_gbps == pytest.approx(mean, rel=1e-12)
            assert row.peak_gbps == pytest.approx(peak, rel=1e-12)
            assert row.peak_to_mean == pytest.approx(peak / mean, rel=1e-12)
    # the microbursts: the ring links look far burstier at 100 µs than at 100 ms
    ring = got.loc[("W2", "W1")]
    assert ring.loc[100_000, "peak_to_mean"] > 5 * ring.loc[100_000_000, "peak_to_mean"]


def test_run_summary(con) -> None:
    got = q(con, "run_summary").set_index("run")
    for run in RUNS:
        p = packets(run)
        assert got.loc[run, "packets"] == len(p)
        assert got.loc[run, "bytes"] == p.frame_len.sum()
        assert got.loc[run, "workers"] == 4
        assert got.loc[run, "log_steps"] == (train_log(run).Type == "Batch").sum()


# ---- column pruning -----------------------------------------------------------------------------
NEEDED = {
    # view: packet columns it may read (worker is read by ingest's de-duplication filter on packets)
    "flow_matrix": {"run", "worker", "src_ip", "dst_ip", "frame_len"},
    "bytes_sent": {"run", "worker", "src_ip", "dst_ip", "frame_len"},
    # in a window or below a millisecond the link views read packets, else the stored bins (below)
    "link_util(from_ns := 0)": {"run", "worker", "src_ip", "dst_ip", "frame_len", "ts_ns"},
    "link_total(bin_ns := 100000)": {"run", "worker", "src_ip", "frame_len", "ts_ns"},
    "congestion": {"run", "worker", "src_ip", "dst_ip", "frame_len", "ts_ns", "ecn", "rdma_opcode"},
    "run_bounds": {"run", "worker", "src_ip", "ts_ns"},
}


def parquet_scans(con, sql: str) -> list[list[str]]:
    """The columns each Parquet scan in the plan of `sql` reads."""
    plan = json.loads(con.sql(f"EXPLAIN (FORMAT json) {sql}").fetchall()[0][1])
    scans: list[list[str]] = []

    def walk(node) -> None:
        if isinstance(node, list):
            for child in node:
                walk(child)
        elif isinstance(node, dict):
            info = node.get("extra_info", {})
            if info.get("Function") == "READ_PARQUET":
                projections = info.get("Projections", [])
                scans.append([projections] if isinstance(projections, str) else projections)
            walk(node.get("children", []))

    walk(plan)
    return scans


@pytest.mark.parametrize("name", sorted(NEEDED))
def test_views_read_only_the_columns_they_need(con, name) -> None:
    scans = parquet_scans(con, f"SELECT * FROM {name}")
    assert scans
    read = {column for scan in scans for column in scan}
    assert "ts_ns" in read or name in ("flow_matrix", "bytes_sent")
    assert read <= NEEDED[name], read - NEEDED[name]


WHOLE_MS = ["link_util", "link_total", "link_util(bin_ns := 1000000)", "link_steady", "contention"]


@pytest.mark.parametrize("sql", WHOLE_MS)
def test_link_views_in_whole_milliseconds_read_no_part_file(con, sql) -> None:
    """Without a window, a width of whole milliseconds sums the bins ingest stored (`link_bins`)."""
    assert parquet_scans(con, f"SELECT * FROM {sql}") == []


@pytest.mark.parametrize("run", RUNS)
def test_topology_check_measured_side(con, run) -> None:
    """Payload per directed worker pair in the training window, its share and per-step value."""
    log = train_log(run)
    b = log[log.Type == "Batch"].ts_ns
    p = packets(run)
    w = worker_pairs(p[(p.ts_ns > b.min()) & (p.ts_ns <= b.max())], run)
    payload = w.groupby(["src_worker", "dst_worker"]).payload.sum()
    got = q(con, "topology_check", runs=[run]).set_index(["src_worker", "dst_worker"])
    assert len(got) == 12
    steps = len(b) - 1
    for key, row in got.iterrows():
        value = payload.get(key, 0)
        assert row.payload_bytes == value
        assert row.measured_share == pytest.approx(value / payload.sum(), rel=1e-12, abs=1e-15)
        assert row.payload_per_step == pytest.approx(value / steps, rel=1e-12, abs=1e-12)
        assert row.steps == steps
