"""bench.make_job_traces: a job of N ranks made from one real rank ingests as one run of N workers, its
planted stragglers are the ones tracecore names, and a rank that was not planted is the template shifted.

The template is the real 4-rank H200 run of ../shared/corpus-gpu (rank 0); 8 ranks x 6 steps without
padding keep it to seconds.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench import make_job_traces as jobs
from tracecore.cli.app import app
from tracecore.ingest import open_catalog

RANKS, STEPS = 8, 6
STEP_COLUMNS = (
    "compute_ns, communication_ns, overlap_ns, exposed_ns, gpu_idle_ns, memory_ns, iteration_ns, step_ns"
)


def make(out: Path, *extra: str, ranks: int = RANKS, steps: int = STEPS) -> dict:
    if not jobs.TEMPLATE.is_dir():
        pytest.fail(f"corpus missing: {jobs.TEMPLATE} (the shared/ folder must sit beside the checkout)")
    argv = [str(out), "--ranks", str(ranks), "--steps", str(steps), "--rank-mb", "0", *extra]
    assert jobs.main(argv) == 0
    folder = out / f"job-{ranks}r"
    return json.loads((folder / "manifest.json").read_text()) | {"folder": folder}


def ingest(folder: Path, data: Path) -> Path:
    res = CliRunner().invoke(app, ["ingest", str(folder), "--data", str(data)])
    assert res.exit_code == 0, res.output
    return data


def rows(data: Path, sql: str) -> list[tuple]:
    con = open_catalog(data)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    """(manifest, dataset) of the plain job, written by two processes."""
    tmp = tmp_path_factory.mktemp("job")
    manifest = make(tmp / "out", "--jobs", "2")
    return manifest, ingest(manifest["folder"], tmp / "data")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, plain: tuple[dict, Path]) -> Path:
    """The template rank alone (its trace and NCCL log), ingested: the numbers a copy must have."""
    manifest, _ = plain
    run = tmp_path_factory.mktemp("template") / jobs.TEMPLATE.name
    run.mkdir()
    for name in (manifest["template"]["trace"], manifest["template"]["nccl_log"]):
        os.symlink(jobs.TEMPLATE / name, run / name)
    return ingest(run, run.parent / "data")


def test_the_manifest_counts_what_a_json_load_counts(plain: tuple[dict, Path]) -> None:
    """Events and bytes per rank and in total; each header says its rank of N and its skewed base."""
    manifest, _ = plain
    base = json.loads((jobs.TEMPLATE / manifest["template"]["trace"]).read_text())["baseTimeNanoseconds"]
    total = 0
    for entry in manifest["per_rank"]:
        path = manifest["folder"] / entry["trace"]
        doc = json.loads(path.read_text())
        assert len(doc["traceEvents"]) == entry["events"]
        assert path.stat().st_size == entry["bytes"] == entry["json_bytes"]
        info = doc["distributedInfo"]
        assert (info["rank"], info["world_size"]) == (entry["rank"], RANKS)
        assert info["pg_config"][0]["ranks"] == list(range(RANKS))
        assert doc["baseTimeNanoseconds"] == base + manifest["skews_ns"][entry["rank"]]
        assert abs(entry["skew_ns"]) <= manifest["skew_us"] * 1000
        names = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
        assert [n for n in names if n.startswith("ProfilerStep#")] == [
            f"ProfilerStep#{n}" for n in range(STEPS)
        ]
        total += entry["events"]
    assert manifest["total"]["events"] == total
    assert manifest["pad"] == 0
    assert len(manifest["stragglers"]) == 2
    assert 0 not in manifest["stragglers"]


def test_the_job_is_one_run_with_a_worker_per_rank(plain: tuple[dict, Path]) -> None:
    """Every rank its own worker at the address its NCCL log names; every collective and step read;
    NCCL's log parser reads each generated log as rank r of N, with no line it does not know."""
    manifest, data = plain
    per_step = manifest["template"]["collectives_per_step"]
    assert rows(data, "SELECT capture_mode, n_workers FROM runs") == [("none", RANKS)]
    assert rows(data, "SELECT ip FROM workers ORDER BY worker") == [(jobs.rank_ip(r),) for r in range(RANKS)]
    collectives = RANKS * sum(per_step[n % len(per_step)] for n in range(STEPS))
    assert rows(data, "SELECT count(*), count(DISTINCT rank) FROM collectives") == [(collectives, RANKS)]
    assert rows(data, "SELECT count(*) FROM profiler_steps") == [(RANKS * STEPS,)]
    assert rows(data, "SELECT DISTINCT worker_from FROM collective_calls") == [("process",)]
    logged = rows(
        data, "SELECT file, rank, nranks, bootstrap_ip, unknown_lines FROM nccl_ranks ORDER BY rank"
    )
    assert logged == [
        (f"nccl.host{r}.{e['pid']}.log", r, RANKS, jobs.rank_ip(r), 0)
        for r, e in enumerate(manifest["per_rank"])
    ]


