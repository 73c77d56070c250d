"""The CLI's start-up shortcuts change nothing a user sees (issue 27, target 6).

Why: a shortcut that hid pandas from pyarrow once broke ingest on the JIT path while every in-process
test passed. Here each shortcut is checked against what it replaces on the same inputs, and through
the installed console script, which is where a user meets it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer._click import Context
from typer._click.exceptions import BadParameter

from tracecore.cli.app import app
from tracecore.cli.coerce import PlainRuntimeParam, plain

TRACECORE = Path(sys.executable).parent / "tracecore"

# values a user types, good and bad, for every kind of parameter the commands declare
WHOLE = ["0", "5", "0100", "-1", "+5", " 5", "5 ", "2.5", "abc", "", "1_000", "9" * 18, "9" * 19, "١٢"]
NUMBERS = [0.0, 3, -2.0, float("nan"), 1, True]  # as Python gives them: a parameter's default
VALUES = {
    "str": ["", "x", " x ", "link_util", "ünï", "a\nb"],
    "int": [*WHOLE, *NUMBERS],
    "float": ["0", "2.5", "-1", "-0.5", "1e3", "nan", "inf", "abc", "", "007.50", ".5", "5.", " 2", *NUMBERS],
    "bool": [True, False, "true", "0", "yes", "maybe"],
    "Format": ["table", "csv", "json", "parquet", "CSV", "xml", ""],
    "ExplainFormat": ["table", "markdown", "json", "Markdown", "xml", ""],
    "Path": ["x.csv", "/tmp", ".", "", "/proc/1/nonexistent/file", "~/a"],
    "list[str]": [("a",), ("a", "b,c"), ()],
    "list[Path]": [("a.pcap",), ("a", "/tmp")],
}


def _params() -> list[tuple[str, object, Context]]:
    """Every Typer parameter of every command, with a context to coerce it in."""
    group = typer.main.get_command(app)
    found = []
    for name, command in group.commands.items():
        ctx = Context(command, info_name=name)
        found += [(f"{name} {p.name}", p, ctx) for p in command.params if hasattr(p, "type_descriptor")]
    return found


def _outcome(coerce, value, param, ctx):
    try:
        got = coerce(value, param=param, ctx=ctx)
        return ("value", type(got), repr(got))  # repr: nan == nan
    except BadParameter as err:
        return ("error", err.format_message())


@pytest.mark.parametrize(("label", "param", "ctx"), _params(), ids=lambda v: v if isinstance(v, str) else "")
def test_plain_coercion_returns_what_typers_adapter_returns(label, param, ctx) -> None:
    """Each value of each parameter: the same value or the same message as Typer's pydantic adapter."""
    from typer._coercion import build_runtime_param

    descriptor = param.type_descriptor
    annotation = descriptor.annotation
    kind = getattr(annotation, "__name__", None) if isinstance(annotation, type) else str(annotation)
    kind = "list[Path]" if "Path" in str(annotation) and "list" in str(annotation) else kind
    kind = "list[str]" if str(annotation) == "list[str]" else kind
    values = VALUES[kind]
    ours = PlainRuntimeParam(
        parameter_info=descriptor.parameter_info, annotation=annotation, descriptor=descriptor
    )
    theirs = build_runtime_param(descriptor)
    for value in values:
        assert _outcome(ours._coerce_value, value, param, ctx) == _outcome(
            theirs._coerce_value, value, param, ctx
        ), (label, value)


def test_plain_coercion_takes_the_common_values_itself() -> None:
    """The shortcut is taken for the values people type (else it would save nothing)."""
    params = {label: (p, ctx) for label, p, ctx in _params()}
    limit, ctx = params["sql limit"]
    assert plain("0100", int, limit.type_descriptor.parameter_info, limit, ctx) == 100
    fmt, ctx = params["sql fmt"]
    assert (
        plain("csv", fmt.type_descriptor.annotation, fmt.type_descriptor.parameter_info, fmt, ctx).value
        == "csv"
    )
    out, ctx = params["sql out"]
    assert plain("x.csv", Path, out.type_descriptor.parameter_info, out, ctx) == Path("x.csv")
    wait, ctx = params["ingest wait"]  # its default is coerced on every ingest
    assert plain(0.0, float, wait.type_descriptor.parameter_info, wait, ctx) == 0.0
    assert plain("2.5", float, wait.type_descriptor.parameter_info, wait, ctx) == 2.5
    jobs, ctx = params["ingest jobs"]  # min=1
    assert plain("2", int, jobs.type_descriptor.parameter_info, jobs, ctx) == 2


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRACECORE), *args], capture_output=True, text=True, timeout=120, check=False, cwd="/"
    )


