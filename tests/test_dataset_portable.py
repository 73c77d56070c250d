"""Plain DuckDB opens a tracecore dataset: the oldest release pyproject allows (a real one, installed
from PyPI into a venv of its own) as well as today's, from any directory, and after the dataset folder
was moved or copied elsewhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import duckdb
import pytest

from tracecore.ingest import ingest, open_catalog
from tracecore.sample import SAMPLE_RUN, sample_root

REPO = Path(__file__).resolve().parent.parent
# views of the collectives' event sources (profiler traces, NCCL's plugins): empty on the sample runs
EVENT_VIEW_PREFIXES = ("collective_", "step_breakdown")
COUNTER_VIEWS = ("nic_util", "counter_check", "roce_congestion", "nic_tx")

# What a user types: open the catalog read-only, maybe say where the dataset folder is, run SQL.
PLAIN_DUCKDB = """\
import json, sys
import duckdb
catalog, search_path, *queries = sys.argv[1:]
try:
    con = duckdb.connect(catalog, read_only=True)
except duckdb.Error as err:
    sys.exit("cannot open: " + str(err).splitlines()[0])
con.execute("SET enable_progress_bar = false")  # a query over 2 s draws one on standard output
if search_path:
    con.execute("SET file_search_path = $path", {"path": search_path})
results = []
for sql in queries:
    try:
        results.append([list(row) for row in con.execute(sql).fetchall()])
    except duckdb.Error as err:
        results.append("error: " + str(err).splitlines()[0])
print(json.dumps({"version": duckdb.__version__, "results": results}, default=str))
"""

# The sample run alone (tracecore/sample): exact values of the ingested capture.
SAMPLE_PACKETS = 17027
SAMPLE_FLOWS = [[SAMPLE_RUN, "4tuple", 22], [SAMPLE_RUN, "5tuple", 22], [SAMPLE_RUN, "connection", 11]]


def duckdb_floor() -> str:
    """The oldest DuckDB pyproject.toml allows: the one these tests install."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (floor,) = [
        m.group(1) for d in deps if (m := re.fullmatch(r"duckdb>=([0-9.]+)", d.split("#")[0].strip()))
    ]
    return floor


