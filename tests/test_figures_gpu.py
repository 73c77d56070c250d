"""The figures on the real GPU corpus (../shared/corpus-gpu: NCCL over TCP sockets, runs of two and
four workers), where issue 34 found them wrong: a flow matrix averaged over runs of different worker
counts, legend labels clipped to the same text, a chart headed with a bin it did not draw, Fig. 6 as
tall panels without flow names, an axis title on its labels. `gpu_dataset()` ingests the two run
folders once per test process; tests/test_report.py reuses it."""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

from tests.test_figures_legibility import REPORT_CHART_WIDTH, scene, scene_findings, scene_texts
from tracecore import figures
from tracecore.figures import render
from tracecore.query import run_view

GPU = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus-gpu"
FOLDERS = (GPU / "gpu-nccl-profilers", GPU / "gpu-nccl-4rank")
CNN = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
MLP = "torch_ddp-mlp25m-sgd-32-nccl-normal-ring"
W4 = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"


@cache
def gpu_dataset() -> Path:
    """The corpus' two-worker runs (cnn3m, mlp25m) and four-worker run ingested into a fresh dataset,
    once per process (removed at exit)."""
    from tracecore.ingest import ingest

    for folder in FOLDERS:
        if not folder.is_dir():
            pytest.fail(f"corpus missing: {folder} (the shared/ folder must sit beside the checkout)")
    out = Path(tempfile.mkdtemp(prefix="tracecore-gpu-"))
    atexit.register(shutil.rmtree, out, True)
    summary = ingest(list(FOLDERS), out / "data", jobs=1)
    assert not summary.failed, summary.failed
    return out / "data"


