"""Every `--help` explains itself: defaults and environment variables shown, examples that run, shell
completion (issue 13 item 5)."""

from __future__ import annotations

import inspect
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.sample import SAMPLE_RUN, sample_run

REPO = Path(__file__).resolve().parent.parent
WIDE = {"COLUMNS": "250"}
OWN = {"help", "install_completion", "show_completion", "version"}  # Typer's and click's own options
EXAMPLE = re.compile(r"^\s*\$ (.+?)\s*$", re.MULTILINE)  # how examples are written in docstrings
# Placeholders of the examples, and what they are in the workspace the examples run in.
PLACEHOLDERS = {"RUN": SAMPLE_RUN}
runner = CliRunner()


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    if hasattr(command, "commands"):  # a group (Typer vendors its own click)
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))


ALL = list(commands(typer.main.get_command(app)))


def help_of(path: tuple[str, ...]) -> str:
    result = runner.invoke(app, [*path, "--help"], env=WIDE, terminal_width=250)
    assert result.exit_code == 0, result.output
    return result.output


def option_rows(text: str) -> dict[str, str]:
    """Each option's row of the help table (continuation lines joined), by each of its names."""
    rows: list[str] = []
    for line in text.splitlines():
        cell = line.strip().strip("│").strip()
        if re.match(r"^\*?\s*-", cell):
            rows.append(cell)
        elif rows and line.startswith("│") and cell:
            rows[-1] += " " + cell
        elif not line.startswith("│"):
            rows.append("") if rows and rows[-1] else None
    by_name = {}
    for row in filter(None, rows):
        names = row.lstrip("* ").split()[:2]
        for name in ",".join(names).split(","):
            by_name[name] = row
    return by_name


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "tracecore")
def test_every_default_and_env_var_is_shown(path: tuple[str, ...]) -> None:
    command = dict(ALL)[path]
    rows = option_rows(help_of(path))
    missing = []
    for param in command.params:
        if (
            param.param_type_name != "option"
            or param.name in OWN
            or param.required
            or (param.is_flag and not param.default)
        ):
            continue
        row = rows[param.opts[0]]
        said = param.show_default
        if "[default: " not in row or (isinstance(said, str) and f"[default: ({said})]" not in row):
            missing.append(f"{param.opts[0]}: {row}")
        if param.envvar and f"[env var: {param.envvar}]" not in row:
            missing.append(f"{param.opts[0]} env: {row}")
    assert missing == []


LEAVES = [(p, c) for p, c in ALL if not hasattr(c, "commands")]


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_usage_lines_name_arguments_as_people_write_them(path: tuple[str, ...], command: Any) -> None:
    """`Usage: tracecore read [OPTIONS] FILE`, the Arguments panel and "Missing argument 'FILE'" name
    arguments in upper case, never as Typer's `{file}`."""
    text = help_of(path)
    (usage,) = [line.strip() for line in text.splitlines() if line.strip().startswith("Usage:")]
    pieces = usage.split()[2 + len(path) :]
    assert pieces[:1] in ([], ["[OPTIONS]"]), usage
    for piece in pieces[1:]:
        assert re.fullmatch(r"\[?[A-Z][A-Z_]*\]?(\.\.\.)?", piece), usage
    arguments = [p for p in command.params if isinstance(p, typer.core.TyperArgument)]
    for argument in arguments:
        assert re.search(rf"│ [* ] +{argument.name.upper()} ", text), (argument.name, text)
    if arguments and arguments[0].required:
        result = runner.invoke(app, list(path), env=WIDE, terminal_width=250)
        assert result.exit_code == 2
        assert f"Missing argument '{arguments[0].name.upper()}" in result.output


def test_the_dataset_option_names_its_default_and_variable() -> None:
    for path in (("query",), ("ingest",), ("sql",), ("figure",), ("report",), ("model", "traffic")):
        row = option_rows(help_of(path))["--data"]
        assert "[env var: TRACECORE_DATA]" in row
        assert "[default: (./tracecore-data)]" in row
    assert option_rows(help_of(("ingest",)))["--out"] == option_rows(help_of(("ingest",)))["--data"]


