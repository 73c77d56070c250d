"""`tracecore ingest`: capture folders → partitioned Parquet + a DuckDB catalog (the Dataset contract).

Public API: `ingest(paths, out, ...)` → `IngestSummary`, and `open_catalog(data_dir)` → a DuckDB
connection with every view, used by the query/sql/figure/report commands.
"""

from __future__ import annotations

from tracecore.ingest.catalog import default_data_dir, open_catalog
from tracecore.ingest.pipeline import ingest
from tracecore.ingest.summary import CaptureOutcome, IngestSummary

__all__ = ["CaptureOutcome", "IngestSummary", "default_data_dir", "ingest", "open_catalog"]
