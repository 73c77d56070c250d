"""`tracecore explain`: the findings of each run, ranked by the time they cost.

Thin: parse options, call `tracecore.explain.explain`, print the findings as text, Markdown or the
view's rows (JSON, CSV, Parquet through `cli.output`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.options import Dataset, Out, Runs

ExplainFormat = StrEnum("ExplainFormat", ["table", "markdown", "json", "csv", "parquet"])


def register(app: typer.Typer) -> None:
    app.command("explain", cls=PlainUsage)(explain)


@boundary
def explain(
    run: Runs = None,
    fmt: Annotated[
        ExplainFormat,
        typer.Option("--format", "-f", help="table: the findings as lines per run; markdown; or the rows."),
    ] = ExplainFormat.table,
    out: Out = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="A threshold as KEY=VALUE (repeat), e.g. min_share=0.1; see "
            "`tracecore query findings --describe`.",
            show_default="the view's own",
        ),
    ] = None,
    data: Dataset = None,
) -> None:
    """Say what slowed each run: stragglers, slow links, loss, exposed communication, with evidence.

    Each finding is one line (the claim with its numbers), ranked by the time it cost, then the
    `tracecore query …` that shows the rows behind it. The same findings are the `findings` view;
    the verdict on each collective is `collective_verdicts`.

    \b
    Examples:
      $ tracecore explain
      $ tracecore explain --run RUN --format markdown --out findings.md
      $ tracecore explain -p min_share=0.1 --format json
    """
    from tracecore.cli.destination import sink, tell_written
    from tracecore.cli.fit import terminal_width
    from tracecore.cli.output import Format, write_batches
    from tracecore.explain import as_markdown, as_text
    from tracecore.explain import explain as find
    from tracecore.query import request_params

    params = request_params("findings", param or [])
    found = find(data, runs=run, params=params)
    if fmt is ExplainFormat.table:
        with sink(out) as text:
            text.write(as_text(found, terminal_width(out)))
    elif fmt is ExplainFormat.markdown:
        with sink(out) as text:
            text.write(as_markdown(found))
    else:
        table = found.findings
        write_batches(table.schema, table.to_batches(), Format[fmt.value], out)
    tell_written(found.findings.num_rows, out)
