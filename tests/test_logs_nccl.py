"""NCCL debug logs (NCCL 2.20.5, NCCL_DEBUG=INFO, three ranks over Soft-RoCE, ../shared/corpus-rdma;
NCCL 2.28.9 over TCP sockets, two and four ranks, ../shared/corpus-gpu) read into ranks, rings, trees,
connections and QPs; and damaged, truncated and hostile copies of them."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest

from tracecore.logs import HEAD_BYTES, detect_parser, nccl

REPO = Path(__file__).resolve().parent.parent
RDMA_CORPUS = REPO.parent / "shared" / "corpus-rdma"
GPU_CORPUS = REPO.parent / "shared" / "corpus-gpu"
FOUR_RANKS = GPU_CORPUS / "gpu-nccl-4rank" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
TWO_RANKS = GPU_CORPUS / "h100-nccl-socket-2rank" / "torch_ddp-mlp-sgd-32-nccl-0-ring"
SAMPLE_RUN = REPO / "tracecore" / "sample" / "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"


def corpus_log(rank: int) -> Path:
    path = RDMA_CORPUS / f"linlinw5_ring2_node{rank}.log"
    if not path.is_file():
        pytest.fail(f"corpus missing: {path} (the shared/ folder must sit beside the checkout)")
    return path


def rows(parsed, table: str) -> list[dict]:
    data = parsed.table if table == nccl.PRIMARY else parsed.more[table]
    return data.to_pylist()


def copy_with(tmp_path: Path, rank: int, edit) -> Path:
    """Rank `rank`'s real log with its lines passed through `edit` (a list → list function)."""
    lines = corpus_log(rank).read_text().splitlines()
    path = tmp_path / f"worker-{rank}-nccl.log"
    path.write_text("\n".join(edit(lines)) + "\n")
    return path


def test_each_rank_log_is_detected_as_nccl_and_nothing_else_is() -> None:
    for rank in range(3):
        assert detect_parser(corpus_log(rank)).table == "nccl_ranks"
    # a training log carrying NCCL lines stays a training log (its exact header wins)
    head = (SAMPLE_RUN / "train_history.log").read_text()[:HEAD_BYTES]
    assert not nccl.detect(head)
    assert not nccl.detect("NCCL INFO without a prefix\nrank 0/3 ok\n")


def test_rank_0_log_as_nccl_printed_it() -> None:
    parsed = nccl.parse(corpus_log(0))
    assert (parsed.bad_lines, parsed.first_bad) == (0, [])
    assert rows(parsed, "nccl_ranks") == [
        {
            "worker": None,  # filled in by ingest from the file name
            "file": "linlinw5_ring2_node0.log",
            "host": "node0",
            "pid": 4744,
            "comm_id": "0x1f82f8f6b7863cd3",
            "comm": "0x43dc13b0",
            "rank": 0,
            "nranks": 3,
            "nnodes": 3,
            "local_rank": 0,
            "local_ranks": 1,
            "cuda_dev": 0,
            "nvml_dev": 0,
            "bus_id": "80",
            "bootstrap_if": "eth0",
            "bootstrap_ip": "172.30.0.25",
            "net": "IB",
            "net_devices": "[0]rxe0:1/RoCE [RO]",
            "roce_ip": "172.30.0.25",  # GID 1 (0/19001EACFFFF0000) = ::ffff:172.30.0.25
            "addresses": ["172.30.0.25"],
            "nccl_version": "2.20.5+cuda12.4",
            "init_complete": True,
            "warnings": 1,  # `Could not find real path of rxe0`
            "unknown_lines": 0,  # every other line is in a form the parser knows
            "first_unknown": None,
            "line": 12,
        }
    ]
    ring = [
        (r["channel"], r["prev_rank"], r["rank"], r["next_rank"], r["source"])
        for r in rows(parsed, "nccl_rings")
    ]
    assert ring == [
        (0, 2, 0, 1, "Channel"),  # `Channel 00/01 :    0   1   2`: rank 0 lists the whole ring
        (0, 0, 1, 2, "Channel"),
        (0, 1, 2, 0, "Channel"),
        (0, 2, 0, 1, "Ring"),  # `Ring 00 : 2 -> 0 -> 1`
    ]
    trees = [(t["channel"], t["rank"], t["up_rank"], t["down_ranks"], t["source"], t["line"])
             for t in rows(parsed, "nccl_trees")]  # fmt: skip
    assert trees == [
        (0, 0, -1, [2], "Tree", 30),  # `Tree 0 : -1 -> 0 -> 2/-1/-1`, as the trees are built…
        (1, 0, 1, [2], "Tree", 31),  # …for two channels, of which the communicator keeps one:
        (0, 0, -1, [2], "Trees", 34),  # `Trees [0] 2/-1/-1->0->-1`: the root, with child 2
    ]
    conns = [
        (c["channel"], c["src_rank"], c["dst_rank"], c["direction"], c["transport"], c["via"], c["line"])
        for c in rows(parsed, "nccl_channels")
    ]
    assert conns == [
        (0, 2, 0, "receive", "NET/IB", "NET/IB/0", 38),
        (0, 0, 1, "send", "NET/IB", "NET/IB/0", 41),
        (0, 0, 2, "send", "NET/IB", "NET/IB/0", 48),  # the tree's connection, set up after the rings
    ]
    qps = [
        (q["rank"], q["seq"], q["local_qpn"], q["remote_qpn"], q["peer_rank"], q["channel"], q["gid_ip"])
        for q in rows(parsed, "nccl_qps")
    ]
    assert qps == [(0, 0, 34, 35, 1, 0, "172.30.0.25"), (0, 1, 36, 42, 2, 0, "172.30.0.25")]
    assert {r["comm_id"] for t in nccl.TABLES if t != nccl.PRIMARY for r in rows(parsed, t)} == {
        "0x1f82f8f6b7863cd3"
    }


