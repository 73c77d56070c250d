"""The collectives tables every event-source parser writes, and the names they share.

Not a parser itself (registers nothing). PyTorch's profiler, NCCL's Inspector, NCCL's example
profiler plugin and Horovod's timeline each record the collectives of a rank in their own words; the
parsers turn them into the rows of one table, `collectives`, so the views join one table to the
packets whatever wrote it. `collective_clocks` records, per file, how its times were put on Unix
time (the capture's clock); `profiler_steps` and `profiler_kernels` hold what PyTorch's profiler says
of each step and each GPU activity (the compute beside the communication). Ingest adds `run` first
and fills `worker` from the file's `worker-<i>` name; the views pair the other rows with workers.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from tracecore import arrow_rows
from tracecore.logs._common import BadLines

_STR, _I32, _I64, _F64 = pa.string(), pa.int32(), pa.int64(), pa.float64()

# Columns as the parsers return them (ingest adds `run` first). Times are UTC ns on the clock of the
# host that recorded them, which is the clock its capture was taken with.
TABLES: dict[str, pa.Schema] = {
    "collectives": pa.schema(
        [
            ("worker", _STR),  # from the file's `worker-<i>` name (ingest); the views pair the rest
            ("file", _STR),  # the source file, relative to its run folder
            ("source", _STR),  # pytorch_profiler | nccl_inspector | nccl_profiler | horovod_timeline
            ("backend", _STR),  # nccl | gloo | mpi | …: the library that ran the collective, if known
            ("host", _STR),  # the recording process's host name, when the source gives it
            ("pid", _I64),  # … and its process id (pairs the file with the NCCL log of that process)
            ("rank", _I32),  # the rank in `comm` (Horovod's timeline: the coordinator, 0)
            ("comm", _STR),  # communicator / process group as the source names it (NCCL: commId hex)
            ("comm_size", _I32),  # ranks in the communicator; NULL when the source does not say
            ("op", _STR),  # all_reduce, all_gather, reduce_scatter, broadcast, reduce, send, recv, …
            ("source_op", _STR),  # the operation as the source wrote it
            ("seq", _I64),  # 0, 1, … per file and communicator, in issue order
            ("source_seq", _I64),  # the source's own sequence number (NCCL's SeqNum, coll_sn), if any
            ("bytes", _I64),  # message bytes of one rank: elements × element size of its input buffer
            ("dtype", _STR),  # float32, bfloat16, … (NULL when not given)
            ("peer", _I32),  # send/recv: the other rank; broadcast/reduce: the root
            ("algorithm", _STR),  # RING, TREE, … as the source names NCCL's choice; NULL when not given
            ("protocol", _STR),  # SIMPLE, LL, LL128
            ("n_channels", _I32),
            ("start_ns", _I64),  # the collective's start: the GPU kernel where the source has it
            ("end_ns", _I64),  # … and its end
            ("time_source", _STR),  # gpu_kernel | kernel_host | backend_work | cpu_call: what start/end are
            ("call_start_ns", _I64),  # the call on the host (CPU), when the source records it
            ("call_end_ns", _I64),
            ("step", _I64),  # training step (PyTorch's ProfilerStep#N); NULL: the views use train_log
            ("algbw_gbs", _F64),  # the source's own figures, GB/s, where it gives them (Inspector)
            ("busbw_gbs", _F64),
            ("line", _I64),  # where in the file the collective is recorded
        ]
    ),
    "collective_clocks": pa.schema(
        [
            ("worker", _STR),
            ("file", _STR),
            ("source", _STR),
            ("host", _STR),
            ("pid", _I64),
            ("rank", _I32),
            ("method", _STR),  # how the file's times were put on Unix time (see each parser)
            ("offset_ns", _I64),  # added to the file's own times (its base or anchor), ns
            ("error_ns", _I64),  # the mapping's stated error, ns: the views' clock check allows this
            ("anchors", _I64),  # points the mapping rests on (e.g. kernels with a GPU clock)
            ("collectives", _I64),  # rows this file gave `collectives`
        ]
    ),
    "profiler_steps": pa.schema(
        [
            ("worker", _STR),
            ("file", _STR),
            ("pid", _I64),
            ("rank", _I32),
            ("step", _I64),  # N of ProfilerStep#N
            ("start_ns", _I64),  # the step on the host (CPU)
            ("end_ns", _I64),
            ("gpu_start_ns", _I64),  # the step's span on the GPU, when the trace has one
            ("gpu_end_ns", _I64),
        ]
    ),
    "profiler_kernels": pa.schema(
        [
            ("worker", _STR),
            ("file", _STR),
            ("pid", _I64),
            ("rank", _I32),
            ("device", _I32),
            ("stream", _I64),
            ("kind", _STR),  # communication | compute | memcpy | memset
            ("start_ns", _I64),
            ("end_ns", _I64),
        ]
    ),
}
# the tables above that grow with a trace's size: the ingest stores them as part files (dataset_tables)
SPILLED = ("profiler_kernels",)

SOURCES = ("pytorch_profiler", "nccl_inspector", "nccl_profiler", "horovod_timeline")

# The times an event source may place an event at, UTC ns: from 2000-01-01 to 2200-01-01. A clock
# outside (a bogus base, a GPU timer read as int64's largest value) is refused, never stored as 1913,
# past 2262 or wrapped (README: "Which collective was slow, and was it the network?").
PLAUSIBLE_NS = (946_684_800_000_000_000, 7_258_118_400_000_000_000)
PLAUSIBLE_TEXT = "2000-01-01..2200-01-01 UTC"


def plausible(ns: int | None) -> bool:
    """Whether `ns` is a time in PLAUSIBLE_NS."""
    return ns is not None and PLAUSIBLE_NS[0] <= ns < PLAUSIBLE_NS[1]


def time_text(ns: int) -> str:
    """UTC ns as a date and time where it is one (years 1-9999), else the number."""
    import datetime as dt

    try:
        when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=ns // 1000)
    except OverflowError:
        return f"{ns} ns"
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def refused_clock(what: str, ns: int) -> str:
    """The warning of a file whose clock puts its times outside PLAUSIBLE_NS."""
    return (
        f"{what} puts the file's times at {time_text(ns)}, outside {PLAUSIBLE_TEXT}: the clock is"
        " refused and the file's times are not stored"
    )


class Clock:
    """A file's own times put on UTC ns (`offset` + time), each checked against PLAUSIBLE_NS: one
    outside is not stored (None) and counted, with the line of the first, for one bad line."""

    def __init__(self, offset: int | None) -> None:
        self.offset = offset
        self.refused = 0
        self._first: tuple[int, int] | None = None  # (line, time) of the first refused

    def __call__(self, t: int | None, line: int = 0) -> int | None:
        """`offset + t`, or None (no time, no offset, or a time outside PLAUSIBLE_NS)."""
        return None if t is None or self.offset is None else self.check(self.offset + t, line)

    def check(self, ns: int | None, line: int = 0) -> int | None:
        """`ns` when it is plausible; else None, counted."""
        if ns is None or plausible(ns):
            return ns
        self.refuse(ns, line)
        return None

    def refuse(self, ns: int, line: int = 0, times: int = 1) -> None:
        """Count `times` times left out, the first of them `ns` (at `line`)."""
        self.refused += times
        self._first = self._first or (line, ns)

    def report(self, bad: BadLines) -> None:
        """The refused times as one bad line (at the first one's line; 0 when not known)."""
        if self._first is not None:
            line, ns = self._first
            bad.add(
                line,
                "",
                f"{self.refused} time(s) outside {PLAUSIBLE_TEXT} not stored (first {time_text(ns)})",
            )


# The operation names of c10d (record_param_comms' "Collective name", `nccl:`/`gloo:` annotations),
# NCCL (its profiler's and Inspector's) and Horovod, folded into one vocabulary.
_OPS = {  # keyed by the name lower-cased without `_`, `nccl` prefix and spaces
    **dict.fromkeys(("allreduce", "allreducecoalesced"), "all_reduce"),
    **dict.fromkeys(
        (
            "allgather",
            "allgatherbase",
            "allgathercoalesced",
            "allgatherintotensor",
            "allgatherintotensorcoalesced",
        ),
        "all_gather",
    ),
    **dict.fromkeys(
        ("reducescatter", "reducescatterbase", "reducescattertensor", "reducescattertensorcoalesced"),
        "reduce_scatter",
    ),
    **dict.fromkeys(("broadcast", "bcast"), "broadcast"),
    **dict.fromkeys(("alltoall", "alltoallbase", "alltoallv", "alltoallsingle"), "all_to_all"),
    **dict.fromkeys(("recv", "recvanysource"), "recv"),
    "reduce": "reduce",
    "send": "send",
    "barrier": "barrier",
    "gather": "gather",
    "scatter": "scatter",
}

_DTYPES = {
    # c10d's record_param_comms (ScalarType names) and Kineto's "Input type" (C++ type names)
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "bfloat16": "bfloat16",
    "c10::bfloat16": "bfloat16",
    "c10::half": "float16",
    "long": "int64",
    "long int": "int64",
    "int64_t": "int64",
    "int": "int32",
    "short": "int16",
    "short int": "int16",
    "byte": "uint8",
    "unsigned char": "uint8",
    "char": "int8",
    "signed char": "int8",
    "bool": "bool",
    "float8_e4m3fn": "float8_e4m3",
    "c10::float8_e4m3fn": "float8_e4m3",
    "float8_e5m2": "float8_e5m2",
    "c10::float8_e5m2": "float8_e5m2",
    # NCCL's ncclDataType_t names
    "ncclint8": "int8",
    "ncclchar": "int8",
    "nccluint8": "uint8",
    "ncclint32": "int32",
    "ncclint": "int32",
    "nccluint32": "uint32",
    "ncclint64": "int64",
    "nccluint64": "uint64",
    "ncclfloat16": "float16",
    "ncclhalf": "float16",
    "ncclfloat32": "float32",
    "ncclfloat": "float32",
    "ncclfloat64": "float64",
    "nccldouble": "float64",
    "ncclbfloat16": "bfloat16",
    "ncclfloat8e4m3": "float8_e4m3",
    "ncclfloat8e5m2": "float8_e5m2",
    # Horovod / numpy
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
}
DTYPE_BYTES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "float32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
}
_WORD = re.compile(r"[^a-z0-9_]+")


