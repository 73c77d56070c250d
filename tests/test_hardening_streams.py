"""The log parsers stream: a huge line costs a bounded read, is named in one problem line, and the rows
around it are kept (issue 25, item 15)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.test_hardening_bounds import MEASURED
from tracecore.logs import detect_parser

REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = REPO / "tracecore" / "sample" / "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"
LOGS = Path(__file__).parent / "data" / "logs"
LONG = 200_000_000  # bytes of one NUL-filled line (a sparse file: nothing is written to disk)
HEAD = 9000  # more than detection's 8 KiB head, so the file is still recognised by its text


def _ingest_measured(runs: Path, out: Path) -> dict:
    """`tracecore ingest RUNS --out OUT --quiet` through the installed script: its exit code, standard
    error and peak RSS (MB), measured in a process of its own."""
    script = str(Path(sys.executable).with_name("tracecore"))
    argv = [sys.executable, "-c", MEASURED, script, "ingest", str(runs), "--out", str(out), "--quiet"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _log_with_a_long_line(path: Path, text: str, long: int) -> None:
    """`text`, its last line repeated past detection's head, `long` NULs with no line end, that last
    line again."""
    last = text.splitlines()[-1] + "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text + last * (HEAD // len(last) + 1))
        fh.flush()
        if long:
            fh.truncate(fh.tell() + long)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(("\n" if long else "") + last)


CASES = {
    "wandb_history": ("wandb.csv", (LOGS / "wandb_history_seed002.csv").read_text()),
    "loss_curve": ("loss.csv", (LOGS / "loss_ddp_resnet8w8_b16.csv").read_text()),
    "benchmark_output": ("bench.txt", (LOGS / "kungfu_scalability_resnet50.txt").read_text()),
    "train_log": ("train_history.log", (SAMPLE_RUN / "train_history.log").read_text()),
}


@pytest.mark.parametrize("table", sorted(CASES))
def test_a_200_mb_line_is_read_in_bounded_memory_and_named(tmp_path: Path, table: str) -> None:
    """Before: each parser read the whole file (and train_history.log's line iterator the whole line):
    541-558 MB peak RSS for ingest with this 200 MB line, the train log without a word; after: 172-177
    MB, as without the line."""
    name, text = CASES[table]
    run = tmp_path / "runs" / SAMPLE_RUN.name
    shutil.copytree(SAMPLE_RUN, run)
    log = run / name
    _log_with_a_long_line(log, text, LONG)
    short = tmp_path / name
    _log_with_a_long_line(short, text, 0)
    parser = detect_parser(short)
    assert parser is not None
    assert parser.table == table
    expected = parser.parse(short).table.num_rows

    out = tmp_path / "ds"
    measured = _ingest_measured(tmp_path / "runs", out)
    assert measured["rss_mb"] < LONG / 1e6 + 100, measured
    assert measured["rc"] == 3, measured  # problems found, the rest ingested
    problems = [line for line in measured["stderr"].splitlines() if line.startswith("problem: ")]
    assert any(
        f"{log}: 1 unparseable line(s)" in p and "longer than 1,048,576 characters; not read" in p
        for p in problems
    ), problems
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == expected  # the lines around it
    finally:
        con.close()


def _horovod_timeline(path: Path, steps: int) -> int:
    """A Horovod timeline as rank 0 writes it: the anchor, 8 tensors, then per step a negotiation, a
    readiness tick and an NCCL allreduce inside ALLREDUCE (7 events); returns the number of events."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(
            '[\n{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": '
        )
        fh.write("1649128380000000}},\n")
        for t in range(1, 9):
            fh.write(f'{{"name": "process_name", "ph": "M", "pid": {t}, "args": {{"name": "grad_{t}"}}}},\n')
        ts = 0
        for i in range(steps):
            pid = i % 8 + 1
            for event in (
                '"name": "NEGOTIATE_ALLREDUCE", "ph": "B"',
                '"name": "0", "ph": "X", "dur": 0',
                '"ph": "E"',
                '"name": "ALLREDUCE", "ph": "B"',
                '"name": "NCCL_ALLREDUCE", "ph": "B"',
                '"ph": "E"',
                '"ph": "E", "args": {"dtype": "float32", "shape": "[64, 3, 7, 7]"}',
            ):
                ts += 3
                fh.write(f'{{{event}, "ts": {ts}, "pid": {pid}}},\n')
    return steps * 7


def test_a_horovod_timeline_is_read_record_by_record_into_batches(tmp_path: Path) -> None:
    """Before: every event was kept as a dict until the end; ingest of this 20 MB timeline (350,000
    events) peaked at 631 MB, the issue's 87 MB one at 1.6 GB (97 MB: 2.05 GB for the parser alone);
    after: 447 MB (the parser alone: 0.58 GB for the 97 MB one)."""
    run = tmp_path / "runs" / SAMPLE_RUN.name
    shutil.copytree(SAMPLE_RUN, run)
    events = _horovod_timeline(run / "timeline.json", 50_000)
    out = tmp_path / "ds"
    measured = _ingest_measured(tmp_path / "runs", out)
    assert measured["rc"] == 0, measured
    assert measured["rss_mb"] < 540, measured
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        assert con.execute(
            "SELECT count(*), count(tensor), count(ts_ns) FROM horovod_timeline"
        ).fetchone() == (
            events,
            events,
            events,
        )
        assert con.execute("SELECT count(*), sum(bytes) FROM collectives").fetchone() == (
            50_000,
            50_000 * 9408 * 4,
        )
    finally:
        con.close()


def test_a_gzip_compressed_line_log_is_read_through_gzip_and_a_cut_one_keeps_its_lines(
    tmp_path: Path,
) -> None:
    """Ingest offers a .csv.gz to the parsers and detects it through gzip, but the line parsers read
    its compressed bytes as text before (3 rows of garbage from this cut file). A stream cut
    short ends the file there, in one problem line, with the rows before it kept."""
    import gzip

    text = (LOGS / "wandb_history_seed002.csv").read_text()
    head, *rows = text.splitlines(keepends=True)
    run = tmp_path / "runs" / SAMPLE_RUN.name
    shutil.copytree(SAMPLE_RUN, run)
    (run / "wandb.csv.gz").write_bytes(gzip.compress(text.encode()))
    long = gzip.compress((head + "".join(rows) * 3000).encode())
    (run / "cut.csv.gz").write_bytes(long[: len(long) // 2])
    plain = tmp_path / "wandb.csv"
    plain.write_text(text)
    parser = detect_parser(plain)
    assert parser is not None
    expected = parser.parse(plain).table.num_rows
    before_cut = parser.parse(run / "cut.csv.gz").table.num_rows
    assert before_cut > 1000 * expected  # the lines before the cut
    out = tmp_path / "ds"
    measured = _ingest_measured(tmp_path / "runs", out)
    assert measured["rc"] == 3, measured
    problems = [line for line in measured["stderr"].splitlines() if line.startswith("problem: ")]
    assert len(problems) == 1, problems
    assert f"{run / 'cut.csv.gz'}: 1 unparseable line(s)" in problems[0]
    assert "(compressed stream damaged: Compressed file ended before the end-of-stream marker" in problems[0]
    con = duckdb.connect(str(out / "tracecore.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM wandb_history").fetchone()[0] == expected + before_cut
    finally:
        con.close()
