"""The Typer application. Each command lives in its own `cli/<name>.py` with a `register(app)`."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys

# One BLAS thread: tracecore parallelises across captures, and OpenBLAS's idle pool threads spin
# after numpy's import-time check (measured: ~0.1 CPU-s of a 2-core machine per process). Set
# before anything imports numpy; a value the user exported wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import typer

from tracecore.cli.common import PlainGroup
from tracecore.version import __version__

# Modules under cli/ that add commands; each defines register(app: typer.Typer) -> None.
COMMAND_MODULES: list[str] = [
    "demo",
    "read",
    "model",
    "ingest",
    "query",
    "explain",
    "sql",
    "figure",
    "report",
    "init",
    "run",
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tracecore {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show version."),
) -> None:
    """Network traces of distributed ML training: pcap → Parquet → SQL views → figures."""


def build_app(commands: list[str] | None = None) -> typer.Typer:
    """The Typer application with the commands of `commands` (modules under cli/; None: all)."""
    built = typer.Typer(
        name="tracecore",
        cls=PlainGroup,
        help="Network traces of distributed ML training: pcap → Parquet → SQL views → figures.",
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion
        pretty_exceptions_enable=False,
    )
    built.callback()(_root)
    for name in COMMAND_MODULES if commands is None else commands:
        importlib.import_module(f"tracecore.cli.{name}").register(built)
    return built


def __getattr__(name: str) -> typer.Typer:
    """`app`, every command, built when first asked for: `main` builds only the one it runs."""
    global app
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = build_app()
    return app


def one_command(argv: list[str], environ: dict[str, str]) -> list[str] | None:
    """The one command module a command line needs, or None for all of them.

    Why: building every command imports ten modules and has Typer read the signatures of some fifty
    parameters (~45 ms of a 0.3 s `tracecore sql`, bench/results/cli-startup.md); a command line that
    starts with a command's name is parsed by that command alone, so the others change nothing it
    prints. The root's own options (`--version`, `--help`, completion) come before any command name, and
    shell completion (`_TRACECORE_COMPLETE`) may list the commands: both get them all.
    """
    if (
        len(argv) < 2
        or argv[1] not in COMMAND_MODULES
        or any(k.startswith("_TRACECORE_COMPLETE") for k in environ)
    ):
        return None
    return [argv[1]]


def main() -> None:
    """Run the command, then exit without the interpreter's teardown.

    Why: once a command has returned, everything it wrote is closed, fsynced and renamed, yet
    Python's shutdown would still free every object and unload Arrow, DuckDB and numba: 0.2-0.4 s
    after an ingest, a sixth of the whole run. Output is flushed and the process leaves at once.
    Besides building only the command it runs (`one_command`), nothing differs from `app()`: hiding
    pandas from pyarrow here (0.3 CPU-s) failed ingest on the JIT path (tests/test_cli_jit.py runs
    this console script; bench/results/jit-startup.md; tests/test_cli_startup.py the shortcuts).
    """
    from tracecore.cli.destination import checked_stdout
    from tracecore.errors import TracecoreError

    checked_stdout()  # a write standard output refuses is one line and exit 2, whoever writes
    code: int | str | None = 0
    only = one_command(sys.argv, dict(os.environ))
    try:
        build_app(only)()
    except SystemExit as done:
        code = done.code
    except TracecoreError as err:  # outside a command's boundary: --version or --help to a full disk
        code = _said(err)
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
    except TracecoreError as err:  # what was left in the buffer: said unless an error was said already
        code = code or _said(err)
    except Exception:  # a closed pipe (`| head`) is not an error here
        pass
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code or 0)


def _said(err: Exception) -> int:
    """`err` as the boundary says it (cli.common): one line on stderr; its exit code."""
    from tracecore.terminal import safe

    print(f"Error: {safe(str(err))}", file=sys.stderr)
    return int(getattr(err, "exit_code", 1))
