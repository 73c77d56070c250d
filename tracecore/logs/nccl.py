"""NCCL debug logs (`NCCL_DEBUG=INFO`, one file per rank) → what NCCL says it built, as five tables.

NCCL prints each line as `host:pid:tid [cudaDev] NCCL INFO message` (a WARN line adds `file.cc:line`
before `NCCL`); launchers may prepend a tag or a timestamp, and the program's own output is mixed in,
so a line counts as NCCL's when that prefix appears in it and every other line is passed over. The
messages read (format strings of NCCL 2.20.5 and 2.28.9; `Bootstrap: Using` and `NET/Socket : Using
[0]eth0:10.0.0.1<0>` alike):

    Bootstrap : Using eth0:172.30.0.25<0>                      bootstrap interface and address
    NET/IB : Using [0]rxe0:1/RoCE [RO]; OOB eth0:172.30.0.25<0> the network devices (NET/Socket alike)
    comm 0x43dc13b0 rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 80 commId 0x1f82… - Init START
    comm 0x43dc13b0 rank 0 nRanks 3 nNodes 3 localRanks 1 localRank 0 MNNVL 0
    Channel 00/01 :    0   1   2                                rank 0 lists each ring in order
    Ring 00 : 2 -> 0 -> 1                                       prev -> this rank -> next, per channel
    Trees [0] 2/-1/-1->0->-1                                    per channel: down0/down1/down2->rank->up
    Tree 0 : -1 -> 0 -> 2/-1/-1                                 one tree: up -> rank -> down0/down1/down2
    Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0             a connection and its transport
    NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 34 mtu 3 query_ece={…} GID 1 (0/19001EACFFFF0000) …
    NET/IB: IbDev 0 Port 1 qpn 35 set_ece={…}

The last two are one RDMA connection as its sender sets it up: `qpn 34 mtu` is the sender's own QP
(its GID is the RoCE address: `::ffff:172.30.0.25` here), and in releases whose line carries
`query_ece=` (2.20–2.26) the following `set_ece` line names the receiver's QP, which is the
destination QP of the data frames on the wire; from 2.27 that line names the sender's own QP again,
so it is read only after a `query_ece=` line. A connection's QPs are matched to its `[send] via NET/IB`
line by order (NCCL sets them up in the order it prints them).

`Trees` (INIT) lists the trees of the channels the communicator keeps; `Tree c` (GRAPH) is printed
as the trees are built, for twice the channels searched, of which fewer may be kept (the 2.20.5 RoCE
logs: `Tree 0` and `Tree 1`, `Trees [0]` only). Both go to `nccl_trees` (`source`); the views
declare a rank's trees from its `Trees` line, from its `Tree` lines only when it has none.

A process may hold several communicators; ranks are per communicator. Lines are given to the
communicator of the nearest `comm 0x… rank …` line of their thread (before, else after), else of
their process, and `commId` (the same in every rank's file) ties the files of one communicator
together. Ranks become workers in the views (`queries/nccl_rank_workers.sql`): by the file name
(`worker-<i>-…` beside `worker-<i>-tcpdump.pcap`, filled in by ingest) or by the addresses logged.

Lines that start like one of these messages but do not parse are bad lines (counted, the first few
kept); so are NCCL lines longer than `MAX_LINE` characters (NCCL's own buffer is 1 KiB). Numbers are
bounded in the patterns, so no text can overflow a column.

NCCL prints much more that says nothing about the graph (plugins, environment, topology dumps,
timings, proxy threads). `_PASSED_OVER` lists those forms, as met in real logs (2.20.5 over RoCE,
2.28.9 over sockets); an INFO message that is neither read nor listed there is an unknown line,
counted per file (`nccl_ranks.unknown_lines`, the first one kept) and reported once per file by
ingest, so a release that changes what it prints is seen the day its logs are read.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from tracecore.arrow_rows import table_from_rows  # not from_pylist: pa.array imports pandas
from tracecore.logs import LogParser, ParsedLog
from tracecore.logs._common import BadLines, note_empty, read_lines

MAX_LINE = 8192

_I32 = r"\d{1,9}"
_HOST = re.compile(r"[^\s:\[\]]{1,255}")
_DEV = re.compile(r"\[[^\]\s]{0,16}\]")
_LEVELS = ("INFO", "WARN", "ABORT", "TRACE")
_VERSION = re.compile(r"NCCL version (?P<v>[0-9][\w.+-]{0,63})")
_BOOTSTRAP = re.compile(r"^Bootstrap ?: Using (?P<ifname>[^\s:]{1,64}):(?P<ip>[^<\s]{1,64})<\d{1,5}>")
_BOOTSTRAP_DEV = re.compile(r"^Bootstrap ?: Using [^\s:]{1,64}:-?\d{1,5}\s*$")  # 2.2x: the OOB net device
_NET_USING = re.compile(r"^NET/(?P<net>IB|Socket) ?: Using (?P<devices>.*?)(?:; OOB (?P<oob>\S+))?\s*$")
_SOCKET_DEV = re.compile(r"\[\d{1,3}\][^\s:]{1,64}:(?P<ip>[^<\s]{1,64})<\d{1,5}>")
_USING_NETWORK = re.compile(r"^Using network (?P<net>.{1,64}?)\s*$")
_COMM = re.compile(
    rf"comm (?P<ptr>0x[0-9a-fA-F]{{1,16}}) rank (?P<rank>{_I32}) n[Rr]anks (?P<nranks>{_I32})\b"
)
_COMM_FIELDS = {
    "cuda_dev": re.compile(rf"\bcudaDev ({_I32})\b"),
    "nvml_dev": re.compile(rf"\bnvmlDev ({_I32})\b"),
    "bus_id": re.compile(r"\bbusId ([0-9a-fA-F]{1,16})\b"),
    "comm_id": re.compile(r"\bcommId (0x[0-9a-fA-F]{1,16})\b"),
    "nnodes": re.compile(rf"\bnNodes ({_I32})\b"),
    "local_ranks": re.compile(rf"\blocalRanks ({_I32})\b"),
    "local_rank": re.compile(rf"\blocalRank ({_I32})\b"),
}
_INT_FIELDS = ("cuda_dev", "nvml_dev", "nnodes", "local_ranks", "local_rank")
_RING = re.compile(rf"^Ring (?P<c>{_I32}) : (?P<prev>-?{_I32}) -> (?P<rank>{_I32}) -> (?P<next>-?{_I32})\s*$")
_RING_LIST = re.compile(rf"^Channel (?P<c>{_I32})/(?P<n>{_I32}) :(?P<ranks>(?: +{_I32}){{1,4096}}) *$")
_TREES = re.compile(
    r"^Trees(?P<trees>(?: \[\d{1,9}\] -?\d{1,9}/-?\d{1,9}/-?\d{1,9}->\d{1,9}->-?\d{1,9}){0,4096})\s*$"
)
_TREE = re.compile(rf"\[({_I32})\] (-?{_I32})/(-?{_I32})/(-?{_I32})->({_I32})->(-?{_I32})")
_TREE_LINE = re.compile(  # GRAPH subsystem: each rank's tree of one channel, its parent first
    rf"^Tree (?P<c>{_I32}) : (?P<up>-?{_I32}) -> (?P<rank>{_I32}) -> "
    rf"(?P<d0>-?{_I32})/(?P<d1>-?{_I32})/(?P<d2>-?{_I32})\s*$"
)
_CONN = re.compile(
    rf"^Channel (?P<c>{_I32})(?:/(?P<ci>{_I32}))? : (?P<src>{_I32})\[[0-9a-fA-Fx]{{1,16}}\] -> "
    rf"(?P<dst>{_I32})\[[0-9a-fA-Fx]{{1,16}}\](?: \[(?P<dir>send|receive)\])? via (?P<via>\S.{{0,255}}?)\s*$"
)
_QP_LOCAL = re.compile(
    r"^NET/IB ?: NCCL (?:Merged)?Dev \d{1,9} IbDev \d{1,9} Port \d{1,9} qpn (?P<qpn>\d{1,8}) mtu \d{1,9}"
    r"(?P<rest>.*)$"
)
_GID = re.compile(r"\bGID -?\d{1,9} \((?P<spn>[0-9A-Fa-f]{1,16})/(?P<iid>[0-9A-Fa-f]{1,16})\)")
_QP_REMOTE = re.compile(r"^NET/IB ?: IbDev \d{1,9} Port \d{1,9} qpn (?P<qpn>\d{1,8}) set_ece=")

# A message starting with one of these is one of the lines above: if its pattern fails, it is bad.
_STRUCTURAL = (
    ("Ring ", (_RING,)),
    ("Trees", (_TREES,)),
    ("Tree ", (_TREE_LINE,)),
    ("Channel ", (_CONN, _RING_LIST)),
    ("Bootstrap : Using", (_BOOTSTRAP, _BOOTSTRAP_DEV)),
    ("Bootstrap: Using", (_BOOTSTRAP, _BOOTSTRAP_DEV)),
    ("NET/IB: NCCL ", (_QP_LOCAL,)),
    ("NET/IB : NCCL ", (_QP_LOCAL,)),
)

# Messages NCCL prints that say nothing this parser reads, passed over on purpose: every other
# form of the real logs (../shared/corpus-rdma: 2.20.5 over RoCE; ../shared/corpus-gpu: 2.28.9 over
# sockets, subsystems INIT,BOOTSTRAP,ENV,GRAPH,NET,PROFILE), matched at the message's start, listed
# about in the order NCCL prints them. An INFO message that is neither read above nor one of these
# is an unknown line.
_PASSED_OVER_FORMS = (
    r"(?:ENV|NET|PROFILER|TUNER)/Plugin ?:",  # plugin search, loading and the plugins' own notes
    r"NCCL_[A-Z0-9_]{1,64} set (?:by environment )?to ",  # an NCCL_* variable's value
    r"cudaDriverVersion \d",
    r"NCCL version ",  # read from the raw line (_VERSION), whatever its level
    r"Comm config \w{1,64} set to ",
    r"Initialized NET plugin ",
    r"Assigned NET plugin ",
    r"Using non-device net plugin version ",
    r"Call to ibv_\w{1,64} failed",  # ECE queries on devices without ECE (2.20)
    r"RAS client listening socket ",
    r"Bootstrap timings ",
    r"Topology detection ?: ",
    r"TOPO/NET ?: ",
    r"NET/(?:IB|Socket) ?: GPU Direct RDMA (?:Disabled|Enabled)",
    r"ncclTopo\w{1,64} ?: ",  # ncclTopoPopulateNics, ncclTopoGetCpuAffinity
    r"=== System : ",  # the topology dump: header, tree of devices and paths, ruler
    r"\+ [A-Z0-9]{1,8}\[",
    r"(?:CPU|GPU|NIC|NET|NVS)/[0-9A-Fa-f-]{1,40} ?(?::[A-Z]|\()",
    r"={10}",
    r"Pattern \d{1,9}, crossNic ",  # the graph search's result, then each channel's path
    r"\d{1,9} : (?:NET|GPU|NVS|CPU)/",
    r"P2P Chunksize ",
    r"Successfully loaded external \w{1,64} plugin ",
    r"(?:NCCL )?Inspector\b",  # the Inspector profiler plugin
    r"Check P2P Type ",
    r"ncclP2pSchedule: ",
    r"\[Proxy (?:Service|Progress)",
    r"\[Service thread\] ",
    r"threadThresholds ",
    r"\d{1,9} coll channels, ",
    r"CC (?:Off|On)\b",
    r"Init timings ",
    r"New proxy (?:send|recv) connection ",
    r"Connected to proxy ",
    r"Connected all (?:rings|trees)",
    r"[\w.]{1,64}\.cc:\d{1,9} -> \d{1,9}",  # an error passed up the call stack (`init.cc:1582 -> 5`)
)
_PASSED_OVER = re.compile("|".join(f"(?:{form})" for form in _PASSED_OVER_FORMS))

_STR, _I32T, _BOOL = pa.string(), pa.int32(), pa.bool_()
# Tables as the parser returns them (ingest adds `run` first); `file` is the log's name in its run
# folder, `comm_id` NCCL's communicator id (NULL when the release does not print it), `line` the
# line number the row comes from.
TABLES: dict[str, pa.Schema] = {
    "nccl_ranks": pa.schema(
        [
            ("worker", _STR),  # the worker whose capture shares the log's `worker-<i>` name (ingest)
            ("file", _STR),
            ("host", _STR),  # hostname in NCCL's line prefix
            ("pid", pa.int64()),
            ("comm_id", _STR),
            ("comm", _STR),  # the communicator's address in this process (`comm 0x…`)
            ("rank", _I32T),
            ("nranks", _I32T),
            ("nnodes", _I32T),
            ("local_rank", _I32T),
            ("local_ranks", _I32T),
            ("cuda_dev", _I32T),
            ("nvml_dev", _I32T),
            ("bus_id", _STR),
            ("bootstrap_if", _STR),
            ("bootstrap_ip", _STR),
            ("net", _STR),  # `Using network …`: IB, Socket or a plugin's name
            ("net_devices", _STR),  # `NET/IB : Using …` / `NET/Socket : Using …` device list
            ("roce_ip", _STR),  # the address of the first local GID logged (IPv4 when IPv4-mapped)
            ("addresses", pa.list_(_STR)),  # every address logged for this process, RoCE first
            ("nccl_version", _STR),
            ("init_complete", _BOOL),
            ("warnings", pa.int32()),  # NCCL WARN lines of this process
            # NCCL INFO lines of the file in no form the parser knows (the file's count, on each of
            # its rows), and the first of them as `line N: text`
            ("unknown_lines", pa.int32()),
            ("first_unknown", _STR),
            ("line", _I32T),
        ]
    ),
    "nccl_rings": pa.schema(
        [
            ("file", _STR),
            ("comm_id", _STR),
            ("channel", _I32T),
            ("rank", _I32T),
            ("prev_rank", _I32T),
            ("next_rank", _I32T),
            ("source", _STR),  # `Ring` (each rank's own line) or `Channel` (rank 0's listing)
            ("line", _I32T),
        ]
    ),
    "nccl_trees": pa.schema(
        [
            ("file", _STR),
            ("comm_id", _STR),
            ("channel", _I32T),
            ("rank", _I32T),
            ("up_rank", _I32T),  # -1: the root
            ("down_ranks", pa.list_(_I32T)),  # children (NCCL's -1 placeholders left out)
            ("source", _STR),  # `Trees` (all channels of a rank in one line) or `Tree` (one channel)
            ("line", _I32T),
        ]
    ),
    "nccl_channels": pa.schema(
        [
            ("file", _STR),
            ("comm_id", _STR),
            ("channel", _I32T),
            ("conn_index", _I32T),
            ("src_rank", _I32T),
            ("dst_rank", _I32T),
            ("direction", _STR),  # send | receive (as the logging rank sees it); NULL for P2P/SHM
            ("transport", _STR),  # NET/IB, NET/Socket, P2P, SHM, …
            ("via", _STR),  # the whole `via` text, e.g. NET/IB/0/GDRDMA
            ("line", _I32T),
        ]
    ),
    "nccl_qps": pa.schema(
        [
            ("file", _STR),
            ("comm_id", _STR),
            ("rank", _I32T),  # the sending rank (this log's)
            ("seq", _I32T),  # the QP's order among its process's logged QPs (0, 1, …)
            ("local_qpn", pa.int64()),  # the sender's QP
            ("remote_qpn", pa.int64()),  # the receiver's QP = destination QP of the data frames
            ("peer_rank", _I32T),  # the receiving rank, from the matching `[send] via NET/IB` line
            ("channel", _I32T),
            ("gid_ip", _STR),
            ("line", _I32T),
        ]
    ),
}
PRIMARY = "nccl_ranks"


def split_prefix(text: str) -> tuple[str, int, int, str, str] | None:
    """(host, pid, tid, level, message) of an NCCL line, or None; in time linear in the line (a
    pattern searched from every position would not be, and lines are untrusted)."""
    at = text.find(" NCCL ")
    if at < 0:
        return None
    level, _, msg = text[at + 6 :].partition(" ")
    if level not in _LEVELS:
        return None
    tokens = text[max(0, at - 600) : at].split()
    if tokens and not tokens[-1].startswith("["):
        tokens.pop()  # a WARN's `file.cc:line`
    if len(tokens) < 2 or not _DEV.fullmatch(tokens[-1]):
        return None
    head, pid, tid = [*tokens[-2].rsplit(":", 2), "", ""][:3]
    host = head.rsplit(":", 1)[-1].rsplit("]", 1)[-1]  # after a launcher's `[rank0]:` tag
    if not (pid.isdigit() and tid.isdigit() and len(pid) <= 10 and len(tid) <= 10 and _HOST.fullmatch(host)):
        return None
    return host, int(pid), int(tid), level, msg.strip()


def detect(head: str) -> bool:
    """NCCL's INFO line prefix somewhere in the head."""
    return " NCCL INFO " in head and any(
        (p := split_prefix(line)) is not None and p[3] == "INFO"
        for line in head.splitlines()[:400]
        if " NCCL INFO " in line
    )


