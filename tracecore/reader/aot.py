"""Build the reader's kernels ahead of time (`python -m tracecore.reader.aot [--out DIR]`), and say
whether the build beside this file is current.

Why: numba's JIT makes every process wait before its first packet (importing numba, building its
typing and target contexts, loading the cache; bench/results/reader-notes.md has the cost).
numba.pycc compiles the very functions of kernel.py into an extension module, `_kernels_aot`,
that imports at once and needs no numba at run time. `make` builds it next to this file and the
wheel build (hatch_build.py) puts it in the wheel. This module owns what was built and whether it
is current (`current_module`); compiled.py only chooses between it and the JIT.

The module exports each kernel with the one signature the driver calls it with, plus
`fingerprint()`, a hash of the sources it was built from (aot.SOURCES), so
that an edited kernel is never run from an old build. Code is generated for a generic x86-64
(or the machine's architecture), never `-march=native`, so a built wheel runs on any machine
of that architecture.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from types import ModuleType

MODULE = "_kernels_aot"
HERE = Path(__file__).resolve().parent
SOURCES = ("kernel.py", "abi.py", "formats.py", "linktypes.py")

_ARRAYS = (
    "int64[::1], int64[::1], uint32[:, ::1], uint16[:, ::1], uint8[:, ::1], uint16[:, ::1], uint32[:, ::1], "
    "int32[:, ::1], uint64[:, ::1], uint64[:, ::1], uint64[:, ::1], uint8[::1], int64[:, ::1], int64[::1]"
)  # vx (VXLAN ports), ts_col, c32f, c16f, c8, c16, c32, cidx, keys, tab, u_key, u_kind, u_rows, st
SIGNATURES = {
    "pcap_records": "UniTuple(int64, 2)(uint8[::1], int64, boolean, boolean, int64, int64, int64, "
    f"int64, int64, {_ARRAYS})",
    "pcapng_blocks": f"UniTuple(int64, 2)(uint8[::1], int64, boolean, int64[:, ::1], int64, int64, int64, "
    f"{_ARRAYS})",
    "reset_table": "void(uint64[:, ::1], uint64[:, ::1], uint8[::1], int64[:, ::1], int64[::1])",
    "bin_bytes": "int64(int64[::1], uint32[::1], int32[::1], int32[::1], uint8[::1], int64, uint8[::1], "
    "int64, int32[::1], int32[::1], int64, int64[:, ::1], int64[::1], int64[:, ::1])",
}


def current_module() -> ModuleType | None:
    """The module beside this file when it imports and was built from the current sources."""
    try:
        module = importlib.import_module(f"tracecore.reader.{MODULE}")
        if module.fingerprint() == fingerprint():
            return module
    except (ImportError, OSError, AttributeError):  # not built, built for another ABI, sources gone
        pass
    return None


def is_current() -> bool:
    """Whether the module beside this file imports and was built from the current sources."""
    return current_module() is not None


def fingerprint(folder: Path = HERE) -> int:
    """A 62-bit hash of the kernel sources (fits a signed int64 on every side)."""
    h = hashlib.blake2b(digest_size=8)
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (folder / name).read_bytes())
    return int.from_bytes(h.digest(), "little") >> 2


def build(out_dir: Path = HERE) -> Path:
    """Compile `_kernels_aot` into `out_dir`; returns the module's path.

    Compiled in a temporary folder and renamed into place, so a failed or interrupted build
    never leaves a half-written module for compiled.py to import.
    """
    from numba.pycc import CC

    from tracecore.reader import kernel

    _release_gil_in_wrappers()

    stamp = fingerprint()

    def _fingerprint() -> int:
        return stamp

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tc-aot-") as tmp:
        cc = CC(MODULE)
        cc.output_dir = tmp
        cc.verbose = False
        cc.use_nrt = False  # the kernels allocate nothing: no reference counting (see kernel.py)
        for name, signature in SIGNATURES.items():
            cc.export(name, signature)(getattr(kernel, name).py_func)
        cc.export("fingerprint", "int64()")(_fingerprint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numba.pycc's and distutils' deprecation notices
            cc.compile()
        (built,) = Path(tmp).glob(f"{MODULE}*")
        final = out_dir / built.name
        partial = out_dir / f".{built.name}.partial"
        shutil.copyfile(built, partial)
        for old in out_dir.glob(f"{MODULE}*"):
            if old != final:  # a build for another Python version
                old.unlink()
        os.replace(partial, final)
    return final


def _release_gil_in_wrappers() -> None:
    """Make pycc's Python wrappers release the GIL around each kernel call, as `nogil=True` does.

    pycc compiles every export with a fresh `Flags()`, ignoring the function's `nogil`, so its
    wrappers would hold the GIL and two capture threads would decode one at a time (see
    bench/results/reader-notes.md). A subclass that sets `release_gil`
    is swapped in for the build; the kernels touch no Python object, so releasing it is safe.
    """
    from numba.pycc import compiler

    if getattr(compiler.Flags, "_tracecore_nogil", False):
        return

    class NoGilFlags(compiler.Flags):
        _tracecore_nogil = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.release_gil = True

    compiler.Flags = NoGilFlags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tracecore.reader.aot", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the module [tracecore/reader]")
    parser.add_argument("--if-stale", action="store_true", help="build only when missing or out of date")
    parser.add_argument(
        "--jit-cache",
        action="store_true",
        help="also fill numba's cache of the JIT kernels (TRACECORE_JIT=1), in a second process alongside",
    )
    args = parser.parse_args(argv)
    jit = _start_jit_cache() if args.jit_cache else None
    rc = _build_unless_current(args.out, args.if_stale)
    if jit is not None:
        _, err = jit.communicate()
        if jit.returncode != 0:
            print(f"tracecore.reader.aot: filling the JIT cache failed:\n{err.strip()}", file=sys.stderr)
            rc = rc or 1
    return rc


def _build_unless_current(out: Path, if_stale: bool) -> int:
    if if_stale and out.resolve() == HERE and is_current():
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("tracecore.reader.aot: no C compiler (cc/gcc) found; install gcc", file=sys.stderr)
        return 1
    path = build(out)
    print(f"built {path} (fingerprint {fingerprint():x})")
    return 0


def _start_jit_cache() -> subprocess.Popen:
    """numba compiles the JIT kernels into its on-disk cache while this process builds the module:
    two single-threaded compilations side by side (a warm cache makes it a few seconds)."""
    argv = [sys.executable, "-m", "tracecore.reader.jit_cache"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


if __name__ == "__main__":
    sys.exit(main())
