"""Running tracecore and the bench tools as a user does: a fresh `python -m` process in the checkout.

Why a module: the subprocess tests share one way to start these processes (same interpreter, same
working directory, output captured as text) instead of each spelling it out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_module(
    module: str, *args: str, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m module args…` run to the end in the checkout, stdout and stderr captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def start_module(module: str, *args: str) -> subprocess.Popen:
    """`python -m module args…` started in the checkout, for tests that signal or watch it while it runs."""
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def tracecore(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The tracecore CLI run to the end, as `python -m tracecore args…`."""
    return run_module("tracecore", *args, env=env)
