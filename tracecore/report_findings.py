"""The report's first section: each run's findings, as `tracecore explain` gives them.

Why apart from report.py: the findings are the `findings` view, computed from views the report reads
anyway (collective_wire for the timeline, tcp_health and step_breakdown for the GPU section); the
section takes those results from the report's shared view results and hands them to the view by name,
so the page pays for them once.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracecore.explain import NO_COLLECTIVES, by_run, cost_text

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Leading:
    """A section above the report's figures (`report.LEADING` builds them; the findings are the first):
    its anchor, its name in the page's index, its HTML (a heading and one or more `<section>`s)."""

    id: str
    nav: str
    html: str


# the `findings` parameters that name rows already computed, and the view each must hold
SHARED = {"wire": "collective_wire", "health": "tcp_health", "steps": "step_breakdown"}


def findings_section(
    con: duckdb.DuckDBPyConnection, runs: list[str] | None, labels: dict[str, str]
) -> Leading | None:
    """The findings of `runs`, per run, each with the command that shows its evidence."""
    from tracecore.figures._views import run_view, shared
    from tracecore.figures.holds import has_collectives
    from tracecore.query import known_runs

    asked = runs or known_runs(con)
    names: dict[str, str] = {}
    for param, view in SHARED.items():
        names[param] = f"report_{view}"
        con.register(names[param], run_view(con, view, runs=runs))
    try:
        table = shared(
            ("findings", None if runs is None else tuple(runs)),
            lambda: run_view(con, "findings", runs=runs, params=names),
        )
    finally:
        for name in names.values():
            con.unregister(name)
    parts = []
    for i, (run, rows) in enumerate(by_run(table, asked).items()):
        label = html.escape(labels.get(run, run))
        lack = "" if has_collectives(con, [run]) else f'<p class="purpose">{html.escape(NO_COLLECTIVES)}</p>'
        shown = _rows_html(rows) if rows else '<p class="purpose">No finding above the thresholds.</p>'
        title = f'<h3 title="{html.escape(run)}">{label}</h3>'
        parts.append(f'<section id="findings-{i}">{title}{lack}{shown}</section>')
    intro = (
        "Each run's findings, ranked by the time they cost (problems first, then notes), each with the "
        "command that shows the rows behind it: the same as tracecore explain; the thresholds and rules: "
        "tracecore query findings --describe."
    )
    return Leading(
        "findings",
        "Findings",
        f'<h2 class="group" id="findings">What slowed each run</h2><p class="intro">{html.escape(intro)}</p>'
        + "".join(parts),
    )


def _rows_html(rows: list[dict[str, Any]]) -> str:
    """One table row a finding: rank, what, cost (or "note"), the claim and the command."""
    body = []
    for row in rows:
        cost = cost_text(row["cost_ns"]) if row["severity"] == "problem" else "note"
        body.append(
            f'<tr><td>{row["rank"]}</td><td class="text">{html.escape(row["finding"])}</td>'
            f"<td>{html.escape(cost)}</td>"
            f'<td class="text">{html.escape(row["claim"])}</td>'
            f'<td class="text"><code>{html.escape(row["evidence"])}</code></td></tr>'
        )
    head = (
        '<tr><th>#</th><th class="text">finding</th><th>cost</th><th class="text">claim</th>'
        '<th class="text">evidence</th></tr>'
    )
    return f'<div class="scroll"><table><thead>{head}</thead><tbody>{"".join(body)}</tbody></table></div>'
