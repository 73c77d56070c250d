"""The HTML report: self-contained, drawn by a real headless Chromium with the network cut off."""

from __future__ import annotations

import hashlib
import html
import json
import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.conftest import require_tool
from tests.test_figures import decode_png
from tests.test_views_support import BOTH, SAMPLE
from tracecore import figures
from tracecore.cli.app import app
from tracecore.figures import render
from tracecore.report import write_report

runner = CliRunner()
# what the sample (two TCP runs, no profiler traces) shows: every figure but RoCE's and the GPU section's
# (each has a `shown_when`)
TCP_FIGURES = [
    name
    for name in figures.figure_names()
    if name not in ("rdma_ops", "step_breakdown", "collective_timeline", "nic_util", "roce_congestion")
]


def chromium(page: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    """Open `page` in headless Chromium (as root, no sandbox, fresh profile, no network at all)."""
    exe = require_tool("chromium")
    argv = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # any name lookup fails: the page must need none
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=30000",  # let vega-embed's promises settle before dumping
        *extra,
        page.resolve().as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def report(tmp_path_factory, sample_dataset) -> Path:
    return write_report(sample_dataset, tmp_path_factory.mktemp("report"))


def test_report_is_one_self_contained_file(report) -> None:
    assert report.name == "index.html"
    assert sorted(p.name for p in report.parent.iterdir()) == ["index.html"]
    page = report.read_text(encoding="utf-8")
    assert "<script src" not in page
    assert "<link" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)
    assert page.count('class="chart"') == len(TCP_FIGURES) == len(figures.figure_names()) - 5
    for name in TCP_FIGURES:
        assert f'id="fig-{name}"' in page
    # no RDMA section: the sample runs are TCP
    assert 'id="fig-rdma_ops"' not in page
    assert 'id="table-rdma_flows"' not in page
    assert "window.vegaEmbed=" in page  # the bundle is inline
    for run in (SAMPLE, BOTH):
        assert run in page
    assert "paper: Table I" in page
    assert "paper: Table II" in page
    # two runs: the comparison section, run names cut to what differs (full names as tooltips)
    assert '<h2 class="group" id="compare">Run comparison</h2>' in page
    assert f'<td class="text run" title="{SAMPLE}">batch 16</td>' in page
    tables = page.split('id="tables"', 1)[1].split("<script>", 1)[0]
    assert not re.search(r"\d[eE][+-]?\d", tables)  # one number format: no exponents
    assert "notebook" not in page
    assert "Student&#x27;s t interval" in tables  # the CI method is named
    assert 'id="gpu"' not in page  # no profiler traces, no NCCL logs: no GPU section
    for view in ("step_breakdown", "collective_stragglers", "tcp_health", "nccl_topology"):
        assert f'id="table-{view}"' not in page


def test_report_of_one_run_has_no_comparison_and_reports_progress(tmp_path, sample_dataset) -> None:
    steps = []
    page = write_report(sample_dataset, tmp_path, [SAMPLE], progress=lambda *a: steps.append(a)).read_text()
    assert 'id="compare"' not in page
    assert "runs_flow_diff" not in page
    figures_shown = [n for n in TCP_FIGURES if not n.startswith("runs_")]
    names = [name for _, _, name in steps]
    assert names[: len(figures_shown)] == figures_shown
    assert names[-1] == "page"
    assert [done for done, _, _ in steps] == list(range(len(steps)))
    assert {total for _, total, _ in steps} == {len(steps) - 1}
    import threading

    assert [t.name for t in threading.enumerate() if t.name.startswith("report")] == []  # builders joined


