"""The version of what a dataset stores, and the check every reader of a dataset makes against it.

Why a module of its own: opening a catalog for a query checks the version before anything else, and
this check must not import pyarrow (the packet schemas in `tracecore.schema` do), which a
`tracecore sql` printing a table never needs otherwise.
"""

from __future__ import annotations

# The version of what a dataset stores (packet files, tables, views' columns), recorded in the
# catalog's `_meta.schema_version` and in every part file. 1: uint32 byte columns, no version recorded
# (tracecore 0.1.0); 2: int64 byte columns, Parquet key-value metadata; 3: dscp, ecn, the RDMA
# (rdma_*) and tunnel (tunnel, vni, inner_*) columns (older part files are rewritten with them null);
# 4: dense part files (every row fully set: TCP) omit LAYER_COLUMNS, null in all their rows
# (`_files.layers` is false for them); version 3 files are version 4 files that store every column.
# 5: tcp_seq, tcp_ack, tcp_window, tcp_window_scale (older part files are rewritten with them null).
# 6: the catalog and ingest's state hold `_link_bins` (bytes per capture, address pair and millisecond);
# part files are version 5's (none is rewritten), and the next ingest stores an older dataset's bins.
SCHEMA_VERSION = 6
OLDEST_READABLE_SCHEMA = 1


def check_schema_version(recorded: str | None, where: object) -> int:
    """The dataset's schema version (None: 1, written before versions were recorded); a version this
    tracecore cannot read raises DatasetError saying why, so nothing misreads or rewrites it."""
    from tracecore.errors import DatasetVersionError
    from tracecore.version import __version__

    try:
        version = int(recorded) if recorded is not None else 1
    except ValueError:
        raise DatasetVersionError(f"{where}: schema_version {recorded!r} in _meta is not a number") from None
    if version > SCHEMA_VERSION:
        raise DatasetVersionError(
            f"{where}: dataset schema version {version} is newer than this tracecore {__version__} reads"
            f" (versions {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}); upgrade tracecore"
            " (pip install -U tracecore) or re-ingest the captures into a new --data folder"
        )
    if version < OLDEST_READABLE_SCHEMA:
        raise DatasetVersionError(
            f"{where}: dataset schema version {version} is older than this tracecore reads"
            f" (versions {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}); re-ingest the captures"
        )
    return version
