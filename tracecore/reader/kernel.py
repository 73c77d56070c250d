"""The hot loop: numba kernels that walk records in a byte buffer and fill column arrays.

Why numba and this shape: one compiled pass over the memory map writes every packet's
fields straight into preallocated numpy columns; Python runs once per batch, never per
packet. Addresses are interned into an open-addressing hash table (numpy arrays), so a
batch carries int32 dictionary indices and Python formats only the distinct addresses.

Compiled functions that take arrays pay reference counting per call, so everything called
per packet is inlined (`inline="always"`); `parse` returns scalars and `_store` writes them
(bench/results/reader-notes.md has the measurements behind this shape). Per packet the kernel
writes 14 column slots, and four for TCP's seq, ack, window and their validity: validity is one byte
of bits (abi.V_*, ip_fragment one of them; abi.TV_* for TCP's), not a byte per column, and the IP
fields' validity is ip_version != 0. A SYN's window scale option is read after the chunk, like the
RoCE and tunnel layers below. Records are parsed a chunk at a
time and the chunk's addresses interned afterwards (`_intern_rows`), which keeps the probe loop out
of the parse loop. RoCE and tunnel packets are only noted in the parse loop and decoded after the
chunk (`_pending_layers`), so the TCP path carries none of their code or values
(bench/results/rdma-reader.md).
Link types are compared by name (linktypes.py): numba compiles those globals in as constants.

A kernel returns `(status, pos)`: it stops when the batch or the address table is full,
when the next record is not wholly in the buffer (the driver refills or reports a
truncated file), at a pcapng block the driver parses itself (SHB, IDB), or at a corrupt
record (`st[ERR]` says why). Every loop advances `pos` by at least one header, so no
input can make it spin.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tracecore.reader.abi import (
    CAPBYTES,
    DST_PORT,
    ERR,
    ERR_BLOCKLEN,
    ERR_CAPLEN,
    ERR_IFACE,
    ERR_NOIFACE,
    ERR_OVERRUN,
    ERR_SHORTBLOCK,
    ERR_TRAILER,
    ERR_VALUE,
    ERR_ZEROLEN,
    F_ACK_REQ,
    F_BECN,
    F_FECN,
    F_SOLICITED,
    GENEVE_PORT,
    INNER_DST_PORT,
    INNER_PROTO,
    INNER_SRC_PORT,
    INNER_VERSION,
    IP_PROTO,
    IP_VERSION,
    L4_LEN,
    L_WSCALE,
    LAST_TS,
    LATE,
    LAYERS,
    NSTATE,
    NUNIQ,
    R_AETH,
    R_DETH,
    R_PAYLOAD_LEN,
    R_RETH,
    RDMA_DEST_QP,
    RDMA_DETH_SRC_QP,
    RDMA_FLAGS,
    RDMA_OPCODE,
    RDMA_PAYLOAD_LEN,
    RDMA_PSN,
    RDMA_RETH_DMA_LEN,
    RDMA_SYNDROME,
    RDMA_VALID,
    ROCEV2_PORT,
    SPB,
    SRC_PORT,
    ST_CORRUPT,
    ST_FULL,
    ST_META,
    ST_NEED,
    T_INNER_PORTS,
    TCP_ACK,
    TCP_FLAGS,
    TCP_SEQ,
    TCP_VALID,
    TCP_WINDOW,
    TCP_WSCALE,
    TOS,
    TUNNEL,
    TUNNEL_GENEVE,
    TUNNEL_VALID,
    TUNNEL_VXLAN,
    TV_ACK,
    TV_SEQ,
    TV_WINDOW,
    TV_WSCALE,
    UNSUPPORTED,
    V_FRAGMENT,
    V_PORTS,
    V_RDMA,
    V_RDMA_SHORT,
    V_TUNNEL,
    V_TUNNEL_SHORT,
    VALID,
    VNI,
    N,
)
from tracecore.reader.formats import MAX_BLOCK
from tracecore.reader.linktypes import (
    LINKTYPE_C_HDLC,
    LINKTYPE_ETHERNET,
    LINKTYPE_IPOIB,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_LOOP,
    LINKTYPE_NULL,
    LINKTYPE_PPP,
    LINKTYPE_PPP_HDLC,
    LINKTYPE_RAW,
    LINKTYPE_RAW_BSD,
    LINKTYPE_RAW_OPENBSD,
)

U64 = np.uint64


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _u16be(b, p):
    return (np.int64(b[p]) << 8) | np.int64(b[p + 1])


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _u32(b, p, big):
    if big:
        return (
            (np.int64(b[p]) << 24)
            | (np.int64(b[p + 1]) << 16)
            | (np.int64(b[p + 2]) << 8)
            | np.int64(b[p + 3])
        )
    return (
        (np.int64(b[p + 3]) << 24) | (np.int64(b[p + 2]) << 16) | (np.int64(b[p + 1]) << 8) | np.int64(b[p])
    )


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _u64be(b, p):
    v = U64(0)
    for i in range(8):
        v = (v << U64(8)) | U64(b[p + i])
    return v


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _intern(hi, lo, kind, tab, u_key, u_kind, st):
    """Dictionary index of address (hi, lo, kind); adds it when new. Load stays <= 1/2."""
    mask = U64(tab.shape[0] - 1)
    h = hi * U64(0x9E3779B97F4A7C15) ^ lo * U64(0xC2B2AE3D27D4EB4F) ^ U64(kind)
    h ^= h >> U64(31)
    h *= U64(0xBF58476D1CE4E5B9)
    h ^= h >> U64(29)
    i = np.int64(h & mask)
    while True:
        idx = tab[i, 2]
        if idx == 0:
            new = st[NUNIQ]
            tab[i, 0] = hi
            tab[i, 1] = lo
            tab[i, 2] = U64(new + 1)
            u_key[new, 0] = hi
            u_key[new, 1] = lo
            u_kind[new] = kind
            st[NUNIQ] = new + 1
            return new
        j = np.int64(idx) - 1
        if tab[i, 0] == hi and tab[i, 1] == lo and u_kind[j] == kind:
            return j
        i = (i + 1) & np.int64(mask)


@njit(nogil=True, cache=True, _nrt=False)
def reset_table(tab, u_key, u_kind, u_rows, st):
    """Empty the address table (and its row counts) by re-probing only the slots this batch used."""
    mask = tab.shape[0] - 1
    for j in range(st[NUNIQ]):
        u_rows[j, 0] = 0
        u_rows[j, 1] = 0
        hi = u_key[j, 0]
        lo = u_key[j, 1]
        h = hi * U64(0x9E3779B97F4A7C15) ^ lo * U64(0xC2B2AE3D27D4EB4F) ^ U64(u_kind[j])
        h ^= h >> U64(31)
        h *= U64(0xBF58476D1CE4E5B9)
        h ^= h >> U64(29)
        i = np.int64(h & U64(mask))
        while tab[i, 2] != U64(j + 1):
            i = (i + 1) & mask
        tab[i, 0] = 0
        tab[i, 1] = 0
        tab[i, 2] = 0
    st[NUNIQ] = 0


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _ethernet(buf, p, end):
    """Ethernet II / 802.3+SNAP, then `_ethertype`; an MPLS Ethernet pseudowire is
    decoded once more as Ethernet."""
    for _depth in range(2):
        if end - p < 14:
            return -1, p
        et, q = _ethertype(buf, _u16be(buf, p + 12), p + 14, end)
        if et != ET_INNER_ETHERNET:
            return et, q
        p = q
    return -1, p


ET_INNER_ETHERNET = -3


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _ethertype(buf, et, q, end):
    """From an ethertype (or 802.3 length) whose payload starts at q, through 802.1Q/802.1ad
    tags, LLC/SNAP, PPPoE session and MPLS, to (protocol, offset). Shared by Ethernet and
    Linux SLL/SLL2. ET_INNER_ETHERNET: an Ethernet frame starts at offset (pseudowire)."""
    while (et == 0x8100 or et == 0x88A8 or et == 0x9100) and q + 4 <= end:
        et = _u16be(buf, q + 2)
        q += 4
    if et < 0x0600:  # 802.3 length (or SLL's LLC protocol): only LLC/SNAP carries an ethertype
        if q + 8 <= end and buf[q] == 0xAA and buf[q + 1] == 0xAA and buf[q + 2] == 3:
            et = _u16be(buf, q + 6)
            q += 8
        else:
            return -1, q
    if et == 0x8864:  # PPPoE session: 6-byte header, then the PPP protocol
        if q + 8 > end:
            return -1, q
        ppp = _u16be(buf, q + 6)
        return (0x0800 if ppp == 0x21 else (0x86DD if ppp == 0x57 else -1)), q + 8
    if et != 0x8847 and et != 0x8848:
        return et, q
    while q + 4 <= end:  # MPLS: pop labels to the bottom of the stack
        bos = buf[q + 2] & 1
        q += 4
        if bos:
            break
    if q >= end:
        return -1, q
    nib = buf[q] >> 4
    if nib == 4:
        return 0x0800, q
    if nib == 6:
        return 0x86DD, q
    if nib != 0:
        return -1, q
    return ET_INNER_ETHERNET, q + 4  # pseudowire control word, then an Ethernet frame


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _net_type(buf, p, end, link):
    """(ethertype-like protocol, offset of the network header); -1 = no IP, -2 = unknown link.

    Link types are compared one by one (SIM109 silenced): plain integer compares per packet, with
    no tuple for numba to type and build."""
    cap = end - p
    if link == LINKTYPE_ETHERNET:
        return _ethernet(buf, p, end)
    if link == LINKTYPE_LINUX_SLL or link == LINKTYPE_LINUX_SLL2:  # noqa: SIM109
        if link == LINKTYPE_LINUX_SLL:
            if cap < 16:
                return -1, p
            et, q = _ethertype(buf, _u16be(buf, p + 14), p + 16, end)
        else:
            if cap < 20:
                return -1, p
            et, q = _ethertype(buf, _u16be(buf, p), p + 20, end)
        if et == ET_INNER_ETHERNET:
            return _ethernet(buf, q, end)
        return et, q
    if link == LINKTYPE_RAW or link == LINKTYPE_RAW_BSD or link == LINKTYPE_RAW_OPENBSD:  # noqa: SIM109
        if cap < 1:
            return -1, p
        nib = buf[p] >> 4
        return (0x0800 if nib == 4 else (0x86DD if nib == 6 else -1)), p
    if link == LINKTYPE_IPV4:
        return 0x0800, p
    if link == LINKTYPE_IPV6:
        return 0x86DD, p
    if link == LINKTYPE_NULL or link == LINKTYPE_LOOP:  # noqa: SIM109
        if cap < 4:
            return -1, p
        if link == LINKTYPE_LOOP:
            af = _u32(buf, p, True)
        else:
            af = _u32(buf, p, False)
            if af > 0xFFFF:  # written on a big-endian host
                af = _u32(buf, p, True)
        if af == 2:
            return 0x0800, p + 4
        if af == 10 or af == 24 or af == 28 or af == 30:
            return 0x86DD, p + 4
        return -1, p
    if link == LINKTYPE_IPOIB:  # 40 bytes of addresses, ethertype, 2 reserved (tcpdump's print-ipoib.c)
        if cap < 44:
            return -1, p
        return _u16be(buf, p + 40), p + 44
    if link == LINKTYPE_C_HDLC:  # address, control, ethertype
        if cap < 4:
            return -1, p
        return _u16be(buf, p + 2), p + 4
    if link == LINKTYPE_PPP or link == LINKTYPE_PPP_HDLC:  # noqa: SIM109 (HDLC framing optional)
        q = p
        if q + 2 <= end and buf[q] == 0xFF and buf[q + 1] == 0x03:
            q += 2
        if q + 2 > end:
            return -1, p
        ppp = _u16be(buf, q)
        return (0x0800 if ppp == 0x21 else (0x86DD if ppp == 0x57 else -1)), q + 2
    return -2, p


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _no_rd():
    z = np.int64(0)
    return (z, z, z, z, z, z, z, z, z)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _no_tn():
    z = np.int64(0)
    u = U64(0)
    return (z, z, z, z, z, z, z, u, u, u, u)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _no_ip(known, layer, at):
    """`parse`'s fields of a frame without IP: whether its link type is known and, for RoCE v1, its
    LAYER_* code and offset (0, 0 otherwise)."""
    z = U64(0)
    i = np.int64(0)
    return (known, i, i, i, i, i, i, i, i, z, z, z, z, i, np.int64(layer), np.int64(at), i, i, i, i, i)


# What `parse` found beyond IP for `_layers` to decode (its LAYER_* code; 0: nothing).
LAYER_ROCEV2 = 1  # a BTH at the UDP payload
LAYER_VXLAN = 2
LAYER_GENEVE = 3
LAYER_ROCEV1 = 4  # a GRH, then a BTH (ethertype 0x8915)
LAYER_TCP_SYN = 5  # a TCP SYN with options: its window scale (`_window_scale`)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _u24(b, p):
    return (np.int64(b[p]) << 16) | (np.int64(b[p + 1]) << 8) | np.int64(b[p + 2])


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _ext_headers(op):
    """(bytes of extension headers after the BTH, RETH offset, AETH offset, DETH offset) of a BTH
    opcode (IBA vol. 1, table 37; offsets -1 where absent); bytes -1: an opcode without a layout."""
    if op == 0x81:  # RoCEv2 CNP: 16 reserved bytes
        return 16, -1, -1, -1
    kind = op >> 5
    code = op & 31
    if kind == 3:  # UD: SEND Only (with Immediate)
        if code == 4:
            return 8, -1, -1, 0
        if code == 5:
            return 12, -1, -1, 0
        return -1, -1, -1, -1
    base = 0
    deth = -1
    if kind == 2:  # RD: RDETH, then DETH, before the rest
        base = 12
        deth = 4
    elif kind > 2 or (kind == 1 and code > 0x0B):
        return -1, -1, -1, -1
    if code <= 2 or code == 4 or code == 7 or code == 8 or code == 0x0E:
        return base, -1, -1, deth
    if code == 3 or code == 5 or code == 9 or code == 0x16 or code == 0x17:  # ImmDt or IETH
        return base + 4, -1, -1, deth
    if code == 6 or code == 0x0A or code == 0x0C:
        return base + 16, base, -1, deth
    if code == 0x0B:  # RETH + ImmDt
        return base + 20, base, -1, deth
    if code == 0x0D or code == 0x0F or code == 0x10 or code == 0x11:
        return base + 4, -1, base, deth
    if code == 0x12:  # AETH + AtomicAckETH
        return base + 12, -1, base, deth
    if code == 0x13 or code == 0x14:  # AtomicETH
        return base + 28, -1, -1, deth
    return -1, -1, -1, -1


@njit(nogil=True, cache=True, _nrt=False)
def _bth(buf, b, end, ulen):
    """The BTH at b and its extension headers: (rdma fields, validity bits). `ulen` = bytes from the
    BTH to the end of the ICRC per the IP/GRH lengths, -1 when unknown.

    rdma fields: (opcode, flags, AETH syndrome, RDMA_VALID bits, dest QP, PSN, payload bytes,
    RETH DMA length, DETH source QP). A BTH cut short gives no fields and V_RDMA_SHORT."""
    if b + 12 > end:
        return _no_rd(), np.int64(V_RDMA_SHORT)
    op = np.int64(buf[b])
    b1 = np.int64(buf[b + 1])
    b4 = np.int64(buf[b + 4])
    flags = (
        ((np.int64(buf[b + 8]) >> 7) * F_ACK_REQ)
        | ((b1 >> 7) * F_SOLICITED)
        | ((b4 >> 7) * F_FECN)
        | (((b4 >> 6) & 1) * F_BECN)
    )
    ext, reth, aeth, deth = _ext_headers(op)
    bits = np.int64(V_RDMA)
    rvalid = np.int64(0)
    syn = np.int64(0)
    plen = np.int64(0)
    dmalen = np.int64(0)
    srcqp = np.int64(0)
    if ext >= 0:
        h = b + 12
        if h + ext > end:
            bits |= V_RDMA_SHORT
        else:
            if reth >= 0:
                dmalen = _u32(buf, h + reth + 12, True)
                rvalid |= R_RETH
            if aeth >= 0:
                syn = np.int64(buf[h + aeth])
                rvalid |= R_AETH
            if deth >= 0:
                srcqp = _u24(buf, h + deth + 5)
                rvalid |= R_DETH
        if ulen >= 0:
            plen = ulen - 12 - ext - 4 - ((b1 >> 4) & 3)
            if plen >= 0:
                rvalid |= R_PAYLOAD_LEN
            else:
                plen = np.int64(0)
    rd = (op, flags, syn, rvalid, _u24(buf, b + 5), _u24(buf, b + 9), plen, dmalen, srcqp)
    return rd, bits


@njit(nogil=True, cache=True, _nrt=False)
def _tunnel(buf, u, end, kind):
    """The VXLAN or Geneve header at u (the UDP payload) and the packet inside it: (rdma fields,
    tunnel fields, validity bits). Tunnel fields: (kind, VNI, inner IP version, inner protocol,
    TUNNEL_VALID bits, inner ports, inner address keys); RoCEv2 inside fills the rdma fields."""
    none = np.int64(0)
    if u + 8 > end:
        return _no_rd(), _no_tn(), np.int64(V_TUNNEL_SHORT)
    if kind == TUNNEL_VXLAN:
        if (buf[u] & 0x08) == 0:  # the I flag: without it this is no VXLAN header
            return _no_rd(), _no_tn(), none
        q = u + 8
        et = np.int64(0x6558)
    else:
        if (buf[u] >> 6) != 0:  # Geneve version 0 only
            return _no_rd(), _no_tn(), none
        q = u + 8 + np.int64(buf[u] & 0x3F) * 4  # options skipped
        et = _u16be(buf, u + 2)
    vni = _u24(buf, u + 4)
    bits = np.int64(V_TUNNEL)
    if et == 0x6558:  # an Ethernet frame
        if q + 14 > end:
            return (
                _no_rd(),
                (kind, vni, none, none, none, none, none, U64(0), U64(0), U64(0), U64(0)),
                bits | V_TUNNEL_SHORT,
            )
        et, q = _ethernet(buf, q, end)
    ver = np.int64(0)
    pr = np.int64(0)
    s_hi = U64(0)
    s_lo = U64(0)
    d_hi = U64(0)
    d_lo = U64(0)
    first = True
    payload = np.int64(-1)
    t = q
    if et == 0x0800:
        if q + 20 > end:
            bits |= V_TUNNEL_SHORT
        elif (buf[q] >> 4) == 4 and (buf[q] & 15) >= 5:
            ihl = np.int64(buf[q] & 15) * 4
            ver = np.int64(4)
            pr = np.int64(buf[q + 9])
            s_lo = U64(_u32(buf, q + 12, True))
            d_lo = U64(_u32(buf, q + 16, True))
            first = (_u16be(buf, q + 6) & 0x1FFF) == 0
            payload = _u16be(buf, q + 2) - ihl
            t = q + ihl
    elif et == 0x86DD:
        if q + 40 > end:
            bits |= V_TUNNEL_SHORT
        elif (buf[q] >> 4) == 6:
            ver = np.int64(6)
            pr = np.int64(buf[q + 6])
            s_hi = _u64be(buf, q + 8)
            s_lo = _u64be(buf, q + 16)
            d_hi = _u64be(buf, q + 24)
            d_lo = _u64be(buf, q + 32)
            t = q + 40
            while pr == 0 or pr == 43 or pr == 60 or pr == 51 or pr == 44:
                if t + 8 > end:
                    bits |= V_TUNNEL_SHORT
                    break
                hl = (np.int64(buf[t + 1]) + 2) * 4 if pr == 51 else (np.int64(buf[t + 1]) + 1) * 8
                if pr == 44:
                    hl = np.int64(8)
                    first = (_u16be(buf, t + 2) & 0xFFF8) == 0
                if t + hl > end:
                    bits |= V_TUNNEL_SHORT
                    break
                pr = np.int64(buf[t])
                t += hl
                if not first:
                    break
            payload = _u16be(buf, q + 4) + 40 - (t - q)
    sport = np.int64(0)
    dport = np.int64(0)
    tvalid = np.int64(0)
    rd = _no_rd()
    if ver != 0 and first and (pr == 6 or pr == 17 or pr == 132 or pr == 136):
        if t + 4 > end:
            bits |= V_TUNNEL_SHORT
        else:
            sport = _u16be(buf, t)
            dport = _u16be(buf, t + 2)
            tvalid = np.int64(T_INNER_PORTS)
            if pr == 17 and dport == ROCEV2_PORT:
                rd, rbits = _bth(buf, t + 8, end, payload - 8 if payload >= 8 else np.int64(-1))
                bits |= rbits
    return rd, (kind, vni, ver, pr, tvalid, sport, dport, s_hi, s_lo, d_hi, d_lo), bits


@njit(nogil=True, cache=True, _nrt=False)
def _layers(buf, layer, at, end, ulen, n, r, c8, c16, c32, keys):
    """Decode what `parse` found beyond IP at `at` (a LAYER_* code) and write its columns to row n and
    the inner address keys to scratch row r; returns the validity bits (abi.V_*) to add.

    Not inlined, and called only for RoCE and tunnel packets: the TCP path neither runs nor carries
    any of it (its values would be live across the parse loop otherwise), so it costs TCP nothing."""
    tn = _no_tn()
    if layer == LAYER_ROCEV2:
        rd, bits = _bth(buf, at, end, ulen)
    elif layer == LAYER_ROCEV1:
        if at + 40 > end:
            return np.int64(V_RDMA_SHORT)
        if buf[at + 6] != 0x1B:  # the GRH's next header is not a BTH
            return np.int64(0)
        rd, bits = _bth(buf, at + 40, end, _u16be(buf, at + 4))
    else:
        rd, tn, bits = _tunnel(
            buf, at, end, np.int64(TUNNEL_VXLAN if layer == LAYER_VXLAN else TUNNEL_GENEVE)
        )
    if bits & V_RDMA:
        op, rflags, syn, rvalid, qp, psn, plen, dmalen, srcqp = rd
        c8[RDMA_OPCODE, n] = op
        c8[RDMA_FLAGS, n] = rflags
        c8[RDMA_SYNDROME, n] = syn
        c8[RDMA_VALID, n] = rvalid
        c32[RDMA_DEST_QP, n] = qp
        c32[RDMA_PSN, n] = psn
        c32[RDMA_PAYLOAD_LEN, n] = plen
        c32[RDMA_RETH_DMA_LEN, n] = dmalen
        c32[RDMA_DETH_SRC_QP, n] = srcqp
    if bits & V_TUNNEL:
        kind, vni, iver, ipr, tvalid, isport, idport, is_hi, is_lo, id_hi, id_lo = tn
        c8[TUNNEL, n] = kind
        c8[INNER_VERSION, n] = iver
        c8[INNER_PROTO, n] = ipr
        c8[TUNNEL_VALID, n] = tvalid
        c16[INNER_SRC_PORT, n] = isport
        c16[INNER_DST_PORT, n] = idport
        c32[VNI, n] = vni
        keys[4, r] = is_hi
        keys[5, r] = is_lo
        keys[6, r] = id_hi
        keys[7, r] = id_lo
    return bits


@njit(nogil=True, cache=True, _nrt=False)
def _window_scale(buf, t, end, hdr):
    """The shift count of the window scale option (RFC 7323, kind 3, length 3) among the options of
    the TCP header at t (`hdr` bytes long) as far as the capture holds them; -1 when there is none.
    The walk stops at End of Option List, at a length below 2 and at the captured end, as tshark's."""
    p = t + 20
    stop = min(t + hdr, end)
    while p < stop:
        kind = np.int64(buf[p])
        if kind == 0:
            return np.int64(-1)
        if kind == 1:
            p += 1
            continue
        if p + 2 > stop:
            return np.int64(-1)
        size = np.int64(buf[p + 1])
        if size < 2 or p + size > stop:
            return np.int64(-1)
        if kind == 3 and size == 3:
            return np.int64(buf[p + 2])
        p += size
    return np.int64(-1)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _udp_layer(dport, vx):
    """The LAYER_* code of a UDP destination port: RoCEv2's, Geneve's, one of the VXLAN ports `vx`,
    or 0."""
    if dport == ROCEV2_PORT:
        return LAYER_ROCEV2
    if dport == GENEVE_PORT:
        return LAYER_GENEVE
    for i in range(vx.shape[0]):
        if vx[i] == dport:
            return LAYER_VXLAN
    return 0


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def parse(buf, p, cap, orig, link, vx):
    """Network fields of the frame at buf[p:p+cap], as a tuple of scalars:
    (link known, ip_version (0 = none), ip_proto, ip_fragment, src_port, dst_port, tcp_flags,
    l4_payload_len, validity bits (abi.V_*), src key hi/lo, dst key hi/lo, IP TOS / traffic class,
    LAYER_* code, its offset, its length per the IP lengths (-1: unknown; a SYN's: its TCP header
    length), tcp seq, ack, window, TCP_VALID bits): `_layers` decodes the RoCE or tunnel headers a
    nonzero LAYER_* code points at, `_window_scale` a SYN's options.

    Why a tuple and not column stores: a call that takes arrays pays reference counting on
    each, per packet; this call takes only `buf`, and `_store` (inlined) writes the columns.
    """
    end = p + cap
    et, q = _net_type(buf, p, end, link)
    if et == -2:
        return _no_ip(False, 0, 0)
    if et == 0x0800 and q < end and (buf[q] >> 4) == 6:
        et = 0x86DD  # IPv4 ethertype but an IPv6 header: decode what is there, as tshark does
    frag = np.int64(0)
    if et == 0x0800:
        if q + 20 > end or (buf[q] >> 4) != 4:
            return _no_ip(True, 0, 0)
        ihl = np.int64(buf[q] & 15) * 4
        if ihl < 20:
            return _no_ip(True, 0, 0)
        tos = np.int64(buf[q + 1])
        total = _u16be(buf, q + 2)
        fo = _u16be(buf, q + 6)
        pr = np.int64(buf[q + 9])
        version = np.int64(4)
        frag = np.int64(1) if (fo & 0x3FFF) != 0 else np.int64(0)
        s_hi = U64(0)
        s_lo = U64(_u32(buf, q + 12, True))
        d_hi = U64(0)
        d_lo = U64(_u32(buf, q + 16, True))
        if total == 0:  # TSO/GSO captures leave it zero: fall back to the wire length
            total = orig - (q - p)
        payload = total - ihl
        t = q + ihl
        first = (fo & 0x1FFF) == 0
    elif et == 0x86DD:
        if q + 40 > end or (buf[q] >> 4) != 6:
            return _no_ip(True, 0, 0)
        tos = ((np.int64(buf[q]) & 15) << 4) | (np.int64(buf[q + 1]) >> 4)
        plen = _u16be(buf, q + 4)
        pr = np.int64(buf[q + 6])
        version = np.int64(6)
        s_hi = _u64be(buf, q + 8)
        s_lo = _u64be(buf, q + 16)
        d_hi = _u64be(buf, q + 24)
        d_lo = _u64be(buf, q + 32)
        t = q + 40
        first = True
        while True:
            if pr == 0 or pr == 43 or pr == 60 or pr == 51:
                if t + 2 > end:
                    break
                hl = (np.int64(buf[t + 1]) + 2) * 4 if pr == 51 else (np.int64(buf[t + 1]) + 1) * 8
                if t + hl > end:  # header not wholly captured: its Next Header is not trusted
                    break
                pr = np.int64(buf[t])
                t += hl
            elif pr == 44:
                if t + 8 > end:
                    break
                frag = np.int64(1)
                first = (_u16be(buf, t + 2) & 0xFFF8) == 0
                pr = np.int64(buf[t])
                t += 8
                if not first:
                    break
            else:
                break
        total = (plen + 40) if plen != 0 else orig - (q - p)
        payload = total - (t - q)
    elif et == 0x8915:
        return _no_ip(True, LAYER_ROCEV1, q)
    else:
        return _no_ip(True, 0, 0)
    sport = np.int64(0)
    dport = np.int64(0)
    flags = np.int64(0)
    l4 = np.int64(0)
    valid = np.int64(0)
    layer = np.int64(0)
    ulen = np.int64(0)
    seq = np.int64(0)
    ack = np.int64(0)
    win = np.int64(0)
    tvalid = np.int64(0)
    if not first:  # a later fragment: no layer-4 header, all of its payload counts
        if payload >= 0:
            l4 = payload
            valid = np.int64(4)
    elif pr == 6:
        if t + 4 <= end:
            sport = _u16be(buf, t)
            dport = _u16be(buf, t + 2)
            valid = np.int64(1)
        if t + 16 <= end:  # the whole fixed header but its checksum and urgent pointer: the usual case
            seq = _u32(buf, t + 4, True)
            ack = _u32(buf, t + 8, True)
            win = _u16be(buf, t + 14)
            tvalid = np.int64(TV_SEQ | TV_ACK | TV_WINDOW)
        elif t + 8 <= end:  # a header cut short: each field once its bytes are there
            seq = _u32(buf, t + 4, True)
            tvalid = np.int64(TV_SEQ)
            if t + 12 <= end:
                ack = _u32(buf, t + 8, True)
                tvalid |= TV_ACK
        if t + 14 <= end:  # up to the flags; a header cut shorter gives no flags and no length
            flags = ((np.int64(buf[t + 12]) & 1) << 8) | np.int64(buf[t + 13])
            valid |= 2
            hdr = (np.int64(buf[t + 12]) >> 4) * 4
            if payload >= hdr:
                l4 = payload - hdr
                valid |= 4
            if (flags & 2) and hdr > 20:  # a SYN's options: decoded after the chunk
                layer = np.int64(LAYER_TCP_SYN)
                ulen = hdr
    else:
        if (pr == 17 or pr == 132 or pr == 136) and t + 4 <= end:
            sport = _u16be(buf, t)
            dport = _u16be(buf, t + 2)
            valid = np.int64(1)
        hdr = np.int64(8) if (pr == 17 or pr == 136) else (np.int64(12) if pr == 132 else np.int64(0))
        if payload >= hdr:
            l4 = payload - hdr
            valid |= 4
        if pr == 17 and (valid & V_PORTS):
            layer = _udp_layer(dport, vx)
            ulen = l4 if payload >= 8 else np.int64(-1)
            t += 8
    return (
        True,
        version,
        pr,
        frag,
        sport,
        dport,
        flags,
        l4,
        valid,
        s_hi,
        s_lo,
        d_hi,
        d_lo,
        tos,
        layer,
        t,
        ulen,
        seq,
        ack,
        win,
        tvalid,
    )


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _store(f, n, r, c8, c16, c32, keys):
    """Write one packet's parsed fields to row n and its address keys to scratch row r;
    returns whether the link type was known.

    Row numbers are abi's (IP_VERSION, …); the RDMA and tunnel rows are `_layers`'s. keys rows: src hi,
    src lo, dst hi, dst lo (the inner ones, rows 4-7, are `_layers`'s; see `_intern_rows`).
    """
    (
        known,
        version,
        pr,
        frag,
        sport,
        dport,
        flags,
        l4,
        valid,
        s_hi,
        s_lo,
        d_hi,
        d_lo,
        tos,
        _,
        _,
        _,
        seq,
        ack,
        win,
        tv,
    ) = f
    c8[IP_VERSION, n] = version
    c8[IP_PROTO, n] = pr
    c8[TOS, n] = tos
    c8[VALID, n] = valid | (frag * V_FRAGMENT)
    c8[TCP_VALID, n] = tv
    c16[SRC_PORT, n] = sport
    c16[DST_PORT, n] = dport
    c16[TCP_FLAGS, n] = flags
    c16[TCP_WINDOW, n] = win
    c32[L4_LEN, n] = l4
    c32[TCP_SEQ, n] = seq
    c32[TCP_ACK, n] = ack
    keys[0, r] = s_hi
    keys[1, r] = s_lo
    keys[2, r] = d_hi
    keys[3, r] = d_lo
    return known


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _row(buf, p, cap, orig, ts, ifid, link, n, first, cols, npend):
    """Row n: the record's frame fields, then its parsed fields (`_store`); returns whether its
    link type is known and the count of RoCE/tunnel rows pending in the chunk. `cols` = (ts, c32f,
    c16f, c8, c16, c32, keys, vx): the kernel's arrays and the VXLAN ports.

    A row with a RoCE or tunnel layer is only noted (keys rows 8-12, slot `npend`: row, LAYER_*
    code, offset, end, length + 1); `_pending_layers` decodes it after the chunk, so the parse loop
    holds no call and no interning beyond what TCP needs."""
    ts_col, c32f, c16f, c8, c16, c32, keys, vx = cols
    ts_col[n] = ts
    c32f[0, n] = orig
    c32f[1, n] = cap
    c16f[0, n] = ifid
    c16f[1, n] = link
    f = parse(buf, p, cap, orig, link, vx)
    known = _store(f, n, n - first, c8, c16, c32, keys)
    layer = f[14]
    if layer != 0:
        keys[8, npend] = n
        keys[9, npend] = layer
        keys[10, npend] = f[15]
        keys[11, npend] = p + cap
        keys[12, npend] = f[16] + 1
        return known, npend + 1
    return known, npend