def test_console_script_never_imports_pydantic_for_sql(sample_dataset: Path) -> None:
    """`tracecore sql` through the installed script coerces its options without pydantic."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(TRACECORE),
            "sql",
            "--data",
            str(sample_dataset),
            "-n",
            "5",
            "-f",
            "csv",
            "SELECT 1 AS x",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == '"x"\n1\n'
    assert " pydantic" not in done.stderr
    assert "pyarrow.compute" not in done.stderr  # CSV: no cast of a table already plain (60 ms)


def _ingest_with_importtime(out: Path) -> list[str]:
    """The console script's `ingest` of the embedded sample run into `out`, under `-X importtime`."""
    from tracecore.sample import sample_run

    run = str(sample_run())
    return [sys.executable, "-X", "importtime", str(TRACECORE), "ingest", run, "--out", str(out)]


def test_console_script_never_imports_pydantic_for_ingest(tmp_path: Path) -> None:
    """`tracecore ingest` through the installed script coerces `--wait` (whose default is coerced on
    every ingest) and `--jobs` without pydantic, and ingests as before."""
    argv = _ingest_with_importtime(tmp_path / "ds")
    done = subprocess.run([*argv, "--json", "-j", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["counts"] == {"ingested": 4}
    assert " pydantic" not in done.stderr
    again = subprocess.run([*argv, "--json", "--wait", "2.5"], capture_output=True, text=True, timeout=120)
    assert json.loads(again.stdout)["counts"] == {"unchanged": 4}
    assert " pydantic" not in again.stderr


def test_ingest_leaves_duckdb_to_the_drafts_thread() -> None:
    """The ingest pipeline's modules import no DuckDB (70-80 ms, holding the GIL): a new dataset's
    catalog draft imports it on its own thread while the captures are read, and the main thread's
    start-up stays short. A module-level import of the catalog's SQL in upgrade.py put it back."""
    code = (
        "import sys, tracecore.ingest.pipeline; "
        "print(sorted({'duckdb', 'tracecore.ingest.catalog'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_console_script_never_imports_pandas_for_ingest(tmp_path: Path) -> None:
    """`tracecore ingest` of a run with a training log, new and again (its state read back), makes
    its small tables without pyarrow's Python conversion, which imports pandas when it is installed
    (0.3 CPU-s a process), and reads the state without pyarrow.dataset, which imports it too."""
    out = tmp_path / "ds"
    argv = _ingest_with_importtime(out)
    for counts in ({"ingested": 4}, {"unchanged": 4}):
        done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(done.stdout)["counts"] == counts
        assert " pandas" not in done.stderr
    assert (out / "tables" / "train_log.parquet").is_file()


GPU_RUNS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus-gpu" / "gpu-nccl-profilers"


def test_console_script_never_imports_pandas_for_a_gpu_run(tmp_path: Path) -> None:
    """The same for runs with NCCL logs, PyTorch profiler traces and NCCL Inspector output: their
    parsers made tables with pa.array and from_pylist (pandas imported on the commit thread)."""
    if not GPU_RUNS.is_dir():
        pytest.fail(f"corpus missing: {GPU_RUNS} (the shared/ folder must sit beside the checkout)")
    out = tmp_path / "ds"
    argv = [sys.executable, "-X", "importtime", str(TRACECORE), "ingest", str(GPU_RUNS), "--out", str(out)]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert " pandas" not in done.stderr
    for table, rows in (("nccl_ranks", 4), ("profiler_kernels", 1), ("collectives", 1)):
        got = _console("sql", "--data", str(out), f"SELECT count(*) >= {rows} FROM {table}", "-f", "csv")
        assert got.stdout.splitlines()[1] == "true", (table, got.stderr)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["-n", "abc"], 2, "Invalid value for '--limit' / '-n': Input should be a valid integer, unable"),
        (["-n", " 5"], 0, "1 row"),
        (["-f", "xml"], 2, "Invalid value for '--format' / '-f': Value error, 'xml' is not one of"),
        (["-f", "CSV"], 2, "'CSV' is not one of"),
        (["-n", "-1"], 2, "Error: --limit must be 0 or more, got -1"),
    ],
)
def test_console_script_reports_bad_options_as_before(
    sample_dataset: Path, args: list[str], code: int, message: str
) -> None:
    """The messages pydantic wrote before the shortcut (recorded from the console script then)."""
    done = _console("sql", "--data", str(sample_dataset), "SELECT 1 AS x", *args)
    assert done.returncode == code
    assert message in " ".join((done.stdout + done.stderr).replace("│", " ").split())