def op_name(text: object) -> str | None:
    """The collective's name in the shared vocabulary (`allreduce`, `_allgather_base`, `AllReduce`,
    `c10d::allreduce_` → all_reduce, …); an unknown one lower-cased as it came (at most 64 chars)."""
    if not isinstance(text, str) or not text.strip():
        return None
    word = text.strip().lower().rsplit("::", 1)[-1]
    key = _WORD.sub("", word.replace("_", ""))
    key = key.removeprefix("nccl") if key.removeprefix("nccl") in _OPS else key
    return _OPS.get(key, _WORD.sub("", word.replace(" ", "_"))[:64] or None)


def dtype_name(text: object) -> str | None:
    """float32, bfloat16, … from a c10d, C++, NCCL or numpy type name; None when unknown."""
    if not isinstance(text, str):
        return None
    return _DTYPES.get(text.strip().lower())


class Columns:
    """Rows of one table kept column by column: integers in typed arrays (8 bytes a value, not a
    Python object), so a trace with millions of kernels stays a compact copy of what it keeps.
    An integer outside its column's type (a hostile file's rank of 2**40) is stored as NULL."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._limits = {f.name: 2 ** (f.type.bit_width - 1) for f in schema if pa.types.is_integer(f.type)}
        self._cols: dict[str, Any] = {f.name: array("q") if f.name in self._limits else [] for f in schema}
        self._nulls: dict[str, list[int]] = {name: [] for name in self._limits}
        self.rows = 0

    def add(self, **values: Any) -> None:
        for name, col in self._cols.items():
            value = values.get(name)
            limit = self._limits.get(name)
            if limit is None:
                col.append(value)
                continue
            if value is None or not -limit <= value < limit:
                self._nulls[name].append(self.rows)
                value = 0
            col.append(int(value))
        self.rows += 1

    def table(self) -> pa.Table:
        arrays = []
        for f in self.schema:
            col = self._cols[f.name]
            if f.name not in self._limits:
                arrays.append(arrow_rows.array(col, f.type))
                continue
            arrays.append(int_array(col, self._nulls[f.name], self.rows).cast(f.type))
        return pa.Table.from_arrays(arrays, schema=self.schema)


def rank_claims(tables: Mapping[str, pa.Table]) -> set[tuple[str, str, int]]:
    """(source, communicator, rank) of each rank whose collectives a file's tables record, and
    (pytorch_profiler, 'steps', rank) of its PyTorch profiler steps.

    Why: the views pair a collective's ranks by (run, source, comm, seq), so two files of one source
    that record the same rank (a trace copied beside itself) would count each collective twice."""
    claims: set[tuple[str, str, int]] = set()
    collectives = tables.get("collectives")
    if collectives is not None and "source" in collectives.column_names and collectives.num_rows:
        # as Python values: Arrow's group_by (Acero) imports pandas
        columns = (collectives[name].to_pylist() for name in ("source", "comm", "rank"))
        claims |= {(s, str(c), r) for s, c, r in zip(*columns, strict=True) if r is not None}
    steps = tables.get("profiler_steps")
    if steps is not None and steps.num_rows:
        ranks = set(steps["rank"].to_pylist()) - {None}
        claims |= {("pytorch_profiler", "steps", rank) for rank in ranks}
    return claims


def claim_ranks(
    owner: dict[tuple, str], name: str, tables: Mapping[str, pa.Table]
) -> tuple[str, tuple] | None:
    """Record file `name`'s ranks (`rank_claims`) in `owner`, unless an earlier file records one of
    them: then that file and one (source, comm, rank) they share, and `owner` is left as it was.
    Files offered in order: the first file of a rank is kept."""
    claims = rank_claims(tables)
    clash = min((c for c in claims if c in owner), default=None, key=str)
    if clash is not None:
        return owner[clash], clash
    owner |= dict.fromkeys(claims, name)
    return None


def int_array(values: array, nulls: list[int], n: int) -> pa.Array:
    """An int64 Arrow array over `values` (no copy) with the rows in `nulls` NULL; built from buffers,
    because pyarrow's NumPy conversion imports pandas (0.2 s and more per ingest)."""
    validity = None
    if nulls:
        bits = bytearray(b"\xff" * ((n + 7) // 8))
        for i in nulls:
            bits[i >> 3] &= ~(1 << (i & 7)) & 0xFF
        validity = pa.py_buffer(bytes(bits))
    return pa.Array.from_buffers(pa.int64(), n, [validity, pa.py_buffer(values)], null_count=len(nulls))
