"""The Typer application. Each command lives in its own `cli/<name>.py` with a `register(app)`."""

from __future__ import annotations

import importlib

import typer

from tracecore import __version__

# Modules under cli/ that add commands; each defines register(app: typer.Typer) -> None.
COMMAND_MODULES: list[str] = ["demo", "read", "model", "ingest", "query", "sql", "figure", "report"]

app = typer.Typer(
    name="tracecore",
    help="Network traces of distributed ML training: pcap → Parquet → SQL views → figures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tracecore {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show version."),
) -> None:
    """Network traces of distributed ML training: pcap → Parquet → SQL views → figures."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"cli.{_name}").register(app)


def main() -> None:
    app()
