"""Figures on the real sample runs: spec snapshots, offline PNG/SVG rendering, the figure command.

Snapshots (syrupy, JSON) live in tests/snapshots/test_figures/, one file per figure: floats rounded to 9
significant digits, since parallel float sums may differ in the last bits; an inline dataset of up
to 100 rows is kept whole, a longer one as its row count, per-column summaries, its first rows and a
SHA-256 of all rows, so every file stays small enough to review. After an intended change run
`pytest tests/test_figures.py --snapshot-update` (the run then fails on purpose: review the diff and
run again).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from typer.testing import CliRunner

from tests.test_views_support import SAMPLE
from tracecore import figures
from tracecore.cli.app import app
from tracecore.figures import _data, render, timeseries, traffic
from tracecore.query import run_view

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "test_figures"
WHOLE_ROWS = 100  # inline datasets up to this many rows are stored whole
runner = CliRunner()


class FigureSpecSnapshot(JSONSnapshotExtension):
    """Vega-Lite specs as JSON files in tests/snapshots/test_figures/, named by test and figure."""

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOTS)


@pytest.fixture
def spec_snapshot(snapshot):
    return snapshot.use_extension(FigureSpecSnapshot)


@pytest.fixture(scope="module")
def charts(con):
    return {name: figures.build(con, name) for name in figures.figure_names()}


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB/RGBA PNG → array (h, w, channels): the five scanline filters, no dependencies."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert (depth, interlace) == (8, 0), header
    assert color in (2, 6), header
    bpp = 4 if color == 6 else 3
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), np.int32)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(width * bpp, np.int32)
        if f == 0:
            out[y] = line
        elif f == 2:
            out[y] = (line + prev) & 0xFF
        else:  # 1 Sub, 3 Average, 4 Paeth depend on the reconstructed left neighbour
            row = np.zeros(width * bpp, np.int32)
            for i in range(width * bpp):
                a = row[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[i] = (line[i] + pred) & 0xFF
            out[y] = row
    return out.reshape(height, width, bpp).astype(np.uint8)


def _rounded(value):
    """Floats to 9 significant digits; long inline datasets summarised (see the module docstring)."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        out = {k: _rounded(v) for k, v in value.items()}
        values = out.get("values")
        if isinstance(values, list) and len(values) > WHOLE_ROWS:
            out["values"] = _summary(values)
        return out
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _summary(rows: list[dict]) -> dict:
    """Row count, per-column min/max (and sum of numbers) or distinct count, first rows, digest."""
    columns = {}
    for key in sorted({k for row in rows for k in row}):
        present = [row[key] for row in rows if row.get(key) is not None]
        numbers = [v for v in present if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(present):
            columns[key] = {"min": min(numbers), "max": max(numbers), "sum": _rounded(float(sum(numbers)))}
        else:
            columns[key] = {"distinct": len({json.dumps(v, sort_keys=True) for v in present})}
        columns[key]["nulls"] = len(rows) - len(present)
    text = json.dumps(rows, sort_keys=True)
    return {
        "rows": len(rows),
        "columns": columns,
        "head": rows[:3],
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


@pytest.mark.parametrize("name", figures.figure_names())
def test_spec_snapshot(charts, name, spec_snapshot) -> None:
    assert _rounded(json.loads(json.dumps(render.spec(charts[name])))) == spec_snapshot


def test_spec_is_the_dict_altairs_own_check_gives_and_still_refuses_a_broken_chart(charts) -> None:
    # render.spec checks the chart once with each dataset cut to a row; Altair checks every row
    for chart in charts.values():
        assert render.spec(chart) == chart.to_dict()
    import altair as alt
    from altair.utils.schemapi import SchemaValidationError, debug_mode

    with debug_mode(False):  # built as the builders build their data: unchecked until spec()
        broken = alt.Chart(_data.inline([{"x": 1}, {"x": 2}])).mark_line(interpolate="sideways")
    with pytest.raises(SchemaValidationError, match="'sideways' is an invalid value for `interpolate`"):
        render.spec(broken.encode(x="x:Q"))


def test_a_spec_is_checked_once_per_cache_and_a_failed_one_never_counts(tmp_path, monkeypatch) -> None:
    """render.spec checks a spec against Vega-Lite's schema once: a report drawn again from the same
    data skips the check (a tenth of its CPU); what failed the check is never recorded as passed."""
    import altair as alt
    from altair.utils.schemapi import SchemaValidationError, debug_mode

    from tracecore.figures import checked_specs

    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "cache"))
    with debug_mode(False):
        good = alt.Chart(_data.inline([{"x": 1}, {"x": 2}])).mark_line().encode(x=alt.X("x:Q"))
        broken = good.mark_line(interpolate="sideways")
    with pytest.raises(SchemaValidationError, match="'sideways' is an invalid value"):
        render.spec(broken)
    assert render.spec(good) == good.to_dict()
    (kept,) = (tmp_path / "cache").glob("checked-specs-*.txt")
    good_key = checked_specs.key(type(good), render._first_rows(good.to_dict()))
    assert kept.read_text().splitlines() == [good_key]
    # a key recorded as passed is not checked again: the broken spec's, recorded by hand, passes
    cut = render._first_rows(broken.to_dict(validate=False))
    checked_specs.remember(checked_specs.key(type(broken), cut))
    assert render.spec(broken)["mark"]["interpolate"] == "sideways"
    monkeypatch.setenv("TRACECORE_CACHE_DIR", "")  # no cache: every spec is checked
    with pytest.raises(SchemaValidationError):
        render.spec(broken)
    # a file grown to twice KEPT keys (and a torn line) is cut to its last KEPT on reading
    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "long"))
    keys = [f"{i:064x}" for i in range(2 * checked_specs.KEPT + 1)]
    long = tmp_path / "long" / kept.name
    long.parent.mkdir()
    long.write_text("".join(f"{k}\n" for k in keys) + "0123")
    assert checked_specs.checked(keys[-1])
    assert not checked_specs.checked(keys[0])
    assert long.read_text().splitlines() == keys[-checked_specs.KEPT :]


