"""tshark's Info of ARP, ICMP and ICMPv6 packets, read from their frame bytes (`frames.FrameTap`).

Why here: the packet table has no ARP or ICMP fields (the reader's kernels keep transport headers only),
so `tracecore read` decodes these few packets from the frame, in the words of tshark 4.0 with its
defaults (`tshark -n`): "Who has 10.0.0.2? Tell 10.0.0.1", "Echo (ping) request  id=0x0001, seq=1/256,
ttl=64", "Neighbor Solicitation for fe80::1 from 00:11:22:33:44:55". Two of them need state across
packets, kept here as tshark keeps it: an echo reply names its request ("(request in 3)", matched on
addresses, identifier, sequence number and checksum), and an ARP packet giving an address another
MAC address gave before says so ("(duplicate use of 10.0.0.2 detected!)"). A packet cut short ends
as tshark's does, with "[Malformed Packet]" (shorter than its headers say) or "[Packet size limited
during capture]" (cut by the snapshot length) where tshark's dissector stops reading.

What is not repeated: ICMP inside a tunnel (the listing describes the outer packet), the IP fragments
after the first (no ICMP header; tshark says "Fragmented IP protocol (…)", the listing "[IP fragment]"),
ATM and AX.25 ARP, and where a corrupt packet ends: a message whose IP length disagrees with its frame,
or a rare message (extended echo, router renumbering, RPL, …) cut short inside its own fields, may end
without tshark's "[Malformed Packet]" or "[Packet size limited during capture]" (or with the other one).
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field

ICMP, ICMPV6 = 1, 58
MALFORMED = "[Malformed Packet]"
CUT_SHORT = "[Packet size limited during capture]"

# ICMP (RFC 792 and successors): tshark's words for each type and, for some types, each code
ICMP_TYPES = {
    0: "Echo (ping) reply",
    1: "Reserved",
    2: "Reserved",
    3: "Destination unreachable",
    4: "Source quench (flow control)",
    5: "Redirect",
    6: "Alternate host address",
    8: "Echo (ping) request",
    9: "Router advertisement",
    10: "Router solicitation",
    11: "Time-to-live exceeded",
    12: "Parameter problem",
    13: "Timestamp request",
    14: "Timestamp reply",
    15: "Information request",
    16: "Information reply",
    17: "Address mask request",
    18: "Address mask reply",
    19: "Reserved (for security)",
    30: "Traceroute",
    31: "Datagram Conversion Error",
    32: "Mobile Host Redirect",
    33: "IPv6 Where-Are-You",
    34: "IPv6 I-Am-Here",
    35: "Mobile Registration Request",
    36: "Mobile Registration Reply",
    37: "Domain Name Request",
    38: "Domain Name Reply",
    39: "SKIP",
    40: "Photuris",
    41: "Experimental mobility protocols",
    42: "Extended Echo request",
    43: "Extended Echo reply",
}
ICMP_CODES = {
    3: (
        "Network unreachable",
        "Host unreachable",
        "Protocol unreachable",
        "Port unreachable",
        "Fragmentation needed",
        "Source route failed",
        "Destination network unknown",
        "Destination host unknown",
        "Source host isolated",
        "Network administratively prohibited",
        "Host administratively prohibited",
        "Network unreachable for TOS",
        "Host unreachable for TOS",
        "Communication administratively filtered",
        "Host precedence violation",
        "Precedence cutoff in effect",
    ),
    5: (
        "Redirect for network",
        "Redirect for host",
        "Redirect for TOS and network",
        "Redirect for TOS and host",
    ),
    6: ("Alternate address for host",),
    9: {0: "Normal router advertisement", 16: "Does not route common traffic"},
    11: ("Time to live exceeded in transit", "Fragment reassembly time exceeded"),
    12: ("Pointer indicates the error", "Required option missing", "Bad length"),
    40: (
        "Bad SPI",
        "Authentication Failed",
        "Decompression Failed",
        "Decryption Failed",
        "Need Authentication",
        "Need Authorization",
    ),
    42: ("No error",),
    43: (
        "No error",
        "Malformed Query",
        "No Such Interface",
        "No Such Table Entry",
        "Multiple Interfaces Satisfy Query",
    ),
}
ICMP_ECHO_LIKE = (0, 8, 13, 14, 15, 16, 17, 18)  # types whose Info gives identifier, sequence number, TTL
ICMP_ERRORS = (3, 4, 11, 12)  # types that quote the packet in error (and read bytes 4-8 first)

ICMPV6_TYPES = {
    1: "Destination Unreachable",
    2: "Packet Too Big",
    3: "Time Exceeded",
    4: "Parameter Problem",
    100: "Private experimentation",
    101: "Private experimentation",
    127: "Reserved for expansion of ICMPv6 error messages",
    128: "Echo (ping) request",
    129: "Echo (ping) reply",
    130: "Multicast Listener Query",
    131: "Multicast Listener Report",
    132: "Multicast Listener Done",
    133: "Router Solicitation",
    134: "Router Advertisement",
    135: "Neighbor Solicitation",
    136: "Neighbor Advertisement",
    137: "Redirect",
    138: "Router Renumbering",
    139: "Node Information Query",
    140: "Node Information Reply",
    141: "Inverse Neighbor Discovery Solicitation",
    142: "Inverse Neighbor Discovery Advertisement",
    143: "Multicast Listener Report Message v2",
    144: "Home Agent Address Discovery Request",
    145: "Home Agent Address Discovery Reply",
    146: "Mobile Prefix Solicitation",
    147: "Mobile Prefix Advertisement",
    148: "Certification Path Solicitation",
    149: "Certification Path Advertisement",
    150: "Experimental Mobility",
    151: "Multicast Router Advertisement",
    152: "Multicast Router Solicitation",
    153: "Multicast Router Termination",
    154: "FMIPv6",
    155: "RPL Control",
    156: "Locator Update",
    157: "Duplicate Address Request",
    158: "Duplicate Address Confirmation",
    159: "MPL Control Message",
    160: "Extended Echo request",
    161: "Extended Echo reply",
    200: "Private experimentation",
    201: "Private experimentation",
    255: "Reserved for expansion of ICMPv6 informational messages",
}
ICMPV6_CODES = {
    1: (
        "no route to destination",
        "Administratively prohibited",
        "Beyond scope of source address",
        "Address unreachable",
        "Port unreachable",
        "Source address failed ingress/egress policy",
        "Reject route to destination",
        "Error in Source Routing Header",
    ),
    3: ("hop limit exceeded in transit", "fragment reassembly time exceeded"),
    4: (
        "erroneous header field encountered",
        "unrecognized Next Header type encountered",
        "unrecognized IPv6 option encountered",
        "IPv6 First Fragment has incomplete IPv6 Header Chain",
    ),
    138: {0: "Command", 1: "Result", 255: "Sequence number reset"},
    139: (
        "Query subject = IPv6 addresses",
        "Query subject = DNS name or empty",
        "Query subject = IPv4 addresses",
    ),
    140: ("Successful", "Refused", "Unknown query type"),
    155: {
        0: "DODAG Information Solicitation",
        1: "DODAG Information Object",
        2: "Destination Advertisement Object",
        3: "Destination Advertisement Object Acknowledgment",
        4: "P2P Discovery Reply Object",
        5: "P2P Discovery Reply Object Acknowledgement",
        128: "Secure DODAG Information Solicitation",
        129: "Secure DODAG Information Object",
        130: "Secure Destination Advertisement Object",
        131: "Secure Destination Advertisement Object Acknowledgment",
        132: "P2P Secure Discovery Reply Object",
        133: "P2P Secure Discovery Reply Object Acknowledgement",
        138: "Consistency Check",
    },
    160: ("No error",),
    161: (
        "No error",
        "Malformed Query",
        "No Such Interface",
        "No Such Table Entry",
        "Multiple Interfaces Satisfy Query",
    ),
}
# Experimental Mobility (150) and FMIPv6 (154): the subtype in byte 4
ICMPV6_SUBTYPES = {2: "Router Solicitation for Proxy Advertisement", 3: "Proxy Router Advertisement"}
ICMPV6_SUBTYPES |= {4: "Handover Initiate", 5: "Handover Acknowledge"}
# neighbor discovery messages: where their options start
ND_OPTIONS_AT = {133: 8, 134: 16, 135: 24, 136: 24, 137: 40, 141: 8, 142: 8}
ND_SOURCE_LINK, ND_TARGET_LINK, ND_PREFIX, ND_MTU = 1, 2, 3, 5
IPV6_EXTENSIONS = (0, 43, 60)  # hop-by-hop, routing, destination options: length in 8-octet units
IPV6_AH, IPV6_FRAGMENT = 51, 44

# ARP (RFC 826 and the IANA registry): the protocol column and the Info for each operation
ARP_PROTOCOLS = {3: "RARP", 4: "RARP", 5: "DRARP", 6: "DRARP", 7: "DRARP", 8: "Inverse ARP", 9: "Inverse ARP"}
ARP_PROTOCOLS |= dict.fromkeys(range(11, 23), "MARS") | {23: "MAPOS"}
MARS_INFO = {
    11: "MARS request",
    12: "MARS MULTI request",
    13: "MARS MSERV request",
    14: "MARS JOIN request",
    15: "MARS LEAVE",
    16: "MARS NAK",
    17: "MARS UNSERV request",
    18: "MARS SJOIN request",
    19: "MARS SLEAVE",
    20: "MARS grouplist request",
    21: "MARS grouplist reply",
    22: "MARS redirect map",
    23: "MAPOS UNARP request",
}
ETHERTYPE_ARP, ETHERTYPE_RARP, ETHERTYPE_IPV4 = 0x0806, 0x8035, 0x0800
VLAN_TAGS = (0x8100, 0x88A8, 0x9100)
HW_ETHER, HW_AX25, HW_IEEE802, HW_ATM = 1, 3, 6, 19
AX25_IP = 0xCC
LINK_ETHERNET, LINK_SLL, LINK_SLL2 = 1, 113, 276
MAX_HEX_BYTES = 36  # tshark writes longer addresses as their first 36 bytes and "…"


class _CutShortError(Exception):
    """The packet ends before a field tshark reads: its Info ends with `marker`."""

    def __init__(self, marker: str):
        self.marker = marker


@dataclass
class _Message:
    """An ICMP or ARP message: the bytes captured and the length its headers give (tshark's reported
    length); `need(n)` raises `_CutShortError` when the first n bytes are not all there."""

    data: bytes
    reported: int

    def need(self, n: int) -> None:
        if n > self.reported:
            raise _CutShortError(MALFORMED)
        if n > len(self.data):
            raise _CutShortError(CUT_SHORT)

    def u16(self, at: int) -> int:
        self.need(at + 2)
        return int.from_bytes(self.data[at : at + 2], "big")

    def u8(self, at: int) -> int:
        self.need(at + 1)
        return self.data[at]

    def take(self, at: int, n: int) -> bytes:
        self.need(at + n)
        return self.data[at : at + n]

    def peek(self, at: int, n: int) -> bytes | None:
        """The n bytes at `at`, None where they are not all there (tshark's comparisons that do not
        stop the dissection)."""
        return self.data[at : at + n] if at + n <= min(len(self.data), self.reported) else None


@dataclass
class _EchoRequest:
    """An echo request seen (its packet number) and whether a reply named it yet."""

    number: int
    answered: bool = False


@dataclass
class ArpIcmpInfo:
    """The Info of the ARP, ICMP and ICMPv6 packets of one capture, read in order (packet `number`s
    as tshark counts frames, from 1)."""

    _echo: dict[tuple, _EchoRequest] = field(default_factory=dict)
    _macs: dict[bytes, list] = field(default_factory=dict)  # IPv4 address → [MAC, packet number]

    def arp(self, number: int, frame: bytes, orig_len: int, link: int) -> tuple[str, str] | None:
        """(protocol, Info) of an ARP or RARP packet; None when the frame carries none."""
        found = _arp_payload(frame, orig_len, link)
        if found is None:
            return None
        message = _Message(*found)
        try:
            hardware = message.u16(0)
            if hardware in (HW_ATM, HW_AX25):
                return None  # tshark's ATM and AX.25 ARP dissectors: not repeated
            return self._arp(number, message, hardware)
        except _CutShortError as short:  # before the operation is read: tshark's protocol column says ARP
            return "ARP", short.marker

    def _arp(self, number: int, m: _Message, hardware: int) -> tuple[str, str]:
        """The header, then the protocol column the operation names and the Info; tshark's ARP
        dissector clears the Info first, so a packet cut short says only where it ends."""
        proto, hlen, plen, op = m.u16(2), m.u8(4), m.u8(5), m.u16(6)
        total = 8 + 2 * hlen + 2 * plen
        if total > m.reported:
            raise _CutShortError(MALFORMED)
        m.reported = total
        protocol = ARP_PROTOCOLS.get(op, "ARP")
        try:
            return protocol, self._arp_info(number, m, hardware, proto, hlen, plen, op)
        except _CutShortError as short:
            return protocol, short.marker

    def _arp_info(
        self, number: int, m: _Message, hardware: int, proto: int, hlen: int, plen: int, op: int
    ) -> str:
        """The Info of an ARP message whose header was read: tshark's sentence for its operation."""
        sha_at = 8
        spa_at = sha_at + hlen
        tha_at = spa_at + plen
        tpa_at = tha_at + hlen

        def hw(at: int) -> str:
            return _hardware_address(m.take(at, hlen), hardware)

        def pa(at: int) -> str:
            return _protocol_address(m.take(at, plen), proto)

        duplicate = None
        ethernet = hardware in (HW_ETHER, HW_IEEE802) and hlen == 6
        if op in (1, 2) and ethernet and proto in (ETHERTYPE_IPV4, AX25_IP) and plen == 4:
            duplicate = self._duplicates(number, m, op, spa_at, sha_at, tpa_at, tha_at)
        gratuitous = announcement = probe = False
        if op in (1, 2):
            gratuitous = m.take(tpa_at, plen) == m.take(spa_at, plen)
            zero_target = op == 1 and m.peek(tha_at, 6) == bytes(6)
            announcement = gratuitous and zero_target
            probe = not gratuitous and zero_target and m.take(spa_at, 4) == bytes(4)
        if op == 1:
            if announcement:
                info = f"ARP Announcement for {pa(tpa_at)}"
            elif gratuitous:
                info = f"Gratuitous ARP for {pa(tpa_at)} (Request)"
            elif probe:
                info = f"Who has {pa(tpa_at)}? (ARP Probe)"
            else:
                info = f"Who has {pa(tpa_at)}? Tell {pa(spa_at)}"
        elif op == 2:
            info = (
                f"Gratuitous ARP for {pa(spa_at)} (Reply)"
                if gratuitous
                else f"{pa(spa_at)} is at {hw(sha_at)}"
            )
        elif op in (3, 5, 8):
            info = f"Who is {hw(tha_at)}? Tell {hw(sha_at)}"
        elif op in (4, 6):
            info = f"{hw(tha_at)} is at {pa(tpa_at)}"
        elif op == 7:
            info = "DRARP Error"
        elif op == 9:
            info = f"{hw(sha_at)} is at {pa(spa_at)}"
        elif op == 10:
            info = "ARP NAK"
        elif op in MARS_INFO:
            info = f"{MARS_INFO[op]} from {hw(sha_at)} at {pa(spa_at)}"
        elif op in (24, 25):
            info = f"Experimental {op - 23} ( opcode {op} )"
        elif op in (0, 65535):
            info = f"Reserved opcode {op}"
        else:
            info = f"Unknown ARP opcode 0x{op:04x}"
        if duplicate is not None:
            info += f" (duplicate use of {ipaddress.IPv4Address(duplicate)} detected!)"
        return info

    def _duplicates(
        self, number: int, m: _Message, op: int, spa_at: int, sha_at: int, tpa_at: int, tha_at: int
    ) -> bytes | None:
        """The address this ARP packet gives another MAC address than the one first seen with it, else
        None: tshark's duplicate address detection, of the sender's address and then of a reply's
        target, the second check's verdict standing (as in tshark, whose table keeps the first MAC)."""
        detected, duplicate = False, None
        for i, (address_at, mac_at) in enumerate(((spa_at, sha_at), (tpa_at, tha_at))):
            address, mac = m.take(address_at, 4), m.take(mac_at, 6)  # the sender is kept if the target is cut
            if (
                mac[0] & 1
                or mac == bytes(6)
                or address == bytes(4)
                or (i and (op == 1 or address == duplicate))
            ):
                continue
            detected = False
            seen = self._macs.get(address)
            if seen is None:
                self._macs[address] = [mac, number]
            elif number > seen[1]:
                if seen[0] == mac:
                    seen[1] = number
                else:
                    detected, duplicate = True, address
        return duplicate if detected else None

    def icmp(
        self, number: int, frame: bytes, orig_len: int, version: int, src: str, dst: str, proto: int
    ) -> str | None:
        """The Info of an ICMP (`proto` 1) or ICMPv6 (58) packet whose outer addresses are `src` and
        `dst`; None when its headers are not found in the frame. The TTL or hop limit is said when the
        IP version is the message's (tshark's ICMP over IPv6 has none, nor its ICMPv6 over IPv4)."""
        found = _ip_payload(frame, orig_len, version, src, dst, proto)
        if found is None:
            return None
        message, hops, pair = found
        words: list[str] = []
        try:
            if proto == ICMP:
                self._icmp(number, message, hops if version == 4 else None, pair, words)
            else:
                self._icmpv6(number, message, hops if version == 6 else None, pair, words)
        except _CutShortError as short:
            words.append(short.marker)
        return "".join(words)

    def _icmp(self, number: int, m: _Message, ttl: int | None, pair: frozenset, words: list[str]) -> None:
        """ICMP's Info in `words`, read in the order tshark's dissector reads (so a short message stops
        where tshark's does): type and code, then the fields its type has."""
        kind, code = m.u8(0), m.u8(1)
        m.u8(5)  # RFC 4884's length of the quoted datagram: read before the Info is written
        name = ICMP_TYPES.get(kind, "Unknown ICMP (obsolete or malformed?)")
        if kind == 9 and code in (0, 16):
            name = "Mobile IP Advertisement"
        words.append(f"{name:<20}")
        if kind in ICMP_CODES:
            words.append(f" ({_code_name(ICMP_CODES[kind], code, 'Unknown code: {}')})")
        if kind in ICMP_ECHO_LIKE:
            ident, seq = m.u16(4), m.take(6, 2)
            words.append(
                f" id=0x{ident:04x}, seq={int.from_bytes(seq, 'big')}/{int.from_bytes(seq, 'little')}"
            )
            if ttl is not None:
                words.append(f", ttl={ttl}")
            if kind in (0, 8):
                checksum = m.u16(2)
                key = (ident << 16) | int.from_bytes(seq, "big")
                if kind == 8:
                    self._echo_request(number, (ICMP, pair, _ones_complement(~checksum, ~0x0800), key))
                else:
                    words.append(self._echo_reply((ICMP, pair, 0 if checksum == 0xFFFF else checksum, key)))
            elif kind in (13, 14):
                m.need(20)  # the three timestamps
            elif kind in (17, 18):
                m.need(12)  # the address mask
        elif kind in (42, 43):
            m.need(8)  # an extended echo's identifier, sequence number and flags
        elif kind in (*ICMP_ERRORS, 5):
            m.need(9 if kind == 5 else 8)  # a redirect reads the quoted header's length
        elif kind == 9:
            count, size = m.u8(4), m.u8(5)
            m.need(8)
            if size == 2:
                m.need(8 + 8 * count)  # the router addresses and preference levels

    def _icmpv6(self, number: int, m: _Message, hops: int | None, pair: frozenset, words: list[str]) -> None:
        """ICMPv6's Info in `words`, in the order tshark's dissector reads: type, code, checksum, then
        the fields and neighbor discovery options its type has."""
        kind = m.u8(0)
        words.append(ICMPV6_TYPES.get(kind, f"Unknown ({kind})"))
        code = m.u8(1)
        if kind in ICMPV6_CODES:
            fallback = "Unknown" if kind == 1 else "Unknown ({})"
            words.append(f" ({_code_name(ICMPV6_CODES[kind], code, fallback)})")
        checksum = m.u16(2)
        if kind in (128, 129):
            ident, seq = m.u16(4), m.u16(6)
            words.append(f" id=0x{ident:04x}, seq={seq}")
            if hops is not None:
                words.append(f", hop limit={hops}")
            key = (ident << 16) | seq
            if kind == 128:
                self._echo_request(number, (ICMPV6, pair, 0 if checksum == 0xFFFF else checksum, key))
            else:
                words.append(self._echo_reply((ICMPV6, pair, _ones_complement(~checksum, ~0x0100), key)))
        elif kind in (1, 3):
            m.u8(4)  # RFC 4884's length of the quoted datagram
            m.need(9)  # the quoted packet
        elif kind in (2, 4):
            m.need(9)  # MTU or pointer, then the quoted packet
        elif kind in (130, 131, 132):
            if kind == 130 and len(m.data) >= 28:
                m.need(28 + 16 * m.u16(26))  # MLDv2 query: its sources
            else:
                m.need(24)
        elif kind == 143:
            _mldv2_records(m)
        elif kind == 138:
            _renumbering(m, code)
        elif kind in (157, 158):
            m.need(32)  # status, lifetime, EUI-64 and registered address
        elif kind in (150, 154):
            words.append(f" ({_code_name(ICMPV6_SUBTYPES, m.u8(4), 'Unknown ({})')})")
        elif kind in ND_OPTIONS_AT:
            start = ND_OPTIONS_AT[kind]
            if kind == 135:
                words.append(f" for {_ipv6(m.take(8, 16))}")
            elif kind == 136:
                flags = m.take(4, 4)[0]
                said = [word for bit, word in ((0x80, "rtr"), (0x40, "sol"), (0x20, "ovr")) if flags & bit]
                words.append(f" {_ipv6(m.take(8, 16))} ({', '.join(said) or 'none'})")
            m.need(start)
            _nd_options(m, start, words)
        elif not 128 <= kind <= 161 and len(m.data) <= 4 < m.reported:
            raise _CutShortError(CUT_SHORT)  # tshark's catch-all for the body of a type it does not parse

    def _echo_request(self, number: int, key: tuple) -> None:
        """A request, kept under its key until a reply answers it (a later one with the same key
        replaces it, as in tshark)."""
        self._echo[key] = _EchoRequest(number)

    def _echo_reply(self, key: tuple) -> str:
        """' (request in N)' when the reply answers a request not answered yet."""
        request = self._echo.get(key)
        if request is None or request.answered:
            return ""
        request.answered = True
        return f" (request in {request.number})"


