"""Run facts the catalog may not carry yet, read from the run folder's `run.toml`.

bench/ and runners/ write `[model] gradient_bytes` (and `n_params`) into each run's `run.toml`; the
catalog's `run_meta.grad_bytes` is NULL until ingest copies it. Models need the gradient size, so
they fall back to the file the run folder (`runs.path`) still holds.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

BYTES_PER_PARAM = 4  # fp32 gradients


def grad_bytes_of_run(path: str | Path | None) -> int | None:
    """Gradient bytes all-reduced per step, from `<path>/run.toml`; None when not recorded."""
    if not path:
        return None
    try:
        model = tomllib.loads((Path(path) / "run.toml").read_text()).get("model", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if isinstance(model.get("gradient_bytes"), int):
        return model["gradient_bytes"]
    if isinstance(model.get("n_params"), int):
        return model["n_params"] * BYTES_PER_PARAM
    return None
