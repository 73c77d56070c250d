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

# tables shown under the figures: (view, heading, purpose, columns)
TABLES: list[tuple[str, str, str, list[str]]] = [
    (
        "throughput_ci",
        "Table I: throughput with 95% confidence interval",
        "Per-second Gbit/s over each run, mean ∓ 1.96·s/√n (the notebook divided by a fixed 10).",
        ["run", "from_s", "to_s", "n", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    (
        "link_util_ci",
        "Table II: link throughput with 95% confidence interval",
        "One-second windows per directed worker link, mean ∓ 1.96·s/√n.",
        ["run", "src_worker", "dst_worker", "windows", "mean_gbps", "ci_low_gbps", "ci_high_gbps"],
    ),
    (
        "data_per_step",
        "Data per training step (Sec. VI input)",
        "Bytes between the first and last logged step, per step; "
        "per-rank payload against 2(N−1)/N × gradient bytes.",
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
    "operation mix, PSN gaps/repeats/rewinds, NAKs, ECN-CE marks and CNPs; src_qp from the paired "
    "direction (same UDP source port) or UD's DETH.",
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


def write_report(data_dir: Path | str, out_dir: Path | str, runs: list[str] | None = None) -> Path:
    """Write OUT_DIR/index.html for `runs` (None = every run) of the dataset at `data_dir`.

    Returns the page's path. Unknown runs raise UsageError before anything is written.
    """
    from tracecore.ingest import open_catalog

    con = open_catalog(Path(data_dir), read_only=True)
    try:
        page = render_report(con, runs, source=str(Path(data_dir)))
    finally:
        con.close()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT_NAME
    tmp = path.with_name(f".{REPORT_NAME}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return path


def render_report(con: duckdb.DuckDBPyConnection, runs: list[str] | None, source: str = "") -> str:
    """The whole page as a string."""
    import vl_convert as vlc

    from tracecore import figures
    from tracecore.figures import render
    from tracecore.figures.registry import has_rdma
    from tracecore.query import check_runs, run_view

    runs = check_runs(con, runs)
    specs: dict[str, Any] = {}
    sections, nav = [], ['<a href="#runs">Runs</a>']
    for name in figures.figure_names():
        fig = figures.get(name)
        if fig.shown_when is not None and not fig.shown_when(con, runs):
            continue
        chart_id = f"fig-{name}"
        specs[chart_id] = render.spec(figures.build(con, name, runs))
        heading = f"{fig.ref}: {fig.purpose}" if fig.ref else fig.purpose
        sections.append(
            f'<section id="{name}"><h2>{html.escape(heading)}</h2>'
            f'<p class="purpose">tracecore figure {name} · tracecore query for the data</p>'
            f'<div class="chart" id="{chart_id}"></div></section>'
        )
        nav.append(f'<a href="#{name}">{html.escape(fig.ref or name)}</a>')
    for view, heading, purpose, columns in [*TABLES, *([RDMA_TABLE] if has_rdma(con, runs) else [])]:
        table = run_view(con, view, runs=runs)
        sections.append(
            f'<section id="table-{view}"><h2>{html.escape(heading)}</h2>'
            f'<p class="purpose">{html.escape(purpose)} (tracecore query {view})</p>'
            f'<div class="scroll">{html_table(table, columns)}</div></section>'
        )
        nav.append(f'<a href="#table-{view}">{html.escape(heading.split(":")[0])} (numbers)</a>')
    summary = run_view(con, "run_summary", runs=runs)
    names = summary.column("run").to_pylist()
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
        runs_table=html_table(summary, [c for c in RUN_COLUMNS if c in summary.column_names]),
        sections="\n".join(sections),
        footer=footer,
        specs=_script_json(specs),
        vega_bundle=_script_safe(render.vega_bundle()),
    )


def html_table(table: pa.Table, columns: list[str]) -> str:
    """A plain HTML table of `columns` (numbers right-aligned, floats to 4 significant digits)."""
    import pyarrow as pa

    cols = [c for c in columns if c in table.column_names]
    numeric = {
        c: pa.types.is_integer(table.schema.field(c).type) or pa.types.is_floating(table.schema.field(c).type)
        for c in cols
    }
    head = "".join(f'<th class="{"" if numeric[c] else "text"}">{html.escape(c)}</th>' for c in cols)
    body = []
    for row in table.select(cols).to_pylist():
        cells = "".join(
            f'<td class="{"" if numeric[c] else "text"}">{html.escape(_fmt(row[c], c))}</td>' for c in cols
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(f'<tr><td class="text" colspan="{len(cols)}">no rows for the selected runs</td></tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _fmt(value: Any, column: str = "") -> str:
    if value is None:
        return "—"
    if column in QP_COLUMNS and isinstance(value, int):
        return f"0x{value:06x}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _script_safe(text: str) -> str:
    """Text that cannot end the <script> element it is placed in."""
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")


def _script_json(value: Any) -> str:
    return (
        json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        .replace("</", "<\\/")
        .replace("<!--", "<\\!--")
    )
