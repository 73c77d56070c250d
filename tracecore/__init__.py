"""tracecore: network traces of distributed ML training, from pcap to figures.

The library does all real work; `tracecore.cli` only parses arguments and prints.
"""

from pathlib import Path as _Path

from tracecore import _checkout
from tracecore.version import __version__

__all__ = ["__version__", "open"]

_checkout.install(__name__, _Path(__file__).resolve().parent)


def __getattr__(name: str) -> object:
    """`tracecore.open` is imported on first use, so `import tracecore` stays instant."""
    if name == "open":
        from tracecore.dataset import open as open_dataset

        return open_dataset
    raise AttributeError(f"module 'tracecore' has no attribute {name!r}")
