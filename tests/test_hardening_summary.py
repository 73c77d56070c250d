"""The ingest summary prints run and file names whole when stderr is not a terminal (issue 12, item 13)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.sample import SAMPLE_RUN, sample_run

REPO = Path(__file__).resolve().parent.parent


def test_names_are_not_cut(tmp_path: Path) -> None:
    run = SAMPLE_RUN + "-" + "x" * 90
    src = tmp_path / "src" / run
    shutil.copytree(sample_run(), src)
    toml = src / "run.toml"
    toml.write_text(toml.read_text().replace(f'name = "{SAMPLE_RUN}"\n', "", 1))
    long_file = "worker-0-tcpdump-" + "y" * 70 + ".pcap"
    (src / "worker-0-tcpdump.pcap").rename(src / long_file)
    res = subprocess.run(
        [sys.executable, "-m", "tracecore", "ingest", str(src.parent), "--out", str(tmp_path / "data")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stderr.splitlines() if "ingested" in line]
    assert len(rows) == 4, res.stderr
    assert all(run in line for line in rows), res.stderr
    assert sum(long_file in line for line in rows) == 1, res.stderr
    assert "…" not in res.stderr


def test_names_with_rich_markup_are_printed_literally(tmp_path: Path) -> None:
    """Folder names are the user's text: `[bold]` or `[red]` in one must print as typed, not as markup."""
    name = "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring[bold]x[red]y"
    src = tmp_path / "runs" / name
    shutil.copytree(sample_run(), src)
    toml = src / "run.toml"
    toml.write_text(toml.read_text().replace(f'name = "{SAMPLE_RUN}"\n', "", 1))
    result = CliRunner().invoke(app, ["ingest", str(tmp_path / "runs"), "--out", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert result.output.count(f"{name} ") == 4  # one table row per worker capture, the name whole
