"""`write_report(data_dir, out_dir, runs)`: one self-contained HTML page with every figure and table.

Self-contained means it opens from a file:// URL with the network off: Vega, Vega-Lite and
vega-embed come inline from vl-convert's bundle (the same versions that render PNG/SVG), the
chart specs carry their data inline, and there is no CDN, font or image fetch. Charts are drawn
in the browser (SVG renderer, tooltips kept); the page records how many were drawn in
<body data-charts-drawn=…> so a headless check can tell a blank chart from a drawn one.

The page, top to bottom: the runs, the sections of `LEADING` (the findings go first), then
`SECTIONS`: GPU training (where the runs have profiler traces or NCCL's logs), the paper's figures,
tracecore's own, the run comparison (two runs or more), and the tables.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from tracecore.report_findings import Leading, findings_section
from tracecore.report_tables import GPU_TABLES, RUN_COLUMNS, TABLES, Table, html_table, table_rows
from tracecore.version import __version__

if TYPE_CHECKING:
    import duckdb

    from tracecore.figures.registry import Figure

REPORT_NAME = "index.html"
Runs = list[str] | None
Progress = Callable[[int, int, str], None]  # (steps done, steps in all, what is being done)


@dataclass(frozen=True)
class Section:
    """A part of the page under one heading: the figures `figures` picks, then its tables."""

    id: str
    heading: str
    figures: Callable[[Figure], bool]
    tables: tuple[Table, ...] = ()
    intro: str = ""
    # views its figures read whole (no parameters), started with its tables when one of them is shown:
    # before the figures' modules are imported, so the costliest scans overlap that import
    reads: tuple[str, ...] = ()


GPU_FIGURES = ("step_breakdown", "collective_timeline")
SECTIONS = (  # the report's order
    Section(
        "gpu",
        "GPU training: steps, collectives, stragglers, TCP health, NCCL topology",
        lambda fig: fig.name in GPU_FIGURES,
        GPU_TABLES,
        "From the runs' PyTorch profiler traces, NCCL's profiler plugins and INFO logs, beside their "
        "captures: shown for the runs that have them.",
        reads=("collective_wire", "collective_calls"),  # the collective timeline's
    ),
    Section("paper", "Figures of the paper", lambda fig: bool(fig.ref)),
    Section(
        "more",
        "More figures",
        lambda fig: not fig.ref and not fig.name.startswith("runs_") and fig.name not in GPU_FIGURES,
    ),
    Section("compare", "Run comparison", lambda fig: fig.name.startswith("runs_")),
    Section("tables", "Tables", lambda fig: False, TABLES),
)


# Sections above the figures, in order, each built by a function of (catalog, runs, short run labels)
# that returns a `Leading`, or None when it has nothing to say for these runs: the findings of
# `tracecore explain` first.
Builds = Callable[["duckdb.DuckDBPyConnection", Runs, dict[str, str]], "Leading | None"]
LEADING: list[Builds] = [findings_section]


def write_report(
    data_dir: Path | str, out_dir: Path | str, runs: list[str] | None = None, progress: Progress | None = None
) -> Path:
    """Write OUT_DIR/index.html for `runs` (None = every run) of the dataset at `data_dir`.

    Returns the page's path. Unknown runs raise UsageError before anything is written. `progress`,
    when given, is called before each figure and table with (done, total, name).
    """
    from tracecore.ingest import open_catalog

    con = open_catalog(Path(data_dir), read_only=True)
    try:
        page = render_report(con, runs, source=str(Path(data_dir)), progress=progress)
    finally:
        con.close()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_NAME
    tmp = path.with_name(f".{REPORT_NAME}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return path


def render_report(
    con: duckdb.DuckDBPyConnection, runs: list[str] | None, source: str = "", progress: Progress | None = None
) -> str:
    """The whole page as a string; figures reading the same view share one result (`shared_views`)."""
    from tracecore.figures._views import shared_views
    from tracecore.query import check_runs

    runs = check_runs(con, runs)
    with shared_views():
        return _page(con, runs, source, progress)


def _page(con: duckdb.DuckDBPyConnection, runs: Runs, source: str, progress: Progress | None) -> str:
    from tracecore.figures._views import run_view
    from tracecore.figures.style import short_runs

    summary = run_view(con, "run_summary", runs=runs)
    names = summary.column("run").to_pylist()
    labels = short_runs(names)
    tables = {section.id: [t for t in section.tables if _shown(t, con, runs)] for section in SECTIONS}
    results: dict[str, Any] = {}
    with _Builder(con) as builder:
        # the tables' views first: they need no Altair, which this thread imports meanwhile
        for section in SECTIONS:
            for view in section.reads if tables[section.id] else ():
                builder.submit(f"read-{view}", _table_job(view, runs, params=False))
            for table in tables[section.id]:
                builder.submit(f"table-{table.view}", _table_job(table.view, runs))
        from tracecore import figures

        shown = [
            fig
            for fig in (figures.get(n) for n in figures.figure_names())
            if fig.shown_when is None or fig.shown_when(con, runs)
        ]
        layout = [
            (section, [f for f in shown if section.figures(f)], tables[section.id]) for section in SECTIONS
        ]
        layout = [part for part in layout if part[1] or part[2]]
        for fig in (f for _, figs, _ in layout for f in figs):
            builder.submit(fig.name, _figure_job(fig.name, runs))
        order = [  # (job, what progress calls it), in the page's order
            step
            for _, figs, shown_tables in layout
            for step in (
                *((f.name, f.name) for f in figs),
                *((f"table-{t.view}", t.view) for t in shown_tables),
            )
        ]
        leading = [part for part in (make(con, runs, labels) for make in LEADING) if part is not None]
        for done, (key, name) in enumerate(order):
            if progress:
                progress(done, len(order), name)
            results[key] = builder.result(key)
    import vl_convert as vlc

    from tracecore.figures import render

    specs: dict[str, Any] = {}
    csv_paths: dict[str, Any] = {}
    nav = [
        '<a href="#runs">Runs</a>',
        *(f'<a href="#{part.id}">{html.escape(part.nav)}</a>' for part in leading),
    ]
    body = [part.html for part in leading]
    for section, figs, tables in layout:
        body.append(f'<h2 class="group" id="{section.id}">{html.escape(section.heading)}</h2>')
        if section.intro:
            body.append(f'<p class="intro">{html.escape(section.intro)}</p>')
        links = []
        for fig in figs:
            chart_id = f"fig-{fig.name}"
            specs[chart_id] = results[fig.name]
            csv_paths[chart_id] = render.data_paths(specs[chart_id])
            body.append(_figure_html(fig, chart_id))
            links.append(f'<a href="#{fig.name}">{html.escape(fig.ref or fig.name.replace("_", " "))}</a>')
        for table in tables:
            body.append(_table_html(table, results[f"table-{table.view}"], labels))
            links.append(f'<a href="#table-{table.view}">{html.escape(table.heading)}</a>')
        nav.append(f'<span class="navgroup"><b>{html.escape(section.heading)}:</b> {" ".join(links)}</span>')
    if progress:
        progress(len(order), len(order), "page")
    title = "tracecore report"
    subtitle = f"{len(names)} run{'s' if len(names) != 1 else ''}: {', '.join(names)}"
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    footer = (
        f"tracecore {__version__} · dataset {html.escape(source)} · generated {stamp} · "
        f"Vega {vlc.get_vega_version()}, vega-embed {vlc.get_vega_embed_version()} inlined (works offline)"
    )
    template = Template(
        resources.files("tracecore").joinpath("report_template.html").read_text(encoding="utf-8")
    )
    return template.substitute(
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        nav="".join(nav),
        runs_table=html_table(summary, [c for c in RUN_COLUMNS if c in summary.column_names], labels),
        sections="\n".join(body),
        footer=footer,
        specs=render.script_json(specs),
        csv_paths=render.script_json(csv_paths),
        vega_bundle=render.script_safe(render.vega_bundle()),
    )


def _shown(table: Table, con: duckdb.DuckDBPyConnection, runs: Runs) -> bool:
    return table.shown_when is None or table.shown_when(con, runs)


def _figure_job(name: str, runs: Runs) -> Callable[[duckdb.DuckDBPyConnection], Any]:
    def build(cursor: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        from tracecore import figures
        from tracecore.figures import render

        return render.spec(figures.build(cursor, name, runs))

    return build


def _table_job(view: str, runs: Runs, params: bool = True) -> Callable[[duckdb.DuckDBPyConnection], Any]:
    """A view's result for `runs`, with the parameters the figures give it (or none), kept for them."""

    def read(cursor: duckdb.DuckDBPyConnection) -> Any:
        from tracecore.figures._views import run_view
        from tracecore.figures.options import FigureOptions
        from tracecore.views import view_params

        declared = [p.name for p in view_params(view)] if params else []
        return run_view(cursor, view, runs=runs, params=FigureOptions().view_params(declared) or None)

    return read


