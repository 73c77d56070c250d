"""Link-layer header types (tcpdump.org's LINKTYPE_* values): which ones the kernel decodes, by name.

Why plain module-level ints: numba freezes a global int into the compiled code as a constant, so
the kernel (JIT and ahead of time alike) compares against these names at no cost, and the driver's
warnings and the tests' oracle read the same ones. This module is part of the kernel's fingerprint
(aot.SOURCES).

Frames of any other link type (802.11, radiotap, PPI, FDDI, …) are kept with null network fields,
and the reader warns, naming the link type and counting its frames. They get no slower decoder of
last resort: training traffic is Ethernet, Linux SLL, raw IP, loopback or IP over InfiniBand,
all decoded here.
"""

from __future__ import annotations

LINKTYPE_NULL = 0  # BSD loopback: 4-byte address family in the writer's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_PPP = 9
LINKTYPE_RAW_BSD = 12  # raw IP, DLT_RAW as most BSDs number it
LINKTYPE_RAW_OPENBSD = 14  # raw IP, DLT_RAW as OpenBSD numbers it
LINKTYPE_PPP_HDLC = 50
LINKTYPE_RAW = 101  # raw IP, version from the first nibble
LINKTYPE_C_HDLC = 104  # Cisco HDLC
LINKTYPE_LOOP = 108  # OpenBSD loopback: address family in network byte order
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_IPOIB = 242  # IP over InfiniBand (RFC 4391): 40 bytes of addresses, ethertype, 2 reserved
LINKTYPE_LINUX_SLL2 = 276

DECODED = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_PPP,
        LINKTYPE_RAW_BSD,
        LINKTYPE_RAW_OPENBSD,
        LINKTYPE_PPP_HDLC,
        LINKTYPE_RAW,
        LINKTYPE_C_HDLC,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        LINKTYPE_IPOIB,
        LINKTYPE_LINUX_SLL2,
    }
)

# Names for warnings: the decoded types above, and undecoded ones seen in real captures.
NAMES = {
    value: name.removeprefix("LINKTYPE_") for name, value in globals().items() if name.startswith("LINKTYPE_")
} | {
    6: "IEEE802_5",
    10: "FDDI",
    105: "IEEE802_11",
    119: "IEEE802_11_PRISM",
    127: "IEEE802_11_RADIOTAP",
    192: "PPI",
    195: "IEEE802_15_4_WITHFCS",
}


def describe(link_type: int) -> str:
    """`IEEE802_11_RADIOTAP (127)`, or `127` for a link type without a name here."""
    name = NAMES.get(link_type)
    return f"{name} ({link_type})" if name else str(link_type)