def test_rows_are_json_safe_in_every_column_type() -> None:
    """_data.rows converts only the columns json_value may change (it cost more than the rows when
    called on every value): the result is json_rows' of every value, column type by column type."""
    from decimal import Decimal

    from tracecore.json_values import json_rows

    table = pa.table(
        {
            "i": pa.array([1, None], pa.int64()),
            "s": pa.array(["a", None]).dictionary_encode(),
            "b": pa.array([True, None]),
            "t": pa.array([1, None], pa.timestamp("ns", tz="UTC")),
            "f": pa.array([float("nan"), float("inf")]),
            "d": pa.array([Decimal("2"), Decimal("2.5")], pa.decimal128(4, 1)),
            "x": pa.array([b"\xff\x00", None]),
            "l": pa.array([[1.0, float("nan")], None]),
            "m": pa.array([pa.MonthDayNano([1, 2, 3]), None], pa.month_day_nano_interval()),
        }
    )
    got = _data.rows(table)
    assert got == json_rows(table.to_pylist())
    assert [r["f"] for r in got] == [None, None]
    assert (got[0]["d"], got[0]["x"], got[0]["l"]) == (2, "ff00", [1.0, None])
    assert got[0]["m"] == "1 month 2 days 00:00:00.000000003"


def test_inline_rows_are_shared_by_the_copies_altair_makes() -> None:
    """Altair deep-copies each chart it layers or concatenates, and again to write its spec: the
    rows went with it, value by value (a tenth of a report's CPU); the copies now share one list."""
    import altair as alt

    rows = [{"x": i, "y": 2 * i} for i in range(3)]
    line = alt.Chart(_data.inline(rows)).mark_line().encode(x=alt.X("x:Q"), y=alt.Y("y:Q"))
    assert line.copy(deep=True).data.to_dict()["values"] is rows
    both = alt.vconcat(line, line.mark_point())  # the parts' one dataset goes to the top
    assert both.copy(deep=True).data.to_dict()["values"] is rows
    assert both.to_dict()["data"]["values"] == rows


@pytest.fixture(scope="module")
def rdma_con():
    from tests.rdma_corpus import open_rdma_dataset

    c = open_rdma_dataset()
    yield c
    c.close()


def test_rdma_ops_spec_snapshot(rdma_con, spec_snapshot) -> None:
    """The operation-mix chart of the NCCL ring and the crafted run (tests/rdma_corpus.py)."""
    from tests.rdma_corpus import CRAFTED_RUN, NCCL_RUN

    chart = figures.build(rdma_con, "rdma_ops", [NCCL_RUN, CRAFTED_RUN])
    assert _rounded(json.loads(json.dumps(render.spec(chart)))) == spec_snapshot


