"""tracecore: network traces of distributed ML training, from pcap to figures.

The library does all real work; `tracecore.cli` only parses arguments and prints.
"""

from pathlib import Path as _Path

from tracecore import _checkout

__version__ = "0.1.0"

_checkout.install(__name__, _Path(__file__).resolve().parent)
