"""PyTorch profiler traces across NCCL and PyTorch releases (issue 38, item 5): every NCCL release's
kernel name is a communication kernel, every Kineto format is read, and a trace whose collectives'
kernels are not recognised says so in one warning with a count, never a silent zero (HTA's failure
when NCCL renamed ncclKernel_* to ncclDevKernel_*).

Each variant is the real 4-rank corpus trace (H200, NCCL 2.28.9, torch 2.11) with its kernels renamed
to a release's form or its records written as an older Kineto wrote them, so the answer to compare
with is the trace's own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracecore.cli.app import app
from tracecore.logs import ParsedLog, pytorch_profiler

FOUR = "gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
RUN = Path(__file__).parents[2] / "shared/corpus-gpu" / FOUR
TRACE = RUN / "kineto-rank0.json"
KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"  # NCCL 2.28.9's
COLLECTIVE_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype")
GPU = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")

# the same all-reduce kernel as each release names it (NVIDIA/nccl and ROCm/rccl sources at their tags)
RELEASES = {
    "2.3": "ncclAllReduceLLKernel_sum_f32(ncclColl)",
    "2.4-2.7": "ncclAllReduceRingLLKernel_sum_f32(ncclColl)",
    "2.7 send/recv": "ncclSendRecvKernel_copy_i8(ncclColl)",
    "2.8-2.11": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
    "2.12": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ncclWorkElem)",
    "2.13-2.18": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
    "2.19-2.21": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "2.19-2.30 generic": "ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)",
    "2.29-2.30": "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(ncclDevKernelArgsStorage<4096ul>)",
    "2.19-2.30 one rank": "void (anonymous namespace)::oneRankReduce<FuncPreMulSum<float> >"
    "(void*, void*, unsigned long, unsigned long, bool)",
    "2.27 symmetric": "ncclSymDevKernel_AllReduce_AGxLL_R_sum_f32(ncclSymDevArgs)",
    "2.28-2.30 symmetric": "ncclSymkDevKernel_AllReduce_RSxLDMC_AGxSTMC_sum_bf16(ncclSymkDevWorkArgs4K)",
    "RCCL": "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
    "RCCL MSCCL": "mscclKernel_Sum_float_LL128_0(ncclDevComm*, mscclAlgo*, mscclWork*)",
}


def corpus_trace() -> Path:
    if not TRACE.is_file():
        pytest.fail(f"corpus missing: {TRACE} (the shared/ folder must sit beside the checkout)")
    return TRACE


def renamed(tmp_path: Path, name: str) -> Path:
    """The corpus trace with its NCCL kernels renamed `name` (a plain text replacement)."""
    text = corpus_trace().read_text()
    assert text.count(KERNEL) == 3
    out = tmp_path / "kineto-rank0.json"
    out.write_text(text.replace(KERNEL, json.dumps(name)[1:-1]))
    return out


def rewritten(
    tmp_path: Path, edit: Callable[[dict], dict | None], meta: Callable[[dict], None] | None = None
) -> Path:
    """The corpus trace with each event replaced by `edit(event)` (None: left out), and its top-level
    values changed by `meta`."""
    trace = json.loads(corpus_trace().read_text())
    trace["traceEvents"] = [e for e in map(edit, trace["traceEvents"]) if e is not None]
    if meta is not None:
        meta(trace)
    out = tmp_path / "kineto-rank0.json"
    out.write_text(json.dumps(trace, indent=1))
    return out


def collectives(parsed: ParsedLog) -> list[tuple]:
    cols = ("op", "bytes", "dtype", "comm", "comm_size", "rank", "start_ns", "end_ns", "time_source")
    return list(zip(*(parsed.table[c].to_pylist() for c in cols), strict=True))


def kinds(parsed: ParsedLog) -> Counter:
    return Counter(parsed.more["profiler_kernels"]["kind"].to_pylist())


@pytest.fixture(scope="module")
def original() -> ParsedLog:
    parsed = pytorch_profiler.parse(corpus_trace())
    assert parsed.warnings == []
    assert parsed.bad_lines == 0
    assert kinds(parsed) == {"compute": 321, "memcpy": 48, "memset": 9, "communication": 3}
    assert [c[-1] for c in collectives(parsed)] == ["gpu_kernel"] * 3
    return parsed


@pytest.mark.parametrize("release", RELEASES)
def test_every_nccl_releases_kernel_name_is_communication(tmp_path, original, release) -> None:
    """Renamed to the form of the release, the kernels are the collectives' (same start and end from
    the GPU) and communication, with no warning: the name alone is recognised."""
    parsed = pytorch_profiler.parse(renamed(tmp_path, RELEASES[release]))
    assert parsed.warnings == []
    assert collectives(parsed) == collectives(original)
    assert kinds(parsed) == kinds(original)
    assert parsed.more["profiler_kernels"].equals(original.more["profiler_kernels"])


def test_the_kernel_name_patterns_hold_each_form_and_no_compute_kernel() -> None:
    """One pattern for all the forms; the corpus' compute kernels (cuDNN, ATen, cuBLAS) match none."""
    assert all(pytorch_profiler._COMM_KERNEL.match(n) for n in RELEASES.values())
    text = corpus_trace().read_text()
    names = {e["name"] for e in json.loads(text)["traceEvents"] if e.get("cat") == "kernel"}
    assert len(names) > 20
    assert {n for n in names if pytorch_profiler._COMM_KERNEL.match(n)} == {KERNEL}


