"""`tracecore read FILE`: print or export a capture's packet table, tshark style.

Streams batch by batch, so `--limit` and `| head` stop early on huge captures. The table is
tshark's packet list; CSV, JSON and Parquet are the packet schema, written by `cli.output`.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated

import typer

from tracecore.cli.checks import check_destination
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.destination import sink
from tracecore.cli.options import FormatOpt, Limit, Out
from tracecore.cli.output import Format, write_batches


def register(app: typer.Typer) -> None:
    app.command("read", cls=PlainUsage)(read)


@boundary
def read(
    file: Annotated[
        Path,
        typer.Argument(help="Capture file: pcap or pcapng, plain or .gz/.xz/.zst; - for standard input."),
    ],
    limit: Limit = None,
    fmt: FormatOpt = Format.table,
    out: Out = None,
) -> None:
    """Read a capture and print its packets, tshark style, or export them.

    Each line: number, seconds since the first, source → destination, protocol, frame length and
    tshark's Info (TCP: ports, flags, Seq, Ack, Win, Len; UDP: ports, Len; ARP: who has, is at; ICMP
    and ICMPv6: type, code, id, seq, the request a reply answers; RoCE: operation, QP, PSN).
    Seq and Ack are relative, as tshark shows them by default (to the first sequence number of each
    direction); --format csv has the raw tcp_seq and tcp_ack. In a terminal each line is cut to its
    width with …; piped or written, lines stay whole.

    \b
    Examples:
      $ tracecore read capture.pcap --limit 10
      $ tracecore read capture.pcap --format csv --out packets.csv
      $ cat capture.pcap | tracecore read - --limit 3
    """
    from tracecore.cli.fit import terminal_width
    from tracecore.reader import CaptureReader
    from tracecore.reader.frames import FrameTap
    from tracecore.reader.listing import packet_lines
    from tracecore.schema import PACKET_SCHEMA
    from tracecore.terminal import safe

    check_destination(fmt, out, limit)
    frames = FrameTap() if fmt is Format.table else None  # the frames of ARP and ICMP packets, for their Info
    reader = CaptureReader(file, batch_rows=1 << 16, frames=frames)
    try:
        batches = _limited(reader.batches(), limit)
        first = next(batches, None)  # a file that is no capture fails here, before any output
        batches = itertools.chain([] if first is None else [first], batches)
        if fmt is not Format.table:
            write_batches(PACKET_SCHEMA, batches, fmt, out)
        else:
            with sink(out) as text:
                for line in packet_lines(batches, terminal_width(out), frames):
                    text.write(line + "\n")
    finally:
        for warning in reader.warnings:
            typer.echo(f"Warning: {safe(warning)}", err=True)


def _limited(batches, limit: int | None):
    if limit is None:
        yield from batches
        return
    left = limit
    for batch in batches:
        if left <= 0:
            break
        yield batch.slice(0, left)
        left -= min(left, batch.num_rows)
        if left == 0:
            break