@dataclass
class _Comm:
    ptr: str
    line: int
    fields: dict = field(default_factory=dict)
    complete: bool = False


@dataclass
class _File:
    """Everything read from one file before rows are given to communicators."""

    name: str
    comms: dict[tuple[int, str], _Comm] = field(default_factory=dict)  # (pid, ptr) → communicator
    comm_lines: dict[tuple[int, int], list[tuple[int, str]]] = field(default_factory=dict)  # (pid, tid)
    pid_lines: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    proc: dict[int, dict] = field(default_factory=dict)  # pid → host, addresses, …
    rows: dict[str, list[dict]] = field(default_factory=lambda: {t: [] for t in TABLES})
    version: str | None = None
    unknown_lines: int = 0
    first_unknown: str | None = None  # `line N: text`

    def process(self, pid: int, host: str) -> dict:
        return self.proc.setdefault(
            pid,
            {"host": host, "addresses": [], "warnings": 0, "pending_qps": [], "qp_lines": 0},
        )


def _gid_ip(spn: str, iid: str) -> str | None:
    """The GID NCCL prints as two little-endian 64-bit words, as an address (IPv4 when mapped)."""
    raw = int(spn, 16).to_bytes(8, "little") + int(iid, 16).to_bytes(8, "little")
    address = ipaddress.IPv6Address(raw)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return None if int(address) == 0 else str(address)