def _code_name(names: tuple | dict, code: int, fallback: str) -> str:
    name = names.get(code) if isinstance(names, dict) else (names[code] if code < len(names) else None)
    return fallback.format(code) if name is None else name


def _ones_complement(a: int, b: int) -> int:
    """tshark's in_cksum of the two 16-bit words a and b: the complement of their one's complement sum."""
    total = (a & 0xFFFF) + (b & 0xFFFF)
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def _mldv2_records(m: _Message) -> None:
    """Walk an MLDv2 report's address records (tshark reads each one whole)."""
    at = 8
    m.need(at)
    while at < m.reported:
        m.need(at + 20)
        aux, sources = m.u8(at + 1), m.u16(at + 2)
        at += 20
        for _ in range(sources):
            m.need(at + 16)
            at += 16
        if aux:
            m.need(at + 4 * aux)
            at += 4 * aux


def _renumbering(m: _Message, code: int) -> None:
    """Walk a router renumbering message: a command's match-prefix and use-prefix parts, a result's
    match reports (tshark reads each one whole)."""
    m.need(16)
    if code not in (0, 1):  # a sequence number reset, or an unknown code: no parts
        return
    at, part = 16, 32 if code == 0 else 24
    if code == 0 and at < m.reported:
        at += 24
        m.need(at)  # the match-prefix part
    while at < m.reported:
        at += part
        m.need(at)


