"""Terminal tables that fit the terminal: titles wrap at an underscore, free text wraps at its
words, then the columns that still do not fit are left out from the right, with a note naming them.

Why its own module: `cli/output.py` renders every table; deciding what fits a given width is a
separate question with its own tests, asked only when the table goes to a terminal; other output
stays whole, one line per row, for grep and scripts. A number, an address or a name never wraps: it
is shown whole or its column is left out.
"""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass

SEP = 2  # spaces between two columns
MIN_TEXT = 12  # free text is wrapped no narrower than this


@dataclass(frozen=True)
class Fit:
    """Which columns to show and how wide: `widths[k]` for column `shown[k]`; `left_out` names the rest
    (by their `names`); `cells[i]` is column i's widest cell."""

    shown: list[int]
    widths: list[int]
    left_out: list[str]
    cells: list[int]

    def folds(self, k: int) -> bool:
        """Whether the k-th shown column is narrower than its widest cell: free text, or a lone column."""
        return self.widths[k] < self.cells[self.shown[k]]

    def line_width(self) -> int:
        return sum(self.widths) + SEP * (len(self.widths) - 1)

    def note(self) -> str:
        if not self.left_out:
            return ""
        n = len(self.left_out)
        return (
            f"{n} column{'s' if n != 1 else ''} not shown to fit the terminal: {', '.join(self.left_out)}; "
            "--wide or --columns shows them, as do --format csv and --out"
        )


def terminal_width(out: object = None) -> int | None:
    """The terminal's width when the table goes to standard output (`out` None) and that is a
    terminal (COLUMNS, when set, says how wide), else None (the table is then left whole). Why not
    COLUMNS alone: GNU readline exports it in any process that loads it, so a piped table would be
    cut to whatever width some parent once had."""
    if out is not None or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def title_pieces(title: str) -> list[str]:
    """A title split after each underscore: where it may wrap (`src_`, `worker`)."""
    return re.findall(r"[^_]*_|[^_]+$", title)


def title_floor(title: str) -> int:
    """The narrowest a title gets: wrapped at its underscores onto two lines at most."""
    pieces = title_pieces(title)
    if len(pieces) < 2:
        return len(title)
    return min(max(len("".join(pieces[:k])), len("".join(pieces[k:]))) for k in range(1, len(pieces)))


def wrap_title(title: str, width: int) -> str:
    """`title` on as few lines of at most `width` as its underscores allow (a longer piece stays whole)."""
    lines: list[str] = []
    for piece in title_pieces(title):
        if lines and len(lines[-1]) + len(piece) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def fit(
    names: list[str],
    titles: list[str],
    cells: list[int],
    wraps: list[bool],
    width: int | None,
    answer: int | None = None,
) -> Fit:
    """The columns of a table that fit `width` (None: all, whole). `titles[i]` is column i's title,
    `cells[i]` its widest cell, `wraps[i]` whether it is free text; the first `answer` columns (None:
    all) are the answer, the rest extras. The answer's rightmost columns are left out until the rest
    fit at their narrowest (a title wrapped onto two lines at underscores, free text at MIN_TEXT);
    extras follow, left to right, while they fit beside it with their titles whole. Then titles wrap,
    those that save the most first, then the widest free text, only as much as needed. The first
    column always stays."""
    full = [max(len(t), c) for t, c in zip(titles, cells, strict=True)]
    if width is None:
        return Fit(list(range(len(names))), full, [], cells)
    answer = len(names) if answer is None else max(1, min(answer, len(names)))
    titled = [max(c, title_floor(t)) for t, c in zip(titles, cells, strict=True)]
    floor = [
        (max(min(c, MIN_TEXT), title_floor(t)) if wraps[i] else titled[i])
        if i < answer
        else (max(min(c, MIN_TEXT), len(t)) if wraps[i] else full[i])  # an extra's title stays whole
        for i, (t, c) in enumerate(zip(titles, cells, strict=True))
    ]
    floor = [min(f, w) for f, w in zip(floor, full, strict=True)]

    def total(widths: dict[int, int]) -> int:
        return sum(widths.values()) + SEP * (len(widths) - 1)

    shown = list(range(answer))
    while len(shown) > 1 and total({i: floor[i] for i in shown}) > width:
        shown.pop()
    need = _narrowed({i: full[i] for i in shown}, titled, floor, wraps, width, total)
    for i in range(answer, len(names)) if len(shown) == answer else ():
        if total({**need, i: floor[i]}) > width:
            break
        need[i] = floor[i]
        shown.append(i)
    widths = _narrowed({i: full[i] for i in shown}, titled, floor, wraps, width, total)
    if total(widths) > width:  # a terminal narrower than the first column: it folds
        widths[shown[0]] = max(1, width)
    left_out = [names[i] for i in range(len(names)) if i not in shown]
    return Fit(shown, [widths[i] for i in shown], left_out, cells)


def _narrowed(
    widths: dict[int, int], titled: list[int], floor: list[int], wraps: list[bool], width: int, total
) -> dict:
    """`widths` made to fit `width` as far as they can: titles wrap (the biggest saving first), then
    the widest free text, each only as much as needed."""
    whole = dict(widths)
    by_saving = sorted(widths, key=lambda c: whole[c] - max(titled[c], floor[c]), reverse=True)
    for i in by_saving:  # a wrapped title takes its two lines' width: a narrower one saves nothing more
        if total(widths) <= width:
            break
        widths[i] = min(whole[i], max(titled[i], floor[i]))
    for i in reversed(by_saving):  # titles the others' savings left room for are whole again
        if widths[i] < whole[i] and total(widths) + whole[i] - widths[i] <= width:
            widths[i] = whole[i]
    while total(widths) > width:
        give = [i for i in widths if wraps[i] and widths[i] > floor[i]]
        if not give:
            break
        i = max(give, key=lambda c: widths[c])
        widths[i] = max(floor[i], widths[i] - (total(widths) - width))
    return widths
