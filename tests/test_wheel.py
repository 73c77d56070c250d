"""The installed wheel carries everything (the CLI, queries/*.sql, runners) under one top-level package.

Builds the wheel, installs it into a fresh venv outside the repository WITHOUT the dev extras (so a
command that needs a test-only package such as pandas fails here), and runs every command of the CLI
from a directory where the checkout cannot be imported by accident.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.wheel, pytest.mark.slow]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    (built,) = dist.glob("tracecore-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=True)
    pip = env_dir / "bin" / "pip"
    # --no-compile: the commands below byte-compile what they import, not every installed package
    subprocess.run([str(pip), "install", "-q", "--no-compile", str(wheel)], check=True, capture_output=True)
    return env_dir


def test_wheel_contains_every_folder(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    sql = {n for n in names if n.startswith("tracecore/queries/") and n.endswith(".sql")}
    in_repo = {f"tracecore/queries/{p.name}" for p in (REPO / "queries").glob("*.sql")}
    assert sql, "no queries/*.sql in the wheel"
    assert sql == in_repo, "every queries/*.sql ships in the wheel"
    assert "tracecore/cli/app.py" in names
    assert "tracecore/runners/testbed.py" in names
    assert any(n.startswith("tracecore/sample/") for n in names), "the embedded sample ships too"
    assert any(n.startswith("tracecore/reader/_kernels_aot.") for n in names), "ahead-of-time kernels ship"


def _run(env_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(env_dir / "bin" / "tracecore"), *args], capture_output=True, text=True, cwd=cwd, env=clean_env
    )


def test_installed_cli_runs_outside_repo(installed: Path, corpus_dir: Path, tmp_path: Path) -> None:
    help_out = _run(installed, "--help", cwd=tmp_path)
    assert help_out.returncode == 0, help_out.stderr
    assert "read" in help_out.stdout

    read_out = _run(installed, "read", str(corpus_dir / "dpkt__http.pcap"), "--format", "csv", cwd=tmp_path)
    assert read_out.returncode == 0, read_out.stderr
    rows = list(csv.DictReader(io.StringIO(read_out.stdout)))
    assert len(rows) == 43  # dpkt__http.pcap holds 43 packets (MANIFEST.csv)
    assert rows[0]["src_ip"] == "145.254.160.237"
    assert rows[0]["dst_port"] == "80"


def test_wheel_installs_one_top_level_package(installed: Path) -> None:
    (record,) = installed.glob("lib/python*/site-packages/tracecore-*.dist-info/RECORD")
    files = [row[0] for row in csv.reader(io.StringIO(record.read_text()))]
    top = {f.split("/")[0] for f in files if not f.startswith("../")}
    assert top == {"tracecore", record.parent.name}
    scripts = {f.rsplit("/", 1)[-1] for f in files if f.startswith("../")}
    assert scripts == {"tracecore"}
    site = record.parent.parent
    for name in ("cli", "runners", "bench", "tests", "queries"):
        assert not (site / name).exists(), f"{name} installed as a top-level package"


def test_python_m_tracecore_is_the_cli(installed: Path, tmp_path: Path) -> None:
    out = _python(installed, tmp_path, "-m", "tracecore", "--version")
    assert out.strip() == "tracecore 0.1.0"


def _python(env_dir: Path, cwd: Path, *args: str) -> str:
    """Stdout of the installed venv's python run with `args` in `cwd` (outside the checkout)."""
    return subprocess.run(
        [str(env_dir / "bin" / "python"), *args], capture_output=True, text=True, cwd=cwd, check=True
    ).stdout


def test_installed_package_is_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = _python(installed, tmp_path, "-c", "import tracecore.cli.app as a; print(a.__file__)")
    assert str(REPO) not in where
    views = _python(installed, tmp_path, "-c", "import tracecore.views as v; print(v.view_names())")
    for sql in (REPO / "queries").glob("*.sql"):
        assert sql.stem in views


def test_installed_reader_runs_the_ahead_of_time_kernels_without_numba(
    installed: Path, tmp_path: Path
) -> None:
    code = (
        "import sys; from tracecore.reader import read_capture; "
        "from tracecore.reader.compiled import kernels; from tracecore.sample import sample_run; "
        "n = read_capture(sample_run() / 'worker-0-tcpdump.pcap').num_rows; "
        "print(kernels().source, n, 'numba' in sys.modules)"
    )
    out = _python(installed, tmp_path, "-c", code).split()
    assert out[0] == "aot"
    assert int(out[1]) == 4531  # the sample's worker-0 capture (workers.packets of W1)
    assert out[2] == "False"  # numba is never imported on the read path