def _nd_options(m: _Message, at: int, words: list[str]) -> None:
    """Neighbor discovery options from `at`: a source link-layer address adds ' from …', a target one
    ' is at …' (an EUI-64 target, ' from …', as tshark writes it)."""
    while at < m.reported:
        length = 8 * m.u8(at + 1)
        kind = m.u8(at)
        m.need(at + length)
        if length == 0:
            return
        if kind in (ND_SOURCE_LINK, ND_TARGET_LINK):
            if length == 8:
                mac = _mac(m.take(at + 2, 6))
                words.append(f" from {mac}" if kind == ND_SOURCE_LINK else f" is at {mac}")
            elif length == 16 and m.take(at + 10, 6) == bytes(6):
                words.append(f" from {_mac(m.take(at + 2, 8))}")
        elif kind == ND_PREFIX:
            m.need(at + 32)
        elif kind == ND_MTU:
            m.need(at + 8)
        at += length


def _ip_payload(
    frame: bytes, orig_len: int, version: int, src: str, dst: str, proto: int
) -> tuple[_Message, int, frozenset] | None:
    """The ICMP message after the outer IP header whose addresses are `src` and `dst`, the TTL or hop
    limit, and the address pair; None when no such header carries `proto`.

    Why a search for the addresses: the reader decoded the link layers already (VLAN, MPLS, PPPoE,
    pseudowires, SLL, HDLC, …) and found these addresses in the first IP header; they are 8 or 32 bytes
    at a fixed place in it, and a header is checked before it is taken."""
    if version not in (4, 6) or proto not in (ICMP, ICMPV6):
        return None
    needle = _packed(src) + _packed(dst)
    shift = 12 if version == 4 else 8
    at = frame.find(needle)
    while at >= 0:
        header = at - shift
        if header >= 0 and frame[header] >> 4 == version:
            found = (_ipv4 if version == 4 else _ipv6_payload)(frame, orig_len, header, proto)
            if found is not None:
                message, hops = found
                return message, hops, frozenset((src, dst))
        at = frame.find(needle, at + 1)
    return None