def test_rdma_ops_draws_rdma_flows(rdma_con) -> None:
    """One bar per flow, one segment per operation it used, as rdma_flows counts them; the flows in the
    view's order (by worker pair), and the 30 busiest only when a run has more."""
    from tests.rdma_corpus import NCCL_RUN

    flows = run_view(rdma_con, "rdma_flows", runs=[NCCL_RUN])
    chart = traffic.rdma_ops_chart(flows).to_dict()
    bars, ends = chart["layer"][0]["data"]["values"], chart["layer"][1]["data"]["values"]
    assert [e["flow"] for e in ends] == [
        "W1→W2 QP 0x000028",
        "W1→W3 QP 0x000022",
        "W2→W1 QP 0x000022",
        "W2→W3 QP 0x000023",
        "W3→W1 QP 0x000023",
        "W3→W2 QP 0x000027",
    ]
    assert [e["label"] for e in ends] == ["32,770 B", "1,024 B", "1,024 B", "32,769 B", "32,769 B", "1,024 B"]
    per_flow = {(b["flow"], b["op"]): b["packets"] for b in bars}
    assert per_flow[("W1→W2 QP 0x000028", "RDMA WRITE")] == 44
    assert per_flow[("W1→W2 QP 0x000028", "ACK")] == 16
    assert sum(per_flow.values()) == sum(flows["packets"].to_pylist()) == 276
    many = pa.concat_tables([flows] * 6)  # 36 flows: the busiest 30 are drawn, the title says so
    cut = traffic.rdma_ops_chart(many).to_dict()
    assert len(cut["layer"][1]["data"]["values"]) == traffic.RDMA_FLOWS_SHOWN == 30
    assert cut["title"]["text"].endswith(f"({NCCL_RUN}: the 30 busiest of 36 flows)")
    assert cut["title"]["subtitle"] == f"run: {NCCL_RUN}"


def test_every_figure_is_listed_with_the_paper_reference() -> None:
    refs = {figures.get(n).ref for n in figures.figure_names()}
    assert {f"Fig. {i}" for i in range(3, 11)} | {"Table I", "Table II"} <= refs
    result = runner.invoke(app, ["figure", "--list"])
    assert result.exit_code == 0
    assert len(result.output.splitlines()) == len(figures.figure_names())


@pytest.mark.parametrize("name", figures.figure_names())
def test_png_is_drawn_at_the_expected_size(charts, name) -> None:
    svg = render.to_svg(charts[name])
    width, height = (
        float(v) for v in re.search(r'<svg[^>]* width="([\d.]+)" height="([\d.]+)"', svg).groups()
    )
    png = decode_png(render.to_png(charts[name], scale=1))
    assert png.shape[1] == pytest.approx(width, abs=1)
    assert png.shape[0] == pytest.approx(height, abs=1)
    assert width >= 250
    assert height >= 100
    rgb = png[..., :3].astype(float)
    assert rgb.var() > 100, "blank image"
    ink = (np.abs(rgb - 255).sum(axis=2) > 60).mean()
    assert ink > 0.01, f"only {ink:.2%} of the pixels carry ink"


def test_builders_are_plain_functions_of_view_results(con) -> None:
    """What a notebook user does: run a view, pass the table to a builder, get an Altair chart."""
    heat = traffic.flow_matrix_chart(run_view(con, "flow_matrix_mean", runs=[SAMPLE])).to_dict()
    rect = heat["layer"][0]["encoding"]
    assert rect["color"]["scale"] == {"scheme": "blues", "type": "log"}
    assert (rect["x"]["field"], rect["y"]["field"]) == ("dst_worker", "src_worker")
    cells = {(r["src_worker"], r["dst_worker"]) for r in heat["data"]["values"]}
    assert {("W2", "W1"), ("W3", "W2"), ("W4", "W3"), ("W1", "W4")} <= cells
    lines = timeseries.link_util_chart(run_view(con, "link_util", runs=[SAMPLE])).to_dict()
    assert lines["spec"]["encoding"]["y"]["field"] == "gbps"
    assert "Gbit/s" in lines["spec"]["encoding"]["y"]["title"]
    assert len({r["link"] for r in lines["data"]["values"]}) == 12
    assert lines["title"]["subtitle"][-1] == f"run: {SAMPLE}"


