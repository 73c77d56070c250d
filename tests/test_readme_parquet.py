"""The guide's "Reading the Parquet files directly" snippet, taken from docs/using.md and run as written,
reads the rows the catalog's `packets` counts: with Polars, pyarrow and pandas, on both sample runs
(the sender-side sample and `both_directions`, whose captures hold each packet twice).

Why: the snippet read every part file's rows, so a both-direction run counted its packets twice
(5,836 rows where `packets` has 2,930); the de-duplication rule lived only in the catalog's SQL.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracecore.ingest import open_catalog
from tracecore.sample import both_directions_run

REPO = Path(__file__).resolve().parent.parent
BOTH = both_directions_run().name


def readme_snippet() -> str:
    """The first Python block after the guide's paragraph on reading the Parquet files directly."""
    text = (REPO / "docs" / "using.md").read_text(encoding="utf-8")
    after = text[text.index("Reading the Parquet files directly") :]
    return re.search(r"```python\n(.*?)```", after, re.DOTALL).group(1)


@pytest.fixture(scope="module")
def snippet(sample_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The snippet's names after running it in a folder whose ./tracecore-data is the sample dataset."""
    import os

    here = tmp_path_factory.mktemp("readme")
    (here / "tracecore-data").symlink_to(sample_dataset, target_is_directory=True)
    names: dict = {}
    cwd = Path.cwd()
    os.chdir(here)
    try:
        exec(compile(readme_snippet(), "docs/using.md", "exec"), names)
        names["packets"] = names["packets"].collect()  # the lazy scan's paths are relative to here
    finally:
        os.chdir(cwd)
    names["here"] = here
    return names


def _catalog(sample_dataset: Path, sql: str) -> list[tuple]:
    con = open_catalog(sample_dataset, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_polars_and_pyarrow_count_what_packets_counts(sample_dataset: Path, snippet: dict) -> None:
    import polars as pl

    per_run = "SELECT run, count(*) FROM {} GROUP BY run ORDER BY run"
    want = _catalog(sample_dataset, per_run.format("packets"))
    assert dict(want)[BOTH] == 2930
    assert dict(_catalog(sample_dataset, per_run.format("packets_all")))[BOTH] == 5836  # the copies
    polars = snippet["packets"].group_by("run").agg(pl.len()).sort("run").rows()
    assert polars == want
    arrow = snippet["table"].group_by("run").aggregate([([], "count_all")]).sort_by("run").to_pylist()
    assert [(r["run"], r["count_all"]) for r in arrow] == want


def test_the_rows_are_the_catalogs(sample_dataset: Path, snippet: dict) -> None:
    """The same rows, not only as many: each (worker, time, source, length) of the both-direction run."""
    import polars as pl

    cols = ["worker", "ts_ns", "src_ip", "frame_len"]
    want = _catalog(
        sample_dataset, f"SELECT {', '.join(cols)} FROM packets WHERE run = '{BOTH}' ORDER BY ALL NULLS FIRST"
    )
    got = (
        snippet["packets"]
        .filter(pl.col("run") == BOTH)
        .select(pl.col("worker"), "ts_ns", pl.col("src_ip").cast(pl.String), "frame_len")
        .sort(cols, nulls_last=False)
        .rows()
    )
    assert got == want


def test_pandas_reads_with_the_same_filter(sample_dataset: Path, snippet: dict) -> None:
    import pandas as pd
    import pyarrow as pa

    from tracecore.schema import DATASET_SCHEMA

    schema = pa.schema([*DATASET_SCHEMA, *snippet["keys"]])
    frame = pd.read_parquet(
        snippet["here"] / "tracecore-data" / "packets", schema=schema, filters=snippet["keep"]
    )
    assert len(frame) == _catalog(sample_dataset, "SELECT count(*) FROM packets")[0][0]