def _ipv4(frame: bytes, orig_len: int, at: int, proto: int) -> tuple[_Message, int] | None:
    size = (frame[at] & 0x0F) * 4
    if size < 20 or len(frame) < at + 20 or frame[at + 9] != proto:
        return None
    if int.from_bytes(frame[at + 6 : at + 8], "big") & 0x1FFF:
        return None  # a fragment after the first: no ICMP header
    total = int.from_bytes(frame[at + 2 : at + 4], "big") or orig_len - at  # 0: segmentation offload
    reported = min(total, orig_len - at) - size
    return _Message(frame[at + size : at + size + max(reported, 0)], reported), frame[at + 8]


def _ipv6_payload(frame: bytes, orig_len: int, at: int, proto: int) -> tuple[_Message, int] | None:
    if len(frame) < at + 40:
        return None
    payload = int.from_bytes(frame[at + 4 : at + 6], "big") or orig_len - at - 40
    end = at + 40 + min(payload, orig_len - at - 40)
    header, pos = frame[at + 6], at + 40
    while header in (*IPV6_EXTENSIONS, IPV6_AH, IPV6_FRAGMENT):
        if len(frame) < pos + 8:
            return None
        if header == IPV6_FRAGMENT:
            if int.from_bytes(frame[pos + 2 : pos + 4], "big") & 0xFFF8:
                return None  # a fragment after the first: no ICMPv6 header
            size = 8
        elif header == IPV6_AH:
            size = (frame[pos + 1] + 2) * 4
        else:
            size = (frame[pos + 1] + 1) * 8
        header, pos = frame[pos], pos + size
    if header != proto:
        return None
    return _Message(frame[pos:end], end - pos), frame[at + 7]


