"""`python -m tracecore` is the `tracecore` command."""

from tracecore.cli.app import main

main()
