"""tracecore's reader alone: iterate `tracecore.reader.read_batches` over files, print the packet count.

python -m bench.tc_read FILE [FILE …]

Prints the packet count on stdout (what bench.peers checks) and, on stderr, the reading time
inside the process: wall and CPU seconds, GB/s and packets/s per core. The subprocess wall time
that bench.peers reports also holds interpreter start-up, imports and numba's cache load
(bench/results/reader-notes.md); this line is the reader's own throughput, and with
TC_READ_WARM=1 numba's kernels are loaded (on the embedded sample) before the clock starts.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from tracecore.reader import read_batches

    files = sys.argv[1:] if argv is None else argv
    total = 0
    if os.environ.get("TC_READ_WARM"):  # load numba's cached kernels before timing the reader itself
        from tracecore.reader import read_capture
        from tracecore.sample import sample_run

        read_capture(sample_run() / "worker-0-tcpdump.pcap")
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for path in files:
        for batch in read_batches(path):
            total += batch.num_rows
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    size = sum(os.path.getsize(p) for p in files)
    print(total)
    print(
        f"reader in-process: {wall:.3f} s wall, {cpu:.3f} s CPU, {size / cpu / 1e9:.2f} GB/s per core, "
        f"{total / cpu / 1e6:.2f} Mpkt/s per core",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
