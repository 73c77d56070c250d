"""The plain-Python peer: a dpkt loop over pcap files writing the paper's fields to Parquet.

    python -m bench.dpkt_loop --out OUT.parquet [--max-packets N] FILE [FILE …]

What a user would write without tracecore: `for ts, buf in dpkt.pcap.Reader(f)`, decode
Ethernet/IPv4/TCP|UDP, keep (time, ip.src, ip.dst, srcport, dstport, frame length), append to
column lists and write Parquet in 1 M-row row groups. Frame length is the IP total length +
14 for IPv4 frames (the capture may be truncated by the snaplen), the captured length otherwise.
`--max-packets` reads only the first N packets of each file (for prefix measurements).
Prints the number of packets read.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

import dpkt
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema(
    [
        ("ts", pa.float64()),
        ("src", pa.string()),
        ("dst", pa.string()),
        ("sport", pa.int32()),
        ("dport", pa.int32()),
        ("frame_len", pa.int32()),
    ]
)
CHUNK = 1_000_000


def _open_reader(fh):
    magic = fh.read(4)
    fh.seek(0)
    if magic == b"\x0a\x0d\x0d\x0a":
        return dpkt.pcapng.Reader(fh)
    return dpkt.pcap.Reader(fh)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.dpkt_loop")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-packets", type=int, default=0, help="per file; 0 = all")
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)

    cols: dict[str, list] = {name: [] for name in SCHEMA.names}
    total = 0
    inet_ntoa = socket.inet_ntoa
    with pq.ParquetWriter(args.out, SCHEMA) as writer:

        def flush() -> None:
            writer.write_table(pa.table(cols, schema=SCHEMA))
            for v in cols.values():
                v.clear()

        for path in args.files:
            n = 0
            with path.open("rb") as fh:
                for ts, buf in _open_reader(fh):
                    src = dst = None
                    sport = dport = None
                    flen = len(buf)
                    try:
                        eth = dpkt.ethernet.Ethernet(buf)
                        ip = eth.data
                        if isinstance(ip, dpkt.ip.IP):
                            src = inet_ntoa(ip.src)
                            dst = inet_ntoa(ip.dst)
                            flen = ip.len + 14
                            l4 = ip.data
                            if isinstance(l4, dpkt.tcp.TCP | dpkt.udp.UDP):
                                sport, dport = l4.sport, l4.dport
                    except (dpkt.UnpackError, IndexError):
                        pass
                    cols["ts"].append(float(ts))
                    cols["src"].append(src)
                    cols["dst"].append(dst)
                    cols["sport"].append(sport)
                    cols["dport"].append(dport)
                    cols["frame_len"].append(flen)
                    n += 1
                    if len(cols["ts"]) >= CHUNK:
                        flush()
                    if args.max_packets and n >= args.max_packets:
                        break
            total += n
        if cols["ts"]:
            flush()
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