def test_console_script_writes_an_empty_csv_without_pandas(sample_dataset: Path, tmp_path: Path) -> None:
    """No rows: the header alone, as before; `Schema.empty_table()` there imported pandas (1.6 s on
    a loaded machine) on every CSV, since Python evaluates `next()`'s default before it is needed."""
    out = tmp_path / "empty.csv"
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            str(TRACECORE),
            "query",
            "link_util",
            "--data",
            str(sample_dataset),
            "--from",
            "1000s",
            "--format",
            "csv",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        out.read_bytes() == b'"run","src_worker","dst_worker","bin_start_ns","bin_ns","t_s","bytes","gbps"\n'
    )
    assert " pandas" not in done.stderr
    assert "pyarrow.compute" not in done.stderr  # no cast of a table already plain (60 ms)


# written by commit 1744e45's CLI; the tables (types.table, rows.json) re-recorded through the Arrow path
# (cli.table.render of the query's Arrow table) when the table layout changed (issue 34): CSV and JSON as then
RECORDED = Path(__file__).resolve().parent / "data" / "cli_startup"
# every kind of value the outputs treat apart: HUGEINT sums (int64 when they fit), a decimal wider
# than int64, NULLs, ns and µs timestamps, floats (0.0 written as 0), quoting, empty strings, booleans,
# lists and structs (JSON text in CSV), decimals, 32-bit floats, small integers, an enum
TYPES_SQL = (
    "SELECT 16111104::HUGEINT * 3 AS s, 16111104::HUGEINT * 1000000000000000000 AS big, NULL::INTEGER AS n,"
    " TIMESTAMP_NS '2026-11-22 07:31:07.700937123' AS t_ns, TIMESTAMP '2026-11-22 07:31:07.7' AS t,"
    " 946.2091971574558 AS a, 0.0::DOUBLE AS z, 'x,\"y' AS q, '' AS e, true AS b, NULL::BOOLEAN AS nb,"
    " [1, 2] AS l, {'k': 1} AS st, 1.5::DECIMAL(10,2) AS d, 7::DECIMAL(18,0) AS d0, 2.5::FLOAT AS f,"
    " -3::TINYINT AS ti, 'a'::ENUM('a','b')::VARCHAR AS en FROM range(2)"
)
# sha256 of `query link_util --run RUN --format csv` and `--limit 5` (table, as issue 34 made it) on the
# sample dataset
LINK_UTIL = {
    "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring": (
        "5cdbe470e28ec251526340dffea22faa2335009198e9166b1dd8ba55c198ec83",
        "6df186bbdcf207073d6ac4314310368c4f84b08f6daff7dbb2cfec6c9b760480",
    ),
    "torch_ddp-resnet8w8-sgd-8-gloo-normal-ring": (
        "ed48df6fb0590eae014a171c942effc4297b7193312cf7f1d3724b223f68725b",
        "f5cd8e5201f4286e49cb75be0ade530d86e16a1a533fa569af22e16a50821e47",
    ),
}


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_console_script_prints_every_type_as_before(sample_dataset: Path, fmt: str) -> None:
    """`tracecore sql` output byte for byte as the CLI before the start-up work printed it."""
    done = _console("sql", "--data", str(sample_dataset), TYPES_SQL, "--format", fmt)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (RECORDED / f"types.{fmt}").read_text(encoding="utf-8")