@pytest.mark.parametrize(
    ("rank", "address", "ring", "tree", "qps"),
    [
        (1, "172.30.0.11", (0, 1, 2), [(2, []), (-1, [0]), (2, [])], [(34, 40, 2)]),
        (2, "172.30.0.12", (1, 2, 0), [(0, [1]), (0, []), (0, [1])], [(39, 35, 0), (41, 36, 1)]),
    ],
)
def test_ranks_1_and_2_as_nccl_printed_them(rank, address, ring, tree, qps) -> None:
    parsed = nccl.parse(corpus_log(rank))
    assert parsed.bad_lines == 0
    (me,) = rows(parsed, "nccl_ranks")
    assert (me["rank"], me["host"], me["bootstrap_ip"], me["roce_ip"], me["nccl_version"]) == (
        rank,
        f"node{rank}",
        address,
        address,
        None,  # only rank 0 prints the version
    )
    assert [(r["prev_rank"], r["rank"], r["next_rank"]) for r in rows(parsed, "nccl_rings")] == [ring]
    # `Tree 0`, `Tree 1`, then `Trees [0]`
    assert [(t["up_rank"], t["down_ranks"]) for t in rows(parsed, "nccl_trees")] == tree
    assert [(q["local_qpn"], q["remote_qpn"], q["peer_rank"]) for q in rows(parsed, "nccl_qps")] == qps


def test_a_log_cut_mid_line_keeps_what_came_before_and_names_the_cut_line(tmp_path: Path) -> None:
    path = copy_with(
        tmp_path, 0, lambda lines: [*lines[:32], "node0:4744:4763 [0] NCCL INFO Ring 00 : 2 -> "]
    )
    parsed = nccl.parse(path)
    assert parsed.bad_lines == 1
    assert parsed.first_bad == [
        "line 33: node0:4744:4763 [0] NCCL INFO Ring 00 : 2 ->  (an NCCL topology line that does not parse)"
    ]
    assert rows(parsed, "nccl_ranks")[0]["rank"] == 0
    assert {r["source"] for r in rows(parsed, "nccl_rings")} == {"Channel"}  # the listing before the cut


def test_damaged_topology_lines_are_counted_and_numbers_cannot_overflow(tmp_path: Path) -> None:
    def damage(lines: list[str]) -> list[str]:
        lines[32] = "node0:4744:4763 [0] NCCL INFO Ring 00 : 2 -> 0 -> 99999999999999999999"
        lines[33] = "node0:4744:4763 [0] NCCL INFO Trees [0] 2/-1/-1->zero->-1"
        lines[40] = "node0:4744:4763 [0] NCCL INFO Channel 00/0 : 0[0] -> one[0] [send] via NET/IB/0"
        return lines

    parsed = nccl.parse(copy_with(tmp_path, 0, damage))
    assert parsed.bad_lines == 3
    assert [b.split(":")[0] for b in parsed.first_bad] == ["line 33", "line 34", "line 41"]
    assert [r["source"] for r in rows(parsed, "nccl_rings")] == ["Channel"] * 3
    assert [t["source"] for t in rows(parsed, "nccl_trees")] == ["Tree", "Tree"]  # not the damaged `Trees`
    assert [c["line"] for c in rows(parsed, "nccl_channels")] == [38, 48]


