"""`tracecore read FILE`: print or export a capture's packet table, tshark style.

Streams batch by batch, so `--limit` and `| head` stop early on huge captures; pyarrow
and numba are imported inside the command so `tracecore --help` stays instant.
"""

from __future__ import annotations

import itertools
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer
from tracecore.cli.common import boundary

from tracecore.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

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


class Format(StrEnum):
    table = "table"
    csv = "csv"
    parquet = "parquet"


def register(app: typer.Typer) -> None:
    app.command("read")(read)


@boundary
def read(
    file: Annotated[Path, typer.Argument(help="Capture file: pcap or pcapng, plain or .gz/.xz/.zst.")],
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=0, help="Stop after N packets.")] = None,
    fmt: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.")] = None,
) -> None:
    """Read a capture and print its packets (number, time, addresses, protocol, ports, length)."""
    from tracecore.reader import CaptureReader

    if fmt is Format.parquet and out is None:
        raise UsageError("--format parquet needs --out FILE (Parquet is binary)")
    reader = CaptureReader(file, batch_rows=1 << 16)
    try:
        batches = _limited(reader.batches(), limit)
        first = next(batches, None)  # a file that is no capture fails here, before any output
        batches = itertools.chain([] if first is None else [first], batches)
        if fmt is Format.parquet:
            _write_parquet(batches, out)
        elif out is None:
            _write_text(batches, fmt, sys.stdout)
        else:
            with out.open("w", encoding="utf-8", newline="") as sink:
                _write_text(batches, fmt, sink)
    finally:
        for warning in reader.warnings:
            typer.echo(f"Warning: {warning}", err=True)


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


def _write_parquet(batches, out: Path) -> None:
    import pyarrow.parquet as pq

    from tracecore.schema import PACKET_SCHEMA

    with pq.ParquetWriter(out, PACKET_SCHEMA) as writer:
        for batch in batches:
            writer.write_batch(batch)


def _write_text(batches, fmt: Format, sink: TextIO) -> None:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    if fmt is Format.csv:
        header = True
        for batch in batches:
            plain = _plain(batch)
            buf = pa.BufferOutputStream()
            pcsv.write_csv(plain, buf, pcsv.WriteOptions(include_header=header))
            sink.write(buf.getvalue().to_pybytes().decode())
            header = False
        if header:  # no packets: still name the columns
            from tracecore.schema import PACKET_COLUMNS

            sink.write(",".join(f'"{c}"' for c in PACKET_COLUMNS) + "\n")
        return
    sink.write(
        f"{'No.':>7} {'Time':>14}  {'Source':<39} {'Destination':<39} {'Protocol':<8} {'Ports':<13} Length\n"
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
            sport, dport = cols["src_port"][i], cols["dst_port"][i]
            ports = f"{sport} → {dport}" if sport is not None else ""
            sink.write(
                f"{number:>7} {(ts - first_ts) / 1e9:>14.9f}  {cols['src_ip'][i] or '':<39} "
                f"{cols['dst_ip'][i] or '':<39} {name:<8} {ports:<13} {cols['frame_len'][i]}\n"
            )


def _plain(batch: pa.RecordBatch) -> pa.Table:
    """Dictionary columns as plain strings (the CSV writer takes no dictionaries)."""
    import pyarrow as pa

    table = pa.Table.from_batches([batch])
    for name in ("src_ip", "dst_ip"):
        i = table.schema.get_field_index(name)
        table = table.set_column(i, name, table.column(name).cast(pa.string()))
    return table
