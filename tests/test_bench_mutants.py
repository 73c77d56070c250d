"""bench.mutants stays runnable: each mutant's line is in its file exactly once (the RDMA decode added a
second copy of two kernel lines, and `make mutants` stopped before running any mutant)."""

from __future__ import annotations

import pytest

from bench.mutants import MUTANTS, REPO, Mutant


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_mutant_applies_to_one_place(mutant: Mutant) -> None:
    text = (REPO / mutant.path).read_text(encoding="utf-8")
    assert text.count(mutant.old) == 1, (mutant.name, mutant.path)
    assert mutant.old != mutant.new
    for test in mutant.tests:
        assert (REPO / test).is_file(), (mutant.name, test)
