"""The collectives' event sources on the real GPU corpus (../shared/corpus-gpu: NCCL 2.28.9 runs on an
H100/H200 with PyTorch profiler traces, NCCL's example profiler plugin and NCCL Inspector) and on
damaged copies of them: rows, clocks, and bad lines named by line."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tracecore.logs import detect_parser, horovod_timeline, nccl_inspector, nccl_profiler, pytorch_profiler
from tracecore.logs._chrome import TraceRecords
from tracecore.logs._common import BadLines

REPO = Path(__file__).resolve().parent.parent
GPU = REPO.parent / "shared" / "corpus-gpu"
CNN = GPU / "gpu-nccl-profilers" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
MLP = GPU / "gpu-nccl-profilers" / "torch_ddp-mlp25m-sgd-32-nccl-normal-ring"
W4 = GPU / "gpu-nccl-4rank" / "torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
DATA = Path(__file__).parent / "data" / "logs"
CNN_PLUGIN = "nccl-profiler-example_7235738580355106002_{}.json"
KINETO_BASE = 1790857026000000000  # baseTimeNanoseconds of every corpus trace


def corpus(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"corpus missing: {path} (the shared/ folder must sit beside the checkout)")
    return path


def meta(run: Path) -> dict:
    return json.loads(corpus(run / "meta.json").read_text())


def rows(table) -> list[dict]:
    return table.to_pylist()


# --- detection ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "table"),
    [
        (CNN / "kineto-rank0.json", "collectives"),
        (CNN / CNN_PLUGIN.format(1), "collectives"),
        (MLP / "nccl-inspector" / "vm-pid974.log", "collectives"),
        (CNN / "nccl.vm.822.log", "nccl_ranks"),
        (CNN / "train_history.log", "train_log"),
        (DATA / "horovod_timeline.json", "horovod_timeline"),
    ],
)
def test_each_source_is_recognised_by_content(path: Path, table: str) -> None:
    parser = detect_parser(corpus(path))
    assert parser is not None
    assert parser.table == table
    kinds = {
        "kineto": pytorch_profiler.PARSER,
        "nccl-profiler": nccl_profiler.PARSER,
        "vm-pid": nccl_inspector.PARSER,
    }
    for prefix, expected in kinds.items():
        if path.name.startswith(prefix):
            assert parser is expected


def test_a_gzipped_trace_is_recognised_and_read_like_the_plain_one(tmp_path: Path) -> None:
    plain = corpus(CNN / "kineto-rank1.json")
    packed = tmp_path / "rank1.pt.trace.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert detect_parser(packed) is pytorch_profiler.PARSER
    a, b = pytorch_profiler.parse(plain), pytorch_profiler.parse(packed)
    assert a.bad_lines == b.bad_lines == 0
    assert a.table.drop(["file"]).equals(b.table.drop(["file"]))
    assert a.more["profiler_kernels"].num_rows == b.more["profiler_kernels"].num_rows == 381


def test_event_sources_are_offered_only_from_subfolders_never_other_logs(tmp_path: Path) -> None:
    shutil.copy(corpus(CNN / "train_history.log"), tmp_path / "train_history.log")
    assert detect_parser(tmp_path / "train_history.log", nested=True) is None
    inspector = corpus(MLP / "nccl-inspector" / "vm-pid975.log")
    assert detect_parser(inspector, nested=True) is nccl_inspector.PARSER


# --- PyTorch profiler ----------------------------------------------------------------------------------


def test_pytorch_profiler_collectives_of_the_cnn3m_rank0_trace() -> None:
    parsed = pytorch_profiler.parse(corpus(CNN / "kineto-rank0.json"))
    assert parsed.bad_lines == 0
    got = rows(parsed.table)
    assert [(r["op"], r["bytes"], r["dtype"], r["step"], r["seq"]) for r in got] == [
        ("all_reduce", 12254760, "float32", 4, 0),
        ("all_reduce", 12254760, "float32", 5, 1),
        ("all_reduce", 12254760, "float32", 6, 2),
    ]
    first = got[0]
    assert (first["rank"], first["comm"], first["comm_size"]) == (0, "0", 2)
    assert (first["pid"], first["backend"]) == (822, "nccl")
    # the kernel's GPU time (ts 4863728092764.016 µs, dur 7475.659 µs) on Unix time
    assert first["time_source"] == "gpu_kernel"
    assert first["start_ns"] == KINETO_BASE + 4863728092764016
    assert first["end_ns"] - first["start_ns"] == 7475659
    # the call on the host: record_param_comms (ts 4863728090439.86 µs, dur 197.432 µs)
    assert first["call_start_ns"] == KINETO_BASE + 4863728090439860
    assert first["call_end_ns"] - first["call_start_ns"] == 197432
    text = (CNN / "kineto-rank0.json").read_text().splitlines()
    assert '"name": "record_param_comms"' in text[first["line"]]  # the record's `{` line, then its fields
    (clock,) = rows(parsed.more["collective_clocks"])
    assert (clock["method"], clock["offset_ns"]) == ("baseTimeNanoseconds", KINETO_BASE)
    assert clock["collectives"] == 3


def test_pytorch_profiler_steps_match_the_runs_own_unix_times() -> None:
    """The clock mapping, checked against meta.json's per-step Unix times (written by the job itself):
    each ProfilerStep#N ends within 1 ms of the job's step N end."""
    parsed = pytorch_profiler.parse(corpus(CNN / "kineto-rank0.json"))
    steps = {s["global_step"]: s for s in meta(CNN)["ranks"]["0"]["steps"]}
    got = rows(parsed.more["profiler_steps"])
    assert [s["step"] for s in got] == [4, 5, 6]
    for s in got:
        assert abs(s["end_ns"] - steps[s["step"]]["end_unix"] * 1e9) < 1e6
        assert s["start_ns"] < s["gpu_start_ns"] < s["gpu_end_ns"] <= s["end_ns"]
    kernels = parsed.more["profiler_kernels"]
    kinds = kernels.group_by("kind").aggregate([("kind", "count")]).to_pylist()
    assert {k["kind"]: k["kind_count"] for k in kinds} == {
        "communication": 3,
        "compute": 321,
        "memcpy": 48,
        "memset": 9,
    }