def test_an_nccl_name_of_no_known_form_is_communication_and_warned_once(tmp_path, original) -> None:
    """A name that holds "nccl" but no release's form (a future rename) stays communication and the
    collectives' own kernels, in one warning that counts the kernels and names one."""
    parsed = pytorch_profiler.parse(renamed(tmp_path, "ncclFooKernel_AllReduce_Sum_f32(ncclFooArgs)"))
    assert parsed.warnings == [
        "3 GPU kernel(s) of no known NCCL kernel name (e.g. 'ncclFooKernel_AllReduce_Sum_f32(ncclFooArgs)')"
        " taken as communication: named like NCCL's, or launched by a collective"
    ]
    assert collectives(parsed) == collectives(original)
    assert kinds(parsed) == kinds(original)


def test_a_kernel_its_collective_launched_is_communication_whatever_its_name(tmp_path, original) -> None:
    """A name without "nccl" at all: Kineto copies record_param_comms' "Collective name" onto the
    kernels the call launched, so they are still its communication kernels, in one warning."""
    name = "cclxDevKernel_AllReduce_Sum_f32_RING_LL_with_a_long_tail_of_template_arguments(Args<4096ul>)"
    parsed = pytorch_profiler.parse(renamed(tmp_path, name))
    assert parsed.warnings == [
        "3 GPU kernel(s) of no known NCCL kernel name"
        " (e.g. 'cclxDevKernel_AllReduce_Sum_f32_RING_LL_with_a_long_tail_of…') taken as"
        " communication: named like NCCL's, or launched by a collective"
    ]
    assert collectives(parsed) == collectives(original)
    assert kinds(parsed) == kinds(original)


def without_collective_args(name: str) -> Callable[[dict], dict]:
    """An event edit: the NCCL kernels renamed `name` and stripped of the collective's args, as
    PyTorch wrote kernels before 2023-12."""

    def edit(event: dict) -> dict:
        if event.get("name") == KERNEL:
            event["name"] = name
            event["args"] = {k: v for k, v in event["args"].items() if k not in COLLECTIVE_ARGS}
        return event

    return edit