def test_the_logged_rings_and_trees_are_one_ring_and_nccls_trees(plain: tuple[dict, Path]) -> None:
    """Each rank's ring neighbours are r-1 and r+1; every tree edge is logged by both its ends."""
    _, data = plain
    ring = rows(
        data, "SELECT DISTINCT rank, prev_rank, next_rank FROM nccl_rings WHERE source = 'Ring' ORDER BY 1"
    )
    assert ring == [(r, (r - 1) % RANKS, (r + 1) % RANKS) for r in range(RANKS)]
    trees = rows(data, "SELECT channel, rank, up_rank, down_ranks FROM nccl_trees WHERE source = 'Trees'")
    ups = {(c, r): up for c, r, up, _ in trees}
    downs = {(c, r, d) for c, r, _, ds in trees for d in ds}
    assert len(ups) == 2 * RANKS
    assert {(c, up, r) for (c, r), up in ups.items() if up != -1} == downs
    assert sorted(r for (c, r), up in ups.items() if up == -1) == [0, RANKS - 1]  # a root a tree


def test_four_generated_ranks_log_the_real_runs_rings_and_trees(tmp_path: Path) -> None:
    """Made with 4 ranks, the rings and NCCL's double binary trees are those the real 4-rank run logged."""
    folder = make(tmp_path, "--stragglers", "0", "--jobs", "1", ranks=4, steps=1)["folder"]
    form = re.compile(r"NCCL INFO ((?:Ring|Trees?) .*)$")

    def topology(path: Path) -> tuple[int, list[str]]:
        text = path.read_text()
        rank = int(re.search(r"comm 0x[0-9a-f]+ rank (\d+) nranks", text)[1])
        return rank, [m[1] for line in text.splitlines() if (m := form.search(line))]

    real = dict(topology(p) for p in jobs.TEMPLATE.glob("nccl.*.log"))
    made = dict(topology(p) for p in folder.glob("nccl.*.log"))
    assert made == real
    assert len(made) == 4


def test_the_planted_stragglers_are_last_on_every_collective(plain: tuple[dict, Path]) -> None:
    """On every instance a planted straggler starts last, later than the first rank by at least the delay
    less twice the largest skew."""
    manifest, data = plain
    found = rows(data, "SELECT last_rank, spread_ns, ranks FROM collective_stragglers ORDER BY seq")
    assert len(found) == sum(manifest["template"]["collectives_per_step"][n % 3] for n in range(STEPS))
    floor = manifest["straggler_delay_ns"] - 2 * manifest["skew_us"] * 1000
    for last, spread, ranks in found:
        assert last in manifest["stragglers"]
        assert spread >= floor
        assert ranks == RANKS


def test_a_rank_not_planted_is_the_template_step_shifted(plain: tuple[dict, Path], template: Path) -> None:
    """step_breakdown of a rank that is not a straggler equals the template step's to the ns, and its
    steps start where the template's did, plus its skew and a whole number of µs."""
    manifest, data = plain
    rank = next(r for r in range(RANKS) if r not in manifest["stragglers"] and r != 0)
    steps = manifest["template"]["steps"]
    expected = {s: row for s, *row in rows(template, f"SELECT step, {STEP_COLUMNS} FROM step_breakdown")}
    assert sorted(expected) == steps
    made = rows(data, f"SELECT step, {STEP_COLUMNS} FROM step_breakdown WHERE rank = {rank} ORDER BY step")
    assert [s for s, *_ in made] == list(range(STEPS))
    for n, *row in made:
        assert row == expected[steps[n % len(steps)]], n
    starts = dict(rows(template, "SELECT step, start_ns FROM profiler_steps"))
    skew = manifest["skews_ns"][rank]
    for n, start in rows(
        data, f"SELECT step, start_ns FROM profiler_steps WHERE rank = {rank} ORDER BY step"
    ):
        shift = start - skew - starts[steps[n % len(steps)]]
        assert shift >= 0, n
        assert shift % 1000 == 0, n
    # a straggler's compute is the template's too: only its NCCL kernels are shorter
    late = manifest["stragglers"][0]
    compute = rows(data, f"SELECT step, compute_ns FROM step_breakdown WHERE rank = {late} ORDER BY step")
    assert [c for _, c in compute] == [expected[steps[n % 3]][0] for n in range(STEPS)]


