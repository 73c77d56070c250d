"""Run folders that appear only when complete: written as `<name>.partial/`, renamed at the end.

Every launcher (iperf3 ring, DDP training, future SSH/Slurm runners) produces one run folder in the
paper's layout; a crash or Ctrl-C must never leave a half-written one for `tracecore ingest` to find.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from tracecore.runners.testbed import TestbedError


@contextlib.contextmanager
def staged_run_dir(
    out_root: str | Path, name: str, *, overwrite: bool = True, failed_to: Path | None = None
) -> Iterator[Path]:
    """Yield `<out_root>/<name>.partial/`; on success it replaces `<out_root>/<name>/`, else it is
    removed, or moved to `failed_to` when given (failed runs kept apart for their logs, never ingested)."""
    out_root = Path(out_root).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    final = out_root / name
    if final.exists() and not overwrite:
        raise TestbedError(f"{final} exists (pass overwrite=True to replace it)")
    partial = out_root / (name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    ok = False
    try:
        yield partial
        if final.exists():
            shutil.rmtree(final)
        partial.rename(final)
        ok = True
    finally:
        if not ok and failed_to is not None and partial.is_dir():
            failed_to.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(failed_to, ignore_errors=True)
            partial.rename(failed_to)
        if not ok:
            shutil.rmtree(partial, ignore_errors=True)


def write_run_toml(run_dir: Path, facts: dict) -> None:
    """The run's metadata as `run.toml` (what `tracecore ingest` reads into the runs table)."""
    import tomli_w

    (run_dir / "run.toml").write_text(tomli_w.dumps(facts), encoding="utf-8")