def test_an_unrecognised_kernel_is_never_a_silent_zero(tmp_path, original) -> None:
    """Nothing tells the renamed kernels for NCCL's: the trace has no communication kernel, and says
    so in one warning, with the collectives counted and the kernels they launched named and counted."""
    name = "cclxDevKernel_AllReduce_Sum_f32_RING_LL(Args<4096ul>)"
    parsed = pytorch_profiler.parse(rewritten(tmp_path, without_collective_args(name)))
    assert parsed.warnings == [
        "3 of 3 NCCL collectives have no GPU kernel recognised as NCCL's (the kernels they launched are"
        " named like 'cclxDevKernel_AllReduce_Sum_f32_RING_LL(Args<4096ul>)' ×3): their kernels count"
        " as compute, and their times are their GPU annotations' or host calls'"
    ]
    assert kinds(parsed) == {"compute": 324, "memcpy": 48, "memset": 9}
    assert len(collectives(parsed)) == 3  # the collectives are still there, timed by nccl:all_reduce


def test_traces_without_gpu_kernels_or_nccl_never_warn(tmp_path, original) -> None:
    """A CPU-only profile of the NCCL run (no GPU activity at all), and a gloo run whose model is on
    the GPU (compute kernels, collectives on the host): neither has an NCCL kernel to miss."""
    cpu_only = pytorch_profiler.parse(rewritten(tmp_path, lambda e: None if e.get("cat") in GPU else e))
    assert cpu_only.warnings == []
    assert [c[-1] for c in collectives(cpu_only)] == ["cpu_call"] * 3
    assert kinds(cpu_only) == {}

    def gloo(event: dict) -> dict | None:
        if event.get("name") == KERNEL or event.get("cat") == "gpu_user_annotation":
            return None
        if event.get("name") == "nccl:all_reduce":
            event["name"] = "gloo:all_reduce"
        return event

    def gloo_info(trace: dict) -> None:
        trace["distributedInfo"]["backend"] = "gloo"

    on_gloo = pytorch_profiler.parse(rewritten(tmp_path, gloo, gloo_info))
    assert on_gloo.warnings == []
    assert kinds(on_gloo) == {"compute": 321, "memcpy": 48, "memset": 9}
    assert {(c[0], c[-1]) for c in collectives(on_gloo)} == {("all_reduce", "cpu_call")}


# --- Kineto's formats: each one the corpus trace written as that Kineto wrote it ----------------------

OLD_GPU = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}


def test_kineto_before_2022_04_kernel_memcpy_memset_and_external_id(tmp_path, original) -> None:
    """ "Kernel", "Memcpy", "Memset" and their lower-case "external id": the same kernels, the same
    collectives timed by them."""

    def edit(event: dict) -> dict:
        if event.get("cat") in OLD_GPU:
            event["cat"] = OLD_GPU[event["cat"]]
            args = event["args"]
            event["args"] = {("external id" if k == "External id" else k): v for k, v in args.items()}
        return event

    parsed = pytorch_profiler.parse(rewritten(tmp_path, edit))
    assert parsed.warnings == []
    assert collectives(parsed) == collectives(original)
    assert parsed.more["profiler_kernels"].equals(original.more["profiler_kernels"])


def test_kineto_before_2022_05_gpu_user_annotation_capitalised(tmp_path, original) -> None:
    """ "gpu_user_Annotation": the steps' GPU spans, and with no kernel the collectives' GPU spans."""

    def edit(event: dict) -> dict | None:
        if event.get("name") == KERNEL:
            return None
        if event.get("cat") == "gpu_user_annotation":
            event["cat"] = "gpu_user_Annotation"
        return event

    parsed = pytorch_profiler.parse(rewritten(tmp_path, edit))
    assert parsed.more["profiler_steps"].equals(original.more["profiler_steps"])
    assert [c[-1] for c in collectives(parsed)] == ["gpu_kernel"] * 3
    starts = zip(collectives(parsed), collectives(original), strict=True)
    assert [kernel[-3] - annotation[-3] for annotation, kernel in starts] == [1] * 3  # 1 ns apart
    assert len(parsed.warnings) == 1
    assert parsed.warnings[0].startswith("3 of 3 NCCL collectives have no GPU")