def _arp_payload(frame: bytes, orig_len: int, link: int) -> tuple[bytes, int] | None:
    """The ARP message of a frame (Ethernet with VLAN tags or LLC/SNAP, Linux cooked v1 and v2) and the
    length its link layer gives it; None when the frame holds none."""
    if link == LINK_ETHERNET:
        at = 12
        kind = int.from_bytes(frame[at : at + 2], "big")
        while kind in VLAN_TAGS:
            at += 4
            kind = int.from_bytes(frame[at : at + 2], "big")
        at += 2
        reported = orig_len - at
        if kind <= 1500 and frame[at : at + 3] == b"\xaa\xaa\x03":  # 802.3 length, LLC/SNAP
            reported = min(kind, reported) - 8
            kind = int.from_bytes(frame[at + 6 : at + 8], "big")
            at += 8
    elif link == LINK_SLL:
        kind, at = int.from_bytes(frame[14:16], "big"), 16
        reported = orig_len - at
    elif link == LINK_SLL2:
        kind, at = int.from_bytes(frame[0:2], "big"), 20
        reported = orig_len - at
    else:
        return None
    if kind not in (ETHERTYPE_ARP, ETHERTYPE_RARP) or len(frame) < at:
        return None
    return frame[at : at + max(reported, 0)], reported