def _figure_html(fig: Figure, chart_id: str) -> str:
    ref = f' <span class="ref">paper: {html.escape(fig.ref)}</span>' if fig.ref else ""
    return (
        f'<section id="{fig.name}"><h3>{html.escape(fig.purpose)}{ref}</h3>'
        f'<div class="chart" id="{chart_id}"></div>'
        f'<p class="tools">{_downloads(chart_id, fig.name)}'
        f"<span>Redraw: <code>tracecore figure {fig.name}</code> (options: --help)</span></p>"
        "</section>"
    )


def _table_html(table: Table, result: Any, labels: dict[str, str]) -> str:
    from tracecore.figures.confidence import method_text

    caption = table.caption
    if "{method}" in caption:
        method = result.column("ci_method")[0].as_py() if result.num_rows else "t"
        caption = caption.format(method=method_text(method))
    shown, note = table_rows(table, result)
    caption = f"{caption} {note}" if note else caption
    return (
        f'<section id="table-{table.view}"><h3>{html.escape(table.heading)}</h3>'
        f'<p class="purpose">{html.escape(caption)}</p>'
        f'<div class="scroll">{html_table(shown, table.columns, labels)}</div>'
        f'<p class="tools"><span>Data: <code>tracecore query {table.view} --format csv</code></span></p>'
        "</section>"
    )


