"""The trace tables that grow with a job (dataset_tables.SPILLED_SCHEMAS) as part files under traces/.

Why: a GPU activity is a row of `profiler_kernels`, so a job of a thousand ranks has hundreds of
millions of them; held with the small tables they would bound the job an ingest can take by this
machine's memory. Each parsed file's rows are written to a staged Parquet file as soon as the file
is read (`Spill.add`), named in `_trace_parts` by the commit and moved into place with the packets'
part files (same crash safety: `layout`), and the catalog reads them as a view
(`catalog.trace_parts_sql`). A dataset written before keeps the table in its state until its next
ingest writes it out here (`convert_legacy`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracecore.ingest import layout
from tracecore.ingest.dataset_tables import SPILLED_SCHEMAS, State


@dataclass
class StagedPart:
    src: Path
    run: str
    table: str
    file: str
    rows: int
    legacy: bool  # written out from a state table (convert_legacy), not parsed by this ingest


@dataclass
class Spill:
    """Where an ingest stages the spilled tables' rows, and what it staged."""

    folder: Path
    parts: list[StagedPart] = field(default_factory=list)

    def add(self, run: str, table: str, file: str, rows: pa.Table, legacy: bool = False) -> None:
        """Stage one file's rows of `table` (with `run` first, as SPILLED_SCHEMAS has it)."""
        import pyarrow.parquet as pq

        if rows.num_rows == 0:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        src = self.folder / f"{uuid.uuid4().hex}.parquet"
        pq.write_table(rows.cast(SPILLED_SCHEMAS[table]), src, compression="zstd")
        self.parts.append(StagedPart(src, run, table, file, rows.num_rows, legacy))


def convert_legacy(state: State, spill: Spill, touched: set[str]) -> None:
    """A spilled table still held in the state (a dataset written before it was part files): each
    untouched run's rows staged as its parts (touched runs get theirs from their files), the table
    dropped from the state."""
    import pyarrow.compute as pc

    for table in SPILLED_SCHEMAS:
        held = state.tables.pop(table, None)
        if held is None or held.num_rows == 0:
            continue
        for run in sorted(set(held["run"].to_pylist()) - touched - {None}):
            rows = held.filter(pc.equal(held["run"], run))
            for file in sorted({f or "" for f in rows["file"].to_pylist()}):
                one = rows.filter(pc.equal(pc.fill_null(rows["file"], ""), file))
                spill.add(run, table, file, one, legacy=True)


def commit_rows(state: State, spill: Spill, touched: set[str], moves: list) -> list[dict]:
    """`_trace_parts` after this commit: the untouched runs' rows kept, the staged parts of the
    touched runs named (their moves into place appended to `moves`)."""
    kept = [r for r in state.rows("_trace_parts") if r["run"] not in touched]
    rows = []
    for part in spill.parts:
        if part.run not in touched and not part.legacy:  # a run the commit left out (its problem said)
            continue
        rel = f"{layout.trace_partition(part.table, part.run)}/part-{state.next_part}.parquet"
        state.next_part += 1
        size, checksum = layout.part_id(part.src)
        moves.append((part.src, rel, False))
        rows.append(
            {
                "path": rel,
                "run": part.run,
                "table": part.table,
                "file": part.file,
                "rows": part.rows,
                "size": size,
                "checksum": checksum,
            }
        )
    return kept + rows
