"""`train_duration` (Fig. 10) on a catalog with lossy runs and several baselines.

The runs are the real sample run copied under other names (tmp_path only): the folder name sets the
configuration and the loss, and each copy's train_history.log is the sample's, stretched by a known
factor and shifted, so every run has its own duration. The reference is computed here from the
log files as written (Decimal timestamps → integer ns) and from the rule in the view's header: a run
is divided by the mean duration of the 0 %-loss runs of its configuration (framework, model,
optimizer, batch size, backend, topology, number of workers), NULL when there is none.
"""

from __future__ import annotations

import shutil
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from tracecore import query
from tracecore.sample import sample_run

BASE = "torch_ddp-resnet8w8-sgd-16-gloo-{loss}-ring"
# run name → (stretch factor of the log, shift in seconds, worker captures copied)
RUNS = {
    BASE.format(loss="normal"): (Decimal(1), Decimal(0), 4),  # the sample as captured
    BASE.format(loss="0"): (Decimal("1.5"), Decimal(100), 4),  # a second 0 % run of the same configuration
    BASE.format(loss="loss_1"): (Decimal(2), Decimal(200), 4),
    BASE.format(loss="loss_0.1"): (Decimal("0.5"), Decimal(300), 4),  # faster than its baselines
    # 0 % runs of neighbouring configurations: never a baseline of the runs above
    "horovod-resnet8w8-sgd-16-gloo-normal-ring": (Decimal(3), Decimal(0), 4),
    "torch_ddp-resnet14-sgd-16-gloo-normal-ring": (Decimal(5), Decimal(0), 4),
    "torch_ddp-resnet8w8-adam-16-gloo-normal-ring": (Decimal(7), Decimal(0), 4),
    "torch_ddp-resnet8w8-sgd-16-gloo_nccl-normal-ring": (Decimal(9), Decimal(0), 4),
    "torch_ddp-resnet8w8-sgd-16-gloo-normal-STAR": (Decimal(11), Decimal(0), 4),
    "torch_ddp-resnet8w8-sgd-16-gloo-0.0-ring": (Decimal(13), Decimal(0), 3),  # three workers
    # a lossy run whose configuration has no 0 % run
    "torch_ddp-resnet8w8-sgd-32-gloo-loss_1-ring": (Decimal("1.2"), Decimal(0), 4),
}
CONFIG = ["framework", "model", "optimizer", "batch_size", "backend", "topology", "n_workers"]


def _stretch(text: str, factor: Decimal, shift: Decimal) -> str:
    lines = text.splitlines()
    header = lines[0].split(",")
    col = header.index("Timestamp")
    rows = [line.split(",") for line in lines[1:] if line]
    t0 = Decimal(rows[0][col])
    for row in rows:
        row[col] = str((t0 + (Decimal(row[col]) - t0) * factor + shift).quantize(Decimal("0.000001")))
    return "\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory):
    from tracecore.ingest import ingest, open_catalog

    root = tmp_path_factory.mktemp("duration")
    log = (sample_run() / "train_history.log").read_text(encoding="utf-8")
    for name, (factor, shift, n) in RUNS.items():
        run = root / "runs" / name
        run.mkdir(parents=True)
        for i in range(n):
            shutil.copy(sample_run() / f"worker-{i}-tcpdump.pcap", run)
        (run / "train_history.log").write_text(_stretch(log, factor, shift), encoding="utf-8")
    summary = ingest([root / "runs"], root / "data", jobs=1)
    assert not summary.failed, summary.failed
    con = open_catalog(root / "data", read_only=True)
    yield root / "runs", con
    con.close()


def reference(runs: Path) -> pd.DataFrame:
    rows = []
    for name, (_, _, n) in RUNS.items():
        log = pd.read_csv(runs / name / "train_history.log", dtype={"Timestamp": str})
        ns = [int(Decimal(t) * 1_000_000_000) for t in log.Timestamp]
        fw, model, opt, batch, backend, loss, topo = name.split("-")
        loss_pct = 0.0 if loss == "normal" else float(loss.removeprefix("loss_"))
        rows.append((name, fw, model, opt, int(batch), backend, topo, n, loss_pct, (max(ns) - min(ns)) / 1e9))
    ref = pd.DataFrame(rows, columns=["run", *CONFIG, "loss_pct", "duration_s"]).set_index("run")
    base = ref[ref.loss_pct == 0].groupby(CONFIG).duration_s.agg(["mean", "size"])
    keyed = ref.join(base, on=CONFIG)
    ref["baseline_s"] = keyed["mean"]
    ref["baseline_runs"] = keyed["size"].fillna(0).astype(int)
    ref["normalized"] = ref.duration_s / ref.baseline_s
    return ref


def test_train_duration_normalizes_by_the_zero_loss_runs_of_the_configuration(catalog) -> None:
    runs, con = catalog
    got = query.run_view(con, "train_duration").to_pandas().set_index("run")
    ref = reference(runs)
    assert sorted(got.index) == sorted(RUNS)
    for name, r in ref.iterrows():
        row = got.loc[name]
        assert [row[c] for c in CONFIG] == [r[c] for c in CONFIG], name
        assert row.loss_pct == r.loss_pct, name
        assert row.steps == 30, name
        assert row.duration_s == pytest.approx(r.duration_s, rel=1e-12), name
        assert row.baseline_runs == r.baseline_runs, name
        if r.baseline_runs:
            assert row.baseline_s == pytest.approx(r.baseline_s, rel=1e-12), name
            assert row.normalized == pytest.approx(r.normalized, rel=1e-12), name
        else:
            assert pd.isna(row.baseline_s), name
            assert pd.isna(row.normalized), name
    # the figures by hand: the two 0 % runs (×1 and ×1.5) average to 1.25 × the sample's duration
    sample = ref.loc[BASE.format(loss="normal"), "duration_s"]
    assert got.loc[BASE.format(loss="loss_1"), "baseline_runs"] == 2
    assert got.loc[BASE.format(loss="loss_1"), "normalized"] == pytest.approx(2 / 1.25, rel=1e-6)
    assert got.loc[BASE.format(loss="loss_0.1"), "normalized"] == pytest.approx(0.5 / 1.25, rel=1e-6)
    assert got.loc[BASE.format(loss="0"), "normalized"] == pytest.approx(1.5 / 1.25, rel=1e-6)
    assert got.loc[BASE.format(loss="normal"), "baseline_s"] == pytest.approx(1.25 * sample, rel=1e-6)
    # every neighbouring configuration is its own single baseline
    for name in list(RUNS)[4:10]:
        assert (got.loc[name, "baseline_runs"], got.loc[name, "normalized"]) == (1, pytest.approx(1.0)), name


def test_train_duration_runs_parameter(catalog) -> None:
    """Selecting runs filters the rows, not the baselines (looked up among all runs)."""
    _, con = catalog
    lossy = BASE.format(loss="loss_1")
    got = query.run_view(con, "train_duration", runs=[lossy]).to_pandas()
    assert list(got.run) == [lossy]
    assert got.baseline_runs.tolist() == [2]
    assert got.normalized.tolist() == pytest.approx([2 / 1.25], rel=1e-6)