def test_builders_take_pandas_and_polars_too(con) -> None:
    import polars as pl

    table = run_view(con, "link_util", runs=[SAMPLE])
    reference = timeseries.link_util_chart(table).to_dict()
    assert timeseries.link_util_chart(table.to_pandas()).to_dict() == reference
    assert timeseries.link_util_chart(pl.from_arrow(table)).to_dict() == reference


def test_figure_command_writes_each_format(tmp_path, sample_dataset) -> None:
    for suffix, check in (
        (".png", lambda p: p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"),
        (".pdf", lambda p: p.read_bytes()[:5] == b"%PDF-" and b"LiberationSans" in p.read_bytes()),
        (".svg", lambda p: p.read_text().lstrip().startswith("<svg")),
        (
            ".json",
            lambda p: json.loads(p.read_text())["$schema"].startswith(
                "https://vega.github.io/schema/vega-lite/"
            ),
        ),
        (".html", lambda p: "vegaEmbed" in p.read_text() and "<script src=" not in p.read_text()),
    ):
        out = tmp_path / f"fig{suffix}"
        result = runner.invoke(
            app, ["figure", "flow_matrix", "--run", SAMPLE, "--out", str(out), "--data", str(sample_dataset)]
        )
        assert result.exit_code == 0, result.output
        assert check(out), suffix


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["figure", "fig4"], "unknown figure 'fig4'; figures: bytes_sent, flow_matrix"),
        (
            ["figure", "flow_matrix", "--out", "x.gif"],
            "cannot write x.gif: use one of .png, .svg, .pdf, .html, .json",
        ),
        (["figure", "flow_matrix", "--data-out", "x.xlsx"], "cannot write x.xlsx: use one of .csv, .parquet"),
        (
            ["figure", "flow_matrix", "--bin", "1s"],
            "figure flow_matrix takes no --bin; its data options: --from/--to",
        ),
        (["figure", "link_util", "--links", "W1→W9"], "no traffic on W1→W9; links: W1→W2, W1→W3"),
        (["figure", "link_util", "--layout", "grid"], "--layout takes one of facet, by-source, overlay"),
        (["figure", "link_util", "--theme", "neon"], "unknown theme 'neon'; themes: tracecore, carbong10"),
        (["figure", "link_util", "--scale", "0"], "--scale must be a number above 0 and at most 20, not 0"),
        (["figure", "flow_matrix", "--run", "nope"], "unknown run 'nope'"),
        (["figure"], "give a figure name, or --list"),
    ],
)
def test_figure_errors_are_one_line(args, message, sample_dataset) -> None:
    result = runner.invoke(app, [*args, "--data", str(sample_dataset)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert message in result.output


def _pytest_with_our_conftest(folder: Path, *args: str, ci: str | None = None):
    """A real pytest run over a one-snapshot test file, with this suite's conftest.py copied beside it."""
    (folder / "conftest.py").write_text((Path(__file__).parent / "conftest.py").read_text(encoding="utf-8"))
    (folder / "test_one.py").write_text("def test_one(snapshot):\n    assert {'gbps': 9.5} == snapshot\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci is not None else {})
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_snapshot_update_fails_after_writing_and_is_refused_in_ci(tmp_path) -> None:
    refused = _pytest_with_our_conftest(tmp_path, "--snapshot-update", ci="true")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR
    assert "--snapshot-update is refused when CI is set" in refused.stderr
    assert not (tmp_path / "__snapshots__").exists()

    written = _pytest_with_our_conftest(tmp_path, "--snapshot-update")
    assert written.returncode == pytest.ExitCode.TESTS_FAILED, written.stdout
    assert "1 snapshot(s) written or removed: review the diff, then run again" in written.stdout
    assert (tmp_path / "__snapshots__" / "test_one.ambr").read_text().count("'gbps': 9.5") == 1

    assert _pytest_with_our_conftest(tmp_path, ci="true").returncode == pytest.ExitCode.OK
    assert _pytest_with_our_conftest(tmp_path, "--snapshot-update").returncode == pytest.ExitCode.OK