def body_of(dom: str) -> dict[str, str]:
    """The data-* attributes the page sets on <body> once every chart has settled."""
    body = re.search(r"<body[^>]*>\s*<header>", dom).group(0)  # the bundle's strings mention <body>
    return dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body))


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 1920])
def test_report_draws_every_chart_offline_and_fits_the_window(report, tmp_path, width) -> None:
    """At 1280 and 1920 px: every chart drawn, no console error, no horizontal scrolling of the page,
    no chart wider than its place."""
    dom = chromium(report, tmp_path, f"--window-size={width},1200", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    total = len(TCP_FIGURES)
    body = body_of(dom.stdout)
    assert (body["charts-total"], body["charts-drawn"], body["charts-failed"]) == (str(total), str(total), "")
    assert int(body["page-client-width"]) > width - 30  # the window's width, less a vertical scrollbar
    assert body["page-scroll-width"] == body["page-client-width"]  # nothing to scroll sideways
    assert body["charts-wider-than-page"] == ""
    for name in TCP_FIGURES:  # each chart container holds a drawn SVG with marks
        container = dom.stdout.split(f'id="fig-{name}"', 1)[1].split("</section>", 1)[0]
        assert "<svg" in container, name
        assert container.count("<path") + container.count("<rect") + container.count("<line") > 3, name

    shot = tmp_path / "report.png"
    run = chromium(
        report, tmp_path, f"--screenshot={shot}", f"--window-size={width},4000", "--hide-scrollbars"
    )
    assert run.returncode == 0, run.stderr[-2000:]
    pixels = decode_png(shot.read_bytes())
    assert pixels.shape[:2] == (4000, width)
    rgb = pixels[..., :3].astype(float)
    assert rgb.var() > 500
    assert (np.abs(rgb - 255).sum(axis=2) > 60).mean() > 0.05  # charts, not an empty page


def test_the_layout_check_can_fail(tmp_path) -> None:
    """The same page with content too wide for the window is seen scrolling sideways."""
    page = tmp_path / "wide.html"
    text = (Path(__file__).resolve().parent.parent / "tracecore" / "report_template.html").read_text()
    from string import Template

    page.write_text(
        Template(text).substitute(
            title="t", subtitle="s", nav="", runs_table="", sections='<div style="width:3000px">wide</div>',
            footer="", specs="{}", csv_paths="{}", vega_bundle="",
        )
    )  # fmt: skip
    body = body_of(chromium(page, tmp_path, "--window-size=1280,900", "--dump-dom").stdout)
    assert int(body["page-scroll-width"]) > int(body["page-client-width"])


@pytest.mark.slow
def test_downloads_give_png_svg_and_the_charts_rows_as_csv(report, tmp_path, con) -> None:
    """What each chart's PNG, SVG and CSV buttons save, made by the page's own code in Chromium."""
    page = report.read_text(encoding="utf-8")
    probe = """<script>
      setTimeout(async () => {
        const out = {};
        for (const id of Object.keys(charts)) {
          const csv = toCsv(rowsOf(id));
          const png = await views[id].toImageURL("png", 2);
          const svg = await (await fetch(await views[id].toImageURL("svg"))).text();
          out[id] = [csv.split("\\n").length - 2, csv.split("\\n")[0], png.slice(0, 22), svg.slice(0, 26)];
        }
        document.body.dataset.downloads = JSON.stringify(out);
      }, 5000);
    </script></body>"""
    probed = tmp_path / "probed.html"
    head, _, tail = page.rpartition("</body>")  # the page's own end, not a string in the Vega bundle
    probed.write_text(head + probe + tail, encoding="utf-8")
    dom = chromium(probed, tmp_path, "--dump-dom")
    assert console_messages(dom.stderr) == []
    found = json.loads(html.unescape(body_of(dom.stdout)["downloads"]))
    assert set(found) == {f"fig-{n}" for n in TCP_FIGURES}
    for chart_id, (rows, header, png, svg) in found.items():
        spec = render.spec(figures.build(con, chart_id.removeprefix("fig-")))
        drawn = render.data_rows(spec)
        assert rows == len(drawn), chart_id
        assert header.split(",") == list(dict.fromkeys(k for r in drawn for k in r)), chart_id
        assert png == "data:image/png;base64,", chart_id
        assert svg.startswith("<svg"), chart_id
    page_buttons = re.findall(r'data-chart="fig-(\w+)" data-kind="(\w+)"', page)
    assert sorted(page_buttons) == sorted((n, k) for n in TCP_FIGURES for k in ("png", "svg", "csv"))


def test_the_console_check_can_fail(tmp_path) -> None:
    """The same check on a page that logs an error does see it."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('boom'); missing();</script></body></html>")
    run = chromium(page, tmp_path, "--dump-dom")
    messages = console_messages(run.stderr)
    assert any("boom" in m for m in messages)
    assert any("missing is not defined" in m for m in messages)


def test_report_command_selects_runs(tmp_path, sample_dataset) -> None:
    result = runner.invoke(
        app, ["report", str(tmp_path / "r"), "--runs", SAMPLE, "--data", str(sample_dataset)]
    )
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "index.html").read_text(encoding="utf-8")
    assert SAMPLE in page
    assert BOTH not in page
    result = runner.invoke(
        app, ["report", str(tmp_path / "x"), "--runs", "nope", "--data", str(sample_dataset)]
    )
    assert result.exit_code == 2
    assert "unknown run 'nope'" in result.output
    assert not (tmp_path / "x" / "index.html").exists()


def test_views_figures_and_report_on_captures_that_are_not_training_runs(corpus_dir, tmp_path) -> None:
    """Single-host corpus captures (no worker pairs, no log): every view runs, empty charts say why."""
    from tracecore import query, views
    from tracecore.ingest import ingest, open_catalog

    files = [corpus_dir / "dpkt__http.pcap", corpus_dir / "arkime__v6-http.pcap"]
    assert not ingest(files, tmp_path / "data", jobs=1).failed
    con = open_catalog(tmp_path / "data")
    try:
        rows = {name: query.run_view(con, name).num_rows for name in views.view_names()}
    finally:
        con.close()
    # dpkt: 6 + 7 distinct (src, dst) IP pairs; 3,040 + 32,507 10 ms bins from first to last packet
    assert rows["flow_matrix"] == 6 + 7
    assert rows["link_total"] == 3040 + 32507
    assert rows["link_util"] == 0  # one worker per run: no worker pair
    assert rows["accuracy_vs_data"] == 0  # no training log
    page = write_report(tmp_path / "data", tmp_path / "report")
    text = page.read_text(encoding="utf-8")
    assert "no training log for the selected runs" in text
    assert "no worker-to-worker traffic in the selected runs" in text
    dom = chromium(page, tmp_path, "--dump-dom")
    assert console_messages(dom.stderr) == []
    total = len(TCP_FIGURES)
    assert f'data-charts-drawn="{total}"' in re.search(r"<body[^>]*>\s*<header>", dom.stdout).group(0)


def test_report_of_rdma_runs_has_an_rdma_section_drawn_offline(tmp_path) -> None:
    """The NCCL ring and the crafted run: the operation-mix chart and the QP flow table, QPs in hex."""
    from tests.rdma_corpus import CRAFTED_RUN, NCCL_RUN, rdma_dataset

    page = write_report(rdma_dataset(), tmp_path / "report", [NCCL_RUN, CRAFTED_RUN])
    text = page.read_text(encoding="utf-8")
    assert text.count('class="chart"') == len(TCP_FIGURES) + 1  # rdma_ops; these runs have no traces
    assert '<a href="#rdma_ops">RDMA operation mix per queue-pair flow (RoCE runs)</a>' not in text
    assert '<a href="#rdma_ops">rdma ops</a>' in text
    table = text.split('id="table-rdma_flows"', 1)[1].split("</section>", 1)[0]
    assert table.count("<tr>") == 1 + 6 + 3  # header, the ring's 6 flows, the crafted run's 3
    assert "<td >0x000028</td>" in table.replace(
        'class=""', ""
    )  # W1→W2's destination QP, as tshark writes it
    dom = chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    body = re.search(r"<body[^>]*>\s*<header>", dom.stdout).group(0)
    assert f'data-charts-drawn="{len(TCP_FIGURES) + 1}"' in body
    assert 'data-charts-failed=""' in body
    chart = dom.stdout.split('id="fig-rdma_ops"', 1)[1].split("</section>", 1)[0]
    assert "<svg" in chart
    for label in ("W1→W2 QP 0x000028", "W2→W1 QP 0x00001b", "32,770 B", "CNP", "RDMA WRITE"):
        assert label in chart, label


def _with_checksum(body: str) -> str:
    return f"// sha256 {hashlib.sha256(body.encode()).hexdigest()}\n{body}"


def test_the_vega_bundle_is_kept_in_the_cache_while_its_checksum_holds(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "cache"))
    bundle = render.vega_bundle()
    assert "window.vegaEmbed=" in bundle
    (kept,) = (tmp_path / "cache").iterdir()
    assert kept.name == f"vega-bundle-{version('vl-convert-python')}.js"
    assert kept.read_text(encoding="utf-8") == _with_checksum(bundle)
    kept.write_text(_with_checksum("kept"), encoding="utf-8")
    assert render.vega_bundle() == "kept"  # the cached copy is what a report inlines
    kept.write_text(_with_checksum("kept")[:-1] + "X", encoding="utf-8")  # damaged: built again, replaced
    assert render.vega_bundle() == bundle
    assert kept.read_text(encoding="utf-8") == _with_checksum(bundle)
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "not-a-folder"))
    assert render.vega_bundle() == bundle  # a cache that cannot be written only costs time


def test_report_command_shows_its_progress_in_a_terminal(tmp_path, sample_dataset) -> None:
    from tests.test_cli_width import in_terminal

    shown = in_terminal(["report", str(tmp_path / "r"), "--data", str(sample_dataset)], 120)
    assert "report" in shown
    # the figure or table being made, on the progress line (which ones a refresh catches depends on
    # timing: a name of the report's figures or tables, with its count)
    names = [*figures.figure_names(), "flow_matrix", "throughput_ci", "data_per_step", "page"]
    assert any(f" {name} " in shown for name in names), shown[-2000:]
    assert re.search(r"\d+/\d+", shown), shown[-2000:]
    assert shown.rstrip().endswith(str(tmp_path / "r" / "index.html"))
    piped = runner.invoke(app, ["report", str(tmp_path / "p"), "--data", str(sample_dataset)])
    assert piped.output.strip() == str(tmp_path / "p" / "index.html")  # not a terminal: just the path


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory) -> Path:
    """The report of the GPU corpus' three runs (two and four workers; tests/test_figures_gpu.py)."""
    from tests.test_figures_gpu import gpu_dataset

    return write_report(gpu_dataset(), tmp_path_factory.mktemp("gpu-report"))


W4_RUN = "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"


def section_of(page: str, anchor: str) -> str:
    return page.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]


