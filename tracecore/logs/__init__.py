"""Training and benchmark logs: a registry of parsers detected by content.

Each parser module defines one `LogParser` as `PARSER`; `PARSER_MODULES` lists the modules in the
order detection tries them (as scapy's `conf.load_layers`), strictest format first, so which parser
wins a file is written down here, not left to import or file-name order. Ingest offers every text
file of a run folder to `detect_parser`; the chosen parser returns one Arrow table (its own kind,
stored as table `parser.table`), any further tables it declares in `more_tables` (NCCL's log holds
ranks, rings, trees, connections and QPs), the count of lines it could not parse, which are
reported, never dropped silently, and any warnings about the file it read (NCCL's lines of unknown
forms). A table with a `worker` column is given, by ingest, the worker
whose capture shares the log's `worker-<i>` name (`ingest/discover.py:worker_stem`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tracecore.logs._text import HEAD_BYTES, looks_like_text, read_head
from tracecore.logs._text import wide_encoding as wide_encoding  # for ingest's discovery

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class ParsedLog:
    """What a parser made of one file."""

    table: pa.Table
    bad_lines: int = 0
    first_bad: list[str] = field(default_factory=list)  # a few examples for the report
    more: dict[str, pa.Table] = field(default_factory=dict)  # the parser's `more_tables`, by name
    # what the report should say about a file read whole (e.g. lines of a form the parser does not
    # know); ingest prints each as a warning after the file's path
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class LogParser:
    """A log format: a cheap content test on the file's head and the full parse."""

    table: str  # dataset table name, e.g. "train_log"
    detect: Callable[[str], bool]  # given the first ~8 KiB of text
    parse: Callable[[Path], ParsedLog]
    more_tables: tuple[str, ...] = ()  # further tables `parse` returns in `ParsedLog.more`

    @property
    def tables(self) -> tuple[str, ...]:
        """Every dataset table this parser writes, its own first."""
        return (self.table, *self.more_tables)


# Detection order: an exact header line, JSON traces (the most specific markers first), CSV headers
# from specific to generic, free text, then NCCL's debug lines (last, so a benchmark's output that also
# carries NCCL lines stays one).
PARSER_MODULES: tuple[str, ...] = (
    "nic_counters",  # the counter sampler's file: its exact first line
    "train_history",  # the DML contract's train_history.log: one exact header line
    "nccl_profiler",  # a JSON array with the categories of NCCL's example profiler plugin
    "horovod_timeline",  # a JSON array of Chrome-trace records with Horovod's names
    "pytorch_profiler",  # a JSON object with Kineto's traceEvents and header keys (plain or .gz)
    "nccl_inspector",  # JSON lines of NCCL Inspector's header + coll_perf records
    "wandb",  # CSV whose header names wandb's `_step`/`_timestamp`
    "loss_csv",  # any CSV with `loss` and `step`/`epoch` columns
    "benchmark_output",  # free text: throughput/RESULT lines anywhere in the head
    "nccl",  # NCCL_DEBUG=INFO lines (`host:pid:tid [dev] NCCL INFO …`) anywhere in the head
)

# Parsers whose files live in a subfolder of the run folder (NCCL Inspector's dump folder): ingest
# offers the files one level down to these only, so no other log gains rows from a new place.
NESTED_TABLES = frozenset({"collectives"})

# Tables of the time-stamped event sources (profiler traces, NCCL Inspector and profiler-plugin records,
# NIC counter samples): a folder holding a file of one of these is a run even without captures, as on an
# RDMA cluster, where tcpdump sees nothing.
TRACE_TABLES = frozenset({"collectives", "counters"})


@functools.cache
def parsers() -> tuple[LogParser, ...]:
    """The parsers in detection order (each module imported once, on first use)."""
    return tuple(importlib.import_module(f"{__name__}.{module}").PARSER for module in PARSER_MODULES)


def detect_parser(path: Path, nested: bool = False) -> LogParser | None:
    """The first parser in `PARSER_MODULES` order that recognises the file (read through gzip when
    compressed), or None; `nested`: the file is in a subfolder, where only event sources are read."""
    head = read_head(path, HEAD_BYTES)
    if not looks_like_text(head):
        return None  # empty, unreadable or binary (a capture)
    head = head.replace("\x00", "")  # NULs a crash left: the parsers read around them
    found = next((p for p in parsers() if p.detect(head)), None)
    return None if found is None or (nested and found.table not in NESTED_TABLES) else found
