"""Fill numba's on-disk cache of the JIT kernels (`python -m tracecore.reader.jit_cache`).

Why: the test suite reads every capture through both builds of the kernels; numba compiling the JIT
build takes minutes, so `make test` has it done here, beside the ahead-of-time build (aot.py
--jit-cache), and every later `TRACECORE_JIT=1` process loads it from the cache. A module of its own
because it reads captures: compiled.py, which the reader imports, cannot import the reader back.
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

from tracecore.reader import compiled, read_capture

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
    os.environ["TRACECORE_JIT"] = "1"
    if compiled.kernels().source != "jit":
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


if __name__ == "__main__":  # python -m tracecore.reader.jit_cache (aot.py --jit-cache runs it)
    fill_jit_cache()