def table_cells(part: str) -> list[list[str]]:
    """The text of each body row's cells in an HTML table of the report."""
    body = part.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def test_gpu_report_has_a_gpu_section_before_the_figures(gpu_report) -> None:
    """Step breakdown, collective timeline, stragglers, TCP health and NCCL's topology against the wire,
    in the units a person reads, above the paper's figures; run names as the figures label them."""
    page = gpu_report.read_text(encoding="utf-8")
    order = [page.index(f'id="{anchor}"') for anchor in ("runs", "gpu", "paper", "more", "compare", "tables")]
    assert order == sorted(order)
    gpu = page[page.index('id="gpu"') : page.index('id="paper"')]
    for anchor in ("fig-step_breakdown", "fig-collective_timeline"):
        assert f'id="{anchor}"' in gpu
    for view in ("step_breakdown", "collective_stragglers", "tcp_health", "nccl_topology"):
        assert f'id="table-{view}"' in gpu
        assert f'<a href="#table-{view}">' in page  # in the index at the top
    steps = table_cells(section_of(page, "table-step_breakdown"))
    # cnn3m-w4, rank 0, step 4: the iteration 70.28 ms on the host beside its 37.26 ms GPU span
    (row,) = [r for r in steps if r[:4] == ["cnn3m-w4", "W1", "0", "4"]]
    assert row[4:7] == ["pytorch_profiler", "70.28", "37.26"]
    assert '<td class="text run" title="torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4">cnn3m-w4</td>' in page
    stragglers = table_cells(section_of(page, "table-collective_stragglers"))
    # the 4-rank run's widest start spread: rank 2 late to the all_gather by 103.6 ms
    widest = next(r for r in stragglers if r[0] == "cnn3m-w4")
    assert widest[:8] == ["cnn3m-w4", "nccl_profiler", "all_gather", "8", "—", "4", "rank 2 (W3)", "103.6"]
    tcp = section_of(page, "table-tcp_health")
    # each run's flows with payload, most retransmissions first, then most payload: as tcp_health has them
    from tests.test_figures_gpu import gpu_dataset
    from tracecore.ingest import open_catalog
    from tracecore.query import run_view

    con = open_catalog(gpu_dataset(), read_only=True)
    try:
        flows = [r for r in run_view(con, "tcp_health", runs=[W4_RUN]).to_pylist() if r["data_packets"]]
    finally:
        con.close()
    flows.sort(key=lambda r: (-r["retransmissions"], -r["payload_bytes"]))
    shown = [r for r in table_cells(tcp) if r[0] == "cnn3m-w4"]
    assert [(r[1], r[4]) for r in shown] == [
        (f"{f['src_worker']}:{f['src_port']}→{f['dst_worker']}:{f['dst_port']}", str(f["retransmissions"]))
        for f in flows[:8]
    ]
    assert "Each run&#x27;s 8 first of its 16, 88, 16 flows with payload." in tcp
    topology = section_of(page, "table-nccl_topology")
    assert topology.count("declared and measured") == 2 + 4 + 2  # each run's ring edges
    assert "set up, idle" in topology


