"""The named SQL views in `queries/`: found with importlib.resources, installed into a DuckDB catalog.

In the wheel the files live in `tracecore/queries/` (hatch force-include); in a source checkout
they live in the top-level `queries/` folder. Both are found the same way.

Convention for a view file `queries/NAME.sql`: a header comment (first line = one-line purpose,
then semantics, `Parameters:` and `Columns:` with units), then
`CREATE OR REPLACE MACRO NAME(param := default, ...) AS TABLE ...` followed by
`CREATE OR REPLACE VIEW NAME AS SELECT * FROM NAME()`. DuckDB keeps table macros and views in
separate namespaces, so ad hoc SQL can say `SELECT * FROM link_util` (the defaults) or
`SELECT * FROM link_util(bin_ns := 100000, runs := ['r1'])`. Common parameters: `runs` (list of
run names, NULL = all), `from_ns`/`to_ns` (window, ns after the run's first packet), `bin_ns`.
Inside a macro a parameter shadows a column of the same name, so parameters are never named like
a column the body reads unqualified. A file without a macro (e.g. `run_meta`) is a plain view.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.errors import UsageError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import duckdb

_HEADER_LINE = re.compile(r"^--\s?(.*)$")


def queries_dir() -> Traversable | Path:
    """The folder of view files, installed or in the checkout."""
    packaged = resources.files("tracecore").joinpath("queries")
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "queries"
    if checkout.is_dir():
        return checkout
    raise UsageError("no queries/ folder found next to the tracecore package; the install is broken")


@functools.cache
def view_names() -> tuple[str, ...]:
    """Every view name, sorted (file stem of each `queries/*.sql`)."""
    return tuple(sorted(p.name[:-4] for p in queries_dir().iterdir() if p.name.endswith(".sql")))


@functools.cache
def view_sql(name: str) -> str:
    """The SQL text of one view; unknown names get a message listing what exists."""
    if name not in view_names():
        raise UsageError(f"unknown view {name!r}; known views: {', '.join(view_names()) or '(none)'}")
    return queries_dir().joinpath(f"{name}.sql").read_text(encoding="utf-8")


def view_purpose(name: str) -> str:
    """First line of the header comment: the view's one-line purpose."""
    for line in view_sql(name).splitlines():
        match = _HEADER_LINE.match(line.strip())
        if match and match.group(1).strip():
            return match.group(1).strip()
    return ""


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) every view of `queries/` in the connected catalog, in name order.

    A view file may depend on another; files are retried until all install or none progresses.
    """
    pending = list(view_names())
    while pending:
        failed: list[tuple[str, Exception]] = []
        for name in pending:
            try:
                con.execute(view_sql(name))
            except Exception as err:  # a view may reference one not yet created
                failed.append((name, err))
        if len(failed) == len(pending):
            name, err = failed[0]
            raise UsageError(f"view {name} cannot be installed: {err}") from err
        pending = [name for name, _ in failed]
