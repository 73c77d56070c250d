"""`tracecore read FILE`: print or export a capture's packet table, tshark style.

Streams batch by batch, so `--limit` and `| head` stop early on huge captures. The table is
tshark's packet list; CSV, JSON and Parquet are the packet schema, written by `cli.output`.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Annotated, TextIO

import typer

from tracecore.cli.checks import check_destination
from tracecore.cli.common import PlainUsage, boundary
from tracecore.cli.destination import sink
from tracecore.cli.options import FormatOpt, Limit, Out
from tracecore.cli.output import Format, write_batches

PROTOCOLS = {
    1: "ICMP",
    2: "IGMP",
    6: "TCP",
    17: "UDP",
    41: "IPv6",
    47: "GRE",
    50: "ESP",
    58: "ICMPv6",
    132: "SCTP",
}


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
    """Read a capture and print its packets (number, time, addresses, protocol, ports, length).

    \b
    Examples:
      $ tracecore read capture.pcap --limit 10
      $ tracecore read capture.pcap --format csv --out packets.csv
      $ cat capture.pcap | tracecore read - --limit 3
    """
    from tracecore.reader import CaptureReader
    from tracecore.schema import PACKET_SCHEMA
    from tracecore.terminal import safe

    check_destination(fmt, out, limit)
    reader = CaptureReader(file, batch_rows=1 << 16)
    try:
        batches = _limited(reader.batches(), limit)
        first = next(batches, None)  # a file that is no capture fails here, before any output
        batches = itertools.chain([] if first is None else [first], batches)
        if fmt is not Format.table:
            write_batches(PACKET_SCHEMA, batches, fmt, out)
        else:
            with sink(out) as text:
                _write_lines(batches, text)
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


def _write_lines(batches, sink: TextIO) -> None:
    """One tshark-like line per packet: number, time since the first, addresses, protocol, ports, length,
    and for RoCE and tunnel packets an Info text (operation, QP, PSN; VNI and inner addresses)."""
    from tracecore.reader.names import protocol, summary

    sink.write(
        f"{'No.':>7} {'Time':>14}  {'Source':<39} {'Destination':<39} {'Protocol':<8} {'Ports':<13} "
        "Length Info\n"
    )
    number = 0
    first_ts: int | None = None
    for batch in batches:
        cols = batch.to_pydict()
        for i in range(batch.num_rows):
            number += 1
            ts = cols["ts_ns"][i]
            first_ts = ts if first_ts is None else first_ts
            proto = cols["ip_proto"][i]
            name = f"link {cols['link_type'][i]}" if proto is None else PROTOCOLS.get(proto, str(proto))
            info = ""
            if cols["rdma_opcode"][i] is not None or cols["tunnel"][i] is not None:
                row = {key: values[i] for key, values in cols.items()}
                name, info = protocol(row) or name, " " + summary(row)
            sport, dport = cols["src_port"][i], cols["dst_port"][i]
            ports = f"{sport} → {dport}" if sport is not None else ""
            line = (
                f"{number:>7} {(ts - first_ts) / 1e9:>14.9f}  {cols['src_ip'][i] or '':<39} "
                f"{cols['dst_ip'][i] or '':<39} {name:<8} {ports:<13} {cols['frame_len'][i]:<6}{info}"
            )
            sink.write(line.rstrip() + "\n")
