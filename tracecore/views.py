"""The named SQL views in `queries/`: found with importlib.resources, installed into a DuckDB catalog.

In the wheel the files live in `tracecore/queries/` (hatch force-include); in a source checkout
they live in the top-level `queries/` folder. Both are found the same way.

Convention for a view file `queries/NAME.sql`: a header comment (first line = one-line purpose,
then a `Kind:` line, semantics, `Parameters:` and `Columns:` with units), then
`CREATE OR REPLACE MACRO NAME(param := default, ...) AS TABLE ...` followed by
`CREATE OR REPLACE VIEW NAME AS SELECT * FROM NAME()`. DuckDB keeps table macros and views in
separate namespaces, so ad hoc SQL can say `SELECT * FROM link_util` (the defaults) or
`SELECT * FROM link_util(bin_ns := 100000, runs := ['r1'])`. Common parameters: `runs` (list of
run names, NULL = all), `from_ns`/`to_ns` (window, ns after the run's first packet), `bin_ns`.
Inside a macro a parameter shadows a column of the same name, so parameters are never named like
a column the body reads unqualified. A file without a macro (e.g. `run_meta`) is a plain view.

`Kind: answer` marks a view a user asks for (a figure, a table of the paper); `Kind: building block`
marks one that exists to be used by other views (`run_bounds`, `packets_window`, …). A file names
the views it uses in its SQL; they are installed first (stdlib graphlib orders them).

`Partition: run` says the view's rows for a set of runs are the rows it gives for each run alone,
in run order: `tracecore query --scheduler` runs it per run on a Dask cluster and concatenates.
`Partition: none` says it needs every run at once (e.g. a baseline looked up among other runs); it
then runs where the catalog is read. A `Combine: VIEW` line under `Partition: run` says the workers
compute VIEW per run and this file's SQL then combines their rows on the driver (`flow_matrix_mean`
over `flow_matrix`). `check_partition` holds the rules that make either exact.

An answer view also says how its table reads: `Key:` the columns that name a row (run, worker, link,
step, …), `Headline:` the answer's columns, most important first (`tracecore query` shows these
before the rest and leaves the rest out first in a narrow terminal), and `Needs:` what the selected
runs must hold for it to have rows (`tracecore.needs`: collectives, tcp, …). A unit written at the end
of a column's line in `Columns:` (`…, ns`, `…, UTC ns`, `…, bytes`, `…, Gbit/s`) is that column's unit.
"""

from __future__ import annotations

import functools
import graphlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import duckdb

ANSWER = "answer"
BUILDING_BLOCK = "building block"
KINDS = (ANSWER, BUILDING_BLOCK)

PARTITIONS = ("run", "none")

_HEADER_LINE = re.compile(r"^--\s?(.*)$")
_HEADER_KEY = re.compile(r"^([A-Z][A-Za-z]*):\s*(.*?)\s*$")  # "Kind: answer", "Partition: run"
_MACRO = re.compile(
    r"CREATE\s+OR\s+REPLACE\s+MACRO\s+(\w+)\s*\((.*?)\)\s*AS\s+TABLE", re.IGNORECASE | re.DOTALL
)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")
_STRING_LITERAL = re.compile(r"'(?:[^']|'')*'")


def queries_dir() -> Traversable | Path:
    """The folder of view files, installed or in the checkout."""
    packaged = resources.files("tracecore").joinpath("queries")
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "queries"
    if checkout.is_dir():
        return checkout
    raise UsageError("no queries/ folder found next to the tracecore package; the install is broken")


@dataclass(frozen=True)
class ViewParam:
    """One parameter of a view's macro: its name and its default as written in the SQL."""

    name: str
    default: str


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on `sep` outside brackets (defaults may be lists, keys may be calls); blanks dropped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


