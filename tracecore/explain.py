"""`tracecore explain`: each run's findings (the `findings` view), ranked, and what a run lacked to be judged.

Why its own module: the findings are one view, but a person reads them per run, with the runs that
had none named and the sources a run did not have said out loud (a run without profiler traces gets
no collective verdicts, which is not the same as "nothing wrong").
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

VIEW = "findings"
THRESHOLDS = "tracecore query findings --describe"
NO_COLLECTIVES = (
    "no collectives were recorded (PyTorch profiler trace, NCCL Inspector, NCCL's profiler plugin): "
    "the verdicts on collectives and steps need them (docs/gpu-runs.md: Which collective was slow, and "
    "was it the network?)"
)


@dataclass(frozen=True)
class Explanation:
    """The findings of the runs asked about, and per run what it lacked."""

    findings: pa.Table
    runs: list[str]
    without_collectives: list[str]

    def by_run(self) -> dict[str, list[dict[str, Any]]]:
        """Each run asked about (in order) with its findings in rank order; [] when it has none."""
        return by_run(self.findings, self.runs)


def by_run(findings: pa.Table, runs: list[str]) -> dict[str, list[dict[str, Any]]]:
    """`runs`, in order, each with its rows of the `findings` view in rank order ([] for none)."""
    grouped: dict[str, list[dict[str, Any]]] = {run: [] for run in runs}
    for row in findings.to_pylist():
        grouped.setdefault(row["run"], []).append(row)
    return grouped


def explain(
    data_dir: Path, runs: list[str] | None = None, params: dict[str, Any] | None = None
) -> Explanation:
    """The `findings` view over the dataset at `data_dir` for `runs` (None: every run)."""
    from tracecore.query import check_runs, known_runs, run_view, with_dataset

    def work(con: duckdb.DuckDBPyConnection) -> Explanation:
        asked = check_runs(con, runs) or known_runs(con)
        traced = {r for (r,) in con.execute("SELECT DISTINCT run FROM collectives").fetchall()}
        table = run_view(con, VIEW, runs=runs, params=params)
        return Explanation(table, asked, [r for r in asked if r not in traced])

    return with_dataset(data_dir, work)


def cost_text(ns: int | None) -> str:
    """A finding's cost as a person reads it: ms below a second, else s."""
    if ns is None:
        return "cost not measured"
    if abs(ns) >= 1_000_000_000:
        return f"{ns / 1e9:.2f} s"
    return f"{ns / 1e6:.1f} ms"


def as_text(expl: Explanation, width: int | None = None) -> str:
    """Per run, its findings as numbered lines (claim, then the evidence command), wrapped to `width`."""
    from tracecore.terminal import safe

    def wrap(text: str, first: str, rest: str) -> list[str]:
        if width is None:
            return [first + text]
        return textwrap.wrap(text, width=max(40, width), initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False, break_long_words=False)  # fmt: skip

    lines: list[str] = []
    for run, rows in expl.by_run().items():
        lines.append(safe(run))
        if run in expl.without_collectives:
            lines.extend(wrap(NO_COLLECTIVES, "  · ", "    "))
        if not rows:
            lines.extend(wrap(f"no finding above the thresholds ({THRESHOLDS})", "  ", "  "))
        for row in rows:
            head = f"{row['rank']}. {row['finding']}"
            head += f" ({cost_text(row['cost_ns'])})" if row["severity"] == "problem" else " (note)"
            lines.extend(wrap(f"{head}: {safe(row['claim'])}", "  ", "     "))
            lines.extend(wrap(safe(row["evidence"]), "     $ ", "       "))
        lines.append("")
    return "\n".join(lines)


def as_markdown(expl: Explanation) -> str:
    """A Markdown section per run with its findings as a table."""

    def cell(text: str) -> str:
        return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    out: list[str] = []
    for run, rows in expl.by_run().items():
        out.append(f"## {cell(run)}\n")
        if run in expl.without_collectives:
            out.append(f"_{cell(NO_COLLECTIVES)}_\n")
        if not rows:
            out.append("No finding above the thresholds.\n")
            continue
        out.append("| # | finding | cost | claim | evidence |")
        out.append("|---|---|---|---|---|")
        for row in rows:
            cost = cost_text(row["cost_ns"]) if row["severity"] == "problem" else "note"
            out.append(
                f"| {row['rank']} | {cell(row['finding'])} | {cost} | {cell(row['claim'])} | "
                f"`{cell(row['evidence'])}` |"
            )
        out.append("")
    return "\n".join(out) + "\n"
