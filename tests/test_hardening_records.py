"""One bad record never costs its file, and nothing in a log aborts the ingest (issue 36, item 3).

Hostile copies of ../shared/corpus-gpu's profiler traces (PyTorch's, NCCL's example plugin's, NCCL
Inspector's), each in a run folder of its own, ingested through the installed console script: a record
nested 2,000 deep, a clock past int64 or before 2000, a rank past int32, a byte-order mark, UTF-16, NUL
bytes, a gzip stream that expands a thousandfold, and two files of one rank. The bad record is one bad
line naming file and line, the file's other records are kept, and a refused clock or file is one warning.
"""

from __future__ import annotations

import gzip
import json
import re
import resource
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tracecore.ingest import open_catalog

SCRIPT = Path(sys.executable).with_name("tracecore")
GPU = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus-gpu" / "gpu-nccl-profilers"
RUN = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
INSPECTOR = GPU / "torch_ddp-mlp25m-sgd-32-nccl-normal-ring" / "nccl-inspector" / "vm-pid974.log"
KINETO = "kineto-rank0.json"
INSPECTED = "nccl-inspector/vm-pid974.log"  # where a run folder holds Inspector's file
COMM_HASH = 7235738580355106002
PROFILER = f"nccl-profiler-example_{COMM_HASH}_0.json"
BASE = '"baseTimeNanoseconds": 1790857026000000000'
DEEP = "[" * 2000 + "]" * 2000
PLAUSIBLE = (946_684_800_000_000_000, 7_258_118_400_000_000_000)  # 2000-01-01, 2200-01-01 UTC
# what each file holds, read whole (tests/test_logs_collectives.py checks them against the corpus)
KINETO_ROWS, KINETO_STEPS, KINETO_KERNELS, PROFILER_ROWS, INSPECTOR_ROWS = 3, 3, 381, 24, 25


def short_capture(src: Path, dst: Path, packets: int = 40) -> None:
    """The first `packets` packets of a classic pcap: enough to make a run, cheap to ingest."""
    data = src.read_bytes()
    at = 24
    for _ in range(packets):
        (caplen,) = struct.unpack_from("<I", data, at + 8)
        at += 16 + caplen
    dst.write_bytes(data[:at])


def run_name(case: str) -> str:
    """The run of `case`: the corpus run's name with the case as its model, so that it parses."""
    return RUN.replace("cnn3m", case)


def run_folder(root: Path, case: str, whole: bool = False) -> Path:
    """A run folder of its own for `case`, with the run's two captures (cut short unless `whole`)."""
    folder = root / run_name(case)
    folder.mkdir(parents=True)
    for worker in (0, 1):
        name = f"worker-{worker}-tcpdump.pcap"
        if whole:
            shutil.copy(GPU / RUN / name, folder / name)
        else:
            short_capture(GPU / RUN / name, folder / name)
    return folder


def text(name: str) -> str:
    return (GPU / RUN / name).read_text()


