"""Terminal tables that fit the terminal: long text columns wrap, then columns that still do not fit
are left out with a note naming them.

Why its own module: `cli/output.py` renders every table; deciding what fits a given width is a
separate question with its own tests, asked only when the table goes to a terminal (piped or
written output stays whole, one line per row, for grep and scripts).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass

GAP = 3  # a column's cell takes its width plus a space each side and a separator; the line one less
MIN_TEXT = 12  # a text column is wrapped no narrower than this


@dataclass(frozen=True)
class Fit:
    """Which columns to show and how wide: `widths[k]` for column `shown[k]`, whose widest cell is
    `full[shown[k]]`; `left_out` names the rest."""

    shown: list[int]
    widths: list[int]
    left_out: list[str]
    full: list[int]

    def column(self, k: int) -> dict:
        """Rich's column options for the k-th shown column: wrapped (folded) when made narrower."""
        wraps = self.widths[k] < self.full[self.shown[k]]
        return {
            "no_wrap": not wraps,
            "overflow": "fold" if wraps else "ellipsis",
            "max_width": self.widths[k] if wraps else None,
        }

    def console_width(self) -> int:
        """A console wide enough that no shown column is cut."""
        return sum(self.widths) + GAP * len(self.widths) + 2

    def note(self) -> str:
        if not self.left_out:
            return ""
        n = len(self.left_out)
        return (
            f"{n} column{'s' if n != 1 else ''} not shown to fit the terminal: {', '.join(self.left_out)}; "
            "a wider terminal, --format csv or --out shows them\n"
        )


def terminal_width(out: object = None) -> int | None:
    """The terminal's width when the table goes to standard output (`out` None) and that is a
    terminal, else None (the table is then left whole)."""
    if out is not None or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def fit(names: list[str], widths: list[int], text: list[bool], width: int | None) -> Fit:
    """The columns of a table (`widths`: each column's widest cell or header; `text`: not a number)
    that fit `width` (None: all, whole): the widest text columns wrap first, down to MIN_TEXT (or
    their header), then columns are left out from the right; the first column always stays."""
    full, widths = list(widths), list(widths)
    if width is None:
        return Fit(list(range(len(names))), widths, [], full)

    def total(cols: list[int]) -> int:
        return sum(widths[i] for i in cols) + GAP * len(cols) - 1

    shown = list(range(len(names)))
    floor = [max(MIN_TEXT, len(names[i])) if text[i] else widths[i] for i in shown]
    while total(shown) > width:  # wrap: narrow the widest text column that can still give
        give = [i for i in shown if widths[i] > floor[i]]
        if not give:
            break
        i = max(give, key=lambda c: widths[c])
        widths[i] = max(floor[i], widths[i] - (total(shown) - width))
    while total(shown) > width and len(shown) > 1:
        shown.pop()
    if total(shown) > width and text[0]:  # a very narrow terminal: the first column wraps narrower
        widths[0] = max(1, width - GAP + 1)
    return Fit(
        shown, [widths[i] for i in shown], [names[i] for i in range(len(names)) if i not in shown], full
    )