@pytest.fixture(scope="module")
def gpu_con():
    from tracecore.ingest import open_catalog

    con = open_catalog(gpu_dataset(), read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def specs(gpu_con) -> dict[str, dict]:
    """Every figure of the report of all three runs (the report's own), built once."""
    return {name: render.spec(figures.build(gpu_con, name)) for name in figures.figure_names()}


def pair_bytes(con, run: str) -> dict[tuple[str, str], int]:
    """flow_matrix's bytes per directed worker pair of one run."""
    out: dict[tuple[str, str], int] = {}
    for r in run_view(con, "flow_matrix", runs=[run]).to_pylist():
        if r["src_worker"] and r["dst_worker"]:
            key = (r["src_worker"], r["dst_worker"])
            out[key] = out.get(key, 0) + r["bytes"]
    return out


def test_flow_matrix_never_averages_runs_of_different_worker_counts(gpu_con, specs) -> None:
    """One matrix per worker count: the two 2-worker runs' mean, and the 4-worker run as it is (W3→W4
    313 MB, not the 78.3 MB it read as the mean over all three runs' matrices)."""
    spec = specs["flow_matrix"]
    two, four = spec["hconcat"]
    assert [two["title"]["text"], four["title"]["text"]] == [
        ["2 workers", "mean of 2 runs"],
        ["4 workers", "cnn3m-w4"],
    ]
    cnn, mlp, w4 = (pair_bytes(gpu_con, run) for run in (CNN, MLP, W4))
    cells = {(c["src_worker"], c["dst_worker"]): c for c in two["data"]["values"]}
    assert set(cells) == {("W1", "W2"), ("W2", "W1")}
    for pair, cell in cells.items():
        assert cell["mean_bytes"] == (cnn[pair] + mlp[pair]) / 2
        assert (cell["n_runs"], cell["workers"], cell["runs"]) == (2, 2, f"{CNN}, {MLP}")
    cells = {(c["src_worker"], c["dst_worker"]): c for c in four["data"]["values"]}
    assert len(cells) == 12
    assert {pair: c["mean_bytes"] for pair, c in cells.items()} == w4
    assert cells[("W3", "W4")]["volume"] == pytest.approx(313.24, abs=0.01)  # MB, as the run sent it
    # the run comparison compares runs of one worker count only
    diff = specs["runs_flow_diff"]
    assert {c["panel"] for c in diff["data"]["values"]} == {"mlp25m − cnn3m"}
    assert "not compared (no other run with as many workers): cnn3m-w4" in diff["title"]["subtitle"][0]


def test_run_labels_stay_apart_with_full_names_in_tooltips(specs) -> None:
    """The legend of Fig. 7 names the three runs by what differs, none cut; the full name is the
    tooltip's and the subtitle's."""
    texts = scene_texts(scene(specs["link_util"]))
    legend = [t for t in texts if t["role"] == "legend-label"]
    assert sorted(t["text"] for t in legend) == ["cnn3m", "cnn3m-w4", "mlp25m"]
    assert not any(t["cut"] for t in texts)
    assert {"field": "run", "type": "nominal"} in specs["link_util"]["spec"]["encoding"]["tooltip"]
    assert specs["link_util"]["title"]["subtitle"][1] == f"runs: {CNN}, {W4}, {MLP}"


def test_charts_name_the_bins_they_draw(specs) -> None:
    """Fig. 7 widens its bins on long runs: the subtitle names the width drawn (the report's heading no
    longer claims 10 ms); Fig. 6 names its bins too."""
    link = specs["link_util"]
    rows = [r for r in link["data"]["values"] if (r["run"], r["link"]) == (W4, "W1→W2")]
    steps = {round(b["t_s"] - a["t_s"], 6) for a, b in itertools.pairwise(rows)}
    width_ms = min(steps) * 1000
    assert width_ms == 20
    assert link["title"]["subtitle"][0].startswith(f"{width_ms:g} ms bins")
    assert "bins" not in figures.get("link_util").purpose
    flows = specs["temporal_flows"]
    widths = {round((r["t_end"] - r["t_s"]) * 1000, 6) for r in flows["data"]["values"]}
    assert widths == {200}
    assert flows["title"]["subtitle"][0].startswith("200 ms bins")


def test_fig6_draws_each_runs_busiest_flows_by_name(gpu_con, specs) -> None:
    spec = specs["temporal_flows"]
    rows = spec["data"]["values"]
    by_run: dict[str, set[str]] = {}
    for r in rows:
        by_run.setdefault(r["run"], set()).add(r["flow"])
    assert {run: len(flows) for run, flows in by_run.items()} == {CNN: 12, W4: 12, MLP: 12}
    assert spec["title"]["subtitle"][0] == (
        "200 ms bins · rows by bytes, busiest on top · each run's 12 busiest flows (of cnn3m: 32, "
        "cnn3m-w4: 162, mlp25m: 28)"
    )
    assert spec["spec"]["encoding"]["y"]["axis"].get("labels", True)  # each row named
    view = run_view(gpu_con, "temporal_flows", runs=[W4], params={"bin_ns": 200_000_000}).to_pylist()
    totals: dict[int, int] = {}
    for r in view:
        totals[r["flow_id"]] = totals.get(r["flow_id"], 0) + r["bytes"]
    drawn = {r["flow_id"] for r in rows if r["run"] == W4}
    assert drawn == set(sorted(totals, key=lambda f: -totals[f])[:12])
    top = next(r for r in rows if r["run"] == W4 and r["order"] == 0)
    assert top["flow_bytes"] == max(totals.values())


@pytest.mark.parametrize("name", figures.figure_names())
def test_every_figure_is_legible_on_the_gpu_corpus(specs, name) -> None:
    """No text on another, past the edge or cut, and narrow enough for the report's page."""
    drawn = scene(specs[name])
    assert scene_findings(drawn) == []
    assert drawn["width"] <= REPORT_CHART_WIDTH


@pytest.mark.parametrize("name", ["train_duration", "link_util", "flow_matrix", "temporal_flows"])
def test_one_run_figures_are_legible(gpu_con, name) -> None:
    """`tracecore figure NAME --run RUN`: one run's full name where the labels were (Fig. 10's axis
    title ran into them)."""
    drawn = scene(render.spec(figures.build(gpu_con, name, [W4])))
    assert scene_findings(drawn) == []


def test_gpu_figures_give_altair_channel_objects_not_strings(gpu_con, monkeypatch) -> None:
    """As on the sample (tests/test_figures_options.py): no shorthand string reaches Altair's from_dict
    (13 ms each) in the figures only the GPU corpus draws in full."""
    from altair.utils import schemapi

    calls = []
    original = schemapi.SchemaBase.from_dict.__func__
    monkeypatch.setattr(
        schemapi.SchemaBase,
        "from_dict",
        classmethod(lambda cls, *a, **k: calls.append(cls) or original(cls, *a, **k)),
    )
    for name in ("step_breakdown", "collective_timeline", "flow_matrix", "topology_check", "temporal_flows"):
        figures.build(gpu_con, name)
    assert calls == []
