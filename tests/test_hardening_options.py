"""No option crashes a renderer or the CLI (issue 36, item 4): control characters in a title or a run
name, absurd --scale/--width, an address-space limit the renderer's V8 cannot live in, a title that
would end an HTML figure's script, view parameters outside their documented range, and a run whose
captures hold no packets beside a profiler trace. Each case goes through the installed console script."""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracecore import param_ranges, views
from tracecore.figures.render import MAX_PIXELS

GPU_RUN = (
    Path(__file__).resolve().parents[2]
    / "shared/corpus-gpu/gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
)


def console(*args: str | Path, limit_as: int | None = None) -> subprocess.CompletedProcess:
    """The installed `tracecore` script, output captured; `limit_as` sets RLIMIT_AS (bytes) in the child."""
    script = Path(sys.executable).with_name("tracecore")

    def limit() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run(
        [script, *map(str, args)], capture_output=True, text=True, timeout=300, check=False, preexec_fn=limit
    )


def refused(result: subprocess.CompletedProcess, message: str) -> None:
    """Exit 2, one line on stderr that starts with `message`, no traceback, nothing on stdout."""
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {message}"), lines
    assert result.stdout == ""


@pytest.mark.parametrize("suffix", ["svg", "png", "pdf"])
def test_control_characters_in_a_title_are_drawn_as_their_pictures(sample_dataset, tmp_path, suffix) -> None:
    """ESC, BEL and 0x01 aborted vl-convert (SIGABRT); they are drawn as ␛ ␇ ␁ instead."""
    out = tmp_path / f"f.{suffix}"
    res = console(
        "figure", "flow_counts", "--title", "a\x1bb\x07c\x01d\te", "-o", out, "--data", sample_dataset
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert out.stat().st_size > 1000
    if suffix == "svg":
        assert "a\u241bb\u2407c\u2401d" in out.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scale", "nan"], "--scale must be a number above 0 and at most 20, not nan"),
        (["--scale", "inf"], "--scale must be a number above 0 and at most 20, not inf"),
        (["--scale", "1000"], "--scale must be a number above 0 and at most 20, not 1000"),
        (["--scale", "0"], "--scale must be a number above 0 and at most 20, not 0"),
        (["--width", "1000000"], "--width is a panel's size in px, at most 10000, not 1000000"),
        (["--height", "99999999999"], "--height is a panel's size in px, at most 10000, not 99999999999"),
        (["--scale", "20", "--width", "5000"], "a PNG of "),
    ],
)
def test_sizes_a_renderer_cannot_take_are_refused(sample_dataset, tmp_path, args, message) -> None:
    """--scale 1000 allocated 633 GB, nan/inf panicked, --width 1000000 took 5.3 GB and 131 s."""
    out = tmp_path / "f.png"
    refused(console("figure", "flow_counts", *args, "-o", out, "--data", sample_dataset), message)
    assert not out.exists()


def test_a_png_too_large_is_measured_before_it_is_drawn(sample_dataset, tmp_path) -> None:
    res = console("figure", "flow_counts", "--scale", "20", "--width", "5000", "-o", tmp_path / "f.png",
                  "--data", sample_dataset)  # fmt: skip
    pixels = re.search(r"would hold (\d+) million pixels \(at most (\d+) million\)", res.stderr)
    assert pixels is not None, res.stderr
    assert int(pixels.group(1)) > int(pixels.group(2)) == MAX_PIXELS // 1_000_000


@pytest.mark.parametrize("suffix", ["pdf", "svg"])
def test_scale_is_for_png_only(sample_dataset, tmp_path, suffix) -> None:
    """A PDF's scale raised a raw UserWarning from vl-convert (it no longer supports it)."""
    refused(
        console(
            "figure", "flow_counts", "--scale", "2", "-o", tmp_path / f"f.{suffix}", "--data", sample_dataset
        ),
        f"--scale sets a PNG's pixels; a {suffix.upper()} is drawn at the chart's size",
    )


def test_an_address_space_limit_is_one_line_not_an_abort(sample_dataset, tmp_path) -> None:
    """Under `ulimit -v` 30 GiB V8 cannot reserve its cage and aborted the process; HTML still works once
    the page's JavaScript is kept (making it needs V8 too)."""
    limit = 30 << 30
    res = console("figure", "flow_counts", "-o", tmp_path / "f.png", "--data", sample_dataset, limit_as=limit)
    refused(res, "drawing PNG, SVG or PDF needs ")
    assert "the limit (ulimit -v) is 30.0 GiB" in res.stderr
    assert (
        console("figure", "flow_counts", "-o", tmp_path / "kept.html", "--data", sample_dataset).returncode
        == 0
    )
    html = console(
        "figure", "flow_counts", "-o", tmp_path / "f.html", "--data", sample_dataset, limit_as=limit
    )
    assert html.returncode == 0, html.stderr[-2000:]
    assert "vegaEmbed" in (tmp_path / "f.html").read_text()


