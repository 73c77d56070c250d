"""The dataset's small tables: their Arrow schemas and the in-memory state an ingest edits.

Why a separate module: the catalog (which stores them in DuckDB and exports Parquet), the pipeline
(which edits them per run) and the tests all need the same column lists. Everything here is
small (one row per run, worker, capture or log line), so plain Arrow tables are enough.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from tracecore.arrow_rows import array, table_from_rows
from tracecore.ingest.layout import FORMAT_VERSION as FORMAT_VERSION
from tracecore.ingest.link_bins import TABLE_SCHEMA
from tracecore.logs import _collectives, nccl, nic_counters
from tracecore.schema import SCHEMA_VERSION

RUNS = pa.schema(
    [
        ("run", pa.string()),
        ("framework", pa.string()),
        ("model", pa.string()),
        ("optimizer", pa.string()),
        ("batch_size", pa.int32()),
        ("backend", pa.string()),
        ("loss_pct", pa.float64()),
        ("topology", pa.string()),
        ("n_workers", pa.int32()),
        ("path", pa.string()),  # the run folder (or file) it was last ingested from
        ("name_parsed", pa.bool_()),  # false: the folder name did not follow the naming scheme
        ("capture_mode", pa.string()),  # sender-only | both | mixed | empty | none (no capture)
        ("grad_bytes", pa.int64()),  # gradient bytes per step, from run.toml or 4 × n_params; else NULL
        ("n_params", pa.int64()),  # model parameters, from run.toml; NULL if unknown
        ("extra", pa.string()),  # JSON of the other run.toml keys
    ]
)

WORKERS = pa.schema(
    [
        ("run", pa.string()),
        ("worker", pa.string()),  # W1..Wn in order of IP address
        ("ip", pa.string()),  # inferred (dominant source address) or from run.toml
        ("capture", pa.string()),  # worker key: file name without rotation/compression suffixes
        ("ip_source", pa.string()),  # inferred | run.toml | none
        ("n_files", pa.int32()),
        ("packets", pa.int64()),  # stored rows, before de-duplication
        ("bytes", pa.int64()),  # sum of frame_len over stored rows
        ("dup_rows", pa.int64()),  # rows received from another captured worker: hidden by `packets`
    ]
)

CAPTURES = pa.schema(
    [
        ("run", pa.string()),
        ("worker", pa.string()),
        ("capture", pa.string()),
        ("file", pa.string()),  # path relative to the run folder: the capture's identity in its run
        ("path", pa.string()),  # absolute source path when last ingested
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("checksum", pa.string()),  # blake2b-128 of size + first and last MiB (see fileid.py)
        ("status", pa.string()),  # ok | partial (corrupt after some packets) | failed
        ("packets", pa.int64()),
        ("bytes", pa.int64()),
        ("first_ts_ns", pa.int64()),
        ("last_ts_ns", pa.int64()),
        ("warnings", pa.list_(pa.string())),
        ("error", pa.string()),
        ("ip_counts", pa.string()),  # JSON {ip: [as_src, as_dst]} for the top addresses
        ("ingested_at_ns", pa.int64()),
    ]
)

TRAIN_LOG = pa.schema(
    [
        ("run", pa.string()),
        ("type", pa.string()),  # Batch | Epoch
        ("id", pa.int32()),
        ("ts_ns", pa.int64()),  # UTC ns (the log's Unix seconds × 1e9)
        ("loss", pa.float64()),
        ("accuracy", pa.float64()),
    ]
)

HOST_CLOCKS = pa.schema(
    [
        ("run", pa.string()),
        ("host", pa.string()),  # run.toml [[hosts]] name
        ("ip", pa.string()),  # its address: the worker whose IP it is ran there
        ("offset_ns", pa.int64()),  # the host's clock − the runner's, ns (runners/clocks.py)
        ("rtt_ns", pa.int64()),  # the round trip of that measurement: the offset is known to ± half of it
    ]
)

FILES = pa.schema(
    [
        ("path", pa.string()),  # relative to the dataset root: packets/run=…/worker=…/part-N.parquet
        ("run", pa.string()),
        ("worker", pa.string()),
        ("file", pa.string()),  # the capture (relative to its run folder) the rows came from
        ("rows", pa.int64()),
        ("size", pa.int64()),  # the part file as committed: a later ingest re-reads its capture
        ("checksum", pa.string()),  # when either differs (see fileid.py); NULL in older datasets
        # false: a dense part (schema version 4), which omits schema.LAYER_COLUMNS; true or NULL (older
        # datasets): it stores every column of its schema version
        ("layers", pa.bool_()),
        # the schema version its rows were read as: the columns added since are NULL in every row, also
        # after an upgrade rewrote the file (tcp_health refuses runs read before version 5's TCP fields);
        # a dataset written before this column records its own schema version for each part
        ("read_version", pa.int32()),
    ]
)

TRACE_PARTS = pa.schema(
    [
        ("path", pa.string()),  # relative to the dataset root: traces/<table>/run=…/part-N.parquet
        ("run", pa.string()),
        ("table", pa.string()),  # the trace table its rows belong to (SPILLED_SCHEMAS)
        ("file", pa.string()),  # the log or trace (relative to its run folder) the rows came from
        ("rows", pa.int64()),
        ("size", pa.int64()),  # the part file as committed
        ("checksum", pa.string()),
    ]
)

# NCCL's own account of a run (tracecore/logs/nccl.py owns the columns): base tables, not extra
# ones, because views read them (queries/nccl_*.sql) and a view needs its tables in every catalog.
NCCL_SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([pa.field("run", pa.string()), *schema]) for name, schema in nccl.TABLES.items()
}

# The collectives the event sources record (PyTorch's profiler, NCCL's Inspector and example plugin,
# Horovod's timeline; tracecore/logs/_collectives.py owns the columns), with their clocks, profiled
# steps and GPU kernels: base tables for the same reason (queries/collective_*.sql, step_breakdown).
COLLECTIVE_SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([pa.field("run", pa.string()), *schema])
    for name, schema in _collectives.TABLES.items()
    if name not in _collectives.SPILLED
}

# Trace tables that grow with the traces (a GPU activity per row: millions for a large job), so an
# ingest writes each file's rows to part files as they come (traces/, `_trace_parts`) and the catalog
# reads them as a view; never held in memory with the small tables.
SPILLED_SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([pa.field("run", pa.string()), *_collectives.TABLES[name]])
    for name in _collectives.SPILLED
}

# The NIC counter sampler's samples and its own account per file (tracecore/logs/nic_counters.py owns
# the columns): base tables, as views read them (queries/nic_*.sql).
COUNTER_SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([pa.field("run", pa.string()), *schema])
    for name, schema in (("counters", nic_counters.COUNTERS), ("counter_sources", nic_counters.SOURCES))
}

BASE_SCHEMAS: dict[str, pa.Schema] = {
    "runs": RUNS,
    "workers": WORKERS,
    "captures": CAPTURES,
    "train_log": TRAIN_LOG,
    "_files": FILES,
    "host_clocks": HOST_CLOCKS,
    "_link_bins": TABLE_SCHEMA,  # ingest's own, never exported (ingest/link_bins.py)
    "_trace_parts": TRACE_PARTS,
    **NCCL_SCHEMAS,
    **COLLECTIVE_SCHEMAS,
    **COUNTER_SCHEMAS,
}
# Tables a dataset written before they existed lacks: read as empty, never as a damaged record.
LATER_TABLES = (
    frozenset(NCCL_SCHEMAS)
    | frozenset(COLLECTIVE_SCHEMAS)
    | frozenset(COUNTER_SCHEMAS)
    | {"host_clocks", "_link_bins", "_trace_parts"}
)
EXPORTED = ("runs", "workers", "captures", "train_log", "host_clocks", *NCCL_SCHEMAS, *COLLECTIVE_SCHEMAS,
            *COUNTER_SCHEMAS)  # fmt: skip


@dataclass
class State:
    """Every small table of a dataset; `extra` holds tables of other log parsers, keyed by name."""

    tables: dict[str, pa.Table] = field(default_factory=dict)
    next_part: int = 0
    schema_version: int = SCHEMA_VERSION  # what the part files were written as (tracecore.schema)
    retired: list[str] = field(default_factory=list)  # part files kept one commit for readers (pipeline)

    def __post_init__(self) -> None:
        for name, schema in BASE_SCHEMAS.items():  # not empty_table(): it imports pandas (0.2 s)
            self.tables.setdefault(name, pa.Table.from_batches([], schema=schema))

    def rows(self, name: str) -> list[dict]:
        return self.tables[name].to_pylist()

    def replace_runs(self, name: str, runs: set[str], new_rows: pa.Table | list[dict]) -> None:
        """Drop table `name`'s rows of `runs`, append `new_rows` (runs absent from `runs` are kept)."""
        old = self.tables.get(name)
        base = BASE_SCHEMAS.get(name)
        if isinstance(new_rows, list):
            schema = base or (old.schema if old is not None else None)
            new_rows = (
                table_from_rows(new_rows, schema) if schema is not None else pa.Table.from_pylist(new_rows)
            )
        if old is None or old.num_rows == 0:
            self.tables[name] = new_rows
            return
        import pyarrow.compute as pc

        keep = pc.invert(pc.is_in(old["run"], value_set=array(sorted(runs), pa.string())))
        kept = old.filter(keep)
        if new_rows.num_rows == 0:
            self.tables[name] = kept
        elif base is not None:
            self.tables[name] = pa.concat_tables([kept, new_rows.cast(base)])
        else:  # another parser's table: its columns may have grown between versions
            self.tables[name] = pa.concat_tables([kept, new_rows], promote_options="permissive")
