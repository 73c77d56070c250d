"""What `tracecore query` prints about a view besides its rows: `--list`, `--describe`, and the line
saying why a view gave no rows.

Why apart from `query.py`: running a view is one thing, describing views is another; the list fits
the terminal the way tables do (`cli/fit.py`), wrapping each purpose beside its view's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from pathlib import Path

    from tracecore.query import ViewDescription, ViewListing

MIN_LISTING = 30  # `--list` puts a purpose under its view's name where less than this is left beside it


def listing(rows: list[ViewListing], width: int | None) -> str:
    """`query --list`: the views by kind, each name with its purpose and parameters; fitted to `width`
    (None: one line each), the purpose wrapped beside the name, or under it where that is too narrow."""
    import textwrap

    indent = 2 + max(len(row.name) for row in rows) + 2
    lines, kind = [], None
    for row in rows:
        if row.kind != kind:
            kind = row.kind
            lines.append(f"{kind}s:")
        text = f"{row.purpose}  ({', '.join(row.params) or 'no parameters'})"
        if width is None:
            lines.append(f"  {row.name:<{indent - 4}}  {text}")
            continue
        beside = width - indent >= MIN_LISTING
        wrapped = textwrap.wrap(
            text,
            width=max(1, width - (indent if beside else 6)),
            break_long_words=False,
            break_on_hyphens=False,
        )
        if beside:
            lines.append(f"  {row.name:<{indent - 4}}  {wrapped[0]}")
            lines += [" " * indent + line for line in wrapped[1:]]
        else:
            lines += [f"  {row.name}", *("      " + line for line in wrapped)]
    return "\n".join(lines) + "\n"


def description(view: ViewDescription) -> str:
    """`query NAME --describe`: purpose, kind, where it runs, its rules, parameters with defaults, columns."""
    defaults = ", ".join(f"{p.name} := {p.default}" for p in view.params) or "none"
    parameters = [f"Parameters ({defaults}):", *view.parameters] if view.params else ["Parameters: none"]
    return "\n".join(
        [
            f"{view.name} ({view.kind}): {view.purpose}",
            f"On a Dask cluster (--scheduler): {view.on_cluster}",
            *(["Rules:", *view.rules] if view.rules else []),
            *parameters,
            "Columns:",
            *view.columns,
        ]
    )


def say_why_empty(data: Path | None, name: str, runs: list[str] | None) -> None:
    """One line on stderr on what the runs lack that view `name` needs (`tracecore.needs`), if anything."""
    from tracecore.needs import why_empty_dataset
    from tracecore.terminal import safe

    reason = why_empty_dataset(data, name, runs)
    if reason:
        typer.echo(safe(reason), err=True)
