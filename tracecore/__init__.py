"""tracecore: network traces of distributed ML training, from pcap to figures.

The library does all real work; `cli/` only parses arguments and prints.
"""

__version__ = "0.1.0"