def console_ingest(*paths: Path, out: Path) -> tuple[int, dict, str, float]:
    """`tracecore ingest --json`: exit code, summary, stderr and the CPU seconds it took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(
        [SCRIPT, "ingest", *map(str, paths), "--data", str(out), "--json", "-q", "-j", "1"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout), res.stderr, cpu


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every hostile run ingested at once: what the console script said, and where the dataset is."""
    root = tmp_path_factory.mktemp("records")
    runs = root / "runs"
    files: dict[str, Path] = {}

    def put(key: str, path: Path, content: str | bytes) -> None:
        path.parent.mkdir(exist_ok=True)
        (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
        files[key] = path

    deep = run_folder(runs, "deep")
    kineto = text(KINETO)
    at = kineto.index('"traceEvents": [') + len('"traceEvents": [')
    kineto = kineto[:at] + f'\n{{"ph": "X", "name": "deep", "args": {DEEP}}},' + kineto[at:]
    put("deep kineto", deep / KINETO, kineto.replace(BASE, f'"nesting": {DEEP},\n  {BASE}'))  # top level too
    profiler = text(PROFILER)
    put(
        "deep profiler",
        deep / PROFILER,
        f'[\n{{"name": "x", "cat": "COLL", "ph": "b", "args": {DEEP}}},\n{profiler[2:]}',
    )
    first, *rest = INSPECTOR.read_text().splitlines(keepends=True)
    put("deep inspector", deep / INSPECTED, first + f'{{"header": {DEEP}}}\n' + "".join(rest))

    for case, base in (("bigbase", 2**63), ("negbase", -1_790_000_000_000_000_000)):
        put(
            case,
            run_folder(runs, case) / KINETO,
            text(KINETO).replace(BASE, f'"baseTimeNanoseconds": {base}'),
        )

    profiler = re.sub(r'"StartGpuClk": \d+', '"StartGpuClk": 9223372036854775807', text(PROFILER), count=1)
    put("clock", run_folder(runs, "clock") / PROFILER, profiler)

    kineto = text(KINETO).replace('"rank": 0, "world_size"', '"rank": 100000000000000000000, "world_size"')
    kernel = (
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 4863728086910.47, "dur": 1,'
        ' "args": {"device": 1180591620717411303424, "stream": 7}},'
    )
    at = kineto.index('"traceEvents": [') + len('"traceEvents": [')
    put("rank", run_folder(runs, "rank") / KINETO, kineto[:at] + "\n" + kernel + kineto[at:])

    encoded = run_folder(runs, "encoded")
    put("bom", encoded / KINETO, b"\xef\xbb\xbf" + (GPU / RUN / KINETO).read_bytes())
    put("utf16", encoded / INSPECTED, INSPECTOR.read_text().encode("utf-16"))  # with its byte-order mark
    put("nul block", encoded / PROFILER, "[\n" + "\x00" * 600 + "\n" + text(PROFILER)[2:])  # within 512 bytes

    first = first.replace('"unknown"', '"unk\x00nown"')  # a NUL inside a string of line 1
    put("nul in record", run_folder(runs, "nul") / INSPECTED, first + "".join(rest))

    for case in ("clean", "twice"):
        folder = run_folder(runs, case, whole=True)
        for name in (KINETO, "kineto-rank1.json", PROFILER, PROFILER.replace("_0.json", "_1.json")):
            shutil.copy(GPU / RUN / name, folder / name)
        put(f"{case} inspector", folder / INSPECTED, INSPECTOR.read_text())
    twice = runs / run_name("twice")  # copies named to come after the originals: the first by name is kept
    put("kineto copy", twice / f"{KINETO}.again", text(KINETO))
    put("profiler copy", twice / f"{PROFILER}.again", text(PROFILER))
    put("inspector copy", twice / f"{INSPECTED}.again", INSPECTOR.read_text())

    out = root / "ds"
    code, summary, _, _ = console_ingest(*sorted(runs.iterdir()), out=out)
    problems: dict[str, list[str]] = {}
    for problem in summary["problems"]:
        problems.setdefault(problem["path"], []).append(problem["reason"])
    return {"code": code, "problems": problems, "warnings": summary["warnings"], "out": out, "files": files}


def rows(corpus: dict, sql: str, *params: object) -> list[tuple]:
    con = open_catalog(corpus["out"])
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def count(corpus: dict, table: str, case: str, file: str) -> int:
    ((n,),) = rows(corpus, f"SELECT count(*) FROM {table} WHERE run = ? AND file = ?", run_name(case), file)
    return n


def problem_of(corpus: dict, key: str) -> str:
    """The one problem reported of the file `key` names."""
    (reason,) = corpus["problems"][str(corpus["files"][key])]
    return reason


def warnings_of(corpus: dict, key: str) -> list[str]:
    path = str(corpus["files"][key])
    return [w for w in corpus["warnings"] if w.startswith(f"{path}: ")]


def test_the_ingest_ends_with_every_run(corpus: dict) -> None:
    """Before: the first hostile file raised RecursionError or OverflowError and nothing was ingested."""
    assert corpus["code"] == 3  # the bad lines are problems: reported, the rest kept
    cases = ("deep", "bigbase", "negbase", "clock", "rank", "encoded", "nul", "clean", "twice")
    got = rows(corpus, "SELECT run FROM runs ORDER BY run")
    assert got == sorted((run_name(case),) for case in cases)
    bad = ("deep kineto", "deep profiler", "deep inspector", "clock", "rank", "nul in record")
    assert sorted(corpus["problems"]) == sorted(str(corpus["files"][key]) for key in bad)
    refused = ("bigbase", "negbase", "kineto copy", "profiler copy", "inspector copy")
    assert sorted(corpus["warnings"]) == sorted(w for key in refused for w in warnings_of(corpus, key))
    assert len(corpus["warnings"]) == len(refused)


def test_a_record_nested_2000_deep_is_one_bad_line(corpus: dict) -> None:
    """Before: RecursionError ended the ingest (kineto, the example profiler and Inspector alike)."""
    kineto = problem_of(corpus, "deep kineto")
    assert kineto.startswith("2 unparseable line(s); first: line 21: [[[")  # the top-level value
    assert kineto.endswith("(nested too deep)")
    assert problem_of(corpus, "deep profiler").startswith(
        '1 unparseable line(s); first: line 2: {"name": "x"'
    )
    assert problem_of(corpus, "deep inspector").startswith(
        '1 unparseable line(s); first: line 2: {"header": [[['
    )
    assert count(corpus, "collectives", "deep", KINETO) == KINETO_ROWS
    assert count(corpus, "profiler_steps", "deep", KINETO) == KINETO_STEPS
    assert count(corpus, "profiler_kernels", "deep", KINETO) == KINETO_KERNELS
    assert count(corpus, "collectives", "deep", PROFILER) == PROFILER_ROWS
    assert count(corpus, "collectives", "deep", INSPECTED) == INSPECTOR_ROWS


@pytest.mark.parametrize(("case", "when"), [("bigbase", "2262-04-11"), ("negbase", "1913-04-12")])
def test_an_implausible_base_is_refused_in_one_warning(corpus: dict, case: str, when: str) -> None:
    """Before: 2**63 raised OverflowError (the ingest ended); -1.79e18 stored its times in 1913."""
    (warning,) = warnings_of(corpus, case)
    assert f"puts the file's times at {when} " in warning
    assert "outside 2000-01-01..2200-01-01 UTC: the clock is refused and the file's times are not" in warning
    assert str(corpus["files"][case]) not in corpus["problems"]
    got = rows(corpus, "SELECT count(*), count(start_ns) FROM collectives WHERE run = ?", run_name(case))
    assert got == [(KINETO_ROWS, 0)]  # the collectives kept, without times
    assert rows(corpus, "SELECT method, offset_ns FROM collective_clocks WHERE run = ?", run_name(case)) == [
        ("none", None)
    ]


def test_no_time_outside_2000_to_2200_is_stored(corpus: dict) -> None:
    """Before: 1913 and 2262 were stored as they came."""
    for table, columns in (
        ("collectives", ("start_ns", "end_ns", "call_start_ns", "call_end_ns")),
        ("profiler_steps", ("start_ns", "end_ns", "gpu_start_ns", "gpu_end_ns")),
        ("profiler_kernels", ("start_ns", "end_ns")),
    ):
        outside = " OR ".join(f"{c} NOT BETWEEN {PLAUSIBLE[0]} AND {PLAUSIBLE[1]}" for c in columns)
        assert rows(corpus, f"SELECT count(*) FROM {table} WHERE {outside}") == [(0,)], table


def test_a_gpu_clock_of_int64_max_is_one_bad_line(corpus: dict) -> None:
    """Before: the plugin's offset, max(StartGpuClk - ts), took the bogus clock, and every collective's
    end was stored past 2262."""
    assert problem_of(corpus, "clock") == (
        "1 unparseable line(s); first: line 7:  (StartGpuClk 9223372036854775807 is not a time in"
        " 2000-01-01..2200-01-01 UTC; not used)"
    )
    got = rows(
        corpus,
        "SELECT seq, start_ns, end_ns, call_start_ns FROM collectives WHERE run = ? AND file = ?"
        " EXCEPT SELECT seq, start_ns, end_ns, call_start_ns FROM collectives WHERE run = ? AND file = ?",
        run_name("clock"),
        PROFILER,
        run_name("clean"),
        PROFILER,
    )
    assert [seq for seq, *_ in got] == [0]  # only the collective of that kernel event moved
    assert count(corpus, "collectives", "clock", PROFILER) == PROFILER_ROWS


def test_a_rank_or_device_past_its_type_is_one_bad_line(corpus: dict) -> None:
    """Before: OverflowError from Arrow (a rank of 1e20) or from the kernels' int64 arrays (a device of
    2**70) ended the ingest."""
    reason = problem_of(corpus, "rank")
    assert reason.startswith("2 unparseable line(s); first: line 23: {")
    assert "(cannot read the record: ValueError: device, stream or end past its type)" in reason
    got = rows(corpus, "SELECT count(*), count(rank) FROM collectives WHERE run = ?", run_name("rank"))
    assert got == [(KINETO_ROWS, KINETO_ROWS)]  # each call's own Rank is kept
    got = rows(corpus, "SELECT count(*), count(rank) FROM profiler_kernels WHERE run = ?", run_name("rank"))
    assert got == [(KINETO_KERNELS, 0)]  # the trace's rank is not stored; the hostile kernel not read


def test_a_byte_order_mark_utf16_and_nul_bytes_are_read(corpus: dict) -> None:
    """Before: each file passed for a binary one and was skipped with exit 0 and no word."""
    for key in ("bom", "utf16", "nul block"):
        assert str(corpus["files"][key]) not in corpus["problems"], key
        assert warnings_of(corpus, key) == [], key
    assert count(corpus, "collectives", "encoded", KINETO) == KINETO_ROWS
    assert count(corpus, "collectives", "encoded", INSPECTED) == INSPECTOR_ROWS
    assert count(corpus, "collectives", "encoded", PROFILER) == PROFILER_ROWS
    # a NUL inside a record's string: that record is bad, the others are read
    assert problem_of(corpus, "nul in record").startswith("1 unparseable line(s); first: line 1: ")
    assert count(corpus, "collectives", "nul", INSPECTED) == INSPECTOR_ROWS - 1


def test_a_second_file_of_a_rank_is_refused_in_one_warning(corpus: dict) -> None:
    """Before: a copy of a rank's trace was read beside it and every collective counted twice."""
    twice = corpus["files"]["kineto copy"].parent
    for key, kept, source in (
        ("kineto copy", twice / KINETO, "pytorch_profiler communicator 0"),
        ("profiler copy", twice / PROFILER, f"nccl_profiler communicator 0x{COMM_HASH:016x}"),
        ("inspector copy", twice / INSPECTED, "nccl_inspector communicator"),
    ):
        (warning,) = warnings_of(corpus, key)
        assert f": records rank 0 of {source}" in warning
        assert f"as {kept} does; not read (one file per rank and source" in warning
    per_file = "SELECT file, count(*) FROM collectives WHERE run = ? GROUP BY file ORDER BY file"
    clean = rows(corpus, per_file, run_name("clean"))
    assert rows(corpus, per_file, run_name("twice")) == clean
    assert sum(n for _, n in clean) == 2 * KINETO_ROWS + 2 * PROFILER_ROWS + INSPECTOR_ROWS


def test_collective_wire_is_not_doubled_by_a_copy(corpus: dict) -> None:
    """Before: collective_wire of the run with copies had twice the rows of the same run without."""

    def wire(case: str) -> list[str]:
        res = subprocess.run(
            [
                SCRIPT,
                "query",
                "collective_wire",
                "--run",
                run_name(case),
                "-f",
                "csv",
                "--data",
                corpus["out"],
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        header, *lines = res.stdout.splitlines()
        assert header.startswith('"run",')
        return [line.split(",", 1)[1] for line in lines]  # without the run

    clean = wire("clean")
    assert len(clean) > 0
    assert wire("twice") == clean


def test_a_gzip_trace_expanding_past_its_limit_is_read_no_further(tmp_path: Path) -> None:
    """Before: 200 MB of white space in a 200 kB `.json.gz` took ~100 CPU-s, character by character;
    now the stream stops at its expansion limit (64 MiB at least, reader.source.expansion_limit) and
    white space is passed over in pieces."""
    folder = run_folder(tmp_path / "runs", "gzip")
    kineto = (GPU / RUN / KINETO).read_bytes()
    end = kineto.rindex(b"\n  ],")  # after the last event: every record is read before the stream stops
    space = gzip.compress(b" " * (1 << 20), compresslevel=9)
    with open(folder / f"{KINETO}.gz", "wb") as fh:
        fh.write(gzip.compress(kineto[:end]))
        for _ in range(200):  # gzip members one after the other: 200 MiB of spaces in ~200 kB
            fh.write(space)
        fh.write(gzip.compress(kineto[end:]))
    assert (folder / f"{KINETO}.gz").stat().st_size < 400_000
    code, summary, _, cpu = console_ingest(folder, out=tmp_path / "ds")
    assert code == 3
    (problem,) = summary["problems"]
    assert problem["path"] == str(folder / f"{KINETO}.gz")
    assert problem["reason"].endswith(
        "(the gzip stream expands past 67,108,864 bytes (its"
        f" {(folder / f'{KINETO}.gz').stat().st_size:,} bytes may expand that far at most); not read further)"
    )
    assert cpu < 30, cpu
    con = open_catalog(tmp_path / "ds")
    try:
        assert con.execute("SELECT count(*) FROM collectives").fetchone() == (KINETO_ROWS,)
        assert con.execute("SELECT count(*) FROM profiler_kernels").fetchone() == (KINETO_KERNELS,)
    finally:
        con.close()
