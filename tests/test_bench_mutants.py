"""bench.mutants is run, not only kept runnable: each mutant's line is in its file exactly once (the RDMA
decode once added a second copy of two kernel lines, and `make mutants` stopped before running any);
the CI subset has a mutant in every view file, the dedup rule and the kernel; the committed reports
list exactly the mutants the code defines, every one killed; and `make test` runs the CI subset here,
each mutant in a private copy of the checkout (bench/results/mutants-ci.md is that run's report).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.mutants import MUTANTS, REPO, Mutant, ci_subset
from tests.commands import run_module

RESULTS = REPO / "bench" / "results"
CI_BOUND_S = 1200  # the subset: 550 s here alone, 1 job (bench/results/mutants-ci.md)


def report_rows(path: Path) -> list[tuple[str, str]]:
    """(mutant, result) of each row of a report's table, in order."""
    rows = re.findall(
        r"^\| (\S+) \| \S+ \| .* \| (\w+) \| \d+ \| `.*` \|$", path.read_text(encoding="utf-8"), re.M
    )
    assert rows, f"{path}: no mutant rows"
    return rows


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_one_place(mutant: Mutant) -> None:
    text = (REPO / mutant.path).read_text(encoding="utf-8")
    assert text.count(mutant.old) == 1, (mutant.name, mutant.path)
    assert mutant.old != mutant.new
    for test in (*mutant.tests, *mutant.ci):
        assert (REPO / test.split("::")[0]).is_file(), (mutant.name, test)


def test_mutant_names_are_unique_and_name_their_file() -> None:
    names = [m.name for m in MUTANTS]
    assert len(set(names)) == len(names)
    for m in MUTANTS:
        areas = {"dedup", "catalog"} if m.path == "tracecore/ingest/catalog.py" else {Path(m.path).stem}
        assert m.name.split(".")[0] in areas, m.name


def test_the_ci_subset_has_a_mutant_in_every_view_the_dedup_rule_and_the_kernel() -> None:
    views = {f"queries/{p.name}" for p in (REPO / "queries").glob("*.sql")}
    assert len(views) > 20
    assert {m.path for m in ci_subset()} == views | {
        "tracecore/ingest/catalog.py",
        "tracecore/reader/kernel.py",
    }
    assert sum(m.kernel for m in ci_subset()) == 1  # one JIT compile: the slow part of a kernel mutant
    for m in ci_subset():
        assert all("::" in test for test in m.ci), m.name  # node ids, not whole modules


def test_the_reports_list_the_mutants_the_code_defines_every_one_killed() -> None:
    assert report_rows(RESULTS / "mutants-latest.md") == [(m.name, "killed") for m in MUTANTS]
    assert report_rows(RESULTS / "mutants-ci.md") == [(m.name, "killed") for m in ci_subset()]


@pytest.mark.slow
def test_the_ci_subset_kills_every_mutant(tmp_path: Path) -> None:
    out = tmp_path / "mutants-ci.md"
    res = run_module("bench.mutants", "--ci", "--out", str(out), timeout=CI_BOUND_S)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert report_rows(out) == [(m.name, "killed") for m in ci_subset()]