@pytest.fixture(scope="session")
def oldest_python():
    """A venv with only the oldest supported DuckDB (from PyPI), made once per test session."""
    folder = Path(tempfile.mkdtemp(prefix="tracecore-oldest-duckdb-"))
    try:
        venv = subprocess.run(
            [sys.executable, "-m", "venv", str(folder)], capture_output=True, text=True, timeout=300
        )
        python = folder / "bin" / "python"
        if venv.returncode:
            pytest.fail(f"cannot make a venv for the oldest DuckDB: {venv.stderr.strip()}")
        pip = subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"duckdb=={duckdb_floor()}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if pip.returncode:
            pytest.fail(f"cannot install duckdb=={duckdb_floor()} from PyPI: {pip.stderr.strip()[-2000:]}")
        yield python
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def plain_duckdb(python: Path, catalog: Path, queries: list[str], cwd: Path, search_path: str = "") -> dict:
    """Run `queries` in a separate process of `python` with nothing but DuckDB imported."""
    res = subprocess.run(
        [str(python), "-c", PLAIN_DUCKDB, str(catalog), search_path, *queries],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.slow
def test_oldest_duckdb_reads_the_catalog_and_runs_every_view(
    sample_dataset: Path, oldest_python: Path, tmp_path: Path
) -> None:
    """Every view of queries/ gives the oldest DuckDB the same rows as today's, from another cwd."""
    from tracecore.views import view_names

    names = sorted({*view_names(), "packets", "packets_all"})
    queries = [
        "SELECT count(*) FROM packets",
        "SELECT run, definition, flows FROM flow_counts ORDER BY run, definition",
        "SELECT run, sum(bytes) FROM bytes_sent GROUP BY run ORDER BY run",
        f"SELECT count(*), sum(bytes) FROM link_util(bin_ns := 100000000, runs := ['{SAMPLE_RUN}'])",
        *[f'SELECT count(*) FROM "{name}"' for name in names],
    ]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    catalog = sample_dataset / "tracecore.duckdb"
    oldest = plain_duckdb(oldest_python, catalog, queries, cwd)
    today = plain_duckdb(Path(sys.executable), catalog, queries, cwd)
    assert oldest["version"] == duckdb_floor() == "1.5.4"  # the last 1.x line
    assert today["version"] == duckdb.__version__
    assert int(duckdb.__version__.split(".")[0]) >= 2
    packets, flows, sent, util, *counts = oldest["results"]
    assert packets == [[19957]]
    other = "torch_ddp-resnet8w8-sgd-8-gloo-normal-ring"
    assert flows == [
        *SAMPLE_FLOWS,
        [SAMPLE_RUN, "hostpair", 6],
        [SAMPLE_RUN, "qp", 0],
        [other, "4tuple", 18],
        [other, "5tuple", 18],
        [other, "connection", 9],
        [other, "hostpair", 6],
        [other, "qp", 0],
    ]
    assert sent == [[SAMPLE_RUN, 16110600], [other, 2413902]]
    assert util == [[804, 16110600]]
    assert today["results"][:4] == oldest["results"][:4]
    assert dict(zip(names, counts, strict=True)) == dict(zip(names, today["results"][4:], strict=True))
    rows = dict(zip(names, counts, strict=True))
    assert rows.pop("rdma_flows") == [[0]]  # the sample is TCP: test below has RDMA
    nccl = {name: rows.pop(name) for name in list(rows) if name.startswith("nccl_")}  # no NCCL logs here
    assert all(isinstance(count, list) for count in nccl.values()), nccl
    # no profiler traces either: test_oldest_duckdb_runs_the_collective_views has runs with them
    events = {name: rows.pop(name) for name in list(rows) if name.startswith(EVENT_VIEW_PREFIXES)}
    assert all(isinstance(count, list) for count in events.values()), events
    assert isinstance(rows.pop("findings"), list)  # it ran: the sample has no finding above the thresholds
    for name in COUNTER_VIEWS:  # no counter files: test_oldest_duckdb_runs_the_counter_views has them
        assert rows.pop(name) == [[0]], name
    assert all(isinstance(count, list) and count[0][0] > 0 for count in rows.values()), rows


def test_oldest_duckdb_runs_the_nccl_views_on_a_run_with_nccl_logs(
    oldest_python: Path, tmp_path: Path
) -> None:
    """The NCCL views over the shared NCCL ring captures and logs (RoCE, 2.20.5) and the 4-rank
    socket run (2.28.9): the same rows in both DuckDBs."""
    from tests.test_views_nccl import RING, nccl_run_folder
    from tests.test_views_nccl_socket import FOUR, copy_run

    nccl_run_folder(tmp_path / "runs", RING, {0: 0, 1: 1, 2: 2})
    copy_run(tmp_path / "runs", FOUR)
    summary = ingest([tmp_path / "runs"], tmp_path / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    queries = [
        "SELECT run, verdict, count(*), count(*) FILTER (WHERE measured) FROM nccl_topology GROUP BY ALL "
        "ORDER BY ALL",
        *[
            f"SELECT * FROM {name} ORDER BY ALL"
            for name in ("nccl_topology", "nccl_edges", "nccl_rank_workers")
        ],
        f"SELECT src_worker, dst_worker FROM topology_check WHERE predicted AND run = '{RING}' ORDER BY ALL",
    ]
    catalog = tmp_path / "data" / "tracecore.duckdb"
    oldest = plain_duckdb(oldest_python, catalog, queries, tmp_path)
    today = plain_duckdb(Path(sys.executable), catalog, queries, tmp_path)
    assert oldest["results"] == today["results"]
    verdicts, topology, edges, ranks, predicted = oldest["results"]
    # FOUR's socket edges: 4 ring links and 4 tree links measured, 3 tree links idle
    assert verdicts == [[RING, True, 5, 3], [FOUR, True, 11, 8]]
    assert (len(topology), len(ranks)) == (16, 7)
    assert len(edges) > 30
    assert predicted == [["W1", "W2"], ["W2", "W3"], ["W3", "W1"]]


def test_oldest_duckdb_runs_the_counter_views(oldest_python: Path, tmp_path: Path) -> None:
    """nic_util, counter_check, roce_congestion and nic_tx on a sample run given a counter sampler file
    (an mlx5-named port with an ethtool PFC counter): the oldest DuckDB gives today's rows."""
    import os

    from tests.test_nic_counters import write_counters

    run = tmp_path / "runs" / SAMPLE_RUN
    run.mkdir(parents=True)
    for f in (sample_root() / SAMPLE_RUN).iterdir():
        os.symlink(f, run / f.name)
    start = 1795332671_000_000_000  # the sample's first logged step is 0.17 s later
    write_counters(run / "worker-0-counters.tsv", [
        line for k in range(300) for line in (
            f"{start + k * 10_000_000}\t{1000 + 150 * k}\t{40 * k}\t{k // 3}",
            *([f"e\t{start + k * 10_000_000 + 500}\t{k}"] if k % 10 == 0 else []),
        )
    ])  # fmt: skip
    assert not ingest([tmp_path / "runs"], tmp_path / "data", jobs=1).failed
    queries = [
        "SELECT * FROM nic_util(bin_ns := 20000000) ORDER BY ALL",
        "SELECT * FROM counter_check ORDER BY ALL",
        "SELECT * FROM roce_congestion ORDER BY ALL",
        "SELECT * FROM nic_tx ORDER BY ALL",
    ]
    catalog = tmp_path / "data" / "tracecore.duckdb"
    oldest = plain_duckdb(oldest_python, catalog, queries, tmp_path)
    today = plain_duckdb(Path(sys.executable), catalog, queries, tmp_path)
    nic, check, congestion, tx = oldest["results"]
    assert len(tx) == 299  # the port's transmit counter, each sample after the first
    assert len(nic) > 100
    assert len(check) >= 20
    assert len(congestion) > 20
    assert oldest["results"] == today["results"]


def test_oldest_duckdb_runs_the_rdma_views(oldest_python: Path, tmp_path: Path) -> None:
    """rdma_flows, congestion and flow_counts' qp give the oldest DuckDB the rows they give today, on
    real RoCE runs (tests/rdma_corpus.py)."""
    from tests.rdma_corpus import rdma_dataset

    queries = [
        "SELECT * FROM rdma_flows ORDER BY ALL",
        "SELECT * FROM congestion(bin_ns := 5000000) WHERE ecn_ce > 0 OR cnps > 0 ORDER BY ALL",
        "SELECT run, flows FROM flow_counts WHERE definition = 'qp' ORDER BY run",
    ]
    catalog = rdma_dataset() / "tracecore.duckdb"
    oldest = plain_duckdb(oldest_python, catalog, queries, tmp_path)
    today = plain_duckdb(Path(sys.executable), catalog, queries, tmp_path)
    flows, marks, qp = oldest["results"]
    assert len(flows) == 39 + 6 + 3
    assert len(marks) == 4  # the crafted run: CE marks in 3 bins of W2→W1, the CNP in one of W1→W2
    assert sum(n for _, n in qp) == 48
    assert oldest["results"] == today["results"]


def _ingest_sample(out: Path) -> Path:
    summary = ingest([sample_root()], out, jobs=1)
    assert not summary.failed, summary.failed
    return out / "tracecore.duckdb"


def test_catalog_drafted_from_the_cached_template_opens_in_the_oldest_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, oldest_python: Path
) -> None:
    """The first ingest caches the draft template, the second starts from a copy of it: both files,
    and the catalog made from the copy, are in a format the oldest DuckDB reads."""
    from tracecore.ingest.catalog import template_path

    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "cache"))
    template = template_path()
    assert template is not None
    assert not template.exists()
    _ingest_sample(tmp_path / "first")
    assert template.is_file()
    made = template.stat().st_mtime_ns
    catalog = _ingest_sample(tmp_path / "second")
    assert template.stat().st_mtime_ns == made  # copied, not rebuilt
    views = "SELECT count(*) FROM duckdb_views() WHERE NOT internal"
    from_template = plain_duckdb(oldest_python, template, [views], tmp_path)
    second = plain_duckdb(oldest_python, catalog, ["SELECT count(*) FROM packets", views], tmp_path)
    assert from_template["results"] == [[[second["results"][1][0][0]]]]
    assert second["results"][0] == [[SAMPLE_PACKETS]]


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset copied to another folder, the original deleted."""
    base = tmp_path_factory.mktemp("portable")
    _ingest_sample(base / "original" / "data")
    shutil.copytree(base / "original" / "data", base / "elsewhere" / "data")
    shutil.rmtree(base / "original")
    return base / "elsewhere" / "data"


@pytest.mark.parametrize("which", ["oldest", "today"])
def test_moved_dataset_opens_in_plain_duckdb_with_file_search_path(
    moved: Path, which: str, oldest_python: Path, tmp_path: Path
) -> None:
    """`SET file_search_path = 'DIR'` (absolute, or relative to the cwd) is all a moved dataset needs;
    without it the views still name the deleted original's files."""
    python = oldest_python if which == "oldest" else Path(sys.executable)
    catalog = moved / "tracecore.duckdb"
    queries = [
        "SELECT count(*) FROM packets",
        "SELECT run, definition, flows FROM flow_counts ORDER BY definition LIMIT 3",
    ]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    expect = [[[SAMPLE_PACKETS]], SAMPLE_FLOWS]
    relative = os.path.relpath(moved, cwd)
    assert relative.startswith("../")
    for folder, search_path in [(cwd, str(moved)), (cwd, relative), (moved, ".")]:
        assert plain_duckdb(python, catalog, queries, folder, search_path)["results"] == expect, search_path
    (missing, _) = plain_duckdb(python, catalog, queries, cwd)["results"]
    assert missing.startswith("error: Invalid Input Error: tracecore: this catalog was written in /"), missing
    assert "/original/data and this DuckDB was not started on its file there" in missing
    assert f"SET file_search_path = '{moved}' reads its own" in missing


