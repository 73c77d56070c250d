"""The range of each view parameter, read from its line in the view's `Parameters:` header, and the check
of a value against it.

Why in the header: the line that says what a parameter means says what values it takes, so `query
--describe` shows the same range the check enforces. The notation is an interval at the end of the
parameter's entry, `range (0, 1]` or `range [1, ∞), a whole number`; a parameter documented in several
views (`from_ns`, `idle_ns`, the verdicts' thresholds) needs its range written once, in any of them.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any

from tracecore import views
from tracecore.errors import UsageError

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"\brange ([\[(])\s*({_NUMBER}|-∞)\s*,\s*({_NUMBER}|∞)\s*([\])])(, a whole number)?")
_ENTRY = re.compile(r"^(\s*)([a-z_]\w*(?:,\s*[a-z_]\w*)*)(?:\s+|$)")


@dataclass(frozen=True)
class ParamRange:
    """The values a parameter takes: an interval, its ends open or closed, and whether whole numbers only."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool
    whole: bool = False

    def holds(self, value: float) -> bool:
        if not math.isfinite(value) or (self.whole and value != int(value)):
            return False
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def __str__(self) -> str:
        low = "-∞" if self.low == -math.inf else f"{self.low:g}"
        high = "∞" if self.high == math.inf else f"{self.high:g}"
        text = f"{'[' if self.low_closed else '('}{low}, {high}{']' if self.high_closed else ')'}"
        return text + (", a whole number" if self.whole else "")


def parse_range(text: str) -> ParamRange | None:
    """The `range …` written in a parameter's entry; None when it has none."""
    match = _RANGE.search(text)
    if match is None:
        return None
    opening, low, high, closing, whole = match.groups()
    return ParamRange(
        low=-math.inf if low == "-∞" else float(low),
        high=math.inf if high == "∞" else float(high),
        low_closed=opening == "[",
        high_closed=closing == "]",
        whole=whole is not None,
    )


def documented_ranges(name: str) -> dict[str, ParamRange]:
    """Each parameter of view `name` whose entry in the `Parameters:` section writes a range."""
    lines = [line for line in views.view_header_section(name, "Parameters") if line[:1].isspace()]
    indent = min((len(line) - len(line.lstrip()) for line in lines), default=0)  # an entry's first line
    entries: dict[str, list[str]] = {}
    names: list[str] = []
    for line in lines:
        match = _ENTRY.match(line)
        if match and len(match.group(1)) == indent:
            names = [n.strip() for n in match.group(2).split(",")]
            for n in names:
                entries[n] = [line[match.end() :]]
        else:
            for n in names:
                entries[n].append(line)
    ranges = {n: parse_range(" ".join(part.strip() for part in text)) for n, text in entries.items()}
    return {n: r for n, r in ranges.items() if r is not None}


@functools.cache
def param_range(view: str, param: str) -> ParamRange | None:
    """The range of `param` as view `view` writes it, else as the first other view that writes one."""
    own = documented_ranges(view).get(param)
    if own is not None:
        return own
    return next(
        (r for other in views.view_names() if (r := documented_ranges(other).get(param)) is not None), None
    )


def check_value(view: str, param: str, value: Any) -> None:
    """A number (or each number of a list) given for `param` lies in its documented range (UsageError)."""
    items = value if isinstance(value, list) else [value]
    numbers = [v for v in items if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers:
        return
    allowed = param_range(view, param)
    for number in numbers:
        if not math.isfinite(number) or (allowed is not None and not allowed.holds(number)):
            where = f"a value in {allowed}" if allowed is not None else "a finite number"
            raise UsageError(f"parameter {param} of {view} takes {where}, got {number!r}")
