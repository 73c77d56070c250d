"""Every windowed view (`from_ns`/`to_ns`) against a pandas reference, on windows chosen to catch
off-by-one bins and an inclusive end.

Two windows per run, inside its training traffic, both starting off any bin edge:
- `bin_edge`: the end is a multiple of 100 ms since the Unix epoch, so it is a bin edge for every
  width used here (100 µs … 100 ms). The last bin is the one holding `end − 1`; a view that took
  `end // bin` would add one empty bin. The views whose bins are anchored at the window start
  (`link_util_ci`, `throughput_ci`) get an end exactly n windows after the start.
- `on_packet`: the end is the timestamp of a packet, which the (exclusive) end must leave out.
The reference reads the raw pcaps (tests/test_views_support.py) and bins them with pandas; every
count, byte sum and bin is compared exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.test_views_support import BOTH, SAMPLE, open_dataset, packets, t_half_width, worker_labels
from tracecore import query

EDGE = 100_000_000  # 100 ms: a multiple of every bin width below
# per run: window start and (about) end, ns after its first packet, inside its training traffic
OFFSETS = {SAMPLE: (3_334_567_000, 4_500_000_000), BOTH: (2_434_567_000, 2_800_000_000)}
CI_WINDOW = 25_000_000
CI_WINDOWS = 20
FIVE = ["src_ip", "dst_ip", "ip_proto", "src_port", "dst_port"]
CASES = [(run, kind) for run in (SAMPLE, BOTH) for kind in ("bin_edge", "on_packet")]


@pytest.fixture(scope="module")
def con():
    c = open_dataset()
    yield c
    c.close()


def window(run: str, kind: str) -> tuple[int, int, int, int]:
    """(from_ns, to_ns, lo, hi): the offsets passed to the view and the absolute [lo, hi)."""
    p = packets(run)
    t0 = int(p.ts_ns.min())
    start, end = OFFSETS[run]
    hi = (t0 + end) // EDGE * EDGE if kind == "bin_edge" else int(p.ts_ns[p.ts_ns >= t0 + end].min())
    return start, hi - t0, t0 + start, hi


def ci_window(run: str, kind: str) -> tuple[int, int, int, int]:
    """The window of the views anchored at its start: n whole windows, or ending on a packet."""
    if kind == "on_packet":
        return window(run, kind)
    t0 = int(packets(run).ts_ns.min())
    start = OFFSETS[run][0]
    return start, start + CI_WINDOWS * CI_WINDOW, t0 + start, t0 + start + CI_WINDOWS * CI_WINDOW


def inside(run: str, lo: int, hi: int) -> pd.DataFrame:
    p = packets(run)
    return p[(p.ts_ns >= lo) & (p.ts_ns < hi)]


def labelled(df: pd.DataFrame, run: str) -> pd.DataFrame:
    labels = worker_labels(run)
    out = df[df.src_ip.isin(labels) & df.dst_ip.isin(labels)].copy()
    out["src_worker"] = out.src_ip.map(labels)
    out["dst_worker"] = out.dst_ip.map(labels)
    return out


def view(con, name: str, run: str, **params) -> pd.DataFrame:
    return query.run_view(con, name, runs=[run], params=params).to_pandas()


def test_windows_are_as_intended() -> None:
    for run, kind in CASES:
        _, _, lo, hi = window(run, kind)
        assert lo % EDGE != 0
        assert (hi % EDGE == 0) == (kind == "bin_edge")
        assert ((packets(run).ts_ns == hi).sum() > 0) == (kind == "on_packet")
        assert hi < packets(run).ts_ns.max()  # the window cuts the run short
        assert len(inside(run, lo, hi)) >= 300  # ... inside its training traffic


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_run_bounds_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    got = view(con, "run_bounds", run, from_ns=from_ns, to_ns=to_ns).iloc[0]
    assert (got.lo_ns, got.hi_ns) == (lo, hi)


@pytest.mark.parametrize("bin_ns", [10_000_000, 1_000_000])
@pytest.mark.parametrize(("run", "kind"), CASES)
def test_link_util_window(con, run, kind, bin_ns) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    t0 = packets(run).ts_ns.min()
    w = labelled(inside(run, lo, hi), run)
    ks = range(lo // bin_ns, (hi - 1) // bin_ns + 1)
    sums = w.groupby(["src_worker", "dst_worker", w.ts_ns // bin_ns]).frame_len.sum()
    pairs = sorted(set(zip(w.src_worker, w.dst_worker, strict=True)))
    idx = pd.MultiIndex.from_tuples([(s, d, k) for s, d in pairs for k in ks])
    ref = sums.reindex(idx, fill_value=0)
    got = view(con, "link_util", run, bin_ns=bin_ns, from_ns=from_ns, to_ns=to_ns)
    assert len(got) == len(pairs) * len(ks) == len(ref)
    assert list(zip(got.src_worker, got.dst_worker, got.bin_start_ns // bin_ns, strict=True)) == list(idx)
    assert got.bytes.tolist() == ref.tolist()
    assert (got.bin_start_ns % bin_ns == 0).all()
    np.testing.assert_allclose(got.gbps, ref.to_numpy() * 8 / bin_ns, rtol=1e-12)
    np.testing.assert_allclose(got.t_s, (got.bin_start_ns - t0) / 1e9, rtol=0, atol=1e-9)


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_link_total_window(con, run, kind) -> None:
    bin_ns = 10_000_000
    from_ns, to_ns, lo, hi = window(run, kind)
    w = inside(run, lo, hi)
    ks = range(lo // bin_ns, (hi - 1) // bin_ns + 1)
    ref = w.groupby(w.ts_ns // bin_ns).frame_len.sum().reindex(ks, fill_value=0)
    got = view(con, "link_total", run, bin_ns=bin_ns, from_ns=from_ns, to_ns=to_ns)
    assert got.bin_start_ns.tolist() == [k * bin_ns for k in ks]
    assert got.bytes.tolist() == ref.tolist()
    assert got.bytes.sum() == w.frame_len.sum()
    np.testing.assert_allclose(got.gbps, ref.to_numpy() * 8 / bin_ns, rtol=1e-12)


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_burstiness_window(con, run, kind) -> None:
    widths = [100_000, 1_000_000, 10_000_000, 100_000_000]
    from_ns, to_ns, lo, hi = window(run, kind)
    w = labelled(inside(run, lo, hi), run)
    got = view(con, "burstiness", run, from_ns=from_ns, to_ns=to_ns)
    got = got.set_index(["src_worker", "dst_worker", "bin_ns"])
    expected_rows = 0
    for (src, dst), link in w.groupby(["src_worker", "dst_worker"]):
        for width in widths:
            per_bin = link.groupby(link.ts_ns // width).frame_len.sum()
            bins = (hi - 1) // width - lo // width + 1
            mean = per_bin.sum() * 8 / (bins * width)
            peak = per_bin.max() * 8 / width
            row = got.loc[(src, dst, width)]
            assert (row.bins, row.busy_bins) == (bins, len(per_bin)), (src, dst, width)
            assert row.mean_gbps == pytest.approx(mean, rel=1e-12)
            assert row.peak_gbps == pytest.approx(peak, rel=1e-12)
            assert row.peak_to_mean == pytest.approx(peak / mean, rel=1e-12)
            expected_rows += 1
    assert len(got) == expected_rows


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_bytes_sent_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    labels = worker_labels(run)
    w = inside(run, lo, hi)
    sent = w[w.src_ip.isin(labels)].groupby("src_ip")
    got = view(con, "bytes_sent", run, from_ns=from_ns, to_ns=to_ns).set_index("ip")
    assert got.bytes.to_dict() == sent.frame_len.sum().to_dict()
    assert got.packets.to_dict() == sent.size().to_dict()
    assert (got.run_bytes == sent.frame_len.sum().sum()).all()
    for ip, share in got.share.items():
        assert share == pytest.approx(sent.frame_len.sum()[ip] / sent.frame_len.sum().sum(), rel=1e-12)


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_flow_counts_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    p = inside(run, lo, hi).dropna(subset=["src_ip", "dst_ip"])
    ported = p.dropna(subset=["src_port", "dst_port"])
    tcp = ported[ported.ip_proto == 6]
    fwd = zip(ported.ip_proto, ported.src_ip, ported.src_port, ported.dst_ip, ported.dst_port, strict=True)
    ref = {
        "4tuple": len(set(zip(tcp.src_ip, tcp.dst_ip, tcp.src_port, tcp.dst_port, strict=True))),
        "5tuple": len(set(zip(*(ported[c] for c in FIVE), strict=True))),
        "connection": len({(pr, *sorted([(a, ap), (b, bp)])) for pr, a, ap, b, bp in fwd}),
        "hostpair": len({tuple(sorted(x)) for x in zip(p.src_ip, p.dst_ip, strict=True)}),
        "qp": 0,
    }
    got = view(con, "flow_counts", run, from_ns=from_ns, to_ns=to_ns)
    assert dict(zip(got.definition, got.flows, strict=True)) == ref


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_flow_matrix_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    w = inside(run, lo, hi).dropna(subset=["src_ip", "dst_ip"])
    ref = w.groupby(["src_ip", "dst_ip"]).frame_len.agg(["sum", "size"])
    got = view(con, "flow_matrix", run, from_ns=from_ns, to_ns=to_ns).set_index(["src_ip", "dst_ip"])
    assert got.bytes.sort_index().to_dict() == ref["sum"].to_dict()
    assert got.packets.sort_index().to_dict() == ref["size"].to_dict()


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_flow_matrix_mean_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = window(run, kind)
    w = labelled(inside(run, lo, hi), run)
    ref = w.groupby(["src_worker", "dst_worker"]).frame_len.sum()
    got = view(con, "flow_matrix_mean", run, from_ns=from_ns, to_ns=to_ns)
    got = got.set_index(["src_worker", "dst_worker"])
    assert (got.n_runs == 1).all()
    assert got.mean_bytes.to_dict() == ref.astype(float).to_dict()
    np.testing.assert_allclose(got.mean_gb.sort_index(), ref.sort_index() / 1e9, rtol=1e-12)


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_temporal_flows_window(con, run, kind) -> None:
    bin_ns = 100_000_000
    from_ns, to_ns, lo, hi = window(run, kind)
    t0 = packets(run).ts_ns.min()
    w = inside(run, lo, hi)
    tcp = w[(w.ip_proto == 6) & w.src_port.notna() & w.dst_port.notna()]
    keys = ["src_ip", "dst_ip", "src_port", "dst_port"]
    sums = tcp.groupby([*keys, tcp.ts_ns // bin_ns]).frame_len.sum()
    rows = []
    for flow_id, (key, grp) in enumerate(sums.groupby(level=[0, 1, 2, 3]), start=1):
        ks = grp.index.get_level_values(-1)
        for k in range(ks.min(), ks.max() + 1):
            rows.append((flow_id, *key[:2], int(key[2]), int(key[3]), k * bin_ns, int(grp.get((*key, k), 0))))
    ref = pd.DataFrame(rows, columns=["flow_id", *keys, "bin_start_ns", "bytes"])
    got = view(con, "temporal_flows", run, bin_ns=bin_ns, from_ns=from_ns, to_ns=to_ns)
    cols = ["flow_id", *keys, "bin_start_ns", "bytes"]
    assert [tuple(r) for r in got[cols].itertuples(index=False)] == [
        tuple(r) for r in ref[cols].itertuples(index=False)
    ]
    np.testing.assert_allclose(got.load, ref.bytes / ref.bytes.max(), rtol=1e-12)
    np.testing.assert_allclose(got.t_s, (ref.bin_start_ns - t0) / 1e9, rtol=0, atol=1e-9)


def _ci(values: np.ndarray) -> tuple[float, float, float, float]:
    """Student's t interval (the views' default method), its lower bound clipped at 0 Gbit/s."""
    m, s = float(np.mean(values)), float(np.std(values, ddof=1))
    h = t_half_width(values)
    return m, s, max(0.0, m - h), m + h


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_link_util_ci_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = ci_window(run, kind)
    t0 = packets(run).ts_ns.min()
    n = (hi - lo) // CI_WINDOW
    if kind == "bin_edge":
        assert n == CI_WINDOWS
        assert hi - lo == n * CI_WINDOW
    w = labelled(inside(run, lo, lo + n * CI_WINDOW), run)
    got = view(con, "link_util_ci", run, window_ns=CI_WINDOW, from_ns=from_ns, to_ns=to_ns)
    got = got.set_index(["src_worker", "dst_worker"])
    assert sorted(got.index) == sorted(set(zip(w.src_worker, w.dst_worker, strict=True)))
    for (src, dst), link in w.groupby(["src_worker", "dst_worker"]):
        per = link.groupby((link.ts_ns - lo) // CI_WINDOW).frame_len.sum().reindex(range(n), fill_value=0)
        m, s, low, high = _ci(per.to_numpy() * 8 / CI_WINDOW)
        row = got.loc[(src, dst)]
        assert row.windows == n
        assert (row.from_s, row.to_s) == pytest.approx(((lo - t0) / 1e9, (lo - t0 + n * CI_WINDOW) / 1e9))
        assert (row.mean_gbps, row.std_gbps) == pytest.approx((m, s), rel=1e-12)
        assert (row.ci_low_gbps, row.ci_high_gbps) == pytest.approx((low, high), rel=1e-9)


@pytest.mark.parametrize(("run", "kind"), CASES)
def test_throughput_ci_window(con, run, kind) -> None:
    from_ns, to_ns, lo, hi = ci_window(run, kind)
    n = (hi - lo) // CI_WINDOW
    w = inside(run, lo, lo + n * CI_WINDOW)
    per = w.groupby((w.ts_ns - lo) // CI_WINDOW).frame_len.sum().reindex(range(n), fill_value=0)
    m, s, low, high = _ci(per.to_numpy() * 8 / CI_WINDOW)
    got = view(con, "throughput_ci", run, bin_ns=CI_WINDOW, from_ns=from_ns, to_ns=to_ns).iloc[0]
    assert got.n == n
    assert (got.mean_gbps, got.std_gbps) == pytest.approx((m, s), rel=1e-12)
    assert (got.ci_low_gbps, got.ci_high_gbps) == pytest.approx((low, high), rel=1e-9)