@njit(nogil=True, cache=True, _nrt=False)
def _pending_layers(buf, npend, first, c8, c16, c32, cidx, keys, tab, u_key, u_kind, st):
    """Decode the chunk's `npend` RoCE/tunnel rows `_row` noted (`_layers`), intern their inner
    addresses into the batch's dictionary and OR their validity bits into st[LAYERS] (so the batch's
    conversion knows which layers it has without a scan); a SYN's window scale goes to TCP_WSCALE."""
    for j in range(npend):
        n = np.int64(keys[8, j])
        r = n - first
        ulen = np.int64(keys[12, j]) - 1
        if np.int64(keys[9, j]) == LAYER_TCP_SYN:
            shift = _window_scale(buf, np.int64(keys[10, j]), np.int64(keys[11, j]), ulen)
            if shift >= 0:
                c8[TCP_WSCALE, n] = shift
                c8[TCP_VALID, n] |= TV_WSCALE
                st[LAYERS] |= L_WSCALE
            continue
        bits = _layers(buf, np.int64(keys[9, j]), np.int64(keys[10, j]), np.int64(keys[11, j]), ulen, n, r,
                       c8, c16, c32, keys)  # fmt: skip
        c8[VALID, n] |= bits
        st[LAYERS] |= bits
        if bits & V_TUNNEL:
            inner = np.int64(c8[INNER_VERSION, n])
            if inner != 0:
                cidx[2, n] = _intern(keys[4, r], keys[5, r], inner, tab, u_key, u_kind, st)
                cidx[3, n] = _intern(keys[6, r], keys[7, r], inner, tab, u_key, u_kind, st)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _recall(hi, lo, kind, first, second, tab, u_key, u_kind, st):
    """Index of address (hi, lo, kind): a memo's, `first` tried first, when it is one of them
    (each memo is (hi, lo, kind, index)), else `_intern`'s."""
    if lo == first[1] and hi == first[0] and kind == first[2]:
        return first[3]
    if lo == second[1] and hi == second[0] and kind == second[2]:
        return second[3]
    return _intern(hi, lo, kind, tab, u_key, u_kind, st)


