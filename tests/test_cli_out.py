"""An output path that cannot be written is one line and exit 2 on every command, never a traceback
(issue 12 item 10); absurd values are one friendly line too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.sample import sample_run

runner = CliRunner()
CAPTURE = str(sample_run() / "worker-0-tcpdump.pcap")


def commands(data: Path, target: str) -> dict[str, list[str]]:
    d = ["--data", str(data)]
    return {
        "query": ["query", "flow_counts", "--out", target, *d],
        "query parquet": ["query", "flow_counts", "-f", "parquet", "--out", target, *d],
        "sql": ["sql", "SELECT 1 AS one", "--out", target, *d],
        "read": ["read", CAPTURE, "--format", "csv", "--out", target],
        "read table": ["read", CAPTURE, "--out", target],
        "figure": ["figure", "flow_matrix", "--out", f"{target}.svg" if target.endswith("x") else target, *d],
        "model --out": ["model", "scaling", "--reference-study", "--out", target],
        "model --figure": ["model", "optimus", "time", "--figure", f"{target}.svg"],
    }


def one_line_exit_2(args: list[str], expected: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, (args, result.output)
    assert result.stderr.splitlines() == [expected], args
    assert result.stdout == ""


@pytest.mark.parametrize("case", list(commands(Path("d"), "x")))
def test_out_in_a_missing_folder(case: str, sample_dataset: Path, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "x"
    args = commands(sample_dataset, str(target))[case]
    written = Path(args[args.index("--out" if "--out" in args else "--figure") + 1])
    one_line_exit_2(args, f"Error: cannot write {written}: no folder {tmp_path / 'missing'}")
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("case", list(commands(Path("d"), "x")))
def test_out_that_is_a_folder(case: str, sample_dataset: Path, tmp_path: Path) -> None:
    folder = tmp_path / "x.svg" if case in ("model --figure",) else tmp_path / "x"
    folder.mkdir()
    args = commands(sample_dataset, str(tmp_path / "x"))[case]
    written = Path(args[args.index("--out" if "--out" in args else "--figure") + 1])
    written.mkdir(exist_ok=True)
    one_line_exit_2(args, f"Error: cannot write {written}: it is a folder; give a file name")


def test_report_into_a_file(sample_dataset: Path, tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("mine\n")
    one_line_exit_2(
        ["report", str(tmp_path / "notes"), "--data", str(sample_dataset)],
        f"Error: cannot write into {tmp_path / 'notes'}: it is a file, not a folder",
    )
    assert (tmp_path / "notes").read_text() == "mine\n"


TOO_MANY = "Error: --limit must be at most 9,223,372,036,854,775,807"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["query", "link_util", "--bin", "1e99"], "Error: bin_ns 1e+99s is too large: at most"),
        (["query", "link_util", "--from", "1e30"], "Error: from_ns 1e+30s is too large: at most"),
        (["query", "flow_counts", "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
        (["sql", "SELECT 1", "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
        (["read", CAPTURE, "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
        # past int64: an OverflowError traceback in Arrow's slice before
        (
            ["sql", "SELECT 1", "-n", "9" * 23],
            "Error: --limit must be at most 9,223,372,036,854,775,807, got",
        ),
        (
            ["query", "flow_counts", "-n", "9" * 23],
            "Error: --limit must be at most 9,223,372,036,854,775,807",
        ),
        (["read", CAPTURE, "-n", "9" * 23], "Error: --limit must be at most 9,223,372,036,854,775,807"),
    ],
)
def test_absurd_values_are_one_friendly_line(args: list[str], expected: str, sample_dataset: Path) -> None:
    data = ["--data", str(sample_dataset)] if args[0] != "read" else []
    result = runner.invoke(app, [*args, *data])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(expected)


def test_list_and_struct_columns_are_json_text_in_csv(sample_dataset: Path) -> None:
    """Arrow's CSV writer has no form for nested values (a view's list of QPs): JSON text, not a traceback."""
    sql = "SELECT [35, 40] AS qps, {'a': 1, 'b': 'x'} AS s, NULL::INTEGER[] AS none, 3 AS n"
    for fmt, expected in [
        ("csv", '"qps","s","none","n"\n"[35, 40]","{""a"": 1, ""b"": ""x""}",,3\n'),
        ("json", '[{"qps": [35, 40], "s": {"a": 1, "b": "x"}, "none": null, "n": 3}]\n'),
    ]:
        result = runner.invoke(app, ["sql", sql, "--data", str(sample_dataset), "-f", fmt])
        assert result.exit_code == 0, result.output
        assert result.stdout == expected


INTERVALS = [  # (expression, DuckDB's own text of it)
    ("INTERVAL 90 MINUTE", "01:30:00"),
    ("-INTERVAL 14 MONTH", "-1 year -2 months"),
    ("INTERVAL 3 DAY + INTERVAL 90 MINUTE + INTERVAL 1 MICROSECOND", "3 days 01:30:00.000001"),
    ("-INTERVAL 1 DAY - INTERVAL 5 SECOND", "-1 day -00:00:05"),
    ("to_microseconds(1500000)", "00:00:01.5"),
    ("INTERVAL 0 SECOND", "00:00:00"),
]


def test_intervals_are_duckdbs_text_in_every_text_format_and_refused_for_parquet(
    sample_dataset: Path, tmp_path: Path
) -> None:
    """Before: CSV and Parquet a traceback (Arrow has no text or Parquet form for its intervals),
    JSON [months, days, ns] lists, the table `MonthDayNano(...)`."""
    import duckdb

    sql = (
        "SELECT "
        + ", ".join(f"{e} AS i{k}" for k, (e, _) in enumerate(INTERVALS))
        + ", [INTERVAL 1 DAY] AS l"
    )
    texts = [t for _, t in INTERVALS]
    assert [duckdb.sql(f"SELECT ({e})::VARCHAR").fetchall()[0][0] for e, _ in INTERVALS] == texts
    names = [f"i{k}" for k in range(len(INTERVALS))]
    got = {}
    for fmt in ("csv", "json", "table"):
        res = console(["sql", sql, "--data", str(sample_dataset), "-f", fmt])
        assert res.returncode == 0, res.stderr
        got[fmt] = res.stdout
    header = ",".join(f'"{n}"' for n in [*names, "l"])
    assert got["csv"] == header + "\n" + ",".join(f'"{t}"' for t in texts) + ',"[""1 day""]"\n'
    assert json.loads(got["json"]) == [{**dict(zip(names, texts, strict=True)), "l": ["1 day"]}]
    assert all(t in got["table"] for t in texts)
    one_line_exit_2_from(
        console(
            ["sql", sql, "--data", str(sample_dataset), "-f", "parquet", "-o", str(tmp_path / "i.parquet")]
        ),
        "Error: column 'i0' is an INTERVAL, which Parquet cannot store: cast it to VARCHAR",
    )
    assert not (tmp_path / "i.pq").exists()


def test_columns_of_the_same_name_are_all_shown_and_refused_as_json(sample_dataset: Path) -> None:
    """Before: the table an IndexError traceback, JSON silently one of them (`[{"a": 2}]`)."""
    sql = "SELECT 1 AS a, 2 AS a, 'x' AS b"
    res = console(["sql", sql, "--data", str(sample_dataset), "-f", "csv"])
    assert (res.returncode, res.stdout) == (0, '"a","a","b"\n1,2,"x"\n')
    res = console(["sql", sql, "--data", str(sample_dataset)])
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[0].split() == ["a", "a", "b"]  # the titles, the rule, then the row
    assert res.stdout.split("\n")[2].split() == ["1", "2", "x"]
    one_line_exit_2_from(
        console(["sql", sql, "--data", str(sample_dataset), "-f", "json"]),
        "Error: the result has 2 columns named 'a'; JSON rows need distinct names",
    )


def console(args: list[str], stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    """The installed `tracecore` script, as a user runs it (a real standard output to fill)."""
    script = Path(sys.executable).with_name("tracecore")
    return subprocess.run(
        [script, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False
    )


def one_line_exit_2_from(res: subprocess.CompletedProcess, start: str) -> str:
    assert res.returncode == 2, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith(start), line
    return line


FILLED = [c for c in commands(Path("d"), "x") if "figure" not in c]  # a figure's name needs its suffix


@pytest.mark.parametrize("case", FILLED)
def test_out_on_a_full_disk(case: str, sample_dataset: Path) -> None:
    """Before: a 46-line traceback, exit 1 (issue 25, item 14)."""
    line = one_line_exit_2_from(
        console(commands(sample_dataset, "/dev/full")[case]), "Error: cannot write /dev/full: "
    )
    assert "No space left on device" in line


@pytest.mark.parametrize("case", ["query", "sql", "read table", "model --out"])
def test_standard_output_on_a_full_disk(case: str, sample_dataset: Path) -> None:
    args = [a for a in commands(sample_dataset, "x")[case] if a not in ("--out", "x")]
    with open("/dev/full", "w") as full:
        res = console(args, stdout=full)
    one_line_exit_2_from(res, "Error: cannot write standard output: No space left on device")


def test_out_that_cannot_be_written(sample_dataset: Path) -> None:
    one_line_exit_2_from(
        console(commands(sample_dataset, "/proc/version")["query"]), "Error: cannot write /proc/version: "
    )


def test_report_into_a_missing_folder_chain(sample_dataset: Path, tmp_path: Path) -> None:
    """Before: the folder chain was created (as root, also under /)."""
    target = tmp_path / "nonexist" / "deeper" / "rep"
    one_line_exit_2(
        ["report", str(target), "--data", str(sample_dataset)],
        f"Error: cannot write into {target}: no folder {target.parent}",
    )
    assert not (tmp_path / "nonexist").exists()
