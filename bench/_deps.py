"""On-demand installation of the bench's Python extras into the running interpreter's env.

torch is never a dependency of tracecore; the bench installs bench/requirements.txt (the pinned
CPU torch wheel and the bench's plain-Python peer, dpkt) only when a DDP capture is asked for.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REQUIREMENTS = Path(__file__).resolve().parent / "requirements.txt"


def ensure_torch() -> None:
    """Import-check torch; install bench/requirements.txt with pip when it is missing."""
    if importlib.util.find_spec("torch") is not None:
        return
    print(f"bench: torch missing, installing {REQUIREMENTS.name} into {sys.prefix}", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)], check=True)
    importlib.invalidate_caches()
    if importlib.util.find_spec("torch") is None:
        raise RuntimeError("torch still not importable after pip install -r bench/requirements.txt")