def test_gzip_and_inspector_give_the_same_rows(plain: tuple[dict, Path], tmp_path: Path) -> None:
    """Written gzipped by one process, the traces give the plain job's rows; the Inspector's records
    name the same stragglers, one record per collective per rank."""
    manifest, data = plain
    packed = make(tmp_path / "out", "--gzip", "--inspector", "--jobs", "1")
    folder = packed["folder"]
    assert sorted(p.name for p in folder.glob("kineto-rank*.json.gz")) == sorted(
        f"kineto-rank{r}.json.gz" for r in range(RANKS)
    )
    for entry in packed["per_rank"]:
        with gzip.open(folder / entry["trace"], "rt") as fh:
            assert len(json.load(fh)["traceEvents"]) == entry["events"]
    assert [e["events"] for e in packed["per_rank"]] == [e["events"] for e in manifest["per_rank"]]
    gz = ingest(folder, tmp_path / "data")
    for sql in (
        "SELECT rank, seq, step, op, bytes, start_ns, end_ns, call_start_ns, call_end_ns FROM collectives"
        " WHERE source = 'pytorch_profiler' ORDER BY ALL",
        "SELECT rank, step, start_ns, end_ns, gpu_start_ns, gpu_end_ns FROM profiler_steps ORDER BY ALL",
        "SELECT kind, count(*), sum(end_ns - start_ns) FROM profiler_kernels GROUP BY ALL ORDER BY ALL",
    ):
        assert rows(gz, sql) == rows(data, sql), sql
    per_rank = sum(manifest["template"]["collectives_per_step"][n % 3] for n in range(STEPS))
    assert rows(
        gz, "SELECT count(*), count(DISTINCT rank) FROM collectives WHERE source = 'nccl_inspector'"
    ) == [(RANKS * per_rank, RANKS)]
    found = rows(gz, "SELECT last_rank, spread_ns FROM collective_stragglers WHERE source = 'nccl_inspector'")
    assert len(found) == per_rank
    assert all(last in packed["stragglers"] for last, _ in found)
    floor = packed["straggler_delay_ns"] - 2 * packed["skew_us"] * 1000 - 1000  # the Inspector's whole µs
    assert all(spread >= floor for _, spread in found)


def test_a_thin_job_gives_the_same_collectives_steps_kernels_and_breakdown(
    plain: tuple[dict, Path], tmp_path: Path
) -> None:
    """--thin leaves out only what tracecore's collectives views do not read (host operators, runtime
    calls, flow arrows): every row they answer from is the plain job's."""
    manifest, data = plain
    thin = make(tmp_path / "out", "--thin", "--jobs", "1")
    assert thin["thin"] is True
    assert sum(e["bytes"] for e in thin["per_rank"]) < sum(e["bytes"] for e in manifest["per_rank"]) / 2
    lean = ingest(thin["folder"], tmp_path / "data")
    for sql in (
        "SELECT rank, seq, step, op, bytes, start_ns, end_ns, call_start_ns, call_end_ns FROM collectives"
        " ORDER BY ALL",
        "SELECT rank, step, start_ns, end_ns, gpu_start_ns, gpu_end_ns FROM profiler_steps ORDER BY ALL",
        "SELECT rank, kind, start_ns, end_ns FROM profiler_kernels ORDER BY ALL",
        f"SELECT rank, step, {STEP_COLUMNS} FROM step_breakdown ORDER BY ALL",
        "SELECT seq, last_rank, spread_ns FROM collective_stragglers ORDER BY ALL",
    ):
        assert rows(lean, sql) == rows(data, sql), sql


def test_the_verdicts_name_both_planted_stragglers_and_no_other_rank(plain: tuple[dict, Path]) -> None:
    """Two ranks equally late: collective_stragglers' last rank is one of them, the verdicts name both."""
    manifest, data = plain
    named = rows(
        data,
        "SELECT DISTINCT unnest(late_ranks) FROM collective_verdicts WHERE verdict = 'straggler' ORDER BY 1",
    )
    assert [r for (r,) in named] == sorted(manifest["stragglers"])
    judged = rows(data, "SELECT count(*) FROM collective_verdicts WHERE verdict = 'straggler'")
    assert judged[0][0] > 0
    assert rows(data, "SELECT DISTINCT len(late_ranks) FROM collective_verdicts") == [(2,)]
