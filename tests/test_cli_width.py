"""Terminal tables fit the terminal (wrapped text, then columns left out with a note), piped ones stay
whole; link_util's table starts at each link's first busy bin. Run in a real pseudo-terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios

import pyarrow as pa
import pytest

from tests.test_views_support import SAMPLE
from tracecore.cli.fit import fit
from tracecore.cli.output import render


def in_terminal(args: list[str], columns: int, timeout: float = 120.0) -> str:
    """`python -m tracecore ARGS` with a pseudo-terminal of `columns` × 50 as its standard output."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracecore", *args],
        stdout=follower,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], timeout)
        if not ready:
            proc.kill()
            pytest.fail(f"no output from {args} within {timeout} s")
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=timeout) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize(
    ("view", "columns"), [("topology_check", 100), ("data_per_step", 80), ("link_util", 120)]
)
def test_query_tables_fit_the_terminal(sample_dataset, view, columns) -> None:
    text = in_terminal(["query", view, "--data", str(sample_dataset)], columns)
    table = [line for line in text.splitlines() if "not shown to fit the terminal" not in line]
    assert max(len(line) for line in table) <= columns, text
    piped = subprocess.run(
        [sys.executable, "-m", "tracecore", "query", view, "--data", str(sample_dataset)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert max(len(line) for line in piped.splitlines()) > columns  # whole when piped: one line per row
    if view == "topology_check":
        (note,) = [line for line in text.splitlines() if "not shown to fit the terminal" in line]
        left_out = note.split(": ", 1)[1].split(";")[0].split(", ")
        assert note.startswith(f"{len(left_out)} columns not shown")
        assert left_out[-1] == "per_step_ratio"  # the last columns go first
        assert "--format csv or --out shows them" in note


def test_link_util_table_starts_at_the_first_busy_bin(sample_dataset) -> None:
    args = [
        "query",
        "link_util",
        "--run",
        SAMPLE,
        "--data",
        str(sample_dataset),
        "--limit",
        "3",
        "-f",
        "table",
    ]
    shown = subprocess.run(
        [sys.executable, "-m", "tracecore", *args], capture_output=True, text=True, check=True
    )
    first = shown.stdout.splitlines()[3].split()
    assert first[1:3] == ["W1", "W2"]
    assert int(first[-2]) > 0  # bytes of the first row
    assert "empty bins before each link's first busy one left out (--from 0s shows them)" in shown.stderr
    whole = subprocess.run(
        [sys.executable, "-m", "tracecore", *args, "--from", "0s"], capture_output=True, text=True, check=True
    )
    assert int(whole.stdout.splitlines()[3].split()[-2]) == 0  # asked: the run's first bin, empty
    assert "left out" not in whole.stderr
    csv = subprocess.run(
        [sys.executable, "-m", "tracecore", *args[:-2], "-f", "csv"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert csv.stdout.splitlines()[1].split(",")[6] == "0"  # CSV is the view's rows, untouched


def test_fit_wraps_text_then_leaves_columns_out() -> None:
    names = ["run", "a", "long_text", "n"]
    assert fit(names, [43, 4, 30, 1], [True, False, True, False], 200).left_out == []
    wrapped = fit(names, [43, 4, 30, 1], [True, False, True, False], 60)
    assert wrapped.left_out == []
    assert sum(wrapped.widths) + 3 * 4 - 1 <= 60
    dropped = fit(names, [43, 4, 30, 1], [True, False, True, False], 22)
    assert dropped.left_out == ["long_text", "n"]
    assert dropped.note().startswith("2 columns not shown to fit the terminal: long_text, n;")
    table = pa.table({"run": ["torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"], "gbps": [0.054068]})
    for width in (80, 40, 20, 12):
        lines = [line for line in render(table, None, width).splitlines() if "not shown" not in line]
        assert max(len(line) for line in lines[:-1]) <= width, lines
    assert "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring" in render(table, None)  # no width: whole
