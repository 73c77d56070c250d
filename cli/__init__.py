"""The `tracecore` command line: thin Typer commands over the `tracecore` library."""
