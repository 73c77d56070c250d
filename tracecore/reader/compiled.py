"""The reader's compiled kernels: built ahead of time when available, numba's JIT otherwise.

Why two ways to one code: numba's JIT makes each process wait before its first packet, while the
ahead-of-time module imports at once. Both compile the same functions of kernel.py. The module is
used when aot.py says it is current; otherwise, or with `TRACECORE_JIT=1`, numba compiles them
(and caches them on disk). Tests run the corpus through both and compare.
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


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
        from tracecore.reader import aot

        module = aot.current_module()
        if module is not None:
            return Kernels(module.pcap_records, module.pcapng_blocks, module.reset_table, "aot")
    from tracecore.reader import kernel

    return Kernels(kernel.pcap_records, kernel.pcapng_blocks, kernel.reset_table, "jit")


def warm_up() -> str:
    """Load the kernels now (numba's start-up, when JIT; a no-op otherwise); returns the source."""
    chosen = kernels()
    if chosen.source == "jit":
        from tracecore.reader import kernel

        kernel.warm_up()
    return chosen.source


# One Ethernet/IPv4/TCP frame (54 bytes) for fill_jit_cache's captures.
_FRAME = bytes.fromhex(
    "0200000000010200000000020800"  # Ethernet: dst, src, IPv4
    "45000028000040004006000a0a0000010a000002"  # IPv4: 40 bytes, TCP, 10.0.0.1 → 10.0.0.2
    "04d20050000000010000000050100100000a0000"  # TCP 1234 → 80, ACK
)


def fill_jit_cache() -> None:
    """Have numba compile every kernel with the argument types the reader passes, so its on-disk
    cache serves later `TRACECORE_JIT=1` processes (the test suite compares both builds).

    Reads a one-packet pcap and pcapng (the two kernel entry points; reset_table comes with
    them) with the JIT kernels, in a process that has not chosen its kernels yet.
    """
    from tracecore.reader import read_capture

    os.environ["TRACECORE_JIT"] = "1"
    if kernels().source != "jit":
        raise RuntimeError("fill_jit_cache: this process already uses the ahead-of-time kernels")
    frame = _FRAME
    pcap = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    pcap += struct.pack("<IIII", 1, 0, len(frame), len(frame)) + frame
    pad = frame + b"\0" * (-len(frame) % 4)
    epb_len = 32 + len(pad)
    pcapng = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
    pcapng += struct.pack("<IIHHII", 1, 20, 1, 0, 0, 20)
    pcapng += struct.pack("<IIIIIII", 6, epb_len, 0, 0, 1, len(frame), len(frame)) + pad
    pcapng += struct.pack("<I", epb_len)
    with tempfile.TemporaryDirectory(prefix="tc-jit-") as tmp:
        for name, data in (("one.pcap", pcap), ("one.pcapng", pcapng)):
            path = Path(tmp) / name
            path.write_bytes(data)
            if read_capture(path).num_rows != 1:
                raise RuntimeError(f"fill_jit_cache: {name} did not decode to one packet")


if __name__ == "__main__":  # python -m tracecore.reader.compiled (aot.py --jit-cache runs it)
    fill_jit_cache()
