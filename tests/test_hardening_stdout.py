"""Standard output is a checked destination for every command, CSV reaches a terminal escaped, and bytes
are hex text (issue 36, item 5), through the installed console script.

A standard output the system refuses (`> /dev/full`) is one line on stderr and exit 2 whatever writes
to it: a result, `query --list`, `figure --list`, `--describe`, a report's path, a dry run's plan,
`--version`, `--help`. CSV sent to a terminal has its control characters escaped (a title change or a
clear-screen from a run name or a query would act on the terminal), while CSV piped or written to a
file is the data as it is; a BLOB is its hex digits in CSV, JSON and tables.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tracecore.sample import sample_run

SCRIPT = Path(sys.executable).with_name("tracecore")
FULL = "Error: cannot write standard output: No space left on device"
HOSTILE = "\x1b]0;pwned\x07\x1b[2J"  # retitles the terminal, then clears the screen
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J"  # how a terminal must get it instead
EXPERIMENT = """\
[experiment]
out = "pcaps"
timeout_s = 600
[backend]
kind = "netns"
[capture]
interface = "eth1"
snaplen = 100
filter = "src host {ip}"
[launcher]
kind = "ddp"
python = "python3"
epochs = 2
steps_per_epoch = 10
[matrix]
framework = ["torch_ddp"]
model = ["resnet20w8"]
optimizer = ["adam"]
batch_size = [64]
backend = ["gloo"]
loss = [0]
topology = ["ring"]
workers = [3]
"""


def console(*args: str | Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([SCRIPT, *map(str, args)], text=True, timeout=300, check=False, **kwargs)


def in_terminal(*args: str | Path) -> str:
    """What the console script writes to a pseudo-terminal as its standard output (exit 0)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [SCRIPT, *map(str, args)], stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    os.close(follower)
    chunks = []
    while select.select([leader], [], [], 120)[0]:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample run ingested from a folder whose name holds the sequences (the folder names the run)."""
    base = tmp_path_factory.mktemp("stdout")
    run = base / "runs" / f"my-run{HOSTILE}"
    shutil.copytree(sample_run(), run)
    (run / "run.toml").unlink()
    res = console("ingest", base / "runs", "--data", base / "data", "-q", capture_output=True)
    assert res.returncode == 0, res.stderr
    (base / "exp.toml").write_text(EXPERIMENT)
    return base


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["query", "--list"],
        ["figure", "--list"],
        ["query", "tcp_health", "--describe"],
        ["report", "{base}/report", "--data", "{base}/data"],
        ["run", "{base}/exp.toml", "--dry-run"],
        ["sql", "SELECT 1", "--data", "{base}/data"],
        ["query", "run_meta", "--data", "{base}/data", "--format", "csv"],
        ["explain", "--data", "{base}/data"],
    ],
    ids=lambda args: " ".join(a for a in args if "{" not in a),
)
def test_standard_output_to_a_full_disk_is_one_line(hostile: Path, args: list[str]) -> None:
    """Before: an OSError traceback for --version, --list, --describe, report, run --dry-run, --help."""
    with open("/dev/full", "w") as full:
        res = console(*(a.format(base=hostile) for a in args), stdout=full, stderr=subprocess.PIPE)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [FULL]


def test_version_and_lists_still_print(hostile: Path) -> None:
    """The checked standard output is the same stream: what it printed it still prints."""
    assert console("--version", capture_output=True).stdout.startswith("tracecore ")
    listing = console("query", "--list", capture_output=True).stdout
    assert listing.startswith("answers:\n")
    assert "\n  tcp_health " in listing


@pytest.mark.parametrize(
    "args",
    [
        ["sql", f"SELECT '{HOSTILE}' AS t", "--format", "csv"],  # Arrow's CSV writer
        ["query", "run_meta", "--columns", "run", "--format", "csv"],  # Arrow's too, after --columns
        ["query", "run_meta", "--format", "csv"],  # the lines DuckDB formats
    ],
    ids=["sql", "query --columns", "query"],
)
def test_csv_to_a_terminal_is_escaped_and_piped_csv_is_data(hostile: Path, args: list[str]) -> None:
    """Before: the title change and the clear-screen reached the terminal raw."""
    data = ["--data", str(hostile / "data")]
    shown = in_terminal(*args, *data)
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert SHOWN in shown
    piped = console(*args, *data, capture_output=True)
    assert piped.returncode == 0, piped.stderr
    assert HOSTILE in piped.stdout  # data as it is
    assert shown.replace(SHOWN, HOSTILE) == piped.stdout


def test_csv_written_to_a_file_from_a_terminal_is_data(hostile: Path, tmp_path: Path) -> None:
    sql = f"SELECT '{HOSTILE}' AS t"
    in_terminal("sql", sql, "--format", "csv", "-o", tmp_path / "t.csv", "--data", hostile / "data")
    assert (tmp_path / "t.csv").read_text() == f'"t"\n"{HOSTILE}"\n'


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ("csv", '"b","l","n"\n"ff00fe","[""00""]",\n'),
        ("json", '[{"b": "ff00fe", "l": ["00"], "n": null}]\n'),
        ("table", "b       n\n" + "─" * 12 + "\nff00fe  NULL\n1 row\n"),
    ],
)
def test_binary_columns_are_hex(hostile: Path, fmt: str, expected: str) -> None:
    """Before: CSV was a pyarrow traceback (ArrowInvalid: Invalid UTF8 payload), JSON and the table
    Python's b'\\xff\\x00\\xfe'."""
    lists = ", [from_hex('00')] AS l" if fmt != "table" else ""  # a table shows a list as Python does
    sql = f"SELECT from_hex('ff00fe') AS b{lists}, NULL::BLOB AS n"
    res = console("sql", sql, "--format", fmt, "--data", hostile / "data", capture_output=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout == expected


def test_binary_columns_stay_bytes_in_parquet(hostile: Path, tmp_path: Path) -> None:
    sql = "SELECT from_hex('ff00fe') AS b"
    res = console("sql", sql, "-f", "parquet", "-o", tmp_path / "b.parquet", "--data", hostile / "data")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(tmp_path / "b.parquet").to_pylist() == [{"b": b"\xff\x00\xfe"}]