@pytest.mark.parametrize("which", ["oldest", "today"])
def test_a_copy_never_reads_the_original_in_plain_duckdb(
    which: str, oldest_python: Path, tmp_path: Path
) -> None:
    """A copy of the folder whose original is still there, and changed since (a colleague's edit of a
    part file): before, plain DuckDB on the copy read the original's part files through the views'
    absolute paths and answered the edited count, with no sign (issue 25, item 7)."""
    import pyarrow.parquet as pq

    python = oldest_python if which == "oldest" else Path(sys.executable)
    original, copy = tmp_path / "original" / "data", tmp_path / "copy" / "data"
    _ingest_sample(original)
    shutil.copytree(original, copy)
    part = max((original / "packets").rglob("part-*.parquet"), key=lambda p: p.stat().st_size)
    edited = pq.read_table(part).slice(0, 10)
    pq.write_table(edited, part)
    count = ["SELECT count(*) FROM packets_all", "SELECT count(*) FROM runs"]
    (refused, runs) = plain_duckdb(python, copy / "tracecore.duckdb", count, tmp_path)["results"]
    assert refused.startswith(
        f"error: Invalid Input Error: tracecore: this catalog was written in {original} and this DuckDB "
        "was not started on its file there, so its views would read that folder's part files. "
        f"A copy or a moved folder: SET file_search_path = '{copy}' reads its own."
    ), refused
    assert runs == [[1]]  # the copy's own tables are its own: only the part files are refused
    told = plain_duckdb(python, copy / "tracecore.duckdb", count, tmp_path, str(copy))["results"]
    assert told == [[[SAMPLE_PACKETS]], [[1]]]
    here = plain_duckdb(python, original / "tracecore.duckdb", count, tmp_path)["results"]
    assert here[0] != [[SAMPLE_PACKETS]]  # the original reads its own (edited) files as before
    attached = [
        f"ATTACH '{copy / 'tracecore.duckdb'}' AS c (READ_ONLY)",
        "SELECT count(*) FROM c.packets_all",
        f"SET VARIABLE tracecore_root = '{original}'",
        "SELECT count(*) FROM c.packets_all",
    ]
    scratch = duckdb.connect()  # a database of the user's own, in a format both DuckDBs read
    scratch.execute("ATTACH $p AS s (STORAGE_VERSION 'v1.5.0')", {"p": str(tmp_path / "scratch.duckdb")})
    scratch.close()
    res = plain_duckdb(python, tmp_path / "scratch.duckdb", attached, tmp_path)["results"]
    assert res[1].startswith("error: Invalid Input Error: tracecore: this catalog was written in"), res
    assert res[3] == [[here[0][0][0]]]  # told it is the original: it reads the original, as asked