GUIDES = ("README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))


def readme_examples() -> list[str]:
    """The command lines of the README's and the guides' sh blocks, which the tests below run."""
    text = "\n".join((REPO / guide).read_text(encoding="utf-8") for guide in GUIDES)
    blocks = re.findall(r"```(?:sh|bash|console)\n(.*?)```", text, re.DOTALL)
    return [
        line.split("  #")[0].strip()
        for block in blocks
        for line in block.splitlines()
        if line.startswith(("tracecore ", "cat "))
    ]


HELP_EXAMPLES = [(" ".join(p), m) for p, _ in ALL for m in EXAMPLE.findall(help_of(p))]


def test_examples_are_everywhere() -> None:
    assert {where for where, _ in HELP_EXAMPLES} == {
        "read",
        "ingest",
        "query",
        "explain",
        "sql",
        "figure",
        "report",
        "init",
        "demo",
        "run",
        "model scaling",
        "model optimus",
    }
    assert len(readme_examples()) == 39  # the README's and docs/' sh lines starting `tracecore ` or `cat `


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pcaps/RUN (the embedded sample), capture.pcap, experiment.toml (an example experiment), and
    ./tracecore-data ingested from pcaps/."""
    root = tmp_path_factory.mktemp("examples")
    shutil.copytree(sample_run(), root / "pcaps" / SAMPLE_RUN)
    shutil.copy(sample_run() / "worker-0-tcpdump.pcap", root / "capture.pcap")
    shutil.copy(REPO / "runners" / "examples" / "ddp_loss_sweep.toml", root / "experiment.toml")
    from tracecore.ingest import ingest

    assert not ingest([root / "pcaps"], root / "tracecore-data", jobs=1).failed
    return root


@pytest.mark.slow
@pytest.mark.parametrize("example", [m for _, m in HELP_EXAMPLES] + readme_examples(), ids=lambda e: e[:60])
def test_example_runs(example: str, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "cwd"
    shutil.copytree(workspace, here, symlinks=True)
    monkeypatch.chdir(here)
    monkeypatch.delenv("TRACECORE_DATA", raising=False)
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(example.replace("pcaps/RUN", f"pcaps/{SAMPLE_RUN}"))]
    stdin = None
    if words[0] == "cat":  # `cat FILE | tracecore …`
        stdin, words = Path(words[1]).read_bytes(), words[3:]
    assert words[0] == "tracecore"
    result = runner.invoke(app, words[1:], input=stdin, env=WIDE)
    assert result.exit_code == 0, (example, result.output)
    assert result.output.strip() or "--out" in words  # something printed, or written


def test_shell_completion_is_offered_and_completes_commands() -> None:
    shown = runner.invoke(app, ["--show-completion", "bash"], prog_name="tracecore")
    assert shown.exit_code == 0
    assert "_TRACECORE_COMPLETE=complete_bash" in shown.output
    env = {"_TRACECORE_COMPLETE": "complete_bash", "COMP_WORDS": "tracecore qu", "COMP_CWORD": "1"}
    done = runner.invoke(app, [], env=env, prog_name="tracecore")
    assert done.output.split() == ["query"]


def test_query_describe_shows_defaults_and_units() -> None:
    result = runner.invoke(app, ["query", "link_util", "--describe"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("link_util (answer): Per directed worker pair: bytes and Gbit/s")
    assert lines[1] == (
        "On a Dask cluster (--scheduler): split by run: parts of a few runs on the workers, "
        "joined here in run order"
    )
    assert lines[2] == "Parameters (bin_ns := 10000000, runs := NULL, from_ns := NULL, to_ns := NULL):"
    assert lines[3].split() == [
        "bin_ns",
        "bin",
        "width,",
        "ns",
        "(default",
        "10",
        "000",
        "000",
        "=",
        "10",
        "ms;",
        "100",
        "000",
        "=",
        "100",
        "µs",
        "works);",
        "range",
        "(0,",
        "∞)",
    ]
    assert lines[7] == "Columns:"
    assert lines[-1].split() == ["gbps", "bytes·8", "/", "bin_ns,", "Gbit/s"]
    plain = runner.invoke(app, ["query", "run_meta", "--describe"]).output.splitlines()
    assert plain[2:4] == ["Parameters: none", "Columns:"]
    across = runner.invoke(app, ["query", "train_duration", "--describe"]).output.splitlines()
    assert across[1] == "On a Dask cluster (--scheduler): not split (it needs every run at once): runs here"


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "tracecore")
def test_brackets_in_help_survive_rich_markup(path: tuple[str, ...]) -> None:
    """An option's help shows its brackets as written: Rich took `[dask]` for a style tag and the
    --scheduler help said `pip install 'tracecore'` (issue 25, item 9)."""
    command = dict(ALL)[path]
    rows = option_rows(help_of(path))
    for param in command.params:
        text = re.sub(r"\s+", " ", getattr(param, "help", None) or "").replace("\\[", "[")
        if "[" in text and param.param_type_name == "option":
            assert text in rows[param.opts[0]], (param.opts[0], rows[param.opts[0]])


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "tracecore")
def test_help_prints_paragraphs_not_source_lines(path: tuple[str, ...]) -> None:
    """A docstring's paragraph, wrapped at the source's line length, prints as one paragraph that the
    terminal wraps: Typer's Rich help kept its line breaks, so `read --help` said "…, frame length and"
    and went on with "tshark's Info (…)" on the next line at any width (issue 34, item 7)."""
    lines = [line.strip() for line in help_of(path).splitlines()]
    callback = dict(ALL)[path].callback
    for paragraph in (inspect.getdoc(callback) or "" if callback else "").split("\n\n")[1:]:
        if paragraph.startswith("\b"):  # examples: their lines stay as written
            continue
        text = " ".join(paragraph.split())
        start = next(i for i, line in enumerate(lines) if line and text.startswith(line))
        block = lines[start : lines.index("", start)]
        assert " ".join(block) == text
        assert all(len(line) > 200 for line in block[:-1]), block  # 250 columns: cut where full only


def test_scheduler_help_names_the_dask_extra() -> None:
    assert "pip install 'tracecore[dask]'" in option_rows(help_of(("ingest",)))["--scheduler"]