def _hardware_address(value: bytes, hardware: int) -> str:
    if not value:
        return "<No address>"
    if hardware in (HW_ETHER, HW_IEEE802) and len(value) == 6:
        return _mac(value)
    return _hex(value)


def _protocol_address(value: bytes, proto: int) -> str:
    if not value:
        return "<No address>"
    if proto in (ETHERTYPE_IPV4, AX25_IP) and len(value) == 4:
        return str(ipaddress.IPv4Address(value))
    return _hex(value)


def _hex(value: bytes) -> str:
    if len(value) > MAX_HEX_BYTES:
        return value[:MAX_HEX_BYTES].hex() + "…"
    return value.hex()


def _mac(value: bytes) -> str:
    return value.hex(":")


def _ipv6(value: bytes) -> str:
    """An IPv6 address as tshark writes it: RFC 5952's form, save that an address whose first 96 bits
    are zero (IPv4-compatible; not :: nor ::1) or ::ffff:0:0/96 (IPv4-mapped) ends in dotted IPv4."""
    words = value[:12]
    if (words == bytes(12) and value[12:14] != b"\0\0") or words == bytes(10) + b"\xff\xff":
        return "::" + ("ffff:" if words[10] else "") + str(ipaddress.IPv4Address(value[12:]))
    return ipaddress.IPv6Address(value).compressed


@functools.lru_cache(maxsize=4096)
def _packed(address: str) -> bytes:
    return ipaddress.ip_address(address).packed
