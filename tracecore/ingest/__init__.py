"""`tracecore ingest`: capture folders → partitioned Parquet + a DuckDB catalog (the Dataset contract).

Public API: `ingest(paths, out, ...)` → `IngestSummary`, and `open_catalog(data_dir)` → a DuckDB
connection with every view, used by the query/sql/figure/report commands.

Names are resolved lazily (PEP 562) so a worker process that only needs `writer` does not import
DuckDB, rich and the pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracecore.ingest.catalog import open_catalog
    from tracecore.ingest.control import IngestControl
    from tracecore.ingest.layout import default_data_dir
    from tracecore.ingest.pipeline import ingest
    from tracecore.ingest.summary import CaptureOutcome, IngestSummary

_WHERE = {
    "IngestControl": "control",
    "default_data_dir": "layout",
    "open_catalog": "catalog",
    "ingest": "pipeline",
    "CaptureOutcome": "summary",
    "IngestSummary": "summary",
}
__all__ = ["CaptureOutcome", "IngestControl", "IngestSummary", "default_data_dir", "ingest", "open_catalog"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
