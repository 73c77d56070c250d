"""The terminal table every command prints: a Rich grid fitted to the terminal (`cli/fit.py`).

Why a module: `tracecore sql` prints a small result from DuckDB's own rows, without Arrow, and every
other table comes from an Arrow table; both go through `render_rows`, so they look the same. A view's
table (`layout` given) reads as its header says (`tracecore.columns`): key columns, then the answer,
then the rest; human units; run names shortened to what differs, with a note giving them whole.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from tracecore.cli.fit import fit, wrap_title

if TYPE_CHECKING:
    import pyarrow as pa

    from tracecore.columns import Column, Layout


def render(
    table: pa.Table,
    limit_rows: int | None,
    width: int | None = None,
    layout: Layout | None = None,
    columns: list[str] | None = None,
) -> str:
    """A table for people: Rich grid, `limit_rows` rows at most with a note on what was left out;
    with a terminal `width`, fitted to it (`cli/fit.py`), else whole. `layout`: the view's (column
    order, units, key; None: the columns as they are); `columns`: only these, in this order."""
    import pyarrow as pa

    shown = table if limit_rows is None else table.slice(0, limit_rows)
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    values = [column.to_pylist() for column in shown.columns]  # by position: names may repeat
    return _render(table.schema.names, numeric, values, table.num_rows, width, layout, columns)


def render_rows(
    names: list[str],
    numeric: list[bool],
    values: list[tuple],
    total: int,
    limit_rows: int | None,
    width: int | None = None,
) -> str:
    """`render` of rows of Python values (the first of `total`), `numeric` saying which columns are
    numbers (right-aligned); no layout: `tracecore sql`'s results have no header to read units from."""
    rows = values[:limit_rows]
    by_column = [[row[i] for row in rows] for i in range(len(names))]
    return _render(names, numeric, by_column, total, width, None, None)


def _render(
    names: list[str],
    numeric: list[bool],
    values: list[list],
    total: int,
    width: int | None,
    layout: Layout | None,
    columns: list[str] | None,
) -> str:
    from tracecore.columns import RUN, pick, plain, readable, short_run_column

    order, answer = list(range(len(names))), None  # answer: the leading columns shown before any other
    if columns:
        order = pick(names, columns, "the result")
    elif layout is not None:
        order = layout.order(names)
        answer = len({*layout.key, *layout.headline} & set(names))
    notes: list[str] = []
    if layout is not None and RUN in names and width is not None:  # whole tables keep the names whole
        at = names.index(RUN)
        labels, lines = short_run_column(values[at], keep=bool(columns))
        notes += lines
        if labels is None:  # one run: named below, not on every row
            order.remove(at)
            answer = answer - 1 if answer is not None and RUN in {*layout.key, *layout.headline} else answer
        else:
            values = [*values[:at], labels, *values[at + 1 :]]
    made: list[Column] = []
    for i in order:
        if layout is None:
            made.append(plain(names[i], values[i], numeric[i]))
        else:
            made.append(readable(names[i], layout.units.get(names[i]), values[i], numeric[i]))
    rows = len(values[0]) if values else 0
    return _draw([names[i] for i in order], made, rows, total, width, notes, answer)


def _draw(
    names: list[str],
    made: list[Column],
    rows: int,
    total: int,
    width: int | None,
    notes: list[str],
    answer: int | None = None,
) -> str:
    """The Rich grid of columns `made` (named `names`; the first `answer` the view's answer), fitted
    to `width`, with the notes below it."""
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tracecore.terminal import safe

    titles = [safe(c.title) for c in made]
    cells = [[safe(v) for v in c.cells] for c in made]
    widest = [max((len(v) for v in column), default=0) for column in cells]
    plan = fit([safe(n) for n in names], titles, widest, [c.wraps for c in made], width, answer)
    grid = Table(box=SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True, header_style="bold")
    for k, i in enumerate(plan.shown):
        folds = plan.folds(k)
        grid.add_column(
            Text(wrap_title(titles[i], plan.widths[k])),
            justify="right" if made[i].numeric else "left",
            width=plan.widths[k],
            no_wrap=not folds,
            overflow="fold",
        )
    # Text, safe: values are data (run names, SQL strings), never markup or control codes
    for r in range(rows):
        grid.add_row(*(Text(cells[i][r]) for i in plan.shown))
    buf = io.StringIO()
    Console(file=buf, width=plan.line_width() + 1, force_terminal=False, color_system=None).print(grid)
    text = "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"
    notes += [made[i].note for i in plan.shown if made[i].note]  # of the columns shown
    foot = [plan.note(), *dict.fromkeys(notes)]  # each line safe: names were made so where they came in
    if rows < total:
        foot.append(f"… {total - rows} more rows of {total}; use --limit, --format csv or --out for all")
    else:
        foot.append(f"{total} row{'s' if total != 1 else ''}")
    return text + "".join(_wrapped(safe(line), width) for note in foot if note for line in note.split("\n"))


def _wrapped(line: str, width: int | None) -> str:
    """A foot line, wrapped at its words to `width` (None: whole), the rest indented; ends in a newline."""
    import textwrap

    if width is None or len(line) <= width:
        return line + "\n"
    lines = textwrap.wrap(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) + "\n"
