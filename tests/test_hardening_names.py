"""Any legal run-folder name fits in a partition folder name (issue 12, item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.layout import partition
from tracecore.sample import SAMPLE_RUN, sample_run

LONG = SAMPLE_RUN + "-" + "é" * 105  # 254 bytes of UTF-8: legal, but 674 bytes once %-escaped


def test_partition_folders_fit_the_file_system_limit() -> None:
    assert len(LONG.encode()) == 254
    for name in (LONG, "x" * 255, "%" * 255, SAMPLE_RUN):
        folder = partition(name, "W1").split("/")[1]
        assert len(folder.encode()) <= 255
    assert partition(SAMPLE_RUN, "W1") == f"packets/run={SAMPLE_RUN}/worker=W1"
    assert partition(LONG, "W1") != partition(LONG + "é", "W1")


def test_a_long_run_name_is_ingested_whole(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_run(), src / LONG)
    shutil.copytree(sample_run(), src / SAMPLE_RUN)
    toml = src / LONG / "run.toml"  # the folder names the run: no `name` in run.toml
    toml.write_text(toml.read_text().replace(f'name = "{SAMPLE_RUN}"\n', "", 1))
    summary = ingest([src], tmp_path / "data")
    assert not summary.failed
    assert sorted(summary.runs) == sorted([LONG, SAMPLE_RUN])
    con = open_catalog(tmp_path / "data")
    try:
        assert con.execute("SELECT run FROM runs ORDER BY run").fetchall() == [(SAMPLE_RUN,), (LONG,)]
        per_run = con.execute("SELECT run, count(*) FROM packets GROUP BY run ORDER BY run").fetchall()
        assert per_run == [(SAMPLE_RUN, 17027), (LONG, 17027)]
        assert con.execute("SELECT count(*) FROM packets WHERE run = ?", [LONG]).fetchone() == (17027,)
    finally:
        con.close()
