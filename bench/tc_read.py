"""tracecore's reader alone: iterate `tracecore.reader.read_batches` over files, print the packet count.

python -m bench.tc_read FILE [FILE …]
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from tracecore.reader import read_batches

    files = sys.argv[1:] if argv is None else argv
    total = 0
    for path in files:
        for batch in read_batches(path):
            total += batch.num_rows
    print(total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