def _add_address(proc: dict, ip: str | None, first: bool = False) -> None:
    if ip and ip not in proc["addresses"]:
        if first:
            proc["addresses"].insert(0, ip)
        else:
            proc["addresses"].append(ip)


def _structural_failure(msg: str) -> bool:
    """Whether `msg` starts like a message this parser reads but none of its patterns matches."""
    for start, patterns in _STRUCTURAL:
        if msg.startswith(start):
            return not any(p.match(msg) for p in patterns)
    return False


def _read_message(f: _File, line_no: int, pid: int, tid: int, msg: str, proc: dict) -> bool:
    """One INFO message into the state and rows of `f` (the caller has checked it is not malformed);
    False when it is none of the messages read."""
    comm = _COMM.search(msg)
    if comm:
        key = (pid, comm["ptr"].lower())
        c = f.comms.setdefault(key, _Comm(comm["ptr"].lower(), line_no))
        c.fields.setdefault("rank", int(comm["rank"]))
        c.fields.setdefault("nranks", int(comm["nranks"]))
        for name, pattern in _COMM_FIELDS.items():
            m = pattern.search(msg, comm.end())
            if m and name not in c.fields:
                c.fields[name] = int(m[1]) if name in _INT_FIELDS else m[1].lower()
        if "Init COMPLETE" in msg:
            c.complete = True
        f.comm_lines.setdefault((pid, tid), []).append((line_no, c.ptr))
        f.pid_lines.setdefault(pid, []).append((line_no, c.ptr))
        return True
    where = {"_pid": pid, "_tid": tid, "line": line_no}
    if m := _RING.match(msg):
        f.rows["nccl_rings"].append(
            {
                **where,
                "channel": int(m["c"]),
                "rank": int(m["rank"]),
                "prev_rank": int(m["prev"]),
                "next_rank": int(m["next"]),
                "source": "Ring",
            }
        )
    elif m := _RING_LIST.match(msg):
        order = [int(r) for r in m["ranks"].split()]
        for i, rank in enumerate(order):
            f.rows["nccl_rings"].append(
                {
                    **where,
                    "channel": int(m["c"]),
                    "rank": rank,
                    "prev_rank": order[i - 1],
                    "next_rank": order[(i + 1) % len(order)],
                    "source": "Channel",
                }
            )
    elif m := _TREES.match(msg):
        for c, d0, d1, d2, rank, up in _TREE.findall(m["trees"]):
            down = [int(d) for d in (d0, d1, d2) if int(d) >= 0]
            f.rows["nccl_trees"].append(
                {
                    **where,
                    "channel": int(c),
                    "rank": int(rank),
                    "up_rank": int(up),
                    "down_ranks": down,
                    "source": "Trees",
                }
            )
    elif m := _TREE_LINE.match(msg):
        f.rows["nccl_trees"].append(
            {
                **where,
                "channel": int(m["c"]),
                "rank": int(m["rank"]),
                "up_rank": int(m["up"]),
                "down_ranks": [int(m[d]) for d in ("d0", "d1", "d2") if int(m[d]) >= 0],
                "source": "Tree",
            }
        )
    elif m := _CONN.match(msg):
        via = m["via"]
        transport = "NET/" + via[4:].split("/")[0] if via.startswith("NET/") else via.split("/")[0]
        f.rows["nccl_channels"].append(
            {
                **where,
                "channel": int(m["c"]),
                "conn_index": int(m["ci"]) if m["ci"] else None,
                "src_rank": int(m["src"]),
                "dst_rank": int(m["dst"]),
                "direction": m["dir"],
                "transport": transport,
                "via": via,
            }
        )
    elif m := _QP_LOCAL.match(msg):
        gid = _GID.search(m["rest"])
        gid_ip = _gid_ip(gid["spn"], gid["iid"]) if gid else None
        _add_address(proc, gid_ip, first=True)
        row = {
            **where,
            "seq": proc["qp_lines"],
            "local_qpn": int(m["qpn"]),
            "remote_qpn": None,
            "gid_ip": gid_ip,
        }
        proc["qp_lines"] += 1
        f.rows["nccl_qps"].append(row)
        if "query_ece=" in m["rest"]:  # 2.20–2.26: the next set_ece line names the receiver's QP
            proc["pending_qps"].append(row)
    elif m := _QP_REMOTE.match(msg):
        if proc["pending_qps"]:
            proc["pending_qps"].pop(0)["remote_qpn"] = int(m["qpn"])
    elif m := _BOOTSTRAP.match(msg):
        proc.setdefault("bootstrap_if", m["ifname"])
        proc.setdefault("bootstrap_ip", m["ip"])
        _add_address(proc, m["ip"])
    elif m := _NET_USING.match(msg):
        proc.setdefault("net_devices", m["devices"].strip())
        if m["net"] == "Socket":
            for dev in _SOCKET_DEV.finditer(m["devices"]):
                _add_address(proc, dev["ip"])
    elif m := _USING_NETWORK.match(msg):
        proc.setdefault("net", m["net"])
    else:
        return False
    return True


