"""Make a large capture by repeating real captures' records with rewritten timestamps.

python -m bench.make_rdma_capture [--out FILE] [--size 200M] [SOURCE.pcap …]

Why: the RoCE decode rate needs a capture of hundreds of MB, and the only real RoCE traffic at hand is
the small corpus in ../shared/corpus-rdma (Soft-RoCE perftest and NCCL over RoCE). Repeating its
records keeps every byte of every packet real; only the record timestamps are rewritten (one packet
per microsecond, monotone across repetitions). Without SOURCE it repeats the corpus's Ethernet RoCE
captures; with the embedded sample's pcap it makes the TCP capture for the fast-path comparison.
"""

from __future__ import annotations

import argparse
import struct
from pathlib import Path

RDMA_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus-rdma"
DEFAULT_SOURCES = ("linlinw5_*.pcap", "scapy_roce_hexcaps.pcap")
START_NS = 1_800_000_000 * 10**9
STEP_NS = 1_000


def read_records(path: Path) -> tuple[int, list[bytes]]:
    """(link type, the records' captured bytes prefixed by cap_len and orig_len) of a classic pcap."""
    data = path.read_bytes()
    magic = data[:4]
    order = {
        b"\xd4\xc3\xb2\xa1": "<",
        b"\x4d\x3c\xb2\xa1": "<",
        b"\xa1\xb2\xc3\xd4": ">",
        b"\xa1\xb2\x3c\x4d": ">",
    }
    if magic not in order:
        raise SystemExit(f"{path}: not a classic pcap file")
    e = order[magic]
    (link,) = struct.unpack_from(e + "I", data, 20)
    records, pos = [], 24
    while pos + 16 <= len(data):
        cap, orig = struct.unpack_from(e + "II", data, pos + 8)
        if pos + 16 + cap > len(data):
            break
        records.append(struct.pack("<II", cap, orig) + data[pos + 16 : pos + 16 + cap])
        pos += 16 + cap
    return link, records


def make(out: Path, size: int, sources: list[Path]) -> tuple[int, int]:
    """Write `out` (nanosecond pcap) of about `size` bytes; returns (packets, bytes)."""
    links, records = set(), []
    for src in sources:
        link, recs = read_records(src)
        links.add(link)
        records += recs
    if len(links) != 1 or not records:
        raise SystemExit(f"sources must share one link type and hold packets: {sorted(links)}")
    snaplen = max(struct.unpack_from("<I", r)[0] for r in records)
    packets, ts = 0, START_NS
    with out.open("wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, max(snaplen, 65535), links.pop()))
        written = 24
        while written < size:
            chunk = []
            for rec in records:
                chunk.append(struct.pack("<II", ts // 10**9, ts % 10**9) + rec)
                ts += STEP_NS
            blob = b"".join(chunk)
            f.write(blob)
            written += len(blob)
            packets += len(records)
    return packets, written


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.make_rdma_capture", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "sources", nargs="*", type=Path, help="classic pcap files [corpus-rdma's RoCE captures]"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/data/rdma-200M.pcap"))
    parser.add_argument("--size", type=_size, default=_size("200M"), help="about this many bytes [200M]")
    args = parser.parse_args(argv)
    sources = args.sources or sorted(p for pattern in DEFAULT_SOURCES for p in RDMA_CORPUS.glob(pattern))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    packets, written = make(args.out, args.size, sources)
    print(f"{args.out}: {packets} packets, {written} bytes from {len(sources)} source files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
