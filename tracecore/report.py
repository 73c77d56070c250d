"""`write_report(data_dir, out_dir, runs)`: one self-contained HTML page with every figure and table.

Self-contained means it opens from a file:// URL with the network off: Vega, Vega-Lite and
vega-embed come inline from vl-convert's bundle (the same versions that render PNG/SVG), the
chart specs carry their data inline, and there is no CDN, font or image fetch. Charts are drawn
in the browser (SVG renderer, tooltips kept); the page records how many were drawn in
<body data-charts-drawn=…> so a headless check can tell a blank chart from a drawn one.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from tracecore.version import __version__

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

REPORT_NAME = "index.html"

# tables shown under the figures: (view, heading, caption, columns)
TABLES: list[tuple[str, str, str, list[str]]] = [
    (
        "throughput_ci",
        "Throughput with 95% confidence interval",
        "All traffic of each run in one-second samples over the whole run (complete seconds only); "
        "{method}, lower bounds clipped at 0 Gbit/s. The paper's Table I took seconds 200–300.",
        ["run", "from_s", "to_s", "n", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    (
        "link_util_ci",
        "Link throughput with 95% confidence interval",
        "Each directed worker link in one-second windows; {method}, lower bounds clipped at 0 Gbit/s. "
        "The paper's Table II took W1→W2 from 90 s to 120 s.",
        ["run", "src_worker", "dst_worker", "windows", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    (
        "data_per_step",
        "Data per training step",
        "Bytes between the first and last logged step, per step; each rank's payload against the "
        "ring all-reduce's 2(N−1)/N × gradient bytes (the input of the paper's Sec. VI model).",
        [
            "run",
            "n_workers",
            "steps",
            "step_s",
            "mb_per_step",
            "rank_payload_per_step",
            "expected_rank_bytes",
            "payload_ratio",
        ],
    ),
    (
        "flow_counts",
        "Flows per run",
        "The paper's directed 4-tuple count next to 5-tuple, bidirectional connection, host-pair and"
        " RDMA queue-pair counts.",
        ["run", "definition", "flows"],
    ),
]

# shown only when a selected run has RoCE packets (figures.registry.has_rdma), after the figure rdma_ops
RDMA_TABLE = (
    "rdma_flows",
    "RDMA queue-pair flows",
    "Per run and directed (source, destination, destination QP): packets, frame and message bytes, "
    "operation mix, PSN gaps/repeats/rewinds, NAKs, ECN-CE marks and CNPs; the source QP from the "
    "paired direction (same UDP source port) or UD's DETH.",
    [
        "run", "src_worker", "dst_worker", "src_ip", "dst_ip", "dest_qp", "src_qp", "transport", "packets",
        "bytes", "message_bytes", "writes", "sends", "read_requests", "read_responses", "atomics", "acks",
        "cnps", "naks", "ecn_ce", "psn_gaps", "psn_repeats", "psn_rewinds",
    ],
)  # fmt: skip
QP_COLUMNS = ("dest_qp", "src_qp")  # shown in hex, as tshark and `tracecore read` write them

RUN_COLUMNS = [
    "run", "framework", "model", "optimizer", "batch_size", "backend", "loss_pct", "topology",
    "workers", "packets", "bytes", "duration_s", "log_steps", "grad_bytes",
]  # fmt: skip

# column headings people read (units in brackets); a column not named here keeps its view name
HEADINGS = {
    "run": "Run", "framework": "Framework", "model": "Model", "optimizer": "Optimizer",
    "batch_size": "Batch", "backend": "Backend", "loss_pct": "Loss [%]", "topology": "Topology",
    "workers": "Workers", "n_workers": "Workers", "packets": "Packets", "bytes": "Bytes",
    "duration_s": "Duration [s]", "log_steps": "Logged steps", "grad_bytes": "Gradient [B]",
    "from_s": "From [s]", "to_s": "To [s]", "n": "Samples", "windows": "Windows",
    "mean_gbps": "Mean [Gbit/s]", "ci_low_gbps": "95% CI low [Gbit/s]",
    "ci_high_gbps": "95% CI high [Gbit/s]",
    "src_worker": "Sender", "dst_worker": "Receiver", "steps": "Steps", "step_s": "Step [s]",
    "mb_per_step": "Data per step [MB]", "rank_payload_per_step": "Payload per rank per step [B]",
    "expected_rank_bytes": "2(N−1)/N × gradient [B]", "payload_ratio": "Measured / expected",
    "definition": "Flow definition", "flows": "Flows", "src_ip": "Source IP", "dst_ip": "Destination IP",
    "dest_qp": "Destination QP", "src_qp": "Source QP", "transport": "Transport",
    "message_bytes": "Message bytes",
}  # fmt: skip

SECTIONS = (  # (id, heading, which figures): the report's order
    ("paper", "Figures of the paper", lambda fig: bool(fig.ref)),
    ("more", "More figures", lambda fig: not fig.ref and not fig.name.startswith("runs_")),
    ("compare", "Run comparison", lambda fig: fig.name.startswith("runs_")),
)

Progress = Callable[[int, int, str], None]  # (steps done, steps in all, what is being done)


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


def _page(
    con: duckdb.DuckDBPyConnection, runs: list[str] | None, source: str, progress: Progress | None
) -> str:
    import vl_convert as vlc

    from tracecore import figures
    from tracecore.figures import render
    from tracecore.figures._views import run_view
    from tracecore.figures.confidence import method_text
    from tracecore.figures.options import FigureOptions
    from tracecore.figures.registry import has_rdma
    from tracecore.figures.style import short_runs
    from tracecore.views import view_params

    summary = run_view(con, "run_summary", runs=runs)
    names = summary.column("run").to_pylist()
    labels = short_runs(names)
    shown = [
        fig
        for fig in (figures.get(n) for n in figures.figure_names())
        if fig.shown_when is None or fig.shown_when(con, runs)
    ]
    tables = [*TABLES, *([RDMA_TABLE] if has_rdma(con, runs) else [])]
    total, done = len(shown) + len(tables), 0
    specs: dict[str, Any] = _build_specs(con, [fig.name for fig in shown], runs, progress, total)
    csv_paths: dict[str, Any] = {}
    sections, nav = [], ['<a href="#runs">Runs</a>']
    for section_id, section_heading, belongs in SECTIONS:
        members = [fig for fig in shown if belongs(fig)]
        if not members:
            continue
        sections.append(f'<h2 class="group" id="{section_id}">{html.escape(section_heading)}</h2>')
        links = []
        for fig in members:
            done += 1
            chart_id = f"fig-{fig.name}"
            csv_paths[chart_id] = render.data_paths(specs[chart_id])
            ref = f' <span class="ref">paper: {html.escape(fig.ref)}</span>' if fig.ref else ""
            sections.append(
                f'<section id="{fig.name}"><h3>{html.escape(fig.purpose)}{ref}</h3>'
                f'<div class="chart" id="{chart_id}"></div>'
                f'<p class="tools">{_downloads(chart_id, fig.name)}'
                f"<span>Redraw: <code>tracecore figure {fig.name}</code> (options: --help)</span></p>"
                "</section>"
            )
            links.append(f'<a href="#{fig.name}">{html.escape(fig.ref or fig.name.replace("_", " "))}</a>')
        nav.append(f'<span class="navgroup"><b>{html.escape(section_heading)}:</b> {" ".join(links)}</span>')
    sections.append('<h2 class="group" id="tables">Tables</h2>')
    table_links = []
    for view, heading, caption, columns in tables:
        if progress:
            progress(done, total, view)
        done += 1
        params = FigureOptions().view_params([p.name for p in view_params(view)])  # as the figures ask
        table = run_view(con, view, runs=runs, params=params)
        if "{method}" in caption:
            method = table.column("ci_method")[0].as_py() if table.num_rows else "t"
            caption = caption.format(method=method_text(method))
        sections.append(
            f'<section id="table-{view}"><h3>{html.escape(heading)}</h3>'
            f'<p class="purpose">{html.escape(caption)}</p>'
            f'<div class="scroll">{html_table(table, columns, labels)}</div>'
            f'<p class="tools"><span>Data: <code>tracecore query {view} --format csv</code></span></p>'
            "</section>"
        )
        table_links.append(f'<a href="#table-{view}">{html.escape(heading)}</a>')
    nav.append(f'<span class="navgroup"><b>Tables:</b> {" ".join(table_links)}</span>')
    if progress:
        progress(total, total, "page")
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
        sections="\n".join(sections),
        footer=footer,
        specs=_script_json(specs),
        csv_paths=_script_json(csv_paths),
        vega_bundle=_script_safe(render.vega_bundle()),
    )


def _build_specs(
    con: duckdb.DuckDBPyConnection,
    names: list[str],
    runs: list[str] | None,
    progress: Progress | None,
    total: int,
) -> dict[str, Any]:
    """Each figure's spec by chart id, built on two threads, each with its own cursor on `con`.

    Why threads: a report spends about two thirds of its time in DuckDB, which releases the GIL,
    and the rest building charts in Python; two builds at a time overlap the two. Progress is told
    in the report's order as each result is taken.
    """
    import contextvars
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tracecore import figures
    from tracecore.figures import render
    from tracecore.ingest.catalog import cursor as catalog_cursor
    from tracecore.ingest.catalog import root_variable

    database = con.execute("SELECT current_database()").fetchone()[0]
    root = root_variable(con)
    local, cursors = threading.local(), []

    def build(name: str) -> dict[str, Any]:
        if not hasattr(local, "con"):  # a DuckDB connection serves one thread at a time
            local.con = catalog_cursor(con, root)  # with the dataset's root: the views read this folder
            local.con.execute(f'USE "{database.replace(chr(34), chr(34) * 2)}"')
            cursors.append(local.con)
        return render.spec(figures.build(local.con, name, runs))

    specs = {}
    pool = ThreadPoolExecutor(2, thread_name_prefix="report")
    try:
        # each task in its own copy of this context: the views shared_views keeps reach it
        pending = [(name, pool.submit(contextvars.copy_context().run, build, name)) for name in names]
        for done, (name, future) in enumerate(pending):
            if progress:
                progress(done, total, name)
            specs[f"fig-{name}"] = future.result()
    finally:  # on an error or Ctrl-C, figures not started are dropped, not built first
        pool.shutdown(wait=True, cancel_futures=True)
        for cursor in cursors:
            cursor.close()
    return specs


def _downloads(chart_id: str, name: str) -> str:
    """Buttons that save the drawn chart as PNG or SVG and its data as CSV, made in the browser."""
    return "".join(
        f'<button type="button" data-chart="{chart_id}" data-kind="{kind}" data-name="{name}">'
        f"{kind.upper()}</button>"
        for kind in ("png", "svg", "csv")
    )


def html_table(table: pa.Table, columns: list[str], labels: dict[str, str] | None = None) -> str:
    """A plain HTML table of `columns` under readable headings, numbers right-aligned in one format
    (`style.number`); run names as `labels` shortens them, the full name in the cell's tooltip."""
    import pyarrow as pa

    labels = labels or {}
    cols = [c for c in columns if c in table.column_names]
    numeric = {
        c: pa.types.is_integer(table.schema.field(c).type) or pa.types.is_floating(table.schema.field(c).type)
        for c in cols
    }
    head = "".join(
        f'<th class="{"" if numeric[c] else "text"}" title="{html.escape(c)}">'
        f"{html.escape(HEADINGS.get(c, c))}</th>"
        for c in cols
    )
    body = []
    for row in table.select(cols).to_pylist():
        cells = []
        for c in cols:
            value = row[c]
            if c == "run" and value in labels:
                cells.append(
                    f'<td class="text run" title="{html.escape(value)}">{html.escape(labels[value])}</td>'
                )
            else:
                cells.append(f'<td class="{"" if numeric[c] else "text"}">{html.escape(_fmt(value, c))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    if not body:
        body.append(f'<tr><td class="text" colspan="{len(cols)}">no rows for the selected runs</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fmt(value: Any, column: str = "") -> str:
    from tracecore.figures.style import number

    if column in QP_COLUMNS and isinstance(value, int):
        return f"0x{value:06x}"
    return number(value)


def _script_safe(text: str) -> str:
    """Text that cannot end the <script> element it is placed in."""
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _script_json(value: Any) -> str:
    return (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--")
    )
