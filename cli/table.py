"""The terminal table every command prints: a Rich grid fitted to the terminal (`cli/fit.py`).

Why a module: `tracecore sql` prints a small result from DuckDB's own rows, without Arrow, and every
other table comes from an Arrow table; both go through `render_rows`, so they look the same.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from tracecore.cli.fit import fit
from tracecore.json_values import interval_text, is_interval

if TYPE_CHECKING:
    import pyarrow as pa


def render(table: pa.Table, limit_rows: int | None, width: int | None = None) -> str:
    """A table for people: Rich grid, `limit_rows` rows at most with a note on what was left out;
    with a terminal `width`, fitted to it (`cli/fit.py`), else whole."""
    import pyarrow as pa

    shown = table if limit_rows is None else table.slice(0, limit_rows)
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in table.schema]
    columns = [column.to_pylist() for column in shown.columns]  # by position: names may repeat
    rows = list(zip(*columns, strict=True)) if columns else [()] * shown.num_rows
    return render_rows(table.schema.names, numeric, rows, table.num_rows, limit_rows, width)


def render_rows(
    names: list[str],
    numeric: list[bool],
    values: list[tuple],
    total: int,
    limit_rows: int | None,
    width: int | None = None,
) -> str:
    """`render` of rows of Python values (the first of `total`), `numeric` saying which columns are
    numbers (right-aligned)."""
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tracecore.terminal import safe

    rows = [[safe(_cell(v)) for v in row] for row in values[:limit_rows]]
    names = [safe(name) for name in names]
    widths = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(names)]
    plan = fit(names, widths, [not n for n in numeric], width)  # width None: whole, for pipes and files
    grid = Table(box=SIMPLE_HEAD, header_style="bold", pad_edge=False)
    for k, i in enumerate(plan.shown):
        grid.add_column(Text(names[i]), justify="right" if numeric[i] else "left", **plan.column(k))
    for row in rows:  # Text, safe: values are data (run names, SQL strings), never markup or control codes
        grid.add_row(*(Text(row[i]) for i in plan.shown))
    buf = io.StringIO()
    Console(file=buf, width=plan.console_width(), force_terminal=False, color_system=None).print(grid)
    text = buf.getvalue() + plan.note()
    if len(rows) < total:
        text += f"… {total - len(rows)} more rows of {total}; use --limit, --format csv or --out for all\n"
    else:
        text += f"{total} row{'s' if total != 1 else ''}\n"
    return text


def _cell(value: object) -> str:
    """Floats to 6 decimals as papers print them (0.054068, 111.5), tiny or huge ones to 6 digits."""
    if not isinstance(value, float):
        return "NULL" if value is None else interval_text(value) if is_interval(value) else str(value)
    return f"{value:.6f}".rstrip("0").rstrip(".") if 1e-3 <= abs(value) < 1e12 else f"{value:.6g}"
