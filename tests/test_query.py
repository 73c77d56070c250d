"""`tracecore query` / `tracecore sql` and tracecore.query over the real sample dataset."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.test_views_support import BOTH, SAMPLE, dataset_dir, open_dataset, packets
from tracecore import query, views
from tracecore.cli.app import app
from tracecore.errors import UsageError

runner = CliRunner()


def cli(*args: str):
    return runner.invoke(app, [*args, "--data", str(dataset_dir())])


@pytest.mark.parametrize(
    ("text", "bare", "ns"),
    [
        ("10ms", "s", 10_000_000),
        ("100us", "s", 100_000),
        ("100µs", "s", 100_000),
        ("1.5s", "s", 1_500_000_000),
        ("2min", "s", 120_000_000_000),
        ("90", "s", 90_000_000_000),
        ("250", "ns", 250),
        ("1e3ns", "s", 1000),
    ],
)
def test_parse_duration(text, bare, ns) -> None:
    assert query.parse_duration_ns(text, bare_unit=bare) == ns


@pytest.mark.parametrize("text", ["", "ten ms", "10 parsecs", "-5s", "ms"])
def test_parse_duration_rejects(text) -> None:
    with pytest.raises(UsageError, match="duration"):
        query.parse_duration_ns(text)


def test_view_params_come_from_the_macro() -> None:
    names = [p.name for p in query.view_params("link_util")]
    assert names == ["bin_ns", "runs", "from_ns", "to_ns"]
    assert query.view_params("link_util")[0].default == "10000000"
    assert [p.name for p in query.view_params("link_util_ci")][:3] == ["window_ns", "src", "dst"]
    assert query.view_params("run_meta") == ()


def test_list_names_every_view_with_its_purpose_answers_first() -> None:
    result = runner.invoke(app, ["query", "--list"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    blocks = [name for name in views.view_names() if views.view_kind(name) == views.BUILDING_BLOCK]
    answers = [name for name in views.view_names() if name not in blocks]
    assert len(lines) == len(views.view_names()) + 2
    assert lines[0] == "answers:"
    assert lines[len(answers) + 1] == "building blocks:"
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert listed == answers + blocks
    for name, line in zip(listed, (line for line in lines if line.startswith("  ")), strict=True):
        assert views.view_purpose(name) in line
    assert any(
        line.split()[0] == "link_util" and line.endswith("(bin_ns, runs, from_ns, to_ns)") for line in lines
    )
    assert any(line.split()[0] == "run_meta" and line.endswith("(no parameters)") for line in lines)


def test_csv_output_is_the_view(tmp_path) -> None:
    result = cli("query", "flow_counts", "--run", SAMPLE, "--format", "csv")
    assert result.exit_code == 0, result.output
    got = pd.read_csv(io.StringIO(result.output))
    assert list(got.columns) == ["run", "definition", "flows"]
    assert set(got.run) == {SAMPLE}
    with open_dataset() as con:
        ref = query.run_view(con, "flow_counts", runs=[SAMPLE]).to_pandas()
    assert got.flows.tolist() == ref.flows.tolist()


def test_json_and_parquet_output(tmp_path) -> None:
    result = cli("query", "bytes_sent", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["run"] for r in rows} == {SAMPLE, BOTH}
    sample_bytes = sum(r["bytes"] for r in rows if r["run"] == SAMPLE)
    sent = packets(SAMPLE).dropna(subset=["src_ip"])  # ARP frames have no IP sender
    assert sample_bytes == sent.frame_len.sum()

    out = tmp_path / "u.parquet"
    result = cli("query", "link_util", "-r", SAMPLE, "--bin", "1ms", "-f", "parquet", "-o", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert set(table.column("bin_ns").to_pylist()) == {1_000_000}
    # every IP packet of the sample run goes worker to worker: its bins hold the 16,110,600 bytes above
    assert sum(table.column("bytes").to_pylist()) == sample_bytes


def test_shorthand_options_map_onto_parameters(tmp_path) -> None:
    out = tmp_path / "w.csv"
    result = cli(
        "query",
        "link_util",
        "-r",
        SAMPLE,
        "--bin",
        "1ms",
        "--from",
        "3.5s",
        "--to",
        "4000ms",
        "-f",
        "csv",
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.output
    with open_dataset() as con:
        ref = query.run_view(
            con,
            "link_util",
            runs=[SAMPLE],
            params={"bin_ns": 1_000_000, "from_ns": 3_500_000_000, "to_ns": 4 * 10**9},
        ).to_pandas()
    got = pd.read_csv(out)
    assert got.bytes.tolist() == ref.bytes.tolist()
    assert got.bin_start_ns.tolist() == ref.bin_start_ns.tolist()
    # --param reaches the other parameters, --bin becomes window_ns where a view has no bin_ns
    result = cli(
        "query", "link_util_ci", "-r", SAMPLE, "--bin", "500ms", "-p", "src=W2", "-p", "dst=W1", "-f", "json"
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert (row["src_worker"], row["dst_worker"]) == ("W2", "W1")
    assert row["windows"] == 13  # 6.6 s of run in whole 0.5 s windows


def test_table_output_is_readable_and_bounded() -> None:
    result = cli("query", "link_util", "--bin", "100us")
    assert result.exit_code == 0, result.output
    assert "src_worker" in result.output
    assert "more rows of" in result.output  # a big result is cut for the terminal, with a note
    assert len(result.output.splitlines()) < 80
    result = cli("query", "run_summary", "--limit", "1", "-f", "csv")
    assert len(result.output.strip().splitlines()) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["query", "no_such_view"], "unknown view 'no_such_view'; known views: accuracy_vs_data"),
        (
            ["query", "link_util", "--run", "nope"],
            f"unknown run 'nope'; runs in the dataset: {', '.join(sorted([SAMPLE, BOTH]))}",
        ),
        (
            ["query", "link_util", "-p", "binsize=3"],
            "view link_util has no parameter 'binsize'; its parameters: bin_ns",
        ),
        (
            ["query", "flow_counts", "--bin", "1ms"],
            "view flow_counts has no bin width; its parameters: from_ns, to_ns",
        ),
        (["query", "train_duration", "--from", "1s"], "view train_duration takes no time window"),
        (["query", "link_util", "--bin", "fast"], "cannot read duration 'fast'"),
        (["query", "link_util", "-p", "oops"], "--param takes KEY=VALUE"),
        # a number's parameter given text reached DuckDB's binder ("+(INTEGER_LITERAL, STRING_LITERAL)")
        (["query", "contention", "-p", "threshold=abc"], "parameter threshold takes a number (default 0.8)"),
        (["query", "link_util", "--bin", "0ms"], "bin_ns must be a positive whole number of ns"),
        (["query", "link_util_ci", "--bin", "0"], "window_ns must be a positive whole number of ns"),
        (["query", "burstiness", "-p", "bins_ns=1ms,0"], "bins_ns must be positive"),
        (["query", "link_util", "-p", f"runs={SAMPLE}"], "select runs with --run"),
        (["query", "flow_counts", "-f", "parquet"], "parquet output is binary"),
        (["query"], "give a view name, or --list"),
        (
            ["sql", "SELECT * FROM no_such_table"],
            "Catalog Error: Table with name no_such_table does not exist",
        ),
        (["sql", "SELEC 1"], "Parser Error"),
        (["sql", "CREATE TABLE x AS SELECT 1"], "read-only"),
    ],
)
def test_errors_are_one_clear_line(args, message) -> None:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    assert message in lines[0]
    assert "Traceback" not in result.output


def test_missing_dataset_is_a_clear_error(tmp_path) -> None:
    result = runner.invoke(app, ["query", "flow_matrix", "--data", str(tmp_path / "none")])
    assert result.exit_code == 4
    assert "no dataset at" in result.output


def test_sql_over_the_catalog(tmp_path) -> None:
    result = cli(
        "sql", "SELECT run, sum(bytes) AS b FROM flow_matrix GROUP BY run ORDER BY run", "-f", "json"
    )
    assert result.exit_code == 0, result.output
    got = {r["run"]: r["b"] for r in json.loads(result.output)}
    assert got == {
        run: int(packets(run).dropna(subset=["src_ip", "dst_ip"]).frame_len.sum()) for run in (SAMPLE, BOTH)
    }
    out = tmp_path / "x.parquet"
    result = cli("sql", "SELECT * FROM link_util(bin_ns := 1000000) LIMIT 7", "-f", "parquet", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert pq.read_table(out).num_rows == 7


def test_a_connection_that_told_its_root_answers_views_next(sample_dataset) -> None:
    """catalog.root_variable fetched one row of one and left the result unfinished; DuckDB 2 then
    refused the connection's next query ("connection has an unfinished result"), the report's and
    explain's among them."""
    from tracecore.ingest import catalog, open_catalog

    con = open_catalog(sample_dataset, read_only=True)
    try:
        assert catalog.root_variable(con) == str(sample_dataset.resolve())
        assert query.run_view(con, "flow_counts").num_rows > 0
    finally:
        con.close()


def test_run_sql_checks_rows_through_a_projection_of_the_bound_query() -> None:
    """run_sql refuses a row over ROW_MAX_BYTES through a projection of the query it bound (not the
    checked text bound again, which cost as much as running `findings`): a closing semicolon and a
    comment after it, repeated names, parameters and ORDER BY still come out as the query has them."""
    import duckdb

    con = duckdb.connect()
    try:
        got = query.run_sql(con, "SELECT i, 'v' || i AS s FROM range(3) t(i) ORDER BY i DESC; -- last", None)
        assert got.to_pylist() == [{"i": 2, "s": "v2"}, {"i": 1, "s": "v1"}, {"i": 0, "s": "v0"}]
        got = query.run_sql(con, "SELECT $n AS a, 'x;' AS a;", {"n": 3})
        assert got.column_names == ["a", "a"]
        assert [c.to_pylist() for c in got.columns] == [[3], ["x;"]]
        huge = f"SELECT 1 AS n, repeat('x', {query.ROW_MAX_BYTES + 1}) AS s;"
        with pytest.raises(UsageError, match="a result row holds more than 1 MiB of text"):
            query.run_sql(con, huge)
    finally:
        con.close()
