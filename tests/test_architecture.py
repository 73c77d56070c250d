"""The import graph of tracecore/, cli/ and runners/, read from the source with `ast`: no circles, and
the library never imports the layers above it (the CLI, the runners, bench/, tests/).

Every import counts, module-level or inside a function (a lazy import is still a dependency), except
those under `if TYPE_CHECKING:`, which never run. Failures print the offending edges with file and line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# folder → the package it is imported as (tracecore/_checkout.py and the wheel map cli/ and runners/)
SOURCES = {"tracecore": "tracecore", "cli": "tracecore.cli", "runners": "tracecore.runners"}
UPPER_LAYERS = ("tracecore.cli", "tracecore.runners", "bench", "tests")

# The entry point `python -m tracecore` starts the CLI: it is the top of the graph, not the library.
ENTRY_POINTS = ("tracecore.__main__",)

# Known edges still to be removed: the lead deletes an entry when its fix is merged (the test below
# then fails on an entry whose import is gone, so the list cannot go stale).
ALLOWED_CIRCLE_EDGES: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Edge:
    """One import: the importing module, the module imported, and where the import is written."""

    importer: str
    imported: str
    where: str

    def __str__(self) -> str:
        return f"{self.importer} → {self.imported}  ({self.where})"


def module_files() -> dict[str, Path]:
    """Dotted module name → source file, for every module of the three folders."""
    modules = {}
    for folder, package in SOURCES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST):
    """Import nodes that can run (those under `if TYPE_CHECKING:` are left out)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            stack.append(child)


def _target(name: str, known: dict[str, Path]) -> str:
    """The module an import resolves to: the longest known prefix, else the top-level name."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return parts[0]


def import_edges() -> list[Edge]:
    """Every runtime import of the three folders as an edge between dotted module names."""
    known = module_files()
    edges = []
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            where = f"{path.relative_to(REPO)}:{node.lineno}"
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                # `from pkg import sub` imports module pkg.sub when it is one, else a name of pkg
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for name in dict.fromkeys(names):
                target = _target(name, known)
                if target != module:
                    edges.append(Edge(module, target, where))
    return edges


def circles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _is_library(module: str) -> bool:
    return (
        module.split(".")[0] == "tracecore"
        and module not in ENTRY_POINTS
        and not any(module == layer or module.startswith(layer + ".") for layer in UPPER_LAYERS)
    )


def test_the_graph_is_read_from_real_imports() -> None:
    edges = {(e.importer, e.imported) for e in import_edges()}
    assert ("tracecore.query", "tracecore.views") in edges
    assert ("tracecore.cli.query", "tracecore.cli.common") in edges
    assert ("tracecore.ingest.catalog", "tracecore.views") in edges
    assert "tracecore.cli.app" in module_files()
    assert "tracecore.runners.testbed" in module_files()


def test_circles_finds_every_module_of_a_planted_circle() -> None:
    planted = [Edge(a, b, "x.py:1") for a, b in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "e")]]
    assert circles(planted) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    edges = [e for e in import_edges() if (e.importer, e.imported) not in ALLOWED_CIRCLE_EDGES]
    found = circles(edges)
    inside = [str(e) for e in edges for c in found if e.importer in c and e.imported in c]
    assert not found, (
        "import circles:\n" + "\n".join(" ↔ ".join(c) for c in found) + "\nedges:\n" + "\n".join(inside)
    )


def test_allowed_edges_still_exist() -> None:
    """An allow-list entry whose import is gone must be deleted, so the list cannot go stale."""
    edges = {(e.importer, e.imported) for e in import_edges()}
    assert not ALLOWED_CIRCLE_EDGES - edges, ALLOWED_CIRCLE_EDGES - edges


def test_the_library_does_not_import_the_layers_above_it() -> None:
    upward = [
        str(e) for e in import_edges() if _is_library(e.importer) and not _is_library(e.imported)
        and any(e.imported == layer or e.imported.startswith(layer + ".") for layer in UPPER_LAYERS)
    ]  # fmt: skip
    assert not upward, "library → cli/runners/bench/tests:\n" + "\n".join(upward)
