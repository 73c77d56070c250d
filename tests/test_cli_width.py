"""Terminal tables fit the terminal (extras left out first, titles wrapped at underscores, free text
wrapped, never a number or an address), piped ones stay whole; a view's table reads in human units with
short run names; link_util's table starts at each link's first busy bin. Run in a real pseudo-terminal."""

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
    assert max(len(line) for line in text.splitlines()) <= columns, text  # the foot's notes wrap too
    piped = subprocess.run(
        [sys.executable, "-m", "tracecore", "query", view, "--data", str(sample_dataset)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "not shown" not in piped
    rows = [line for line in piped.splitlines() if line.startswith("torch_ddp-resnet8w8-sgd-")]
    foot = piped.splitlines()[-1]  # "N rows", or "… k more rows of N" after the table's 50
    assert len(rows) == (50 if foot.startswith("…") else int(foot.split()[0]))  # whole: one line a row
    assert len(piped.splitlines()[0].split()) == len(rows[0].split())  # every column, run names whole
    if view == "topology_check":
        header = text.splitlines()[0].split()
        key = ["run", "src_worker", "dst_worker"]
        answer = ["predicted", "measured_share", "predicted_share", "per_step_ratio"]
        assert header[:7] == key + answer  # the key columns, the headline, then the rest as far as they fit
        foot = " ".join(text[text.index("columns not shown") :].split())
        left_out = foot.split(": ", 1)[1].split(";")[0].split(", ")
        assert text.count("columns not shown") == 1
        assert "per_step_ratio" not in left_out
        assert left_out[-1] == "predicted_per_step"  # the rest go from the right
        assert "--wide or --columns shows them, as do --format csv and --out" in foot
        assert "batch 16 = torch_ddp-resnet8w8-sgd-16-gloo-normal-ring" in text  # short labels, named whole
        assert "batch 8  = torch_ddp-resnet8w8-sgd-8-gloo-normal-ring" in text


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
    header, _, first = (line.split() for line in shown.stdout.splitlines()[:3])
    assert header[:6] == ["run", "src_worker", "dst_worker", "t_s", "gbps", "bytes"]  # key, then the answer
    assert first[1:3] == ["W1", "W2"]
    assert int(first[5]) > 0  # bytes of the first row (under 1 kB: left in bytes)
    assert "empty bins before each link's first busy one left out (--from 0s shows them)" in shown.stderr
    whole = subprocess.run(
        [sys.executable, "-m", "tracecore", *args, "--from", "0s"], capture_output=True, text=True, check=True
    )
    assert int(whole.stdout.splitlines()[2].split()[5]) == 0  # asked: the run's first bin, empty
    assert "left out" not in whole.stderr
    csv = subprocess.run(
        [sys.executable, "-m", "tracecore", *args[:-2], "-f", "csv"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert csv.stdout.splitlines()[1].split(",")[6] == "0"  # CSV is the view's rows, untouched


def test_fit_leaves_extras_out_then_wraps_titles_then_text() -> None:
    names = ["run", "a_long_name", "free_text", "n"]
    cells = [8, 4, 30, 1]
    wraps = [False, False, True, False]
    assert fit(names, names, cells, wraps, 200).left_out == []
    assert fit(names, names, cells, wraps, 200).widths == [8, 11, 30, 1]
    titled = fit(names, names, cells, wraps, 52)  # 56 whole: the title that saves most wraps, then it fits
    assert (titled.left_out, titled.widths) == ([], [8, 7, 30, 1])
    wrapped = fit(names, names, cells, wraps, 40)  # the free text wraps as much as it must, no more
    assert wrapped.left_out == []
    assert wrapped.widths == [8, 7, 18, 1]
    assert wrapped.line_width() == 40
    dropped = fit(names, names, cells, wraps, 26)  # below MIN_TEXT it goes, and what follows it
    assert dropped.left_out == ["free_text", "n"]
    assert dropped.widths == [8, 11]  # the title whole again: room was left
    assert dropped.note().startswith("2 columns not shown to fit the terminal: free_text, n;")
    extras = fit(names, names, cells, wraps, 30, answer=2)  # extras only where they fit with titles whole
    assert extras.left_out == ["free_text", "n"]
    assert fit(["x"], ["x"], [43], [False], 20).widths == [20]  # narrower than its one column: it folds


def test_nothing_wraps_inside_an_address_or_a_number() -> None:
    """Before: a 100-column terminal showed `192.168.17.5` as `192.168.17.` over `5`."""
    table = pa.table(
        {
            "src_ip": ["192.168.17.5", "10.0.0.1"],
            "port": [29833, 443],
            "message": ["the sender waited for the last rank to start", "ok"],
            "bytes": [12254760, 64],
        }
    )
    for width in (60, 40, 30, 20):
        text = render(table, None, width)
        body = text.splitlines()[2:4]
        assert "192.168.17.5" in body[0] or "src_ip" not in text.splitlines()[0], text
        for line in text.splitlines():
            assert len(line) <= width, text
        shown = text.splitlines()[0].split()
        if "bytes" in shown:
            assert "12254760" in text
        if "port" in shown:
            assert "29833" in body[0]
    text = render(table, None, 40)
    assert "message" in text.splitlines()[0]  # free text wraps at its words to stay in
    assert any(line.split() == ["the", "sender"] or "last rank" in line for line in text.splitlines())


def test_a_view_table_reads_in_human_units_with_short_run_names() -> None:
    from tracecore.columns import Layout

    layout = Layout(
        key=("run", "worker"),
        headline=("compute_ns", "bytes"),
        units={"start_ns": "UTC ns", "compute_ns": "ns", "bytes": "bytes", "rtt_us": "microseconds"},
    )
    table = pa.table(
        {
            "run": ["torch_ddp-cnn3m-sgd-32-nccl-normal-ring", "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"],
            "start_ns": [1795720754083413577, 1795720754110063294],
            "worker": ["W1", "W2"],
            "bytes": [12254760, 64],
            "rtt_us": [24.54321, None],
            "compute_ns": [859012, 37412345],
        }
    )
    text = render(table, None, 120, layout)
    lines = text.splitlines()
    assert lines[0].split() == ["run", "worker", "compute_ms", "MB", "start_utc", "rtt_us"]
    assert lines[2].split() == ["ring", "W1", "0.859", "12.255", "19:19:14.083413", "24.5"]
    assert lines[3].split() == ["ring-w4", "W2", "37.412", "<0.001", "19:19:14.110063", "NULL"]
    assert "runs: ring    = torch_ddp-cnn3m-sgd-32-nccl-normal-ring" in lines
    assert "      ring-w4 = torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4" in lines
    assert "times are UTC, on 2026-11-26" in lines
    whole = render(table, None, None, layout)  # piped: run names whole, units still a person's
    assert "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4" in whole
    assert "runs:" not in whole
    assert "compute_ms" in whole
    one = render(table.slice(0, 1), None, 120, layout)  # one run: said once, below the table
    assert one.splitlines()[0].split()[0] == "worker"
    assert "run: torch_ddp-cnn3m-sgd-32-nccl-normal-ring" in one.splitlines()
