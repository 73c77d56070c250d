"""Why a view gave no rows: what the selected runs lack of what its header says it `Needs:`.

Why its own module: an empty table that says nothing leaves a user guessing whether the run, the
parameters or tracecore is at fault. Each view names its needs in its header (`-- Needs: collectives`);
here each need is one check on the catalog's tables (the selected runs that lack it) and one line
saying what is missing and which guide (docs/) tells how to get it. The CLI prints the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

SHOWN_RUNS = 3  # runs named in a line; the rest are counted


@dataclass(frozen=True)
class Need:
    """One thing a view needs: `lacking` is SQL giving the runs of `$runs` without it; `message` says
    so (`{runs}`: "run A" or "runs A, B"; `{has}`: has or have); `guide` is (file, section) to read."""

    lacking: str
    message: str
    guide: tuple[str, str]


def _runs_without(condition: str) -> str:
    """SQL: the runs of $runs for which no row satisfies `condition` (which names the run as `r`)."""
    return f"SELECT r FROM (SELECT unnest($runs::VARCHAR[]) AS r) AS s WHERE NOT EXISTS ({condition})"


COLLECTIVES_GUIDE = ("docs/gpu-runs.md", "Which collective was slow, and was it the network?")

NEEDS: dict[str, Need] = {
    "collectives": Need(
        _runs_without("SELECT 1 FROM collectives AS c WHERE c.run = s.r"),
        "{runs} {has} no collectives: no PyTorch profiler trace, NCCL Inspector or NCCL profiler-plugin"
        " output was ingested",
        COLLECTIVES_GUIDE,
    ),
    "steps": Need(
        _runs_without(
            "SELECT 1 FROM profiler_steps AS p WHERE p.run = s.r"
            " UNION ALL SELECT 1 FROM train_log AS t WHERE t.run = s.r AND t.type = 'Batch'"
        ),
        "{runs} {has} no training steps: neither a PyTorch profiler trace with ProfilerStep spans nor a"
        " training log's Batch rows was ingested",
        COLLECTIVES_GUIDE,
    ),
    "two runs": Need(
        "SELECT r FROM (SELECT unnest($runs::VARCHAR[]) AS r) AS s WHERE len($runs::VARCHAR[]) < 2",
        "{view} needs at least two runs: only {runs} is selected (select two with --run A --run B, or"
        " group runs with -p group_by=COLUMN)",
        ("docs/using.md", "Was a link held down, and what did a change do?"),
    ),
    "tcp": Need(
        _runs_without("SELECT 1 FROM packets AS p WHERE p.run = s.r AND p.ip_proto = 6"),
        "{runs} {has} no TCP packets",
        ("docs/gpu-runs.md", "Did TCP lose packets? `tcp_health`"),
    ),
    "rdma": Need(
        _runs_without("SELECT 1 FROM packets AS p WHERE p.run = s.r AND p.rdma_opcode IS NOT NULL"),
        "{runs} {has} no RDMA packets (RoCE or InfiniBand): a host's own capture does not see them",
        ("docs/gpu-runs.md", "GPU-cluster traffic: RoCEv2 and tunnels"),
    ),
    "counters": Need(
        _runs_without("SELECT 1 FROM counters AS c WHERE c.run = s.r"),
        "{runs} {has} no NIC counters: no counter sampler file (worker-<i>-counters.tsv) was ingested;"
        ' capture.method = "both" (or "counters") in the experiment samples them',
        ("docs/gpu-runs.md", "No packets? Counters"),
    ),
    "nccl log": Need(
        _runs_without("SELECT 1 FROM nccl_ranks AS n WHERE n.run = s.r"),
        "{runs} {has} no NCCL debug log: none was ingested (NCCL_DEBUG=INFO and NCCL_DEBUG_FILE in the"
        " run folder make one)",
        ("docs/gpu-runs.md", "NCCL's own account"),
    ),
    "training log": Need(
        _runs_without("SELECT 1 FROM train_log AS t WHERE t.run = s.r"),
        "{runs} {has} no training log: no train_history.log (or other training history) was ingested",
        ("docs/using.md", "Using the CLI"),
    ),
}


def check_needs(names: tuple[str, ...], where: str) -> None:
    """Refuse a `Needs:` name the registry does not know (a typo would silently never say why)."""
    from tracecore.errors import UsageError

    unknown = [n for n in names if n not in NEEDS]
    if unknown:
        raise UsageError(f"{where}: unknown need {', '.join(map(repr, unknown))}; known: {', '.join(NEEDS)}")


def why_empty(con: duckdb.DuckDBPyConnection, view: str, runs: list[str] | None) -> str | None:
    """One line on what the selected `runs` (None: all) lack of what `view` needs, or None when they
    lack nothing it declares (its parameters or window left no rows)."""
    from tracecore import views
    from tracecore.query import known_runs

    needs = views.view_header_list(view, "Needs")
    check_needs(needs, views.installed_views().file(view))
    selected = list(runs) if runs else known_runs(con)
    for name in needs:
        need = NEEDS[name]
        lacking = {row[0] for row in con.execute(need.lacking, {"runs": selected}).fetchall()}
        if lacking:
            return _line(need, view, [r for r in selected if r in lacking])
    return None


def why_empty_dataset(data_dir: Path, view: str, runs: list[str] | None) -> str | None:
    """`why_empty` over the dataset at `data_dir`, opened read-only for it."""
    from tracecore.query import with_dataset

    return with_dataset(data_dir, lambda con: why_empty(con, view, runs))


def _line(need: Need, view: str, runs: list[str]) -> str:
    shown = ", ".join(runs[:SHOWN_RUNS]) + (
        f" and {len(runs) - SHOWN_RUNS} more" if len(runs) > SHOWN_RUNS else ""
    )
    text = need.message.format(
        view=view,
        runs=f"{'run' if len(runs) == 1 else 'runs'} {shown}",
        has="has" if len(runs) == 1 else "have",
    )
    file, section = need.guide
    return f"{text}; see {file} '{section}'"
