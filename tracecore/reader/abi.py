"""What the compiled kernels and their Python driver agree on: status codes, `st` slots, errors.

Why a module of its own: the driver (capture.py, columns.py) needs these names but not the
compiler. With the ahead-of-time kernels (see compiled.py) a read never imports numba, so
nothing the driver imports may import it either.
"""

from __future__ import annotations

DEFAULT_BATCH_ROWS = 1 << 20  # rows the driver asks the kernels to fill per batch

# Kernel status codes.
ST_NEED = 0  # the record at pos is not wholly in the buffer (or pos == end)
ST_FULL = 1  # batch rows or address table full: emit the batch, call again
ST_CORRUPT = 2  # the record at pos is corrupt; st[ERR] holds an ERR_* code
ST_META = 3  # a pcapng SHB or IDB at pos: the driver parses it in Python

# st[] slots: counters shared between the kernel and the driver.
N = 0  # rows in the current batch
NUNIQ = 1  # distinct addresses in the current batch
ERR = 2  # ERR_* code of a corrupt record
LAST_TS = 3  # timestamp of the last packet (for SPBs, which have none)
UNSUPPORTED = 4  # frames whose link type has no decoder
SPB = 5  # simple packet blocks read
CAPBYTES = 6  # sum of cap_len
ERR_VALUE = 7  # the offending value of a corrupt record
NSTATE = 8

ERR_CAPLEN = 1  # pcap caplen above the limit
ERR_BLOCKLEN = 2  # pcapng block length < 12, not a multiple of 4, or huge
ERR_TRAILER = 3  # pcapng trailing block length differs
ERR_SHORTBLOCK = 4  # pcapng packet block too short for its fixed fields
ERR_IFACE = 5  # packet for an interface not declared in its section
ERR_OVERRUN = 6  # captured length overruns the block
ERR_NOIFACE = 7  # simple packet block before any IDB

ERR_MESSAGES = {
    ERR_CAPLEN: "corrupt record: captured length {} is larger than any real packet",
    ERR_BLOCKLEN: "corrupt pcapng block: total length {}",
    ERR_TRAILER: "corrupt pcapng block: trailing length {} differs from the leading one",
    ERR_SHORTBLOCK: "corrupt pcapng packet block: length {} too short for its fields",
    ERR_IFACE: "corrupt pcapng packet block: interface {} not declared in this section",
    ERR_OVERRUN: "corrupt pcapng packet block: captured length {} overruns the block",
    ERR_NOIFACE: "pcapng simple packet block before any interface description ({})",
}