@pytest.mark.parametrize("run", sorted(LINK_UTIL))
def test_console_script_writes_link_util_as_before(sample_dataset: Path, tmp_path: Path, run: str) -> None:
    """`tracecore query link_util` as CSV file and as a table: the same bytes as before."""
    import hashlib

    csv_sha, table_sha = LINK_UTIL[run]
    out = tmp_path / "link_util.csv"
    done = _console(
        "query", "link_util", "--data", str(sample_dataset), "--run", run, "-f", "csv", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == csv_sha
    table = _console("query", "link_util", "--data", str(sample_dataset), "--run", run, "--limit", "5")
    assert hashlib.sha256(table.stdout.encode()).hexdigest() == table_sha


def test_each_command_module_adds_the_command_of_its_name() -> None:
    """What `one_command` relies on: module `cli/NAME.py` registers exactly the command NAME."""
    from tracecore.cli.app import COMMAND_MODULES, build_app

    for name in COMMAND_MODULES:
        assert set(typer.main.get_command(build_app([name])).commands) == {name}


def _full_app(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line run by the app with every command, as before `one_command`."""
    code = "from tracecore.cli.app import app; app(prog_name='tracecore')"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False, cwd="/"
    )


@pytest.mark.parametrize(
    "args",
    [
        *(
            [name, "--help"]
            for name in ("demo", "read", "model", "ingest", "query", "sql", "figure", "report", "init", "run")
        ),
        ["sql"],
        ["sql", "SELECT 1", "--fromm", "x"],
        ["query", "link_util", "--frm", "1s"],
        ["model", "scaling", "--help"],
        ["model"],
        ["--help"],
        ["--version"],
        ["sqll", "SELECT 1"],
        [],
    ],
    ids=" ".join,
)
def test_console_script_parses_as_the_full_app(args: list[str]) -> None:
    """Building only the command a line names prints what the app with every command prints."""
    ours, full = _console(*args), _full_app(*args)
    assert (ours.returncode, ours.stdout, ours.stderr) == (full.returncode, full.stdout, full.stderr)


def _main_loads(*args: str) -> tuple[str, set[str]]:
    """`main` (the console script's entry point) run on `args`: its stdout and the modules it had
    loaded when it left (read from `os._exit`, which `main` leaves by)."""
    code = (
        "import os, sys\n"
        "from tracecore.cli import app\n"
        "def leave(code, real=os._exit):\n"
        "    print(' '.join(sys.modules), file=sys.stderr)\n"
        "    real(code)\n"
        "os._exit = leave\n"
        "app.main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, set(done.stderr.strip().splitlines()[-1].split())


def test_main_imports_only_the_command_it_runs(sample_dataset: Path) -> None:
    """`main` loads cli/sql.py for `tracecore sql`, and no other command's module."""
    _, loaded = _main_loads("sql", "--data", str(sample_dataset), "SELECT 1")
    assert "tracecore.cli.sql" in loaded
    assert "tracecore.cli.run" not in loaded
    assert "tracecore.cli.figure" not in loaded


ROWS_CASES = json.loads((RECORDED / "rows.json").read_text(encoding="utf-8"))  # the Arrow path's tables


@pytest.mark.parametrize("case", ROWS_CASES, ids=lambda c: f"{c['sql'][:40]} {' '.join(c['args'])}")
def test_console_script_prints_sql_tables_as_before(sample_dataset: Path, case: dict) -> None:
    """`tracecore sql` tables, printed from DuckDB's rows where they qualify (one SELECT, plain column
    types, few rows) and from Arrow otherwise: the same bytes as before, `--limit` included."""
    done = _console("sql", "--data", str(sample_dataset), case["sql"], *case["args"])
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == case["stdout"]


def test_sql_count_as_a_table_imports_no_arrow(sample_dataset: Path) -> None:
    """The start-up shortcut is taken: `tracecore sql "SELECT count(*) …"` loads neither pyarrow nor numpy."""
    out, loaded = _main_loads("sql", "--data", str(sample_dataset), "SELECT count(*) FROM packets")
    assert out.split() == ["count_star()", "─" * 12, "19957", "1", "row"]
    assert {"pyarrow", "numpy", "pandas"} & loaded == set()
    assert "duckdb" in loaded