def test_pytorch_profiler_two_buckets_per_step_on_mlp25m() -> None:
    for rank in (0, 1):
        got = rows(pytorch_profiler.parse(corpus(MLP / f"kineto-rank{rank}.json")).table)
        assert [(r["bytes"], r["step"]) for r in got] == [
            (50429992, 4),
            (50348032, 4),
            (50429992, 5),
            (50348032, 5),
            (50429992, 6),
            (50348032, 6),
        ]
        assert {r["rank"] for r in got} == {rank}


def test_pytorch_profiler_cut_short_keeps_the_events_before_and_names_the_line(tmp_path: Path) -> None:
    text = corpus(CNN / "kineto-rank0.json").read_text()
    cut = text.index('"name": "ncclDevKernel_AllReduce', text.index("4863728124920.917") - 200)
    damaged = tmp_path / "kineto-rank0.json"
    damaged.write_text(text[:cut])
    parsed = pytorch_profiler.parse(damaged)
    assert parsed.bad_lines == 1
    record_start = text.rfind("\n  {", 0, cut) + 1  # the cut record's `{`
    assert parsed.first_bad[0].startswith(f"line {text[:record_start].count(chr(10)) + 1}: ")
    got = rows(parsed.table)
    # every call survives; the kernels of the second and third all-reduce were never written
    assert [r["time_source"] for r in got] == ["gpu_kernel", "cpu_call", "cpu_call"]
    assert got[0]["start_ns"] == KINETO_BASE + 4863728092764016


def test_pytorch_profiler_broken_records_are_bad_lines_with_their_numbers(tmp_path: Path) -> None:
    lines = corpus(CNN / "kineto-rank0.json").read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if '"name": "record_param_comms"' in line)
    lines[at + 1] = lines[at + 1].replace('"ts": ', '"ts": ,')  # the call's record no longer parses
    no_ts = next(i for i, line in enumerate(lines) if '"cat": "kernel"' in line)
    lines[no_ts + 1] = lines[no_ts + 1].replace('"ts": ', '"tz": ')
    damaged = tmp_path / "kineto-rank0.json"
    damaged.write_text("\n".join(lines))
    parsed = pytorch_profiler.parse(damaged)
    assert parsed.bad_lines == 2
    assert at < no_ts  # bad lines are reported in file order, each at its record's `{` line
    assert parsed.first_bad[0].startswith(f"line {at}: ")
    assert parsed.first_bad[1].startswith(f"line {no_ts}: ")
    assert "without a name, ts or dur" in parsed.first_bad[1]
    got = rows(parsed.table)
    # the first call's record is lost, not its collective: the nccl:all_reduce annotation inside it
    # and that annotation's span on the GPU stand in for it
    assert [(r["step"], r["bytes"]) for r in got] == [(4, 12254760), (5, 12254760), (6, 12254760)]
    assert (got[0]["source_op"], got[0]["time_source"]) == ("nccl:all_reduce", "gpu_kernel")
    assert got[0]["start_ns"] == KINETO_BASE + 4863728092764015  # gpu_user_annotation nccl:all_reduce


