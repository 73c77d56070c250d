"""The reader's compiled kernels: built ahead of time when available, numba's JIT otherwise.

Why two ways to one code: numba's JIT makes each process wait before its first packet, while the
ahead-of-time module imports at once. Both compile the same functions of kernel.py. The module is
used when aot.py says it is current; otherwise, or with `TRACECORE_JIT=1`, numba compiles them
(and caches them on disk). Tests run the corpus through both and compare.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kernels:
    pcap_records: Callable
    pcapng_blocks: Callable
    reset_table: Callable
    bin_bytes: Callable  # ingest's bytes per (address pair, millisecond): ingest/link_bins.py
    source: str  # "aot" or "jit"


@functools.cache
def kernels() -> Kernels:
    """The kernels this process uses (chosen once)."""
    if os.environ.get("TRACECORE_JIT", "") not in ("1", "true", "yes"):
        from tracecore.reader import aot

        module = aot.current_module()
        if module is not None:
            m = module
            return Kernels(m.pcap_records, m.pcapng_blocks, m.reset_table, m.bin_bytes, "aot")
    from tracecore.reader import kernel

    return Kernels(kernel.pcap_records, kernel.pcapng_blocks, kernel.reset_table, kernel.bin_bytes, "jit")


def warm_up() -> str:
    """Load the kernels now (numba's start-up, when JIT; a no-op otherwise); returns the source."""
    chosen = kernels()
    if chosen.source == "jit":
        from tracecore.reader import kernel

        kernel.warm_up()
    return chosen.source
