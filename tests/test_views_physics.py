"""Physics on real gloo DDP captures: the ring pattern, and bytes per step against the gradient size.

Gloo's ring all-reduce sends rank i → i−1; each rank sends 2(N−1)/N × the gradient bytes per step
(reduce-scatter + allgather). The gradient size comes from the run's run.toml ([model]
gradient_bytes), read here independently of ingest. Both embedded runs are checked; the loss-run
normalization of `train_duration` is tested on runs built in tmp_path (tests/test_views_duration.py),
so nothing here needs bench/data or skips on a clean clone.
"""

from __future__ import annotations

import shutil

import pytest

from tests.test_views_support import BOTH, SAMPLE, run_toml
from tracecore import query
from tracecore.sample import sample_run

MSS_FRAME = 1514 / 1448  # MTU 1500, TCP timestamps: 66 header bytes per 1448-byte segment


@pytest.mark.parametrize("run", [SAMPLE, BOTH])
def test_topology_check_shows_the_gloo_ring(con, run) -> None:
    got = query.run_view(con, "topology_check", runs=[run]).to_pandas()
    assert set(got.pattern) == {"ring_prev"}
    assert len(got) == 12  # every ordered pair of 4 workers
    edges = {(r.src_worker, r.dst_worker) for r in got.itertuples() if r.predicted}
    assert edges == {("W2", "W1"), ("W3", "W2"), ("W4", "W3"), ("W1", "W4")}
    for r in got.itertuples():
        if r.predicted:
            assert r.predicted_share == pytest.approx(0.25)
            assert abs(r.share_deviation) < 0.02  # ≈ a quarter of all payload on each ring edge
        else:
            assert r.predicted_share == 0
            assert r.measured_share < 0.01  # ACKs carry no payload; TCPStore/control traffic is tiny


@pytest.mark.parametrize("run", [SAMPLE, BOTH])
def test_per_rank_bytes_per_step_match_the_gradient_size(con, run) -> None:
    grad = run_toml(run)["model"]["gradient_bytes"]
    n = run_toml(run)["run"]["n_workers"]
    expected = 2 * (n - 1) / n * grad
    row = query.run_view(con, "data_per_step", runs=[run]).to_pandas().iloc[0]
    assert row.n_workers == n
    # transport payload per rank per step: the collective's bytes plus a little gloo framing
    assert 1.0 <= row.rank_payload_per_step / expected <= 1.10
    assert row.rank_payload_min / expected >= 1.0
    assert row.rank_payload_max / expected <= 1.10
    # frame bytes: the same plus L2–L4 headers (66 B per full segment) and ACKs, within 10 %
    assert abs(row.rank_bytes_per_step / (expected * MSS_FRAME) - 1) <= 0.10
    # on the ring edges themselves, per step
    topo = query.run_view(con, "topology_check", runs=[run]).to_pandas()
    for r in topo[topo.predicted].itertuples():
        assert abs(r.payload_per_step / expected - 1) <= 0.10
    # ingest carries the gradient size into the catalog: the views predict the same figure
    assert row.grad_bytes == grad
    assert row.expected_rank_bytes == pytest.approx(expected)
    assert 1.0 <= row.payload_ratio <= 1.10
    assert list(topo[topo.predicted].predicted_per_step) == pytest.approx([expected] * 4)


def test_gradient_bytes_from_run_metadata_give_predicted_bytes(tmp_path) -> None:
    """With grad_bytes in run.toml's [run] table, the views predict bytes per step themselves."""
    from tracecore.ingest import ingest, open_catalog

    run = tmp_path / "runs" / sample_run().name
    shutil.copytree(sample_run(), run)
    toml = (run / "run.toml").read_text(encoding="utf-8")
    grad = run_toml(SAMPLE)["model"]["gradient_bytes"]
    (run / "run.toml").write_text(
        toml.replace("[run]\n", f"[run]\ngrad_bytes = {grad}\n", 1), encoding="utf-8"
    )
    assert not ingest([tmp_path / "runs"], tmp_path / "data", jobs=1).failed
    c = open_catalog(tmp_path / "data")
    try:
        meta = query.run_view(c, "run_meta").to_pandas().iloc[0]
        assert meta.grad_bytes == grad
        dps = query.run_view(c, "data_per_step").to_pandas().iloc[0]
        assert dps.expected_rank_bytes == pytest.approx(1.5 * grad)
        assert 1.0 <= dps.payload_ratio <= 1.10
        topo = query.run_view(c, "topology_check").to_pandas()
        ring = topo[topo.predicted]
        assert list(ring.predicted_per_step) == pytest.approx([1.5 * grad] * 4)
        assert ring.per_step_ratio.between(0.9, 1.1).all()
        assert (topo[~topo.predicted].predicted_per_step == 0).all()
    finally:
        c.close()


EDGES = {
    "STAR": {("W1", "W2"), ("W1", "W3"), ("W1", "W4"), ("W2", "W1"), ("W3", "W1"), ("W4", "W1")},
    "TREE": {("W1", "W2"), ("W1", "W3"), ("W1", "W4"), ("W2", "W1"), ("W3", "W1"), ("W4", "W1")},
    "BINARY_TREE_STAR": {("W1", "W2"), ("W1", "W3"), ("W2", "W4"), ("W2", "W1"), ("W3", "W1"), ("W4", "W2")},
    "CLIQUE": {(f"W{i}", f"W{j}") for i in range(1, 5) for j in range(1, 5) if i != j},
}


def test_topology_check_predictions_and_deviation(tmp_path) -> None:
    """The same real ring capture declared as another topology: the prediction follows the metadata
    (star/tree at rank 0, binary tree 0–1, 0–2, 1–3, clique), and the deviation exposes the mismatch."""
    from tracecore.ingest import ingest, open_catalog

    toml = (sample_run() / "run.toml").read_text(encoding="utf-8")
    for topology in EDGES:
        name = sample_run().name.replace("-ring", f"-{topology}")
        run = tmp_path / "runs" / name
        shutil.copytree(sample_run(), run)
        text = toml.replace('topology = "ring"', f'topology = "{topology}"').replace(sample_run().name, name)
        (run / "run.toml").write_text(text, encoding="utf-8")
    assert not ingest([tmp_path / "runs"], tmp_path / "data", jobs=1).failed
    c = open_catalog(tmp_path / "data")
    try:
        topo = query.run_view(c, "topology_check").to_pandas()
    finally:
        c.close()
    grad = run_toml(SAMPLE)["model"]["gradient_bytes"]
    for topology, edges in EDGES.items():
        rows = topo[topo.topology == topology]
        assert len(rows) == 12, topology
        assert {(r.src_worker, r.dst_worker) for r in rows.itertuples() if r.predicted} == edges, topology
        assert rows[rows.predicted].predicted_share.tolist() == pytest.approx([1 / len(edges)] * len(edges))
        # every pattern moves 2(N−1)·M per step in total
        assert rows.predicted_per_step.sum() == pytest.approx(2 * 3 * grad)
        # the capture is a gloo ring, so the declared topology shows up as a large deviation
        assert rows.share_deviation.abs().max() > 0.1, topology
