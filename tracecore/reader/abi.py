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
LAYERS = 8  # the validity bits (V_RDMA, V_TUNNEL, …) of the current batch's RoCE/tunnel rows, OR-ed
LATE = 9  # pcapng packet blocks whose time lies past int64 ns (they carry the previous packet's time)
NSTATE = 10

# Column rows of the kernel's arrays (kernel._store writes them, batch.Columns converts them).
# c8: per packet the first four rows; the RDMA rows only where V_RDMA is set, the tunnel rows only where
# V_TUNNEL is set (the other rows' values are never read).
# TCP_VALID (TV_* bits) is written per packet too; TCP_WSCALE only where TCP_VALID has TV_WSCALE.
IP_VERSION, IP_PROTO, TOS, VALID = range(4)
RDMA_OPCODE, RDMA_FLAGS, RDMA_SYNDROME, RDMA_VALID = range(4, 8)
TUNNEL, INNER_VERSION, INNER_PROTO, TUNNEL_VALID = range(8, 12)
TCP_VALID, TCP_WSCALE = range(12, 14)
C8_ROWS = 14
# c16: src_port, dst_port, tcp_flags, tcp_window; inner ports (tunnel rows)
SRC_PORT, DST_PORT, TCP_FLAGS, TCP_WINDOW, INNER_SRC_PORT, INNER_DST_PORT = range(6)
C16_ROWS = 6
# c32: l4_payload_len, tcp_seq, tcp_ack; RDMA rows; vni (tunnel row)
L4_LEN, TCP_SEQ, TCP_ACK = range(3)
RDMA_DEST_QP, RDMA_PSN, RDMA_PAYLOAD_LEN, RDMA_RETH_DMA_LEN, RDMA_DETH_SRC_QP, VNI = range(3, 9)
C32_ROWS = 9

# Bits of the VALID row: which fields of the packet are set (the IP fields: ip_version != 0).
V_PORTS = 1
V_FLAGS = 2
V_L4 = 4
V_RDMA = 8  # a whole BTH: rdma_opcode, rdma_dest_qp, rdma_psn, rdma_flags and the RDMA_VALID row
V_TUNNEL = 16  # a VXLAN or Geneve header: tunnel, vni and the TUNNEL_VALID, INNER_* rows
V_RDMA_SHORT = 32  # a RoCE packet whose BTH or extension header the capture cut short
V_TUNNEL_SHORT = 64  # a tunnel packet whose tunnel header or inner headers the capture cut short
V_FRAGMENT = 128  # ip_fragment (a bit here, not a row of its own: the TCP path stores no more than before)
# Bits of the RDMA_VALID row.
R_PAYLOAD_LEN = 1
R_RETH = 2
R_AETH = 4
R_DETH = 8
# Bits of the TUNNEL_VALID row (inner addresses and protocol: INNER_VERSION != 0).
T_INNER_PORTS = 1
# Bits of the TCP_VALID row: which TCP header fields the capture holds (each once its bytes are there).
TV_SEQ = 1
TV_ACK = 2
TV_WINDOW = 4
TV_WSCALE = 8  # a SYN's window scale option (only SYN rows are looked at, after the chunk)
# st[LAYERS] bit (beyond the VALID byte's): the batch has a row with TV_WSCALE.
L_WSCALE = 256

# rdma_flags bits, from the BTH.
F_ACK_REQ = 1  # A: acknowledge request
F_SOLICITED = 2  # SE: solicited event
F_FECN = 4  # forward explicit congestion notification
F_BECN = 8  # backward explicit congestion notification (set on CNPs)

TUNNEL_VXLAN = 1  # TUNNEL row values; names in TUNNEL_NAMES
TUNNEL_GENEVE = 2
TUNNEL_NAMES = ("vxlan", "geneve")
ROCEV2_PORT = 4791  # UDP destination port of RoCEv2, whatever the source port
GENEVE_PORT = 6081
DEFAULT_VXLAN_PORTS = (4789, 8472)  # IANA's, and the Linux kernel's and flannel's default

ERR_CAPLEN = 1  # pcap caplen above the limit
ERR_BLOCKLEN = 2  # pcapng block length < 12, not a multiple of 4, or huge
ERR_TRAILER = 3  # pcapng trailing block length differs
ERR_SHORTBLOCK = 4  # pcapng packet block too short for its fixed fields
ERR_IFACE = 5  # packet for an interface not declared in its section
ERR_OVERRUN = 6  # captured length overruns the block
ERR_NOIFACE = 7  # simple packet block before any IDB
ERR_ZEROLEN = 9  # a packet whose original length is 0: zero-filled or garbage data, no real packet

ERR_MESSAGES = {
    ERR_CAPLEN: "corrupt record: captured length {} is larger than any real packet",
    ERR_BLOCKLEN: "corrupt pcapng block: total length {}",
    ERR_TRAILER: "corrupt pcapng block: trailing length {} differs from the leading one",
    ERR_SHORTBLOCK: "corrupt pcapng packet block: length {} too short for its fields",
    ERR_IFACE: "corrupt pcapng packet block: interface {} not declared in this section",
    ERR_OVERRUN: "corrupt pcapng packet block: captured length {} overruns the block",
    ERR_NOIFACE: "pcapng simple packet block before any interface description ({})",
    ERR_ZEROLEN: "corrupt record: original length 0, which no real packet has (zero-filled or garbage data)",
}
