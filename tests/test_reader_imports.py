"""The reader's modules import one another one way (no circle, function-level imports included),
and the library never imports the tests' oracle."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import tracecore

READER = Path(tracecore.__file__).parent / "reader"


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


def test_the_library_does_not_import_the_tests() -> None:
    for path in Path(tracecore.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n == "tests" or n.startswith("tests.")], path