def test_tracecore_on_a_copy_reads_the_copy_and_rewrites_its_views(tmp_path: Path) -> None:
    original, copy = tmp_path / "original" / "data", tmp_path / "copy" / "data"
    _ingest_sample(original)
    shutil.copytree(original, copy)
    shutil.rmtree(original / "packets")  # were the copy read through the original's paths: missing files
    con = open_catalog(copy)
    try:
        assert con.execute("SELECT count(*) FROM packets").fetchone() == (SAMPLE_PACKETS,)
    finally:
        con.close()
    con = duckdb.connect(str(copy / "tracecore.duckdb"), read_only=True)  # plain DuckDB, no setting
    try:
        assert con.execute("SELECT count(*) FROM packets").fetchone() == (SAMPLE_PACKETS,)
    finally:
        con.close()


def test_catalog_written_in_the_newest_format_is_rewritten_when_tracecore_opens_it(
    tmp_path: Path, oldest_python: Path
) -> None:
    """A dataset ingested before the catalog had a storage version (DuckDB's newest format, the views
    fingerprint of that tracecore) is rewritten readable the first time tracecore opens it."""
    from tracecore import views
    from tracecore.ingest.dataset_tables import FORMAT_VERSION

    out = tmp_path / "data"
    catalog = _ingest_sample(out)
    before = hashlib.sha256(FORMAT_VERSION.encode())  # the fingerprint that tracecore recorded
    for name in views.view_names():
        before.update(name.encode() + b"\0" + views.view_sql(name).encode() + b"\0")
    newest = out / "newest.duckdb"
    con = duckdb.connect()
    con.execute("ATTACH $path AS old (READ_ONLY)", {"path": str(catalog)})
    con.execute("ATTACH $path AS newest (STORAGE_VERSION 'v2.0.0')", {"path": str(newest)})
    con.execute("COPY FROM DATABASE old TO newest")
    con.execute(
        "UPDATE newest._meta SET value = $fp WHERE key = 'views_fingerprint'", {"fp": before.hexdigest()[:16]}
    )
    con.close()
    newest.replace(catalog)
    count = ["SELECT count(*) FROM packets"]
    refused = subprocess.run(
        [str(oldest_python), "-c", PLAIN_DUCKDB, str(catalog), "", *count], capture_output=True, text=True
    )
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "cannot open: IO Error: Trying to read a database file with version number"
    ), refused.stderr
    open_catalog(out).close()
    assert plain_duckdb(oldest_python, catalog, count, tmp_path)["results"] == [[[SAMPLE_PACKETS]]]


