"""The reader's modules import one another one way (no circle, function-level imports included),
the library never imports the tests' oracle, and dpkt (the oracle's decoder) is no runtime need."""

from __future__ import annotations

import ast
import graphlib
import tomllib
from pathlib import Path

import tracecore

LIBRARY = Path(tracecore.__file__).parent
READER = LIBRARY / "reader"


def _reader_imports(path: Path) -> set[str]:
    """Names of the reader modules that `path` imports anywhere in its code."""
    modules = {p.stem for p in READER.glob("*.py")}
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "tracecore.reader":
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tracecore.reader."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("tracecore.reader.")}
    return found - {path.stem}


def test_reader_modules_import_one_another_without_a_circle() -> None:
    graph = {p.stem: _reader_imports(p) for p in READER.glob("*.py")}
    assert "compiled" not in graph["aot"]  # aot owns what was built; compiled only chooses
    assert graph["compiled"] >= {"aot"}
    order = list(graphlib.TopologicalSorter(graph).static_order())  # CycleError on a circle
    assert order.index("linktypes") < order.index("kernel") < order.index("aot")


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and not n.level]
    return {name.split(".")[0] for name in names}


def test_the_library_imports_neither_the_tests_nor_dpkt() -> None:
    for path in LIBRARY.rglob("*.py"):
        assert not _top_level_imports(path) & {"tests", "dpkt"}, path


def test_dpkt_is_a_dev_dependency_only() -> None:
    project = tomllib.loads((LIBRARY.parent / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("dpkt")]
    assert [d for d in project["optional-dependencies"]["dev"] if d.startswith("dpkt")] == ["dpkt>=1.9.8"]
