"""`tracecore.open`: the notebook entry point over a real ingested dataset, kept across re-ingests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import altair as alt
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import tracecore
from tracecore.errors import DatasetError, UsageError
from tracecore.ingest import ingest, open_catalog
from tracecore.query import run_view
from tracecore.sample import BOTH_DIRECTIONS_RUN, SAMPLE_RUN, both_directions_run, sample_run

SAMPLE_PACKETS = 17_027  # stored rows of the 4 sample captures (workers.packets)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    summary = ingest([sample_run()], tmp_path / "data", jobs=1)
    assert not summary.failed
    return tmp_path / "data"


def test_a_connection_kept_across_a_reingest_loses_its_files(data: Path) -> None:
    """The failure `tracecore.open` exists to avoid: the old catalog names deleted part files (kept
    one commit for readers, deleted by the next)."""
    con = open_catalog(data)
    assert con.execute("SELECT count(*) FROM packets_all").fetchall() == [(SAMPLE_PACKETS,)]
    ingest([sample_run()], data, jobs=1, force=True)  # new part files, the old ones retired
    assert con.execute("SELECT count(*) FROM packets_all").fetchall() == [(SAMPLE_PACKETS,)]
    ingest([sample_run()], data, jobs=1, force=True)  # the old ones deleted
    with pytest.raises(Exception, match=r"part-[0-7]\.parquet"):  # one of the first ingest's files
        con.execute("SELECT count(*) FROM packets_all").fetchall()
    con.close()


def test_a_dataset_object_sees_every_reingest(data: Path) -> None:
    ds = tracecore.open(data)
    assert ds.sql("SELECT count(*) AS n FROM packets_all")["n"].to_pylist() == [SAMPLE_PACKETS]
    ingest([sample_run()], data, jobs=1, force=True)
    assert ds.sql("SELECT count(*) AS n FROM packets_all")["n"].to_pylist() == [SAMPLE_PACKETS]
    ingest([both_directions_run()], data, jobs=1)
    assert ds.runs["run"].to_pylist() == sorted([SAMPLE_RUN, BOTH_DIRECTIONS_RUN])
    ds.close()


def test_views_sql_and_runs_as_arrow_polars_or_pandas(data: Path) -> None:
    con = open_catalog(data)
    want = run_view(con, "flow_matrix", params={"to_ns": "10s"}).sort_by([("src_worker", "ascending")])
    con.close()
    with tracecore.open(data) as ds:
        got = ds.view("flow_matrix", to_ns="10s")
        assert isinstance(got, pa.Table)
        assert got.sort_by([("src_worker", "ascending")]).equals(want)
        frame = ds.view("flow_matrix", as_="polars", to_ns="10s")
        assert isinstance(frame, pl.DataFrame)
        assert frame.sort("src_worker").to_arrow().to_pylist() == want.to_pylist()
        runs = ds.runs
        assert runs.select(["run", "n_workers", "packets"]).to_pylist() == [
            {"run": SAMPLE_RUN, "n_workers": 4, "packets": SAMPLE_PACKETS}
        ]
        total = ds.sql("SELECT sum(frame_len) AS b FROM packets_all", as_="pandas")
        assert isinstance(total, pd.DataFrame)
        assert int(total["b"][0]) == runs["bytes"].to_pylist()[0]
        assert ds.sql("SELECT $x + 1 AS y", x=41)["y"].to_pylist() == [42]
    with tracecore.open(data, as_="polars") as ds:
        assert ds.runs["run"].to_list() == [SAMPLE_RUN]
        with pytest.raises(UsageError, match="unknown view 'flow_matrx'"):
            ds.view("flow_matrx")
        with pytest.raises(UsageError, match="unknown result form 'numpy'"):
            ds.sql("SELECT 1", as_="numpy")


def test_figure_is_an_altair_chart_of_the_data(data: Path) -> None:
    with tracecore.open(data) as ds:
        chart = ds.figure("flow_matrix")
        assert isinstance(chart, alt.TopLevelMixin)
        spec = chart.to_dict()
        values = spec["data"]["values"]
        assert {(v["src_worker"], v["dst_worker"]) for v in values} >= {("W1", "W4"), ("W2", "W1")}


def test_repr_and_html_repr_show_path_runs_packets_views(data: Path) -> None:
    with tracecore.open(data) as ds:
        text = repr(ds)
        assert text.splitlines()[:3] == [
            f"tracecore dataset {data.resolve()}",
            f"  1 run(s), 17,027 stored packets, {ds.runs['bytes'].to_pylist()[0]:,} bytes on the wire",
            f"  {SAMPLE_RUN}: 4 workers, 17,027 packets",
        ]
        assert "flow_matrix" in text.splitlines()[3]
        assert "run_bounds" not in text  # building blocks are left out
        page = ds._repr_html_()
        assert f"<td>{SAMPLE_RUN}</td><td>4</td><td>17,027</td>" in page
        assert str(data.resolve()) in page


def test_a_missing_dataset_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no dataset at"):
        tracecore.open(tmp_path / "nothing")


def test_import_tracecore_stays_light() -> None:
    code = (
        "import sys, tracecore; tracecore.open; import tracecore.dataset;"
        "print(sorted(m for m in ('duckdb', 'pyarrow', 'polars', 'pandas', 'altair') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


# A Python without pandas, as a user's who installed tracecore alone: its import fails as it would there.
WITHOUT_PANDAS = """\
import importlib.abc, sys
class NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
import tracecore
sys.meta_path.insert(0, NoPandas())
ds = tracecore.open(sys.argv[1])
print(ds.view("flow_counts", as_="polars").height)
try:
    ds.view("flow_counts", as_="pandas")
except Exception as err:
    print(type(err).__name__, err, sep=": ")
"""


def test_pandas_results_without_pandas_name_the_extra(data: Path) -> None:
    """Before: pyarrow's raw `ModuleNotFoundError: No module named 'pandas'` (issue 25, item 6)."""
    res = subprocess.run(
        [sys.executable, "-c", WITHOUT_PANDAS, str(data)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    polars_rows, error = res.stdout.splitlines()
    assert polars_rows == "5"
    assert error == (
        "UsageError: as_='pandas' needs pandas, which is not installed: pip install 'tracecore[pandas]' "
        "(or ask for as_='polars' or as_='arrow')"
    )
