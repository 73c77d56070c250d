"""Model inputs read from an ingested dataset's DuckDB catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl


def catalog_frame(data_dir: Any, sql: str, *, model: str) -> pl.DataFrame:
    """The rows `sql` selects from the catalog of `data_dir`, as a polars frame.

    Why here: every model that reads the catalog needs the same open/close and the same one-line
    DatasetError when an older ingest lacks a view or column the model reads.
    """
    import duckdb
    import polars as pl

    from tracecore.errors import DatasetError
    from tracecore.ingest.catalog import open_catalog

    con = open_catalog(data_dir)
    try:
        return pl.from_arrow(con.sql(sql).to_arrow_table())
    except duckdb.CatalogException as err:
        raise DatasetError(
            f"{data_dir}: the catalog lacks what the {model} model reads ({str(err).splitlines()[0]}); "
            "re-run `tracecore ingest` with this version"
        ) from None
    finally:
        con.close()