# tracecore itself running on the oldest DuckDB: the venv's own site-packages (that DuckDB) come first,
# this venv's packages (tracecore, pyarrow, numba, …) after them.
TRACECORE_ON_OLDEST = """\
import site, sys
site.addsitedir(sys.argv[1])
from pathlib import Path
import duckdb
from tracecore.ingest import ingest, open_catalog
from tracecore.query import run_view
from tracecore.sample import sample_root
summary = ingest([sample_root()], Path(sys.argv[2]), jobs=1)
con = open_catalog(sys.argv[2])
flows = run_view(con, "flow_counts").to_pylist()
print(duckdb.__version__, summary.failed, con.execute("SELECT count(*) FROM packets").fetchone()[0])
print([[row["run"], row["definition"], row["flows"]] for row in flows][:3])
"""


def test_tracecore_ingests_and_queries_with_the_oldest_duckdb(oldest_python: Path, tmp_path: Path) -> None:
    """pyproject's floor is a DuckDB tracecore runs on: ingest, the locked-down catalog, a view."""
    import sysconfig

    env = {**os.environ, "TRACECORE_CACHE_DIR": str(tmp_path / "cache")}
    packages = sysconfig.get_paths()["purelib"]
    res = subprocess.run(
        [str(oldest_python), "-c", TRACECORE_ON_OLDEST, packages, str(tmp_path / "d")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"{duckdb_floor()} False {SAMPLE_PACKETS}", str(SAMPLE_FLOWS)]


def test_oldest_duckdb_runs_the_collective_views(oldest_python: Path, tmp_path: Path) -> None:
    """The views of the collectives' event sources (ASOF joins, running windows) give the oldest
    DuckDB the rows they give today, on a real NCCL run with a PyTorch trace and NCCL's plugin."""
    from tests.test_views_collectives import CNN, PROFILERS

    summary = ingest([PROFILERS / CNN], tmp_path / "data", jobs=1)
    assert not summary.problems, summary.problems
    views = ("collective_wire", "collective_coverage", "collective_clock_check", "collective_stragglers")
    queries = [f"SELECT * FROM {name} ORDER BY ALL" for name in (*views, "step_breakdown")]
    catalog = tmp_path / "data" / "tracecore.duckdb"
    oldest = plain_duckdb(oldest_python, catalog, queries, tmp_path)
    today = plain_duckdb(Path(sys.executable), catalog, queries, tmp_path)
    assert oldest["results"] == today["results"]
    wire, coverage, clocks, stragglers, steps = oldest["results"]
    assert (len(wire), len(coverage), len(clocks), len(stragglers), len(steps)) == (50, 4, 4, 27, 6)
