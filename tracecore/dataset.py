"""`tracecore.open(path)`: a dataset as one object for notebooks — runs, views, SQL, figures.

Why an object and not a connection: a notebook keeps it across `tracecore ingest`, which renames a new
catalog over the old one and deletes the Parquet files the old one named; a connection kept open
would then fail with "No files found". The object notices the new catalog file (its inode, size and
mtime) before every call and reopens, so the notebook sees the new data without doing anything.
Views, SQL and figures go through `tracecore.query` and `tracecore.figures` (their checks and
messages); results come as Arrow, or Polars or pandas when asked (`as_=`).
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracecore.errors import DatasetError, UsageError

if TYPE_CHECKING:
    import altair as alt
    import duckdb
    import pyarrow as pa

OUTPUTS = ("arrow", "polars", "pandas")


def open(path: Path | str | None = None, as_: str = "arrow") -> Dataset:
    """The dataset at `path` (default: $TRACECORE_DATA or ./tracecore-data); results as `as_`."""
    return Dataset(path, as_)


class Dataset:
    """One dataset: `.runs`, `.view(name, **params)`, `.sql(text)`, `.figure(name)`.

    `as_` ("arrow", "polars" or "pandas") is the default form of results; every call can override it.
    """

    def __init__(self, path: Path | str | None = None, as_: str = "arrow"):
        from tracecore.ingest.layout import CATALOG_NAME, default_data_dir

        self.path = Path(path if path is not None else default_data_dir()).resolve()
        self.as_ = _check_output(as_)
        self._catalog = self.path / CATALOG_NAME
        self._con: duckdb.DuckDBPyConnection | None = None
        self._stamp: tuple[int, int, int] | None = None
        self._connection()  # a missing or unreadable dataset fails here, not at the first query

    # -- the connection, reopened when an ingest replaced the catalog ------------------------------

    def _file_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._catalog)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """The catalog as it is now: reopened when its file changed since the last call."""
        stamp = self._file_stamp()
        if self._con is None or stamp != self._stamp:
            from tracecore.ingest import open_catalog

            self.close()
            self._con = open_catalog(self.path, read_only=True)
            self._stamp = self._file_stamp()
        return self._con

    def _run(self, call: Any) -> pa.Table:
        """`call(con)`, retried once on a fresh connection when an ingest committed meanwhile."""
        try:
            return call(self._connection())
        except (UsageError, DatasetError):
            if self._file_stamp() == self._stamp:
                raise
            return call(self._connection())

    def close(self) -> None:
        """Release the catalog (also done when the object is garbage-collected)."""
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> Dataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a notebook asks for ------------------------------------------------------------------

    @property
    def runs(self) -> Any:
        """One row per run: its metadata (the `runs` table), workers, stored packets and bytes."""
        return self.sql(_RUNS_SQL)

    def view(self, name: str, runs: list[str] | None = None, as_: str | None = None, **params: Any) -> Any:
        """Named view `name` (see `views`) with its parameters, e.g. `view("link_util", bin_ns="10ms")`."""
        from tracecore.query import run_view

        return _convert(self._run(lambda con: run_view(con, name, runs, params)), as_ or self.as_)

    def sql(self, text: str, as_: str | None = None, **values: Any) -> Any:
        """Any SQL over the catalog; `$name` placeholders take `values`."""
        from tracecore.query import run_sql

        return _convert(self._run(lambda con: run_sql(con, text, values or None)), as_ or self.as_)

    def figure(self, name: str, runs: list[str] | None = None, **options: Any) -> alt.TopLevelMixin:
        """Figure `name` (see `figures`) as an Altair chart, which Jupyter draws; `options` are
        `tracecore.figures.options.FigureOptions` fields, e.g. top=4, layout="overlay", ci="bootstrap"."""
        from tracecore.figures import build
        from tracecore.figures.options import FigureOptions

        return self._run(lambda con: build(con, name, runs, FigureOptions(**options)))

    @property
    def views(self) -> list[str]:
        """The views a user asks for (building blocks left out)."""
        from tracecore.query import view_listing
        from tracecore.views import ANSWER

        return [row.name for row in view_listing() if row.kind == ANSWER]

    @property
    def figures(self) -> list[str]:
        from tracecore.figures import figure_names

        return figure_names()

    def _summary(self) -> tuple[list[dict], int, int]:
        rows = self.sql(_RUNS_SQL, as_="arrow").select(["run", "n_workers", "packets", "bytes"]).to_pylist()
        return rows, sum(r["packets"] or 0 for r in rows), sum(r["bytes"] or 0 for r in rows)

    def __repr__(self) -> str:
        rows, packets, nbytes = self._summary()
        lines = [
            f"tracecore dataset {self.path}",
            f"  {len(rows)} run(s), {packets:,} stored packets, {nbytes:,} bytes on the wire",
        ]
        lines += [f"  {r['run']}: {r['n_workers']} workers, {r['packets'] or 0:,} packets" for r in rows]
        lines.append(f"  views: {', '.join(self.views)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows, packets, nbytes = self._summary()
        cells = "".join(
            f"<tr><td>{html.escape(r['run'])}</td><td>{r['n_workers']}</td>"
            f"<td>{r['packets'] or 0:,}</td><td>{r['bytes'] or 0:,}</td></tr>"
            for r in rows
        )
        return (
            f"<div><b>tracecore dataset</b> <code>{html.escape(str(self.path))}</code><br>"
            f"{len(rows)} run(s), {packets:,} stored packets, {nbytes:,} bytes on the wire"
            "<table><thead><tr><th>run</th><th>workers</th><th>packets</th><th>bytes</th></tr></thead>"
            f"<tbody>{cells}</tbody></table>"
            f"views: <code>{html.escape(', '.join(self.views))}</code></div>"
        )


_RUNS_SQL = """
SELECT r.*, w.packets, w.bytes
FROM runs r
LEFT JOIN (
    SELECT run, sum(packets)::BIGINT AS packets, sum(bytes)::BIGINT AS bytes FROM workers GROUP BY run
) w USING (run)
ORDER BY r.run
"""


def _check_output(as_: str) -> str:
    if as_ not in OUTPUTS:
        raise UsageError(f"unknown result form {as_!r}; choose one of {', '.join(OUTPUTS)}")
    return as_


def _convert(table: pa.Table, as_: str) -> Any:
    """An Arrow table as `as_`: itself, a Polars DataFrame or a pandas DataFrame."""
    as_ = _check_output(as_)
    if as_ == "polars":
        import polars as pl

        return pl.from_arrow(table)
    if as_ == "pandas":
        try:
            import pandas  # noqa: F401  (pyarrow's own import error names neither the extra nor the choice)
        except ImportError:
            raise UsageError(
                "as_='pandas' needs pandas, which is not installed: pip install 'tracecore[pandas]' "
                "(or ask for as_='polars' or as_='arrow')"
            ) from None
        return table.to_pandas()
    return table
