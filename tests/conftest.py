"""Shared fixtures. Paths to real data fail loudly when missing: a test never passes silently."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own cache folder (catalog draft templates), inherited by the commands tests run:
    nothing is written to the user's ~/.cache and no state leaks between runs."""
    os.environ["TRACECORE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracecore-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("TRACECORE_CACHE_DIR", ""), ignore_errors=True)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """../shared/corpus: real captures by other tools, with tshark's reading in expected/."""
    if not (CORPUS / "MANIFEST.csv").is_file():
        pytest.fail(f"corpus missing: {CORPUS} (the shared/ folder must sit beside the checkout)")
    return CORPUS


def require_tool(name: str) -> str:
    """Path of a system tool; a missing one fails the test (run `make system-deps`)."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: run `make system-deps` (scripts/install-system-deps.sh)")
    return path
