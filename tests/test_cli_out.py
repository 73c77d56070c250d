"""An output path that cannot be written is one line and exit 2 on every command, never a traceback
(issue 12 item 10); absurd values are one friendly line too."""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["query", "link_util", "--bin", "1e99"], "Error: bin_ns 1e+99s is too large: at most"),
        (["query", "link_util", "--from", "1e30"], "Error: from_ns 1e+30s is too large: at most"),
        (["query", "flow_counts", "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
        (["sql", "SELECT 1", "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
        (["read", CAPTURE, "--limit", "-1"], "Error: --limit must be 0 or more, got -1"),
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