@njit(nogil=True, cache=True, _nrt=False)
def _intern_rows(first, stop, c8, keys, cidx, tab, u_key, u_kind, u_rows, st):
    """Dictionary indices of rows [first, stop) from their keys (scratch rows 0..stop-first), and
    each address's rows as outer source and destination added to `u_rows`.

    Why a second pass over a chunk instead of interning while parsing: the interning code
    (a probe loop that writes the table and `st`) in the parse loop costs the compiler its
    registers. A memo of the last source and destination skips hashing for most packets (a
    flow, or its reverse).
    """
    none = (U64(0), U64(0), np.int64(-1), np.int64(0))  # no address has kind -1
    a = none  # the last source as (hi, lo, kind, index)
    b = none  # the last destination
    for n in range(first, stop):
        kind = np.int64(c8[IP_VERSION, n])
        if kind == 0:
            cidx[0, n] = 0
            cidx[1, n] = 0
            continue
        r = n - first
        si = _recall(keys[0, r], keys[1, r], kind, a, b, tab, u_key, u_kind, st)
        di = _recall(keys[2, r], keys[3, r], kind, b, a, tab, u_key, u_kind, st)
        cidx[0, n] = si
        cidx[1, n] = di
        u_rows[si, 0] += 1
        u_rows[di, 1] += 1
        a = (keys[0, r], keys[1, r], kind, si)
        b = (keys[2, r], keys[3, r], kind, di)


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _chunk_stop(n, nmax, keys, nuniq, umax):
    """Last row (exclusive) of the next chunk: at most a scratch's worth, at most the batch,
    and no more rows than the address table has room for (four new addresses per row: a tunnel
    packet's outer and inner ones)."""
    return min(nmax, n + min(keys.shape[1], (umax - nuniq) // 4))


@njit(nogil=True, cache=True, _nrt=False)
def pcap_records(
    buf,
    pos,
    big,
    nanos,
    swapmode,
    link,
    limit,
    nmax,
    umax,
    vx,
    ts_col,
    c32f,
    c16f,
    c8,
    c16,
    c32,
    cidx,
    keys,
    tab,
    u_key,
    u_kind,
    u_rows,
    st,
):
    """Classic pcap records from `pos` until the batch is full or the buffer ends; `vx` holds the
    UDP ports read as VXLAN.

    Records are parsed a chunk at a time, then the chunk's addresses are interned. Counters
    live in locals inside the loop (the compiler cannot keep `st` slots in registers, since
    any column store might alias it) and go back to `st` on return.
    """
    end = buf.shape[0]
    mult = 1 if nanos else 1000
    n = st[N]
    ts = st[LAST_TS]
    capbytes = 0
    unsupported = 0
    status = np.int64(ST_FULL)
    cols = (ts_col, c32f, c16f, c8, c16, c32, keys, vx)
    while status == ST_FULL:
        stop = _chunk_stop(n, nmax, keys, st[NUNIQ], umax)
        if stop <= n:
            break
        first = n
        npend = 0
        while n < stop:
            if pos + 16 > end:
                status = np.int64(ST_NEED)
                break
            cap = _u32(buf, pos + 8, big)
            orig = _u32(buf, pos + 12, big)
            if swapmode == 1 or (swapmode == 2 and cap > orig):
                cap, orig = orig, cap
            if cap > limit:
                st[ERR] = ERR_CAPLEN
                st[ERR_VALUE] = cap
                status = np.int64(ST_CORRUPT)
                break
            if orig == 0:  # zero-filled data: it would read as endless empty packets at time 0
                status = _corrupt(st, ERR_ZEROLEN, 0)
                break
            if pos + 16 + cap > end:
                status = np.int64(ST_NEED)
                break
            ts = _u32(buf, pos, big) * 1_000_000_000 + _u32(buf, pos + 4, big) * mult
            known, npend = _row(buf, pos + 16, cap, orig, ts, 0, link, n, first, cols, npend)
            if not known:
                unsupported += 1
            capbytes += cap
            n += 1
            pos += 16 + cap
        _intern_rows(first, n, c8, keys, cidx, tab, u_key, u_kind, u_rows, st)
        if npend:
            _pending_layers(buf, npend, first, c8, c16, c32, cidx, keys, tab, u_key, u_kind, st)
    st[N] = n
    st[LAST_TS] = ts
    st[CAPBYTES] += capbytes
    st[UNSUPPORTED] += unsupported
    return status, pos


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _ts_ns(t, kind, factor, offset):
    if kind == 0:
        return t * factor + offset
    if kind == 1:
        return np.int64(U64(t) // U64(factor)) + offset  # the counter is unsigned
    ut = U64(t)
    sec = np.int64(ut >> U64(factor))
    frac = ut & ((U64(1) << U64(factor)) - U64(1))
    if factor <= 32:
        sub = (frac * U64(1_000_000_000)) >> U64(factor)
    else:  # exact floor(frac * 1e9 / 2^factor) without a 128-bit product
        hi = frac >> U64(32)
        lo = frac & U64(0xFFFFFFFF)
        sub = (hi * U64(1_000_000_000) + ((lo * U64(1_000_000_000)) >> U64(32))) >> U64(factor - 32)
    return sec * 1_000_000_000 + np.int64(sub) + offset


@njit(nogil=True, cache=True, _nrt=False)
def pcapng_blocks(
    buf,
    pos,
    big,
    ifs,
    n_if,
    nmax,
    umax,
    vx,
    ts_col,
    c32f,
    c16f,
    c8,
    c16,
    c32,
    cidx,
    keys,
    tab,
    u_key,
    u_kind,
    u_rows,
    st,
):
    """pcapng blocks of one section from `pos`; ifs rows: link, snaplen, ts kind, factor, offset, and
    the largest timestamp counter whose time fits int64 ns (as uint64 bits: formats.max_units).

    Chunks and counters as in `pcap_records`. A packet block whose time lies past int64 ns (its product
    would wrap) is kept with the previous packet's time, as a simple packet block, and counted in st[LATE].
    """
    end = buf.shape[0]
    n = st[N]
    ts = st[LAST_TS]
    capbytes = 0
    unsupported = 0
    spb = 0
    late = 0
    status = np.int64(ST_FULL)
    cols = (ts_col, c32f, c16f, c8, c16, c32, keys, vx)
    while status == ST_FULL:
        stop = _chunk_stop(n, nmax, keys, st[NUNIQ], umax)
        if stop <= n:
            break
        first = n
        npend = 0
        while n < stop:
            if pos + 12 > end:
                status = np.int64(ST_NEED)
                break
            btype = _u32(buf, pos, big)
            if btype == 0x0A0D0D0A:
                status = np.int64(ST_META)
                break
            blen = _u32(buf, pos + 4, big)
            if blen < 12 or (blen & 3) != 0 or blen > MAX_BLOCK:
                status = _corrupt(st, ERR_BLOCKLEN, blen)
                break
            if pos + blen > end:
                status = np.int64(ST_NEED)
                break
            trail = _u32(buf, pos + blen - 4, big)
            if trail != blen:
                status = _corrupt(st, ERR_TRAILER, trail)
                break
            if btype == 1:
                status = np.int64(ST_META)
                break
            if btype == 6 or btype == 2:
                if blen < 32:
                    status = _corrupt(st, ERR_SHORTBLOCK, blen)
                    break
                if btype == 6:
                    ifid = _u32(buf, pos + 8, big)
                else:
                    ifid = (_u32(buf, pos + 8, big) >> 16) if big else (_u32(buf, pos + 8, big) & 0xFFFF)
                cap = _u32(buf, pos + 20, big)
                orig = _u32(buf, pos + 24, big)
                if ifid >= n_if:
                    status = _corrupt(st, ERR_IFACE, ifid)
                    break
                if 28 + cap > blen - 4:
                    status = _corrupt(st, ERR_OVERRUN, cap)
                    break
                if orig == 0:
                    status = _corrupt(st, ERR_ZEROLEN, 0)
                    break
                t = (_u32(buf, pos + 12, big) << 32) | _u32(buf, pos + 16, big)
                if U64(t) > U64(ifs[ifid, 5]):  # past int64 ns: the product would wrap
                    late += 1  # the previous packet's time
                else:
                    ts = _ts_ns(t, ifs[ifid, 2], ifs[ifid, 3], ifs[ifid, 4])
                known, npend = _row(buf, pos + 28, cap, orig, ts, ifid, ifs[ifid, 0], n, first, cols, npend)
                if not known:
                    unsupported += 1
                capbytes += cap
                n += 1
            elif btype == 3:
                if n_if == 0:
                    status = _corrupt(st, ERR_NOIFACE, 0)
                    break
                if blen < 16:
                    status = _corrupt(st, ERR_SHORTBLOCK, blen)
                    break
                orig = _u32(buf, pos + 8, big)
                if orig == 0:
                    status = _corrupt(st, ERR_ZEROLEN, 0)
                    break
                cap = min(orig, blen - 16)
                if ifs[0, 1] > 0:
                    cap = min(cap, ifs[0, 1])
                # no timestamp in an SPB: it carries the previous packet's
                known, npend = _row(buf, pos + 12, cap, orig, ts, 0, ifs[0, 0], n, first, cols, npend)
                if not known:
                    unsupported += 1
                capbytes += cap
                spb += 1
                n += 1
            pos += blen
        _intern_rows(first, n, c8, keys, cidx, tab, u_key, u_kind, u_rows, st)
        if npend:
            _pending_layers(buf, npend, first, c8, c16, c32, cidx, keys, tab, u_key, u_kind, st)
    st[N] = n
    st[LAST_TS] = ts
    st[CAPBYTES] += capbytes
    st[UNSUPPORTED] += unsupported
    st[SPB] += spb
    st[LATE] += late
    return status, pos


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _corrupt(st, code, value):
    st[ERR] = code
    st[ERR_VALUE] = value
    return np.int64(ST_CORRUPT)


def warm_up() -> None:
    """Pay numba's one-off start-up now (e.g. on a thread while the caller does other work).

    The first call of any compiled function in a process is slow even with a warm cache: numba
    builds its typing and target contexts, importing numba.np (which imports scipy.linalg to look
    for BLAS); later kernels then load from the cache quickly. `reset_table` is called on arrays
    of exactly the types `AddressTable` uses, so this loads, never compiles, an overload.
    """
    tab = np.zeros((2, 3), dtype=np.uint64)
    u_key, u_kind, u_rows = np.zeros((1, 2), np.uint64), np.zeros(1, np.uint8), np.zeros((1, 2), np.int64)
    reset_table(tab, u_key, u_kind, u_rows, np.zeros(NSTATE, np.int64))


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _ms(t):
    """ts_ns // 10^6 truncated toward zero, as DuckDB divides (numba floors like Python)."""
    ms = t // 1000000
    if t < 0 and ms * 1000000 != t:
        ms += 1
    return ms


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _bin_add(k, t, size, acc):
    acc[k, 0] += size
    acc[k, 1] += 1
    if t < acc[k, 2]:
        acc[k, 2] = t


@njit(nogil=True, cache=True, _nrt=False, inline="always")
def _bin_flush(ms, width, acc, touched, nt, out, k):
    """Write the `nt` slots of `acc` listed in `touched` as column `k` of `out` (rows s, d, ms, bytes,
    first), empty them again, and return the next free column."""
    for j in range(nt):
        slot = touched[j]
        out[0, k] = slot // width
        out[1, k] = slot % width
        out[2, k] = ms
        out[3, k] = acc[slot, 0]
        out[4, k] = acc[slot, 2]
        acc[slot, 0] = 0
        acc[slot, 1] = 0
        acc[slot, 2] = 9223372036854775807
        k += 1
    return k


@njit(nogil=True, cache=True, _nrt=False)
def bin_bytes(ts, flen, src, dst, sbits, soff, dbits, doff, sids, dids, width, acc, touched, out):
    """Sum each packet's frame_len per (source, destination, millisecond), with the bin's earliest
    timestamp, into the columns of `out` (its rows: s, d, ms, bytes, first); returns how many.

    One slot of `acc` per address pair (bytes, packets, earliest ts; empty: 0, 0, int64 max) holds the
    current millisecond, whose slots (listed in `touched`) become rows when the millisecond changes:
    a reader batch is in time order, so each bin is one row and memory does not grow with the time a
    batch spans. Out of order, a bin may come out in several rows (ingest/link_bins.py sums them).
    `src`/`dst` are a batch's dictionary indices, valid where their bitmaps (from bit `soff`/`doff`)
    say, all of them when both bitmaps are empty; `sids`/`dids` map index + 1 to an address id (0: no
    address)."""
    n = ts.shape[0]
    check = sbits.shape[0] != 0 or dbits.shape[0] != 0  # else no frame without addresses: no bit to test
    k = nt = 0
    cur = _ms(ts[0]) if n else 0
    for i in range(n):
        t = ts[i]
        ms = _ms(t)
        if ms != cur:
            k = _bin_flush(cur, width, acc, touched, nt, out, k)
            nt = 0
            cur = ms
        if check:
            j, m = soff + i, doff + i
            s = sids[src[i] + 1] if (sbits[j >> 3] >> (j & 7)) & 1 else 0
            d = dids[dst[i] + 1] if (dbits[m >> 3] >> (m & 7)) & 1 else 0
        else:
            s, d = sids[src[i] + 1], dids[dst[i] + 1]
        slot = s * width + d
        if acc[slot, 1] == 0:
            touched[nt] = slot
            nt += 1
        _bin_add(slot, t, flen[i], acc)
    return _bin_flush(cur, width, acc, touched, nt, out, k)
