"""Wheel build hook: ships the reader's ahead-of-time kernels (tracecore/reader/aot.py) in the wheel.

Why: without them every tracecore process pays numba's JIT start-up before reading a packet
(bench/results/reader-notes.md). A module already built in the checkout from the same sources
(`make` builds one) is reused; otherwise it is compiled here (needs a C compiler). When neither
works the wheel is built pure, and tracecore falls back to the JIT at run time: slower to start,
same results.
Editable installs are left alone (`make` builds the module in place).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT = Path(__file__).resolve().parent


class AotKernels(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        sys.path.insert(0, str(ROOT))
        try:
            module = self._module()
        except Exception as err:  # no compiler, no numba: a pure wheel that uses the JIT
            warnings.warn(
                f"tracecore: ahead-of-time kernels not built ({err}); the wheel uses numba's JIT",
                stacklevel=1,
            )
            return
        finally:
            sys.path.remove(str(ROOT))
        build_data["force_include"][str(module)] = f"tracecore/reader/{module.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _module(self) -> Path:
        from tracecore.reader import aot

        if aot.is_current():
            (built,) = (ROOT / "tracecore" / "reader").glob(f"{aot.MODULE}.*")
            return built
        out = Path(tempfile.mkdtemp(prefix="tc-wheel-aot-"))
        return aot.build(out)