TRAFFIC_RUNS = (
    "run,model,framework,backend,batch_size,topology,mb_per_step\n"
    "a,mobilenetv2,horovod,mpi,64,ring,10\nb,mobilenetv2,horovod,mpi,64,ring,11\n"
    "c,mobilenetv2,horovod,mpi,64,ring,12\nd,mobilenetv2,tf_sync,grpc,64,ring,20\n"
    "e,mobilenetv2,tf_sync,grpc,64,ring,22\nf,mobilenetv2,tf_sync,grpc,64,ring,24\n"
    "g,mobilenetv2,tf_sync,grpc,64,ring,26\n"
)
SPEEDS = "workers,ps,speed\n" + "".join(
    f"{w},{p},{1 / (1.02 * 128 / w + 2.78 + 4.92 * w / p + 0.02 * p)!r}\n"
    for w, p in [(1, 1), (2, 1), (4, 2), (8, 2), (2, 2), (4, 4)]
)


@pytest.fixture(scope="module")
def workspace(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the demo's dataset (`tracecore demo` run by the installed CLI) and model inputs."""
    work = tmp_path_factory.mktemp("work")
    demo = _run(installed, "demo", "--out", str(work / "demo"), cwd=work)
    assert demo.returncode == 0, demo.stderr
    assert "ring_prev" in demo.stdout  # the gloo ring found in the embedded sample
    (work / "runs.csv").write_text(TRAFFIC_RUNS)
    (work / "speed.csv").write_text(SPEEDS)
    return work


def _sample(installed: Path, call: str) -> str:
    code = f"from tracecore.sample import {call.split('(')[0]}; print({call})"
    return subprocess.run(
        [str(installed / "bin" / "python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


# Every command of the CLI, each `model` subcommand with its --figure; {…} are filled in below.
EVERY_COMMAND = [
    (["read", "{corpus}/dpkt__http.pcap", "--limit", "2"], "145.254.160.237", None),
    (["ingest", "{sample_root}", "--out", "{work}/ingested", "--json"], '"packets": ', None),
    (["query", "topology_check", "--data", "{data}"], "ring_prev", None),
    (["sql", "SELECT worker FROM workers ORDER BY worker", "-f", "csv", "--data", "{data}"], "W4", None),
    (["figure", "flow_matrix", "--data", "{data}", "--out", "{work}/flow.svg"], "", "{work}/flow.svg"),
    (["report", "{work}/report", "--data", "{data}"], "index.html", "{work}/report/index.html"),
    (["model", "scaling", "--reference-study", "--figure", "{work}/s.svg"], "0.567164", "{work}/s.svg"),
    (
        ["model", "optimus", "fit", "{sample_run}/train_history.log", "--figure", "{work}/fit.svg"],
        "Optimus loss fit against epochs",
        "{work}/fit.svg",
    ),
    (["model", "optimus", "speed", "{work}/speed.csv", "--batch", "128"], "θ4", None),
    (["model", "optimus", "time", "--figure", "{work}/time.svg"], "244.662839", "{work}/time.svg"),
    (
        ["model", "optimus", "ridge", "{logs}/optimus_fits_seed003.csv", "--predict", "50:K80"],
        "Ridge prediction of b0, b1, b2",
        None,
    ),
    (
        ["model", "traffic", "--input", "{work}/runs.csv", "--figure", "{work}/traffic.svg"],
        "framework_backend_tf_sync_grpc",
        "{work}/traffic.svg",
    ),
]


@pytest.mark.parametrize(
    ("args", "printed", "figure"), EVERY_COMMAND, ids=[" ".join(a[:3]) for a, _, _ in EVERY_COMMAND]
)
def test_installed_cli_runs_every_command(
    installed: Path,
    workspace: Path,
    corpus_dir: Path,
    args: list[str],
    printed: str,
    figure: str | None,
) -> None:
    places = {
        "corpus": str(corpus_dir),
        "work": str(workspace),
        "data": str(workspace / "demo" / "data"),
        "logs": str(REPO / "tests" / "data" / "logs"),
        "sample_root": _sample(installed, "sample_root()"),
        "sample_run": _sample(installed, "sample_run()"),
    }
    done = _run(installed, *(a.format(**places) for a in args), cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert printed in done.stdout
    assert "Traceback" not in done.stderr
    if figure is not None:
        written = Path(figure.format(**places))
        head = written.read_bytes()[:5]
        assert head in (b"<svg ", b"<!DOC"), head
