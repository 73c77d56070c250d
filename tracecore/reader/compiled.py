"""The reader's compiled kernels: built ahead of time when available, numba's JIT otherwise.

Why two ways to one code: numba's JIT costs each process ~0.5 s before its first packet, while
the ahead-of-time module (aot.py) imports in a millisecond. Both compile the same functions of
kernel.py. The module is used when it exists and its fingerprint matches the sources beside it;
otherwise, or with `TRACECORE_JIT=1`, numba compiles them (and caches them on disk). Tests run
the corpus through both and compare.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Kernels:
    pcap_records: Callable
    pcapng_blocks: Callable
    reset_table: Callable
    source: str  # "aot" or "jit"


@functools.cache
def kernels() -> Kernels:
    """The kernels this process uses (chosen once)."""
    if os.environ.get("TRACECORE_JIT", "") not in ("1", "true", "yes"):
        module = aot_module()
        if module is not None:
            return Kernels(module.pcap_records, module.pcapng_blocks, module.reset_table, "aot")
    from tracecore.reader import kernel

    return Kernels(kernel.pcap_records, kernel.pcapng_blocks, kernel.reset_table, "jit")


def aot_module() -> object | None:
    """The ahead-of-time module when it is importable and built from the current sources."""
    from tracecore.reader import aot

    try:
        module = importlib.import_module(f"tracecore.reader.{aot.MODULE}")
        if module.fingerprint() == aot.fingerprint():
            return module
    except (ImportError, OSError, AttributeError):  # not built, built for another ABI, sources gone
        pass
    return None


def warm_up() -> str:
    """Load the kernels now (numba's start-up, when JIT; a no-op otherwise); returns the source."""
    chosen = kernels()
    if chosen.source == "jit":
        from tracecore.reader import kernel

        kernel.warm_up()
    return chosen.source
