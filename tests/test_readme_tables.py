"""The README calls the catalog's tables tables and its views views: a table is read with `tracecore sql`,
never with `tracecore query`, which runs only the views (queries/*.sql).

Why: the README said "`nccl_ranks` lists every rank" under "What the views then say", and
`tracecore query nccl_ranks` answers "unknown view". The README's own `tracecore sql` line for the
NCCL tables runs here on a real NCCL run (../shared/corpus-gpu, two ranks over sockets).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.ingest import ingest, open_catalog

REPO = Path(__file__).resolve().parent.parent
# the README and the guides it links, as one text
GUIDES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
README = "\n".join(p.read_text(encoding="utf-8") for p in GUIDES)
GPU_CORPUS = REPO.parent / "shared" / "corpus-gpu"
TWO_RANKS = GPU_CORPUS / "h100-nccl-socket-2rank" / "torch_ddp-mlp-sgd-32-nccl-0-ring"
VIEWS = {p.stem for p in (REPO / "queries").glob("*.sql")}
# "`name` lists …": a name as the subject of what it tells, the way the README speaks of views
TELLS = r"(lists|finds|predicts|compares|holds|joins|counts|judges|puts|matches|draws|says|shows|gives)"
runner = CliRunner()


@pytest.fixture(scope="module")
def nccl_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not TWO_RANKS.is_dir():
        pytest.fail(f"corpus missing: {TWO_RANKS} (the shared/ folder must sit beside the checkout)")
    out = tmp_path_factory.mktemp("nccl") / "data"
    assert not ingest([TWO_RANKS], out, jobs=1).failed
    return out


@pytest.fixture(scope="module")
def tables(nccl_dataset: Path) -> set[str]:
    """The catalog's base tables (its private `_…` ones left out)."""
    con = open_catalog(nccl_dataset, read_only=True)
    try:
        found = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
        ).fetchall()
    finally:
        con.close()
    return {name for (name,) in found if not name.startswith("_")}


def test_the_readme_sql_line_reads_the_nccl_ranks(nccl_dataset: Path) -> None:
    lines = [c for c in re.findall(r"`(tracecore sql \"[^`]*\")`", README) if "nccl_ranks" in c]
    assert lines, "the README shows no `tracecore sql` line for nccl_ranks"
    for line in lines:
        result = runner.invoke(app, [*shlex.split(line)[1:], "--data", str(nccl_dataset), "-f", "json"])
        assert result.exit_code == 0, (line, result.output)
        assert [(r["rank"], r["nranks"], r["net"], r["nccl_version"]) for r in json.loads(result.stdout)] == [
            (0, 2, "Socket", "2.28.9+cuda13.0"),
            (1, 2, "Socket", "2.28.9+cuda13.0"),
        ]


def test_query_runs_views_only(nccl_dataset: Path, tables: set[str]) -> None:
    assert "nccl_ranks" in tables
    assert "nccl_ranks" not in VIEWS
    result = runner.invoke(app, ["query", "nccl_ranks", "--data", str(nccl_dataset)])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: unknown view 'nccl_ranks'")


def test_the_readme_never_speaks_of_a_table_as_a_view(tables: set[str]) -> None:
    queried = set(re.findall(r"tracecore query ([a-z_0-9]+)", README))
    assert queried
    assert queried <= VIEWS, sorted(queried - VIEWS)
    said = [
        m.group(0)
        for m in re.finditer(rf"(\S+\s+)`([a-z_0-9]+)`\s+{TELLS}\b", README)
        if m.group(2) in tables and "table" not in (m.group(1) or "")
    ]
    assert said == []
