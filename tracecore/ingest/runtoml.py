"""`tracecore init RUN_DIR`: a commented run.toml template for a run folder of one's own captures.

Why a template: a folder that does not follow the naming convention ingests with empty metadata,
and the keys that fill it in (read by runname.apply_run_toml) are easier to fill than to look up.
Known values (fields parsed from the folder name, the captures found in it) are filled in; the rest
are commented examples, so the file parses and ingests as written.
"""

from __future__ import annotations

from pathlib import Path

from tracecore.errors import UsageError
from tracecore.ingest.discover import RUN_TOML, discover
from tracecore.ingest.runname import format_loss, parse_run_name

_EXAMPLES = {
    "framework": '"torch_ddp"',
    "model": '"resnet50"',
    "optimizer": '"sgd"',
    "batch_size": "64",
    "backend": '"gloo"',
    "loss": '"normal"',
    "topology": '"ring"',
}


def run_toml_template(run_dir: Path) -> str:
    """The text of a run.toml for `run_dir` (see the module docstring)."""
    meta = parse_run_name(run_dir.name)
    known = {
        "framework": meta.framework,
        "model": meta.model,
        "optimizer": meta.optimizer,
        "batch_size": meta.batch_size,
        "backend": meta.backend,
        "loss": format_loss(meta.loss_pct) if meta.loss_pct is not None else None,
        "topology": meta.topology,
    }
    lines = [
        "# run.toml: metadata tracecore cannot read from the captures (tracecore ingest reads it).",
        "# Lines starting with # are comments: remove the # of a line to use it.",
        "",
        "[run]",
        f"# name = {_quote(run_dir.name)}   # the run's name in the dataset (default: the folder name)",
        "# the 7 fields of a conventional run name:",
    ]
    for key, value in known.items():
        if value is None:
            lines.append(f"# {key} = {_EXAMPLES[key]}")
        else:
            lines.append(f"{key} = {value if isinstance(value, int) else _quote(str(value))}")
    lines += [
        '# loss may also be a number in percent: loss = 0.1 (or loss_pct = 0.1); "normal" is 0',
        '# any other key (e.g. gpus = 4, notes = "...") is kept in the runs table\'s `extra` JSON',
        "",
        "[model]",
        "# gradient_bytes = 102228128   # bytes all-reduced per training step (the views' physics use it)",
        "# n_params = 25557032          # or the parameter count: gradient_bytes = 4 × n_params (fp32)",
        "",
        "[capture]",
        "# shared_addresses = true      # only if workers really share one IP (rows are then counted once",
        "#                              # per worker); better: pin each worker's IP below",
        "",
        "# One block per worker capture pins its IP (default: the address seen most in the capture).",
        "# Needed when captures cannot tell their worker apart, e.g. all captured on loopback 127.0.0.1.",
    ]
    captures = [c for run in discover([run_dir]).runs for c in run.captures]
    keys = sorted({c.key: c.file for c in captures}.items()) or [("worker-0", "worker-0-tcpdump.pcap")]
    for i, (_, file) in enumerate(keys):
        lines += ["# [[capture.worker]]", f"# file = {_quote(file)}", f'# ip = "192.168.17.{50 + i}"']
    return "\n".join(lines) + "\n"


def write_run_toml(run_dir: Path | str, force: bool = False) -> Path:
    """Write `run_dir/run.toml` from the template; an existing one is kept unless `force`."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a folder; give the run folder that holds the captures")
    path = run_dir / RUN_TOML
    if path.exists() and not force:
        raise UsageError(f"{path} exists; edit it, or pass --force to replace it with the template")
    path.write_text(run_toml_template(run_dir), encoding="utf-8")
    return path


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