def test_a_record_longer_than_the_limit_is_one_bad_line_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    big = json.dumps({"ph": "X", "name": "x", "args": {"pad": "y" * 5000}})
    text = '{"traceEvents": [\n  {"ph": "i", "name": "a"},\n  ' + big + ',\n  {"ph": "i", "name": "b"}\n]}\n'
    path.write_text(text)
    bad = BadLines()
    names = [rec["name"] for _, rec in TraceRecords(path, bad, max_record=1024)]
    assert names == ["a", "b"]
    assert bad.count == 1
    assert bad.examples[0].startswith("line 3: ")
    assert "longer than 1024" in bad.examples[0]


def test_a_damaged_gzip_stream_keeps_what_came_before(tmp_path: Path) -> None:
    packed = gzip.compress(corpus(CNN / "kineto-rank0.json").read_bytes())
    path = tmp_path / "t.json.gz"
    path.write_bytes(packed[: len(packed) // 2])
    parsed = pytorch_profiler.parse(path)
    assert parsed.bad_lines >= 1
    assert any("compressed stream damaged" in b for b in parsed.first_bad)
    # the three calls lie in the first half, their kernels (from line 14,251) in the lost one
    assert [r["time_source"] for r in rows(parsed.table)] == ["cpu_call"] * 3


# --- NCCL's example profiler plugin -----------------------------------------------------------------------


def test_example_plugin_collectives_and_clock_of_cnn3m_rank0() -> None:
    parsed = nccl_profiler.parse(corpus(CNN / CNN_PLUGIN.format(0)))
    assert parsed.bad_lines == 0
    got = rows(parsed.table)
    assert len(got) == 24
    assert [r["op"] for r in got].count("all_reduce") == 19
    assert {r["comm"] for r in got} == {"0x646a81e6f9a7c4d2"}  # CommHash as NCCL's log prints commId
    marker = got[1]
    assert (marker["op"], marker["bytes"], marker["source_seq"], marker["algorithm"], marker["protocol"]) == (
        "all_reduce",
        4194304,
        1,
        "RING",
        "SIMPLE",
    )
    (clock,) = rows(parsed.more["collective_clocks"])
    assert (clock["anchors"], clock["offset_ns"]) == (42, 1795720748388082485)
    # the mapped host time of the marker's call lies inside the job's own bracket of it (meta.json);
    # its kernel's GPU clock ends 0.08 ms after the bracket: the GPU's timer runs a little ahead
    lo, hi = (t * 1e9 for t in meta(CNN)["ranks"]["0"]["marker_all_reduce"]["unix"])
    assert lo <= marker["call_start_ns"] <= marker["start_ns"] <= hi
    assert 0 < marker["end_ns"] - hi < 100_000
    steps = [r for r in got if r["bytes"] == 12254760 and r["op"] == "all_reduce"]
    assert len(steps) == 16
    assert all(r["time_source"] == "gpu_kernel" for r in steps)
    assert all(r["n_channels"] == 2 for r in steps)
    broadcast = next(r for r in got if r["op"] == "broadcast" and r["bytes"] == 12254760)
    assert (broadcast["dtype"], broadcast["peer"]) == ("float32", 0)  # the user's type; root 0


def test_example_plugin_without_kernel_events_keeps_host_times_unplaced(tmp_path: Path) -> None:
    lines = corpus(CNN / CNN_PLUGIN.format(1)).read_text().splitlines()
    kept = [line for line in lines if '"cat": "GPU"' not in line]
    path = tmp_path / "p.json"
    path.write_text("\n".join(kept))
    parsed = nccl_profiler.parse(path)
    (clock,) = rows(parsed.more["collective_clocks"])
    assert (clock["method"], clock["offset_ns"], clock["anchors"]) == ("none", None, 0)
    assert {r["start_ns"] for r in rows(parsed.table)} == {None}


def test_example_plugin_damaged_record_is_a_bad_line(tmp_path: Path) -> None:
    lines = corpus(CNN / CNN_PLUGIN.format(1)).read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if '"cat": "COLL", "ph": "b"' in line and "Broadcast" in line)
    lines[at] = lines[at][:60]
    path = tmp_path / "p.json"
    path.write_text("\n".join(lines))
    parsed = nccl_profiler.parse(path)
    assert parsed.bad_lines == 1
    assert parsed.first_bad[0].startswith(f"line {at + 1}: ")
    assert [r["op"] for r in rows(parsed.table)].count("broadcast") == 3


# --- NCCL Inspector ---------------------------------------------------------------------------------------


def test_inspector_records_of_mlp25m_rank1() -> None:
    parsed = nccl_inspector.parse(corpus(MLP / "nccl-inspector" / "vm-pid975.log"))
    assert parsed.bad_lines == 0
    got = rows(parsed.table)
    assert len(got) == 25
    assert [r["op"] for r in got].count("all_reduce") == 24
    assert {(r["host"], r["pid"], r["rank"], r["comm"], r["comm_size"]) for r in got} == {
        ("vm", 975, 1, "0x45c208fb738496", 2)
    }
    third = got[3]  # coll_sn 3: the first 50,429,992 B bucket
    assert (third["source_seq"], third["bytes"], third["busbw_gbs"]) == (3, 50429992, 1.599327)
    assert third["time_source"] == "kernel_host"
    assert (third["start_ns"], third["end_ns"]) == (1795720471049371000, 1795720471081270000)
    assert third["call_start_ns"] == 1795720471047156000


def test_inspector_bad_lines_are_named_and_the_rest_kept(tmp_path: Path) -> None:
    lines = corpus(MLP / "nccl-inspector" / "vm-pid974.log").read_text().splitlines()
    lines[2] = lines[2][:100]
    lines[5] = json.dumps({"header": {"id": "x"}, "coll_perf": {}})
    path = tmp_path / "vm-pid974.log"
    path.write_text("\n".join(lines) + "\n")
    parsed = nccl_inspector.parse(path)
    assert parsed.bad_lines == 2
    assert parsed.first_bad[0].startswith("line 3: ")
    assert parsed.first_bad[1].startswith("line 6: ")
    assert parsed.table.num_rows == 23


# --- Horovod's timeline -----------------------------------------------------------------------------------


def test_horovod_timeline_fused_tensors_are_one_collective() -> None:
    parsed = horovod_timeline.parse(DATA / "horovod_timeline.json")
    (row,) = rows(parsed.more["collectives"])
    # two tensors, float32 [16, 3, 3, 3] and [10, 64], all-reduced together by one GLOO_ALLREDUCE
    assert (row["op"], row["backend"], row["bytes"], row["dtype"], row["comm_size"]) == (
        "all_reduce",
        "gloo",
        (16 * 3 * 3 * 3 + 10 * 64) * 4,
        "float32",
        2,
    )
    start_us = 1795332680644387
    assert (row["start_ns"], row["end_ns"]) == ((start_us + 1141) * 1000, (start_us + 2310) * 1000)


def test_untrusted_names_and_numbers_are_bounded(tmp_path: Path) -> None:
    record = json.loads(corpus(MLP / "nccl-inspector" / "vm-pid974.log").read_text().splitlines()[3])
    record["metadata"]["hostname"] = "h" * 10_000
    record["header"]["rank"] = 2**40  # outside the int32 column: stored as NULL, not wrapped
    record["coll_perf"]["coll"] = "Weird" * 100
    path = tmp_path / "vm-pid1.log"
    path.write_text(json.dumps(record) + "\n")
    parsed = nccl_inspector.parse(path)
    assert parsed.bad_lines == 0
    (row,) = rows(parsed.table)
    assert (len(row["host"]), row["rank"], len(row["op"]), len(row["source_op"])) == (255, None, 64, 64)


def test_pytorch_profiler_reduce_scatter_counts_each_ranks_output(tmp_path: Path) -> None:
    """NCCL counts a reduce-scatter by each rank's output; c10d's record_param_comms gives both counts
    (`_reduce_scatter_base`: In = N × Out). cnn3m rank 0's first all-reduce record rewritten as the
    reduce-scatter of the same bucket over its 2 ranks (no corpus run has one): its message is the
    bucket, 3,063,690 floats, not the 2 × 3,063,690 each rank puts in."""
    text = corpus(CNN / "kineto-rank0.json").read_text()
    record = '"Collective name": "allreduce", "Process Group Description": "default_pg"'
    assert text.count(record) == 3
    at = text.index(record)
    end = text.index("}", at)
    assert text[at:end].count('"In msg nelems": 3063690') == 1
    rewritten = (
        text[at:end]
        .replace('"allreduce"', '"_reduce_scatter_base"')
        .replace('"In msg nelems": 3063690', '"In msg nelems": 6127380')
    )
    trace = tmp_path / "kineto-rank0.json"
    trace.write_text(text[:at] + rewritten + text[end:])
    got = rows(pytorch_profiler.parse(trace).table)
    assert [(r["op"], r["source_op"], r["bytes"]) for r in got] == [
        ("reduce_scatter", "_reduce_scatter_base", 12254760),
        ("all_reduce", "allreduce", 12254760),
        ("all_reduce", "allreduce", 12254760),
    ]