def test_hostile_lines_are_bounded_and_never_raise(tmp_path: Path) -> None:
    huge = 50  # MiB: one line this long is read in bounded pieces, never whole
    path = tmp_path / "worker-0-nccl.log"
    real = corpus_log(0).read_bytes().splitlines()
    with open(path, "wb") as fh:
        fh.write(b"\n".join(real[:12]) + b"\n")
        fh.write(b"node0:4744:4763 [0] NCCL INFO Ring 00 : ")  # an NCCL line…
        for _ in range(huge):
            fh.write(b"7 " * (1 << 19))
        fh.write(b"\n")
        for _ in range(huge):  # …and the program's own output: passed over
            fh.write(b"x" * (1 << 20))
        fh.write(b"\n")
        fh.write(b"node0:4744:4763 [0] NCCL INFO Bootstrap : Using eth0:'); DROP TABLE runs; --<0>\n")
        fh.write(b"evil');--:1:2 [0] NCCL INFO comm 0x1 rank 5 nranks 9\n")
        fh.write(b"node0:4744:4763 [0] NCCL INFO \x00\xff\xfe garbage Trees \xc3\n")
        fh.write(b"\n".join(real[12:]) + b"\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    parsed = nccl.parse(path)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 40, f"RSS grew {grown_mib:.0f} MiB reading a 50 MiB line"
    assert parsed.bad_lines == 2
    assert parsed.first_bad[0].startswith("line 13: node0:4744:4763 [0] NCCL INFO Ring 00 : 7 7 ")
    assert parsed.first_bad[0].endswith(f"(an NCCL line longer than {nccl.MAX_LINE} characters)")
    assert parsed.first_bad[1].startswith("line 15: node0:4744:4763 [0] NCCL INFO Bootstrap : Using eth0:')")
    ranks = {r["rank"]: r for r in rows(parsed, "nccl_ranks")}
    assert ranks[0]["bootstrap_ip"] == "172.30.0.25"
    assert ranks[5]["host"] == "evil');--"  # kept as text, as printed: it is a value, never SQL
    assert [r["source"] for r in rows(parsed, "nccl_rings")] == ["Channel"] * 3 + ["Ring"]


def test_a_file_with_nccl_lines_but_no_communicator_is_empty_and_reported(tmp_path: Path) -> None:
    path = copy_with(tmp_path, 1, lambda lines: lines[:4])  # bootstrap only: killed before init
    assert nccl.detect(path.read_text())
    parsed = nccl.parse(path)
    assert parsed.table.num_rows == 0
    assert (parsed.bad_lines, parsed.first_bad) == (
        1,
        ["no NCCL communicator (`comm 0x… rank …`) line in the file"],
    )


def test_launcher_tags_timestamps_and_older_releases_without_init_start(tmp_path: Path) -> None:
    """torchrun's `[rank0]:` tag and a timestamp before the prefix; NCCL ≤ 2.17 prints the comm line
    only at `Init COMPLETE`, after the rings: they still belong to that communicator."""

    def older(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            if "Init START" in line or "nNodes" in line:
                continue  # ≤ 2.17 prints neither
            out.append(f"[rank2]:[2026-01-05 10:00:00] {line}" if "NCCL" in line else line)
        return out

    parsed = nccl.parse(copy_with(tmp_path, 2, older))
    assert parsed.bad_lines == 0
    (me,) = rows(parsed, "nccl_ranks")
    assert (me["host"], me["rank"], me["comm_id"], me["nnodes"]) == ("node2", 2, "0x1f82f8f6b7863cd3", None)
    assert [r["comm_id"] for r in rows(parsed, "nccl_rings")] == ["0x1f82f8f6b7863cd3"]
    assert [q["rank"] for q in rows(parsed, "nccl_qps")] == [2, 2]


def test_two_communicators_in_one_process_keep_their_own_ranks_and_rings(tmp_path: Path) -> None:
    """A second communicator (a sub-group: ranks 0 and 2 of the first, ranks 0 and 1 of its own)
    initialised later on another thread of the same process."""
    comm = "comm 0x5 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 80 commId 0xabc"
    sub = [
        f"node2:4706:4800 [0] NCCL INFO {comm} - Init START",
        "node2:4706:4800 [0] NCCL INFO Ring 00 : 0 -> 1 -> 0",
        "node2:4706:4800 [0] NCCL INFO Trees [0] -1/-1/-1->1->0",
        f"node2:4706:4800 [0] NCCL INFO {comm} - Init COMPLETE",
    ]
    parsed = nccl.parse(copy_with(tmp_path, 2, lambda lines: [*lines, *sub]))
    assert parsed.bad_lines == 0
    assert [(r["comm_id"], r["rank"], r["nranks"]) for r in rows(parsed, "nccl_ranks")] == [
        ("0x1f82f8f6b7863cd3", 2, 3),
        ("0xabc", 1, 2),
    ]
    assert [
        (r["comm_id"], r["prev_rank"], r["rank"], r["next_rank"]) for r in rows(parsed, "nccl_rings")
    ] == [
        ("0x1f82f8f6b7863cd3", 1, 2, 0),
        ("0xabc", 0, 1, 0),
    ]
    assert [(t["comm_id"], t["up_rank"], t["source"]) for t in rows(parsed, "nccl_trees")] == [
        ("0x1f82f8f6b7863cd3", 0, "Tree"),
        ("0x1f82f8f6b7863cd3", 0, "Tree"),
        ("0x1f82f8f6b7863cd3", 0, "Trees"),
        ("0xabc", 0, "Trees"),
    ]


def test_newer_releases_set_ece_line_is_not_taken_for_the_receivers_qp(tmp_path: Path) -> None:
    """From NCCL 2.27 the connect line has no `query_ece=` and `qpn N set_ece` is the sender's own QP."""

    def newer(lines: list[str]) -> list[str]:
        return [
            line.replace(" query_ece={supported=0, vendor_id=0x0, options=0x0, comp_mask=0x0}", "")
            for line in lines
        ]

    parsed = nccl.parse(copy_with(tmp_path, 0, newer))
    assert [(q["local_qpn"], q["remote_qpn"], q["peer_rank"]) for q in rows(parsed, "nccl_qps")] == [
        (34, None, 1),
        (36, None, 2),
    ]


def test_two_processes_in_one_file_keep_apart_even_at_the_same_address(tmp_path: Path) -> None:
    """One stdout shared by a host's local ranks: each process (pid) is its own, even when both
    communicators happen to sit at the same virtual address."""
    lines = corpus_log(1).read_text().splitlines()
    other = [line.replace("node1:4626:", "node1:5555:").replace("rank 1 n", "rank 3 n") for line in lines]
    other = [line.replace("Ring 00 : 0 -> 1 -> 2", "Ring 00 : 2 -> 3 -> 0") for line in other]
    other = [line.replace("commId 0x1f82f8f6b7863cd3", "commId 0xbbbb") for line in other]
    path = tmp_path / "worker-1-nccl.log"
    path.write_text("\n".join(line for pair in zip(lines, other, strict=True) for line in pair) + "\n")
    parsed = nccl.parse(path)
    assert parsed.bad_lines == 0
    assert [(r["pid"], r["comm"], r["rank"]) for r in rows(parsed, "nccl_ranks")] == [
        (4626, "0x2a97e9c0", 1),
        (5555, "0x2a97e9c0", 3),
    ]
    rings = [(r["comm_id"], r["rank"], r["next_rank"]) for r in rows(parsed, "nccl_rings")]
    assert rings == [("0x1f82f8f6b7863cd3", 1, 2), ("0xbbbb", 3, 0)]
    qps = [(q["comm_id"], q["rank"], q["local_qpn"]) for q in rows(parsed, "nccl_qps")]
    assert qps == [("0x1f82f8f6b7863cd3", 1, 34), ("0xbbbb", 3, 34)]


def real_logs() -> list[Path]:
    """Every NCCL log of the shared corpora: 3 of 2.20.5 over RoCE, 12 of 2.28.9 over sockets."""
    logs = sorted(RDMA_CORPUS.glob("linlinw5_ring2_node*.log")) + sorted(GPU_CORPUS.rglob("nccl.*.log"))
    if len(logs) != 15:
        pytest.fail(
            f"corpus missing: {len(logs)} NCCL logs under ../shared (the folder must sit beside the checkout)"
        )
    return logs


@pytest.mark.parametrize("path", real_logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_line_of_the_real_logs_is_in_a_form_the_parser_knows(path: Path) -> None:
    """INIT, BOOTSTRAP, ENV, GRAPH, NET, PROFILE and the plugins' lines: read or passed over on purpose."""
    parsed = nccl.parse(path)
    assert (parsed.bad_lines, parsed.warnings) == (0, [])
    assert [(r["unknown_lines"], r["first_unknown"]) for r in rows(parsed, "nccl_ranks")] == [(0, None)]


def test_nccl_2_28_socket_rank_with_its_tree_lines() -> None:
    """Rank 2 of the 4-rank run: `Tree 0 : 0 -> 2 -> 1/3/-1` (parent, rank, children) says what
    `Trees [0] 1/3/-1->2->0` says, one channel a line."""
    parsed = nccl.parse(FOUR_RANKS / "nccl.vm.872.log")
    (me,) = rows(parsed, "nccl_ranks")
    got = {k: me[k] for k in ("rank", "nranks", "nnodes", "comm_id", "net", "net_devices", "addresses")}
    assert got == {
        "rank": 2,
        "nranks": 4,
        "nnodes": 4,
        "comm_id": "0x2b59316653137e7e",
        "net": "Socket",
        "net_devices": "[0]gqv2:10.78.0.3<0>",
        "addresses": ["10.78.0.3"],
    }
    assert (me["nccl_version"], me["init_complete"], me["warnings"]) == ("2.28.9+cuda13.0", True, 0)
    trees = [(t["channel"], t["up_rank"], t["rank"], t["down_ranks"], t["source"], t["line"])
             for t in rows(parsed, "nccl_trees")]  # fmt: skip
    assert trees == [
        (0, 0, 2, [1, 3], "Tree", 39),
        (1, 1, 2, [], "Tree", 40),
        (0, 0, 2, [1, 3], "Trees", 43),
        (1, 1, 2, [], "Trees", 43),
    ]
    assert [(r["channel"], r["prev_rank"], r["next_rank"]) for r in rows(parsed, "nccl_rings")] == [
        (0, 1, 3),
        (1, 1, 3),
    ]
    sends = [(c["channel"], c["dst_rank"]) for c in rows(parsed, "nccl_channels") if c["direction"] == "send"]
    assert sends == [(0, 3), (0, 0), (0, 1), (1, 1), (1, 3)]  # ring ch 0, tree ch 0 up and down, …
    assert {c["transport"] for c in rows(parsed, "nccl_channels")} == {"NET/Socket"}


def with_lines(tmp_path: Path, source: Path, after: int, extra: list[str]) -> Path:
    """A copy of a real log with `extra` lines after its line `after`."""
    lines = source.read_text().splitlines()
    path = tmp_path / source.name
    path.write_text("\n".join([*lines[:after], *extra, *lines[after:]]) + "\n")
    return path


def test_lines_of_a_form_the_parser_does_not_know_are_counted_and_warned_once(tmp_path: Path) -> None:
    """What a newer release might print: counted per file, the first kept and escaped in the one
    warning; the lines around them are read as before."""
    new_forms = [
        "vm:637:637 [0] NCCL INFO Graph v3 00 : 1 => 0 => 1 \x1b[31mnew\x1b[0m",
        "vm:637:637 [0] NCCL INFO Tree 0 : -1 -> 0 -> 1/-1/-1/-1",  # four children: a bad `Tree` line
        "vm:637:685 [0] NCCL INFO NVLS Trees : -1/-1/-1->0->1 -1/-1/-1->0->1",  # NVLink SHARP, not met yet
        "vm:637:637 [0] NCCL WARN a warning is counted as one, never as unknown",
        "not NCCL's at all: the program's own output",
    ]
    path = with_lines(tmp_path, TWO_RANKS / "nccl.vm.637.log", 40, new_forms)
    parsed = nccl.parse(path)
    (me,) = rows(parsed, "nccl_ranks")
    first = "line 41: vm:637:637 [0] NCCL INFO Graph v3 00 : 1 => 0 => 1 \x1b[31mnew\x1b[0m"
    assert (me["unknown_lines"], me["first_unknown"], me["warnings"]) == (2, first, 1)
    assert parsed.warnings == [
        "2 NCCL line(s) of a form tracecore does not know (a newer NCCL?), passed over; "
        "first: 'line 41: vm:637:637 [0] NCCL INFO Graph v3 00 : 1 => 0 => 1 \\x1b[31mnew\\x1b[0m'"
    ]
    assert parsed.bad_lines == 1  # starts like the `Tree` line, does not parse: bad, not unknown
    assert parsed.first_bad == [f"line 42: {new_forms[1]} (an NCCL topology line that does not parse)"]
    rings = [r["source"] for r in rows(parsed, "nccl_rings")]
    assert rings == ["Channel"] * 4 + ["Ring"] * 2  # `Channel 00/02 : 0 1` twice, `Ring 0x : 1 -> 0 -> 1`
    assert [t["source"] for t in rows(parsed, "nccl_trees")] == ["Tree", "Tree", "Trees", "Trees"]
