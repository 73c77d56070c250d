"""`tracecore explain` and its views on runs whose cause is known: made by the tests in the namespace
testbed (tests/gloo_profiled.py: 3 gloo ranks on CPU with PyTorch's profiler, sender-side captures).

- a straggler: rank 2 sleeps DELAY_S before every step, so the others wait for it in each all-reduce;
- a rate-limited worker: worker 1's egress under `tc tbf` at 50 Mbit/s (gloo's ring sends to the
  left, so W2→W1 carries its data);
- a lossy worker: the bridge drops 5 % of the frames worker 1 sends (after its capture saw them);
- a clean run of the same training (named with a quote, for the evidence's shell quoting), which is
  also the lossy run's 0 %-loss baseline.
The thresholds are the views' defaults: a finding here is what a user would be told.
"""

from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

import pytest

from tests import commands
from tests.gloo_profiled import Cause, make_run
from tests.test_views_collectives import rows
from tracecore.ingest import ingest, open_catalog

pytestmark = [pytest.mark.slow, pytest.mark.netns]

DELAY_S = 0.1
CLEAN = "clean run's baseline"  # the folder torch_ddp-mlp1m-sgd-16-gloo-0-ring, renamed in run.toml
STRAGGLER = "torch_ddp-mlp1m_delay-sgd-16-gloo-0-ring"
SHAPED = "torch_ddp-mlp1m_tbf-sgd-16-gloo-0-ring"
LOSSY = "torch_ddp-mlp1m-sgd-16-gloo-5-ring"
MADE = {  # folder: (cause, name in run.toml)
    "torch_ddp-mlp1m-sgd-16-gloo-0-ring": (Cause(), CLEAN),
    STRAGGLER: (Cause(delay_rank=2, delay_s=DELAY_S), None),
    SHAPED: (Cause(shaped=1, rate="50mbit"), None),
    LOSSY: (Cause(lossy=1, loss_pct=5), None),
}
ACTIVE = 5  # profiled steps (2..6) of 8


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("causes")
    for i, (folder, (cause, name)) in enumerate(MADE.items()):
        make_run(
            root / "runs", run=folder, ranks=3, hidden=250, steps=8, active=ACTIVE, cause=cause,
            subnet=f"192.168.{94 + i}.0/24", name=name,
        )  # fmt: skip
    summary = ingest([root / "runs"], root / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    return root / "data"


@pytest.fixture(scope="module")
def con(data: Path):
    connection = open_catalog(data)
    yield connection
    connection.close()


def problems(con, run: str) -> list[dict]:
    return rows(con, "SELECT * FROM findings(runs := [?]) WHERE severity = 'problem' ORDER BY rank", [run])


def retransmitting_links(con, run: str) -> set[str]:
    """The links whose retransmissions pass findings' default thresholds, by tcp_health's own count."""
    health = rows(
        con,
        "SELECT src_worker || '→' || dst_worker AS link, sum(retransmissions) AS n, "
        "sum(data_packets) AS data FROM tcp_health(runs := [?]) WHERE dst_worker IS NOT NULL GROUP BY ALL",
        [run],
    )
    return {h["link"] for h in health if h["n"] >= 10 and h["n"] >= 0.005 * h["data"]}


def without_retransmissions(con, run: str) -> tuple[list[dict], set[str]]:
    """The run's problems other than retransmissions, and the links of those: a machine as busy as CI's
    drops frames of any testbed run (the receivers' backlogs), and each such finding must be true."""
    found = problems(con, run)
    resent = {f["subject"] for f in found if f["finding"] == "retransmissions"}
    assert resent == retransmitting_links(con, run), found
    return [f for f in found if f["finding"] != "retransmissions"], resent


def test_a_delayed_rank_is_the_straggler_with_its_delay(con) -> None:
    verdicts = rows(con, "SELECT * FROM collective_verdicts(runs := [?])", [STRAGGLER])
    assert len(verdicts) == ACTIVE
    assert {(v["verdict"], v["late_rank"], v["late_worker"]) for v in verdicts} == {("straggler", 2, "W3")}
    late_s = statistics.median(v["late_ns"] for v in verdicts) / 1e9
    assert abs(late_s - DELAY_S) <= 0.1 * DELAY_S, late_s
    found, _ = without_retransmissions(con, STRAGGLER)
    assert [(f["finding"], f["subject"], f["rank"]) for f in found] == [("straggler", "rank 2 (W3)", 1)]
    found = found[0]
    assert f"started {ACTIVE} of {ACTIVE} collectives last" in found["claim"]
    assert found["cost_ns"] == sum(v["late_ns"] for v in verdicts)


def test_a_rate_limited_egress_is_the_network_on_its_link(con) -> None:
    verdicts = rows(con, "SELECT * FROM collective_verdicts(runs := [?])", [SHAPED])
    assert len(verdicts) == ACTIVE
    assert {(v["verdict"], v["rule"], v["link_src"], v["link_dst"]) for v in verdicts} == {
        ("network", "slow link", "W2", "W1")
    }
    assert all(v["link_gbps"] < 0.5 * v["others_gbps"] for v in verdicts)
    # retransmissions (a frame the shaper's queue or a busy receiver dropped; W2's ACKs wait in its
    # queue behind its data, so W3→W2 may time out) are found exactly where tcp_health counts them
    found, _ = without_retransmissions(con, SHAPED)
    assert (found[0]["finding"], found[0]["subject"]) == ("slow link", "W2→W1")
    assert not [f for f in found if f["finding"] in ("straggler", "start skew")]


def test_a_lossy_worker_retransmits_on_its_links(con) -> None:
    found = problems(con, LOSSY)
    _, resent = without_retransmissions(con, LOSSY)
    assert "W2→W1" in resent  # its data link in the ring
    health = rows(
        con,
        "SELECT src_worker, sum(retransmissions) AS n, sum(data_packets) AS data "
        "FROM tcp_health(runs := [?]) WHERE dst_worker IS NOT NULL GROUP BY ALL",
        [LOSSY],
    )
    by_worker = {h["src_worker"]: h["n"] / h["data"] for h in health}
    assert by_worker["W2"] > 0.02, by_worker  # 5 % of its frames dropped
    assert by_worker["W2"] > 3 * max(by_worker["W1"], by_worker["W3"], 1e-4), (
        by_worker
    )  # a busy machine's drops
    wire = rows(
        con,
        "SELECT run, seq, src_worker, bytes, frames, resent_frames FROM collective_wire(runs := [?, ?])",
        [LOSSY, CLEAN],
    )
    lossy = [w for w in wire if w["run"] == LOSSY and w["src_worker"] == "W2"]
    assert sum(w["resent_frames"] for w in lossy) > 0.02 * sum(w["frames"] for w in lossy), lossy
    # each byte once: a re-sent segment falls where its first copy did, so each collective's bytes on
    # each link are the clean run's (W2's 60 re-sent frames a collective would add 87 kB): within one
    # segment and one 84-byte gloo message, which fall on either side of a boundary as the timing goes
    by_link = {(w["run"], w["seq"], w["src_worker"]): w["bytes"] for w in wire}
    clean = {k[1:]: v for k, v in by_link.items() if k[0] == CLEAN}
    lossy = {k[1:]: v for k, v in by_link.items() if k[0] == LOSSY}
    assert lossy.keys() == clean.keys()
    assert all(abs(lossy[k] - clean[k]) <= 1448 + 84 for k in clean), (lossy, clean)
    # what the loss did to training time: 5 % loss made the run 3x slower when the drops cost timeouts,
    # and no slower when fast retransmission recovered each (both seen here): a finding iff it was slower
    (timed,) = rows(con, "SELECT duration_s, baseline_s FROM train_duration WHERE run = ?", [LOSSY])
    losses = [f for f in found if f["finding"] == "loss"]
    assert len(losses) == (timed["duration_s"] >= 1.05 * timed["baseline_s"]), (timed, losses)
    for loss in losses:
        assert loss["claim"].startswith("5 % loss: training took"), loss
        assert "(1 run)" in loss["claim"]  # the clean run of the same configuration is the baseline
        assert loss["cost_ns"] == round((timed["duration_s"] - timed["baseline_s"]) * 1e9), (loss, timed)


def test_a_clean_run_has_no_problem(con) -> None:
    # an overloaded machine can drop a clean run's packets on its way (the receivers' socket backlogs);
    # a retransmission finding is then true, and tcp_health must say the same
    found, _ = without_retransmissions(con, CLEAN)
    # a known defect, left open: one segment at a collective's boundary on a link can be placed in the
    # next collective (gloo's small messages shift with the timing), so a clock finding of a lead
    # within twice the stated error can appear on a loaded machine; any other problem is false
    clocks = rows(
        con, "SELECT ok, lead_ns, error_ns FROM collective_clock_check WHERE run IN (?, ?)", [CLEAN, LOSSY]
    )
    assert len(clocks) == 6
    assert all(c["ok"] or c["lead_ns"] <= 2 * c["error_ns"] for c in clocks), clocks
    assert [f for f in found if f["finding"] != "clock"] == []
    notes = rows(con, "SELECT * FROM findings(runs := [?])", [CLEAN])
    assert {n["finding"] for n in notes} >= {"slowest collective", "collective time"}
    for note in notes:  # a run name a shell would split is quoted in the command to copy
        argv = shlex.split(note["evidence"])
        assert argv[:2] == ["tracecore", "query"]
        assert argv[argv.index("--run") + 1] == CLEAN


def test_explain_prints_each_run_and_its_evidence(data: Path) -> None:
    res = commands.tracecore("explain", "--data", str(data), "--run", STRAGGLER, "--run", CLEAN)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert text.index(STRAGGLER) < text.index("1. straggler (") < text.index(CLEAN)
    assert f"$ tracecore query collective_verdicts --run {STRAGGLER}" in text
    clean = text[text.index(CLEAN) :]
    assert "slowest collective (note)" in clean
    as_json = commands.tracecore("explain", "--data", str(data), "--run", SHAPED, "-f", "json")
    got = json.loads(as_json.stdout)
    assert (got[0]["run"], got[0]["finding"]) == (SHAPED, "slow link")
    md = commands.tracecore("explain", "--data", str(data), "--run", SHAPED, "-f", "markdown")
    assert md.stdout.startswith(f"## {SHAPED}\n")
    assert "| 1 | slow link |" in md.stdout
    strict = commands.tracecore("explain", "--data", str(data), "--run", CLEAN, "-p", "min_share=0")
    assert strict.returncode == 0, strict.stderr
    bad = commands.tracecore("explain", "--data", str(data), "--run", "no-such-run")
    assert bad.returncode == 2
    assert "unknown run 'no-such-run'" in bad.stderr
    wrong = commands.tracecore("explain", "--data", str(data), "-p", "nonsense=1")
    assert wrong.returncode == 2, wrong.stderr


GPU_FOUR = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus-gpu" / "gpu-nccl-4rank"
W4 = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"


@pytest.fixture(scope="module")
def four_ranks_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not GPU_FOUR.is_dir():
        pytest.fail(f"corpus missing: {GPU_FOUR} (the shared/ folder must sit beside the checkout)")
    out = tmp_path_factory.mktemp("w4") / "data"
    summary = ingest([GPU_FOUR], out, jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    return out


@pytest.fixture(scope="module")
def four_ranks(four_ranks_data: Path):
    connection = open_catalog(four_ranks_data)
    yield connection
    connection.close()


def test_the_four_rank_runs_slowest_all_reduce_is_start_skew_with_its_late_rank(four_ranks) -> None:
    """Issue 34: the slowest all-reduce of the real 4-rank NCCL run (63 ms) kept its links busy 4–8 ms
    while the ranks started up to 40 ms apart: start skew, not the network; rank 3 started last."""
    (slowest,) = rows(
        four_ranks,
        "SELECT * FROM collective_verdicts WHERE source = 'nccl_profiler' AND op = 'all_reduce' "
        "ORDER BY duration_ns DESC LIMIT 1",
    )
    assert (slowest["seq"], slowest["step"], slowest["bytes"]) == (8, 1, 12254760)
    assert round(slowest["duration_ns"] / 1e6, 1) == 63.4
    assert round(slowest["spread_ns"] / 1e6, 1) == 39.6
    assert (slowest["verdict"], slowest["late_rank"], slowest["late_worker"]) == ("straggler", 3, "W4")
    assert 4e6 < slowest["link_busy_ns"] < 8e6  # the busiest link: 7.5 ms of the 63 ms
    found = rows(four_ranks, "SELECT * FROM findings WHERE finding = 'slowest collective'")
    assert [(f["run"], f["subject"]) for f in found] == [(W4, "all_reduce seq 8")]
    assert "straggler — the ranks started over 39.6 of its 63.4 ms, rank 3 (W4) last" in found[0]["claim"]
    (skew,) = rows(four_ranks, "SELECT * FROM findings WHERE finding = 'start skew'")
    assert (skew["severity"], skew["rank"]) == ("problem", 1), skew
    # the GPUs' side, one finding each for the run: every worker's share of its profiled steps
    (exposed,) = rows(four_ranks, "SELECT * FROM findings WHERE finding = 'exposed communication'")
    assert "(100.5 ms a worker over 3 steps; W1 74%, W2 72%, W3 71%, W4 59%)" in exposed["claim"]
    (idle,) = rows(four_ranks, "SELECT * FROM findings WHERE finding = 'gpu idle'")
    assert "(42.3 ms a worker over 3 steps; W4 39%, W3 27%, W2 26%, W1 24%)" in idle["claim"]
    assert [exposed["rank"], idle["rank"]] == [2, 3]


def test_the_readmes_explain_output_is_what_explain_prints(four_ranks_data: Path) -> None:
    """The README's first answer is `tracecore explain` on the 4-rank run, in a 100-column terminal."""
    from tracecore.explain import as_text, explain

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```text\n", 1)[1].split("```", 1)[0]
    assert block == as_text(explain(four_ranks_data, runs=[W4]), 100)