def test_kineto_before_2021_06_operator_and_user(tmp_path, original) -> None:
    """Host operators and annotations all "Operator", GPU annotations "User": the same steps and
    collectives."""
    old = {"cpu_op": "Operator", "user_annotation": "Operator", "gpu_user_annotation": "User"}

    def edit(event: dict) -> dict:
        event["cat"] = old.get(event.get("cat"), event.get("cat"))
        return event

    parsed = pytorch_profiler.parse(rewritten(tmp_path, edit))
    assert parsed.warnings == []
    assert collectives(parsed) == collectives(original)
    assert parsed.more["profiler_steps"].equals(original.more["profiler_steps"])
    assert parsed.table["source_op"].to_pylist() == ["allreduce"] * 3


def record_param_comms(change: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def edit(event: dict) -> dict:
        if event.get("name") == "record_param_comms":
            event["args"] = change(event["args"])
        return event

    return edit


def test_record_param_comms_without_its_collective_args(tmp_path, original) -> None:
    """No "Collective name", message or dtype (older PyTorch, a "coalesced" record): the operation,
    bytes and dtype are those of the nccl:all_reduce work nested in the call."""
    names = ("Collective name", "In msg nelems", "Out msg nelems", "dtype")
    strip = record_param_comms(lambda args: {k: v for k, v in args.items() if k not in names})
    parsed = pytorch_profiler.parse(rewritten(tmp_path, strip))
    assert parsed.warnings == []
    assert collectives(parsed) == collectives(original)
    assert collectives(parsed)[0][:3] == ("all_reduce", 3063690 * 4, "float32")
    assert parsed.table["source_op"].to_pylist() == ["nccl:all_reduce"] * 3


def test_record_param_comms_msg_size_before_2023_12(tmp_path, original) -> None:
    """ "In msg size"/"Out msg size", the element counts' names before "… msg nelems"."""
    old = {"In msg nelems": "In msg size", "Out msg nelems": "Out msg size"}
    parsed = pytorch_profiler.parse(
        rewritten(tmp_path, record_param_comms(lambda args: {old.get(k, k): v for k, v in args.items()}))
    )
    assert collectives(parsed) == collectives(original)
    assert collectives(parsed)[0][1] == 3063690 * 4


def test_record_param_comms_process_group_id_before_2024_04(tmp_path, original) -> None:
    """ "Process Group ID", the process group's key before "Process Group Name"."""

    def rename(args: dict) -> dict:
        return {("Process Group ID" if k == "Process Group Name" else k): v for k, v in args.items()}

    parsed = pytorch_profiler.parse(rewritten(tmp_path, record_param_comms(rename)))
    assert parsed.table["comm"].to_pylist() == ["0"] * 3

    def relabel(args: dict) -> dict:
        return rename(args) | {"Process Group ID": "3f9a1c"}

    parsed = pytorch_profiler.parse(rewritten(tmp_path, record_param_comms(relabel)))
    assert parsed.table["comm"].to_pylist() == ["3f9a1c"] * 3  # not distributedInfo's only group, "0"


def test_ingest_prints_the_warning_with_the_traces_path(tmp_path) -> None:
    """Through the CLI: the traces-only run's ingest names the trace and the count in one line."""
    run = tmp_path / "runs" / RUN.name
    run.mkdir(parents=True)
    name = "cclxDevKernel_AllReduce_Sum_f32_RING_LL(Args<4096ul>)"
    trace = rewritten(tmp_path, without_collective_args(name))
    trace.rename(run / "kineto-rank0.json")
    res = CliRunner().invoke(app, ["ingest", str(tmp_path / "runs"), "--data", str(tmp_path / "data")])
    assert res.exit_code == 0, res.output
    lines = [line for line in res.output.splitlines() if "no GPU kernel recognised" in line]
    assert len(lines) == 1, res.output
    assert lines[0].startswith(f"warning: {run / 'kineto-rank0.json'}: 3 of 3 NCCL collectives have no GPU")
