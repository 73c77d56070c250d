"""Names for the RDMA and tunnel columns: BTH opcodes as tshark spells them, and a packet's summary.

Why here: `tracecore read` and the views' users need to recognise a packet ("RC RDMA Write Only
QP=0x000027") from the numbers the reader stores; one owner keeps the CLI, figures and tests on the
same spelling. Plain Python, no numba (the kernels store only numbers).
"""

from __future__ import annotations

TRANSPORTS = {0x00: "RC", 0x20: "UC", 0x40: "RD", 0x60: "UD"}
OPERATIONS = {
    0x00: "Send First",
    0x01: "Send Middle",
    0x02: "Send Last",
    0x03: "Send Last Immediate",
    0x04: "Send Only",
    0x05: "Send Only Immediate",
    0x06: "RDMA Write First",
    0x07: "RDMA Write Middle",
    0x08: "RDMA Write Last",
    0x09: "RDMA Write Last Immediate",
    0x0A: "RDMA Write Only",
    0x0B: "RDMA Write Only Immediate",
    0x0C: "RDMA Read Request",
    0x0D: "RDMA Read Response First",
    0x0E: "RDMA Read Response Middle",
    0x0F: "RDMA Read Response Last",
    0x10: "RDMA Read Response Only",
    0x11: "Acknowledge",
    0x12: "Atomic Acknowledge",
    0x13: "Compare Swap",
    0x14: "Fetch Add",
    0x16: "Send Last Invalidate",
    0x17: "Send Only Invalidate",
}
CNP_OPCODE = 0x81


def opcode_name(opcode: int) -> str:
    """'RC RDMA Write Only' for 0x0A (tshark's words), 'CNP' for RoCEv2's congestion notification,
    'opcode 0xNN' for one without a name."""
    if opcode == CNP_OPCODE:
        return "CNP"
    transport = TRANSPORTS.get(opcode & 0xE0)
    operation = OPERATIONS.get(opcode & 0x1F)
    if transport is None or operation is None:
        return f"opcode 0x{opcode:02x}"
    return f"{transport} {operation}"


def aeth_kind(syndrome: int) -> str:
    """What an AETH syndrome says: 'ACK', 'RNR NAK' or 'NAK' (IBA vol. 1, 9.7.5.1)."""
    kind = syndrome >> 5
    return {0: "ACK", 1: "RNR NAK", 3: "NAK"}.get(kind, "reserved")


def protocol(row: dict) -> str | None:
    """The protocol column's word for a RoCE or tunnel packet ('RoCEv2', 'RoCE', 'VXLAN', 'Geneve');
    None for others."""
    if row.get("tunnel") is not None:
        return "VXLAN" if row["tunnel"] == "vxlan" else "Geneve"
    if row.get("rdma_opcode") is not None:
        return "RoCE" if row.get("ip_version") is None else "RoCEv2"
    return None


def summary(row: dict) -> str:
    """One packet's RDMA and tunnel layers in words, '' when it has neither, e.g.
    'RC RDMA Write Only QP=0x000027 PSN=0' or 'VXLAN VNI=100 192.168.203.3 → 192.168.203.5'."""
    parts = []
    if row.get("tunnel") is not None:
        inner = ""
        if row.get("inner_src_ip") is not None:
            sport, dport = row.get("inner_src_port"), row.get("inner_dst_port")
            src, dst = (f":{sport}", f":{dport}") if sport is not None else ("", "")
            inner = f" {row['inner_src_ip']}{src} → {row['inner_dst_ip']}{dst}"
        parts.append(f"{'VXLAN' if row['tunnel'] == 'vxlan' else 'Geneve'} VNI={row['vni']}{inner}")
    if row.get("rdma_opcode") is not None:
        text = f"{opcode_name(row['rdma_opcode'])} QP=0x{row['rdma_dest_qp']:06x} PSN={row['rdma_psn']}"
        if row.get("rdma_aeth_syndrome") is not None and row["rdma_aeth_syndrome"] >> 5 != 0:
            text += f" {aeth_kind(row['rdma_aeth_syndrome'])}"
        if (row.get("ecn") or 0) == 3:
            text += " ECN-CE"
        parts.append(text)
    return " ".join(parts)