def test_an_html_figure_title_cannot_end_its_script(sample_dataset, tmp_path) -> None:
    """`--title '</script><script>…'` ended vl-convert's script element and ran the rest as a script."""
    from tests.test_report import chromium

    hostile = '</script><script>document.body.dataset.pwned="yes"</script><!--'
    page = tmp_path / "f.html"
    res = console("figure", "flow_counts", "--title", hostile, "-o", page, "--data", sample_dataset)
    assert res.returncode == 0, res.stderr[-2000:]
    dom = chromium(page, tmp_path, "--dump-dom")
    body = re.findall(r"<body([^>]*)>", dom.stdout)[-1]  # the page's; the inlined JavaScript holds "<body>"
    assert 'data-chart-drawn="true"' in body
    assert "pwned" not in body
    assert "<title>&lt;/script&gt;&lt;script&gt;" in page.read_text()


RANGE_CASES = [
    ("contention", "threshold=nan", "threshold of contention takes a value in (0, 1], got nan"),
    ("contention", "min_bins=-1", "min_bins of contention takes a value in [1, ∞), a whole number, got -1"),
    ("contention", "min_bins=2.5", "min_bins of contention takes a value in [1, ∞), a whole number, got 2.5"),
    ("collective_wire", "min_conn_share=1e308",
     "min_conn_share of collective_wire takes a value in [0, 1], got 1e+308"),
    ("collective_verdicts", "slow_factor=0.5",
     "slow_factor of collective_verdicts takes a value in [1, ∞), got 0.5"),
    ("explain", "retrans_share=inf", "retrans_share of findings takes a value in [0, 1], got inf"),
]  # fmt: skip


@pytest.mark.parametrize(("view", "param", "message"), RANGE_CASES)
def test_view_parameters_outside_their_documented_range_are_refused(
    sample_dataset, view, param, message
) -> None:
    command = ["explain"] if view == "explain" else ["query", view]
    refused(console(*command, "-p", param, "--data", sample_dataset), f"parameter {message}")


def test_parameters_inside_their_range_still_run(sample_dataset) -> None:
    res = console(
        "query", "contention", "-p", "threshold=1", "-p", "min_bins=1", "-f", "csv", "--data", sample_dataset
    )
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) > 10


def numeric_params() -> list[tuple[str, str]]:
    """(view, parameter) for every parameter that takes a number: a numeric default, or a duration."""
    number = re.compile(r"\[?-?\d")
    return [
        (view, p.name)
        for view in views.view_names()
        for p in views.view_params(view)
        if p.name.endswith("_ns") or number.match(p.default)
    ]


def test_every_numeric_parameter_documents_its_range() -> None:
    """The range lives on the parameter's header line (`query VIEW --describe` shows it)."""
    params = numeric_params()
    assert len(params) > 60
    missing = [f"{view}.{name}" for view, name in params if param_ranges.param_range(view, name) is None]
    assert missing == []


def test_a_parameter_written_in_several_views_has_one_range() -> None:
    written: dict[str, set[str]] = {}
    for view in views.view_names():
        for name, allowed in param_ranges.documented_ranges(view).items():
            written.setdefault(name, set()).add(str(allowed))
    assert {n: r for n, r in written.items() if len(r) > 1} == {}
    assert written["threshold"] == {"(0, 1]"}
    assert written["min_bins"] == {"[1, ∞), a whole number"}


def test_describe_shows_the_range_the_check_enforces(sample_dataset) -> None:
    res = console("query", "contention", "--describe", "--data", sample_dataset)
    assert res.returncode == 0, res.stderr
    assert "(default 0.8, KungFu's); range (0, 1]" in res.stdout


@pytest.fixture(scope="module")
def empty_captures(tmp_path_factory) -> Path:
    """A run whose two captures hold only their file headers, beside rank 0's PyTorch profiler trace."""
    base = tmp_path_factory.mktemp("empty")
    run = base / "runs" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
    run.mkdir(parents=True)
    shutil.copy(GPU_RUN / "kineto-rank0.json", run)
    for worker in (0, 1):
        header = (GPU_RUN / f"worker-{worker}-tcpdump.pcap").read_bytes()[:24]
        (run / f"worker-{worker}-tcpdump.pcap").write_bytes(header)
    res = console("ingest", base / "runs", "--out", base / "data")
    assert res.returncode == 0, res.stderr[-2000:]
    return base


def test_a_run_without_packets_but_with_a_trace_draws_and_reports(empty_captures) -> None:
    """figure collective_timeline and report raised IndexError/KeyError and wrote nothing."""
    data = empty_captures / "data"
    figure = console("figure", "collective_timeline", "-o", empty_captures / "t.svg", "--data", data)
    assert figure.returncode == 0, figure.stderr[-2000:]
    assert "all_reduce #1" in (empty_captures / "t.svg").read_text()
    report = console("report", empty_captures / "report", "--data", data)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (empty_captures / "report" / "index.html").stat().st_size > 100_000


def test_a_run_without_packets_is_not_judged_compute_bound(empty_captures) -> None:
    """No frame on any link: the wire is not judged (it said compute/launch, 0.0 ms busy of ?→?)."""
    res = console("explain", "--format", "csv", "--data", empty_captures / "data")
    assert res.returncode == 0, res.stderr
    assert "compute/launch" not in res.stdout
    assert "wire not judged" in res.stdout
    assert "W1's capture worker-0-tcpdump holds no packets" in res.stdout
    assert "W2's capture worker-1-tcpdump holds no packets" in res.stdout
