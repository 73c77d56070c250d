"""Result tables print data as data: brackets in values or column names are not Rich markup."""

from __future__ import annotations

import pyarrow as pa

from tracecore.cli.output import render


def test_brackets_in_values_and_names_print_as_typed() -> None:
    table = pa.table({"[bold]run": ["a[red]b[/]c", "[link=http://x]y"], "n": [1, 2]})
    text = render(table, None)
    assert "[bold]run" in text
    assert "a[red]b[/]c" in text
    assert "[link=http://x]y" in text
    assert text.endswith("2 rows\n")