def test_gpu_report_draws_every_chart_offline_and_fits_the_window(gpu_report, tmp_path) -> None:
    """In Chromium at 1280 px: every chart of the GPU report drawn, no console error, none wider than
    its place (a legend past the section's edge was clipped to 'cnn3m-sgd-32-nccl-normal-rir')."""
    dom = chromium(gpu_report, tmp_path, "--window-size=1280,1200", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    body = body_of(dom.stdout)
    total = len(figures.figure_names()) - 3  # every figure but RoCE's and the NIC counters' two
    assert (body["charts-total"], body["charts-drawn"], body["charts-failed"]) == (str(total), str(total), "")
    assert body["page-scroll-width"] == body["page-client-width"]
    assert body["charts-wider-than-page"] == ""


def test_gpu_report_leads_with_the_findings_of_explain(gpu_report) -> None:
    """The first section after the runs is each run's findings, as `tracecore explain` has them."""
    from tests.test_figures_gpu import gpu_dataset
    from tracecore.explain import explain

    page = gpu_report.read_text(encoding="utf-8")
    assert page.index('id="runs"') < page.index('id="findings"') < page.index('id="gpu"')
    assert '<a href="#runs">Runs</a><a href="#findings">Findings</a>' in page
    expected = explain(gpu_dataset()).by_run()
    sections = page.split('id="findings"', 1)[1].split('id="gpu"', 1)[0].split("<section ")[1:]
    assert len(sections) == len(expected)
    for part, (run, rows) in zip(sections, expected.items(), strict=True):
        assert f'<h3 title="{run}">' in part
        cells = table_cells(part)
        assert [c[1] for c in cells] == [r["finding"] for r in rows]
        assert [c[3] for c in cells] == [r["claim"] for r in rows]
        assert [c[4] for c in cells] == [f"<code>{r['evidence']}</code>" for r in rows]  # cells unescaped
    w4 = next(part for part in sections if f'title="{W4_RUN}"' in part)
    assert table_cells(w4)[0][:3] == ["1", "start skew", "370.0 ms"]


def test_sections_of_leading_go_above_the_figures(tmp_path, sample_dataset, monkeypatch) -> None:
    """One call puts a section above the figures (where `tracecore explain`'s findings go), with its
    link first in the index; one that has nothing to say (None) leaves no trace."""
    from tracecore import report

    seen = []

    def findings(con, runs, labels):
        seen.append((runs, labels))
        return report.Leading("findings", "Findings", '<section id="findings"><h2>Findings</h2></section>')

    monkeypatch.setattr(report, "LEADING", [])
    report.LEADING.insert(0, findings)
    report.LEADING.append(lambda con, runs, labels: None)
    page = write_report(sample_dataset, tmp_path, [SAMPLE]).read_text(encoding="utf-8")
    assert seen == [([SAMPLE], {SAMPLE: SAMPLE})]
    assert page.index('id="runs"') < page.index('id="findings"') < page.index('id="paper"')
    assert '<nav><a href="#runs">Runs</a><a href="#findings">Findings</a><span' in page