def _owner(f: _File, pid: int, tid: int, line_no: int) -> str | None:
    """The communicator (its `comm 0x…`) a row of thread `tid` at `line_no` belongs to: the nearest
    earlier communicator line of the thread, else of the process, else the next one of the thread,
    else the process's only communicator."""
    own = f.comm_lines.get((pid, tid), [])
    i = bisect.bisect_left(own, (line_no, ""))
    if i > 0:
        return own[i - 1][1]
    anywhere = f.pid_lines.get(pid, [])
    j = bisect.bisect_left(anywhere, (line_no, ""))
    if j > 0:
        return anywhere[j - 1][1]
    if i < len(own):
        return own[i][1]
    ptrs = {ptr for (p, ptr) in f.comms if p == pid}
    return ptrs.pop() if len(ptrs) == 1 else None


def _assign_peers(qps: list[dict], sends: list[dict]) -> None:
    """Give each QP row its connection's peer: the k-th connection's QPs are the k-th block of QP lines."""
    if not sends or not qps or len(qps) % len(sends):
        return
    per = len(qps) // len(sends)
    for i, row in enumerate(qps):
        send = sends[i // per]
        row["peer_rank"], row["channel"] = send["dst_rank"], send["channel"]


def parse(path: Path) -> ParsedLog:
    """Every NCCL line of the file, streamed; other output in the file is passed over."""
    f = _File(Path(path).name)
    bad = BadLines()
    for line_no, text, cut in read_lines(path, MAX_LINE, bad):
        if f.version is None and (v := _VERSION.search(text)):
            f.version = v["v"]
        prefix = split_prefix(text)
        if prefix is None:
            continue
        if cut:
            bad.add(line_no, text, f"an NCCL line longer than {MAX_LINE} characters")
            continue
        host, pid, tid, level, msg = prefix
        proc = f.process(pid, host)
        if level == "WARN":
            proc["warnings"] += 1
            continue
        if level != "INFO":
            continue
        if _structural_failure(msg):
            bad.add(line_no, text, "an NCCL topology line that does not parse")
            continue
        if not _read_message(f, line_no, pid, tid, msg, proc) and not _PASSED_OVER.match(msg):
            f.unknown_lines += 1
            f.first_unknown = f.first_unknown or f"line {line_no}: {text[:160]}"
    note_empty(len(f.comms), bad, "NCCL communicator (`comm 0x… rank …`)")
    return _tables(f, bad)


def _tables(f: _File, bad: BadLines) -> ParsedLog:
    rows = f.rows
    for table in ("nccl_rings", "nccl_trees", "nccl_channels", "nccl_qps"):
        for row in rows[table]:
            row["_ptr"] = _owner(f, row["_pid"], row["_tid"], row["line"])
            comm = f.comms.get((row["_pid"], row["_ptr"]))
            row["comm_id"] = comm.fields.get("comm_id") if comm else None
            row["file"] = f.name
    ranks_of = {(pid, ptr): c.fields.get("rank") for (pid, ptr), c in f.comms.items()}
    for row in rows["nccl_qps"]:
        row["rank"] = ranks_of.get((row["_pid"], row["_ptr"]))
    for key in {(r["_pid"], r["_ptr"]) for r in rows["nccl_qps"]}:
        sends = [
            r
            for r in rows["nccl_channels"]
            if (r["_pid"], r["_ptr"]) == key and r["direction"] == "send" and r["transport"] == "NET/IB"
        ]
        _assign_peers([r for r in rows["nccl_qps"] if (r["_pid"], r["_ptr"]) == key], sends)
    for (pid, ptr), c in sorted(f.comms.items(), key=lambda kv: kv[1].line):
        proc = f.proc.get(pid, {})
        addresses = proc.get("addresses", [])
        rows["nccl_ranks"].append(
            {
                "worker": None,
                "file": f.name,
                "host": proc.get("host"),
                "pid": pid,
                "comm_id": c.fields.get("comm_id"),
                "comm": ptr,
                "rank": c.fields.get("rank"),
                "nranks": c.fields.get("nranks"),
                "nnodes": c.fields.get("nnodes"),
                "local_rank": c.fields.get("local_rank"),
                "local_ranks": c.fields.get("local_ranks"),
                "cuda_dev": c.fields.get("cuda_dev"),
                "nvml_dev": c.fields.get("nvml_dev"),
                "bus_id": c.fields.get("bus_id"),
                "bootstrap_if": proc.get("bootstrap_if"),
                "bootstrap_ip": proc.get("bootstrap_ip"),
                "net": proc.get("net"),
                "net_devices": proc.get("net_devices"),
                "roce_ip": next(
                    (r["gid_ip"] for r in rows["nccl_qps"] if r["_pid"] == pid and r["gid_ip"]), None
                ),
                "addresses": list(addresses),
                "nccl_version": f.version,
                "init_complete": c.complete,
                "warnings": proc.get("warnings", 0),
                "unknown_lines": f.unknown_lines,
                "first_unknown": f.first_unknown,
                "line": c.line,
            }
        )
    tables = {name: table_from_rows(rows[name], schema) for name, schema in TABLES.items()}
    primary = tables.pop(PRIMARY)
    warnings = []
    if f.first_unknown:  # escaped: the text is the log's, and goes to a terminal
        warnings.append(
            f"{f.unknown_lines} NCCL line(s) of a form tracecore does not know (a newer NCCL?), "
            f"passed over; first: {f.first_unknown!r}"
        )
    return ParsedLog(primary, bad.count, bad.examples, more=tables, warnings=warnings)


PARSER = LogParser(
    table=PRIMARY, detect=detect, parse=parse, more_tables=tuple(t for t in TABLES if t != PRIMARY)
)
