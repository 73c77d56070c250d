"""Run folders the launchers write: run.toml is valid TOML whatever the values hold."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tracecore.runners.rundir import staged_run_dir, write_run_toml

AWKWARD = 'cr\r lf\n tab\t soh\x01 del\x7f nul\x00 "quoted" back\\slash naïve µs 🙂'


def test_run_toml_round_trips_control_characters_quotes_and_unicode(tmp_path: Path) -> None:
    facts = {
        "run": {"name": "torch_ddp-resnet8-sgd-16-gloo-normal-ring", "note": AWKWARD, "loss_pct": 0.5},
        "model": {"n_params": 19954, "gradient_bytes": 79816, "tags": [AWKWARD, "plain"]},
        "capture": {"worker": [{"file": "worker-0.pcap", "ip": "192.168.17.50"}]},
    }
    with staged_run_dir(tmp_path, "run") as partial:
        write_run_toml(partial, facts)
    with (tmp_path / "run" / "run.toml").open("rb") as f:
        assert tomllib.load(f) == facts