class _Builder:
    """The report's figures and table views, built on two threads as they are submitted, each thread
    with its own cursor on the catalog.

    Why threads: a report spends most of its time in DuckDB, which releases the GIL, and the rest
    building charts in Python; two builds at a time overlap the two. Results are taken in the page's
    order; on an error or Ctrl-C the jobs not started are dropped, not built first.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.pending: dict[str, Any] = {}
        self.cursors: list[duckdb.DuckDBPyConnection] = []

    def __enter__(self) -> _Builder:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        from tracecore.ingest.catalog import ROOT_VARIABLE

        # every row fetched: the connection serves this thread's next query (a result left open by
        # fetchone is refused then: "connection has an unfinished result")
        self.database = self.con.execute("SELECT current_database()").fetchall()[0][0]
        self.root = self.con.execute("SELECT getvariable(?)", [ROOT_VARIABLE]).fetchall()[0][0]
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(2, thread_name_prefix="report")
        return self

    def submit(self, key: str, job: Callable[[duckdb.DuckDBPyConnection], Any]) -> None:
        import contextvars

        # each task in its own copy of this context: the views shared_views keeps reach it
        self.pending[key] = self.pool.submit(contextvars.copy_context().run, self._run, job)

    def _run(self, job: Callable[[duckdb.DuckDBPyConnection], Any]) -> Any:
        if not hasattr(self.local, "con"):  # a DuckDB connection serves one thread at a time
            from tracecore.ingest.catalog import cursor as catalog_cursor

            self.local.con = catalog_cursor(self.con, self.root)  # with the dataset's root: views read it
            self.local.con.execute(f'USE "{self.database.replace(chr(34), chr(34) * 2)}"')
            self.cursors.append(self.local.con)
        return job(self.local.con)

    def result(self, key: str) -> Any:
        return self.pending[key].result()

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        for cursor in self.cursors:
            cursor.close()


def _downloads(chart_id: str, name: str) -> str:
    """Buttons that save the drawn chart as PNG or SVG and its data as CSV, made in the browser."""
    return "".join(
        f'<button type="button" data-chart="{chart_id}" data-kind="{kind}" data-name="{name}">'
        f"{kind.upper()}</button>"
        for kind in ("png", "svg", "csv")
    )
