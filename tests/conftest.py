"""Shared fixtures and the snapshot policy. Paths to real data fail loudly when missing: a test never
passes silently."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own cache folder (catalog draft templates), inherited by the commands tests run:
    nothing is written to the user's ~/.cache and no state leaks between runs. Snapshots are never
    rewritten in CI, where nobody reviews the diff."""
    if config.getoption("update_snapshots", default=False) and _in_ci():
        raise pytest.UsageError("--snapshot-update is refused when CI is set: update snapshots locally")
    os.environ["TRACECORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracecore-test-cache-")
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Started in the background of a shell without job control, SIGINT is ignored and every
        # child would inherit that: the Ctrl-C tests' ingests would never see their SIGINT.
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with a `slow` test first, each module's tests kept together and in order: `make test`
    hands whole modules to its workers (pytest-xdist `--dist loadscope --no-loadscope-reorder`), so
    the long ones start at once instead of leaving one worker busy at the end while the other idles."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)  # stable


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(trylast=True)  # after syrupy's own hook has written the files and its report
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """An update run that wrote snapshots fails, so the new files are reviewed before a run passes."""
    report = getattr(getattr(session.config, "_syrupy", None), "report", None)
    if report is None or not session.config.getoption("update_snapshots", default=False):
        return
    written = report.num_created + report.num_updated + report.num_unused
    if written:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"{written} snapshot(s) written or removed: review the diff, then run again")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("TRACECORE_CACHE_DIR", ""), ignore_errors=True)


@pytest.fixture
def untested(record_property):
    """`untested(what)`: says in the run's summary a branch this test could not exercise on this machine
    (a kernel without netem), so a test that passes is not read as having run it."""
    return lambda what: record_property("untested", what)


def pytest_terminal_summary(terminalreporter) -> None:
    """The branches tests said they could not exercise here (`untested`), one line each."""
    lines = sorted(
        {
            f"{report.nodeid}: {what}"
            for reports in terminalreporter.stats.values()
            for report in reports
            for key, what in getattr(report, "user_properties", ())
            if key == "untested"
        }
    )
    if lines:
        terminalreporter.section("not exercised on this machine")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus: real captures by other tools, with tshark's reading in expected/."""
    if not (CORPUS / "MANIFEST.csv").is_file():
        pytest.fail(f"corpus missing: {CORPUS} (the shared/ folder must sit beside the checkout)")
    return CORPUS


@pytest.fixture(scope="session")
def sample_dataset() -> Path:
    """Both sample runs ingested once per test session (tests/test_views_support.py makes it)."""
    from tests.test_views_support import dataset_dir

    return dataset_dir()


@pytest.fixture(scope="session")
def corpus_dataset(
    corpus_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict], object]:
    """Every file of ../shared/corpus ingested once per test session (one run per file):
    (dataset, MANIFEST.csv's rows, the ingest summary)."""
    import csv

    from tracecore.ingest import ingest

    with open(corpus_dir / "MANIFEST.csv", encoding="utf-8", newline="") as fh:
        manifest = list(csv.DictReader(fh))
    out = tmp_path_factory.mktemp("corpus") / "data"
    summary = ingest([corpus_dir / m["file"] for m in manifest], out, jobs=1)
    return out, manifest, summary


@pytest.fixture(scope="session")
def con(sample_dataset: Path):
    """One read-only DuckDB connection to the session's sample dataset, shared by the view tests."""
    from tracecore.ingest import open_catalog

    connection = open_catalog(sample_dataset, read_only=True)
    yield connection
    connection.close()


def netns_made_by(pid: int) -> set[str]:
    """Network namespaces made by testbeds of process `pid` (runners/testbed.py names them
    tb<pid>x<n>-…): leftover checks look only at these, never at what anything else on the machine made."""
    from tracecore.runners.testbed import list_netns

    return {ns for ns in list_netns() if ns.startswith(f"tb{pid}x")}


def default_signals() -> None:
    """A child's `preexec_fn`: SIGHUP, SIGTERM and SIGINT at their defaults, as in a job a shell starts
    (`nohup` leaves SIGHUP ignored in the suite, and every child would inherit that)."""
    for sig in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


def require_tool(name: str) -> str:
    """Path of a system tool; a missing one fails the test (run `make system-deps`)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: run `make system-deps` (scripts/install-system-deps.sh)")
    return path


@pytest.fixture
def snapshot_runner(snapshot):
    """syrupy's snapshot kept in the runners' reviewed amber files (tests/snapshots/<test module>/)."""
    from tests.runs import RunnerSnapshot

    return snapshot.use_extension(RunnerSnapshot)
