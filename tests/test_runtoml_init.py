"""Own captures: the unparsed-name warning names the run.toml keys, `tracecore init` writes a template
that parses and ingests, and workers sharing an address are an error with the fix named."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.runtoml import write_run_toml
from tracecore.sample import sample_run

runner = CliRunner()


def _own_run(root: Path, name: str = "my-capture", copies: dict[str, str] | None = None) -> Path:
    """A run folder of real sample captures under names of one's own (no run.toml)."""
    run = root / name
    run.mkdir(parents=True)
    for dst, src in (
        copies or {f"worker-{i}-tcpdump.pcap": f"worker-{i}-tcpdump.pcap" for i in range(4)}
    ).items():
        shutil.copyfile(sample_run() / src, run / dst)
    return run


def test_unparsed_name_warning_names_the_run_toml_keys(tmp_path: Path) -> None:
    run = _own_run(tmp_path)
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert summary.warnings == [
        f"{run}: run name 'my-capture' is not framework-model-optimizer-batchsize-backend-loss-topology;"
        f" ingested with empty metadata. Give it in {run}/run.toml: [run] framework, model, optimizer,"
        " batch_size, backend, loss, topology (and name); [model] gradient_bytes or n_params;"
        " [[capture.worker]] file + ip to pin addresses. `tracecore init RUN_DIR` writes a template"
    ]


def test_init_template_parses_and_ingests_as_written(tmp_path: Path) -> None:
    run = _own_run(tmp_path)
    result = runner.invoke(app, ["init", str(run)])
    assert result.exit_code == 0, result.output
    assert result.output == f"Wrote {run / 'run.toml'}; fill it in, then run `tracecore ingest {run}`\n"
    assert tomllib.loads((run / "run.toml").read_text(encoding="utf-8")) == {
        "run": {},
        "model": {},
        "capture": {},
    }
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert not summary.failed
    assert not [w for w in summary.warnings if w.startswith(f"{run / 'run.toml'}:")]  # read without a word
    again = runner.invoke(app, ["init", str(run)])
    assert again.exit_code == 2
    assert (
        again.output
        == f"Error: {run / 'run.toml'} exists; edit it, or pass --force to replace it with the template\n"
    )
    missing = runner.invoke(app, ["init", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert missing.output.count("\n") == 1


def test_init_template_with_its_examples_filled_in(tmp_path: Path) -> None:
    """Every commented example, uncommented, is a key ingest reads into the runs and workers tables."""
    run = _own_run(tmp_path)
    text = write_run_toml(run).read_text(encoding="utf-8")
    lines = []
    for line in text.splitlines():
        body = line[2:] if line.startswith("# ") else line
        key = body.split("=")[0].strip()
        if key in ("framework", "model", "optimizer", "batch_size", "backend", "loss", "topology",
                   "n_params", "file", "ip", "[[capture.worker]]", "name"):  # fmt: skip
            line = body
        lines.append(line)
    (run / "run.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert not summary.failed
    con = open_catalog(tmp_path / "data")
    assert con.execute(
        "SELECT run, framework, model, optimizer, batch_size, backend, loss_pct, topology, n_params,"
        " grad_bytes FROM runs"
    ).fetchall() == [
        ("my-capture", "torch_ddp", "resnet50", "sgd", 64, "gloo", 0.0, "ring", 25557032, 102228128)
    ]
    assert con.execute("SELECT worker, ip, ip_source FROM workers ORDER BY worker").fetchall() == [
        (f"W{i + 1}", f"192.168.17.{50 + i}", "run.toml") for i in range(4)
    ]
    con.close()


def test_workers_sharing_an_address_are_an_error_naming_the_fix(tmp_path: Path) -> None:
    copies = {
        "worker-0-tcpdump.pcap": "worker-0-tcpdump.pcap",
        "worker-1-tcpdump.pcap": "worker-0-tcpdump.pcap",
    }
    run = _own_run(tmp_path, "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring", copies)
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert summary.failed
    assert summary.problems == [
        (
            str(run),
            "workers share an address (worker-0-tcpdump, worker-1-tcpdump all claim 192.168.17.50), so every"
            " view would count their packets once per worker; this run was not ingested. Pin each worker's IP"
            " in run.toml ([[capture.worker]] file = ..., ip = ...), or set [capture] shared_addresses = true"
            " to ingest it anyway",
        )
    ]
    con = open_catalog(tmp_path / "data")
    assert con.execute("SELECT count(*) FROM runs").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM packets_all").fetchall() == [(0,)]
    con.close()
    result = runner.invoke(app, ["ingest", str(run), "--out", str(tmp_path / "cli")])
    assert result.exit_code != 0
    assert "shared_addresses = true" in result.output


def test_shared_addresses_opt_in_ingests_with_a_warning(tmp_path: Path) -> None:
    copies = {
        "worker-0-tcpdump.pcap": "worker-0-tcpdump.pcap",
        "worker-1-tcpdump.pcap": "worker-0-tcpdump.pcap",
    }
    run = _own_run(tmp_path, "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring", copies)
    (run / "run.toml").write_text("[capture]\nshared_addresses = true\n", encoding="utf-8")
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert not summary.failed
    assert f"{run.name}: workers share an address (run.toml shared_addresses)" in summary.warnings
    con = open_catalog(tmp_path / "data")
    assert con.execute("SELECT count(*) FROM workers").fetchall() == [(2,)]
    con.close()
