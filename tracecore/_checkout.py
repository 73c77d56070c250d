"""In a source checkout, `cli/` and `runners/` sit beside the package; the wheel puts them inside it.

Why: the repository's layout keeps the command line and the launchers in folders of their own, while
an install must add one top-level name only. This finder gives the checkout the installed names
(`tracecore.cli`, `tracecore.runners`), so code and tests import them one way everywhere.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

FOLDERS = ("cli", "runners")


class CheckoutFolders(importlib.abc.MetaPathFinder):
    """Finds `tracecore.<folder>` in the checkout's top-level folder of that name."""

    def __init__(self, package: str, root: Path) -> None:
        self.folders = {f"{package}.{name}": root / name for name in FOLDERS}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None or not (folder / "__init__.py").is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def install(package: str, package_dir: Path) -> None:
    """Add the finder once, only where the folders are not inside the package (a checkout)."""
    if (package_dir / FOLDERS[0]).is_dir():
        return
    if not any(isinstance(f, CheckoutFolders) for f in sys.meta_path):
        sys.meta_path.append(CheckoutFolders(package, package_dir.parent))