@dataclass(frozen=True)
class ViewFolder:
    """One folder of view files and what their text says: kinds, references, install order.

    A class rather than module state so a test can point it at a folder of its own making.
    """

    root: Traversable | Path

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """Every view name, sorted (file stem of each `*.sql`)."""
        return tuple(sorted(p.name[:-4] for p in self.root.iterdir() if p.name.endswith(".sql")))

    def sql(self, name: str) -> str:
        """The SQL text of one view; unknown names get a message listing what exists."""
        if name not in self.names:
            raise UsageError(f"unknown view {name!r}; known views: {', '.join(self.names) or '(none)'}")
        return self._texts[name]

    @functools.cached_property
    def _texts(self) -> dict[str, str]:
        return {name: self.root.joinpath(f"{name}.sql").read_text(encoding="utf-8") for name in self.names}

    def file(self, name: str) -> str:
        """The file a view comes from, as error messages name it."""
        return str(self.root.joinpath(f"{name}.sql"))

    def header_value(self, name: str, key: str) -> str | None:
        """The value of the header line `-- Key: value` (the comment lines before the SQL); None if absent."""
        for line in self.sql(name).splitlines():
            match = _HEADER_LINE.match(line.strip())
            if match is None:
                return None
            pair = _HEADER_KEY.match(match.group(1))
            if pair and pair.group(1) == key:
                return pair.group(2)
        return None

    def kind(self, name: str) -> str:
        """`answer` or `building block`, from the file's `-- Kind:` header line (required)."""
        kind = self.header_value(name, "Kind")
        if kind not in KINDS:
            raise UsageError(
                f"{self.file(name)}: header needs a line '-- Kind: answer' or '-- Kind: building block', "
                f"got {kind!r}"
            )
        return kind

    def code(self, name: str) -> str:
        """The file's SQL with comments removed and string literals emptied: what names and clauses
        are read from."""
        code = "\n".join(line.split("--", 1)[0] for line in self.sql(name).splitlines())
        return _STRING_LITERAL.sub("''", code)

    def references(self, name: str) -> frozenset[str]:
        """The other views this file's SQL names (comments and string literals left out)."""
        words = set(_IDENTIFIER.findall(self.code(name)))
        return frozenset(words & set(self.names) - {name})

    def params(self, name: str) -> tuple[ViewParam, ...]:
        """The macro parameters of a view, in declaration order; () for a plain view."""
        match = _MACRO.search(self.sql(name))
        if not match:
            return ()
        params = []
        for part in split_top_level(match.group(2)):
            key, _, default = part.partition(":=")
            params.append(ViewParam(key.strip(), default.strip()))
        return tuple(params)

    @functools.cached_property
    def install_order(self) -> tuple[str, ...]:
        """Every view after the views it references; a circle is a UsageError naming its files."""
        graph = {name: self.references(name) for name in self.names}
        sorter = graphlib.TopologicalSorter(graph)
        try:
            return tuple(sorter.static_order())
        except graphlib.CycleError as err:
            circle = err.args[1]
            files = " → ".join(self.file(name) for name in circle)
            raise UsageError(f"the view files reference each other in a circle: {files}") from err

    def install(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create (or replace) every view in the connected catalog, building blocks before their users."""
        import duckdb

        for name in self.install_order:
            try:
                con.execute(self.sql(name))
            except duckdb.Error as err:
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise UsageError(f"{self.file(name)} cannot be installed: {first}") from err


@functools.cache
def installed_views() -> ViewFolder:
    """The views tracecore ships (queries/ of the install or the checkout)."""
    return ViewFolder(queries_dir())


def view_names() -> tuple[str, ...]:
    """Every view name, sorted (file stem of each `queries/*.sql`)."""
    return installed_views().names


def view_sql(name: str) -> str:
    """The SQL text of one view; unknown names get a message listing what exists."""
    return installed_views().sql(name)


def view_params(name: str) -> tuple[ViewParam, ...]:
    """The macro parameters of a view, in declaration order; () for a plain view."""
    return installed_views().params(name)


def view_kind(name: str) -> str:
    """`answer` (a view a user asks for) or `building block` (used by other views)."""
    return installed_views().kind(name)


def view_purpose(name: str) -> str:
    """First line of the header comment: the view's one-line purpose."""
    for line in view_sql(name).splitlines():
        match = _HEADER_LINE.match(line.strip())
        if match and match.group(1).strip():
            return match.group(1).strip()
    return ""


_SECTION = re.compile(r"^([A-Z][A-Za-z]*):\s*(.*)$")  # "Parameters:", "Columns: every column of …"
# a column entry of `Columns:` ("  start_ns, end_ns    the step, UTC ns"): names, then the meaning or nothing
_COLUMN_ENTRY = re.compile(r"^(\s*)([a-z_]\w*(?:,\s*[a-z_]\w*)*)(?:\s+(.*))?$")
# the unit at the end of an entry's meaning: after a comma, before ';', '(' , ')' or the end
_EVERY_COLUMN = re.compile(r"^every column of `(\w+)`")  # a section that takes another view's columns
UNITS = ("UTC ns", "ns", "microseconds", "seconds", "bytes", "MB", "GB", "Gbit/s", "GB/s")
_UNIT = re.compile(r",\s*(" + "|".join(re.escape(u) for u in UNITS) + r")\s*(?=[;()]|$)")


def view_header_section(name: str, title: str) -> tuple[str, ...]:
    """The lines of one section (`Parameters`, `Columns`) of a view's header comment, indentation kept.

    Why: `tracecore query --describe` shows what the header says, so the file stays the one owner of
    units and meanings. A section runs to the next unindented `Word:` line or the end of the header.
    """
    lines: list[str] = []
    inside = False
    for line in view_sql(name).splitlines():
        match = _HEADER_LINE.match(line.strip())
        if match is None:
            break
        text = match.group(1).rstrip()
        section = _SECTION.match(text)
        if section:
            inside = section.group(1) == title
            text = section.group(2)
        if inside and text.strip():
            lines.append(text)
    return tuple(lines)


def view_header_list(name: str, key: str) -> tuple[str, ...]:
    """The comma-separated names of header line `-- Key: a, b` (`Key`, `Headline`, `Needs`); () if absent."""
    value = installed_views().header_value(name, key)
    return tuple(split_top_level(value)) if value else ()


def view_column_units(name: str) -> dict[str, str | None]:
    """Each column the header's `Columns:` names, in order, with its unit (one of UNITS) or None.

    Why here: the header is the one owner of what a column means and in which unit; a table for
    people (`tracecore.columns`) converts by it, so a view's file and its table cannot disagree. An
    entry is a line of comma-separated names and their meaning, which may go on over deeper-indented lines;
    the unit is the meaning's last `, UNIT` (see UNITS) and holds for every name of the entry. A
    section that starts `every column of `VIEW`` has VIEW's columns first.
    """
    lines = view_header_section(name, "Columns")
    units: dict[str, str | None] = {}
    every = _EVERY_COLUMN.match(lines[0]) if lines else None
    if every and every.group(1) in view_names():  # `Columns: every column of `run_meta`, plus`
        units.update(view_column_units(every.group(1)))
    entries: list[tuple[int, list[str], str]] = []
    for line in lines:
        indent = len(line) - len(line.lstrip())
        match = _COLUMN_ENTRY.match(line)
        if match and indent and (not entries or indent <= entries[-1][0]):
            names = [n.strip() for n in match.group(2).split(",")]
            entries.append((indent, names, match.group(3) or ""))
        elif entries:
            indent0, names, meaning = entries[-1]
            entries[-1] = (indent0, names, f"{meaning} {line.strip()}")
    for _, names, meaning in entries:
        found = _UNIT.findall(meaning)
        for column in names:
            units[column] = found[-1] if found else None
    return units


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) every view of `queries/` in the connected catalog, in dependency order."""
    installed_views().install(con)
