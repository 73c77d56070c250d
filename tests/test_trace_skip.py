"""The records a profiler trace's parser passes over unread (`_chrome.skippable_record`) change nothing:
every table is the one a full decode of each record gives, line numbers and bad lines included."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tracecore.logs import pytorch_profiler
from tracecore.logs._chrome import skippable_record

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus-gpu"
TRACES = [
    CORPUS / "gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4/kineto-rank0.json",
    CORPUS / "gpu-nccl-profilers/torch_ddp-mlp25m-sgd-32-nccl-normal-ring/kineto-rank1.json",
]


def _tables(path: Path) -> dict:
    parsed = pytorch_profiler.parse(path)
    tables = {"collectives": parsed.table, **parsed.more}
    return {name: t.to_pylist() for name, t in tables.items()} | {
        "bad": (parsed.bad_lines, parsed.first_bad),
        "warnings": parsed.warnings,
    }


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    skipped = _tables(path)
    with monkeypatch.context() as m:
        m.setattr(pytorch_profiler, "_UNUSED", None)
        decoded = _tables(path)
    return skipped, decoded


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.parent.name[-12:] + "/" + p.name)
def test_the_corpus_traces_read_the_same_with_records_passed_over(path, monkeypatch):
    skipped, decoded = _both(path, monkeypatch)
    assert skipped == decoded
    assert len(skipped["profiler_kernels"]) > 200
    assert len(skipped["collectives"]) >= 3


def _event(**fields) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::add",
        "pid": 1,
        "tid": 1,
        "ts": 10.0,
        "dur": 1.0,
    } | fields


def test_tricky_records_passed_over_and_those_after_them_read(tmp_path, monkeypatch):
    kernel = _event(cat="kernel", name="void k()", ts=20.0, args={"External id": 7, "device": 0, "stream": 7})
    step = _event(cat="user_annotation", name="ProfilerStep#3", ts=5.0, dur=100.0)
    events = [
        _event(name='aten::{odd}"quoted\\" }', args={"Concrete Inputs": ["{", "}", "\\"]}),
        _event(name="aten::deep", args={"a": {"b": {"c": {"d": 1}}}}),  # deeper than the skip pattern
        _event(name="aten::ünïcode", args={"x": "{"}),
        _event(cat="cuda_runtime", name="cudaLaunchKernel", args={"correlation": 3}),
        {"ph": "f", "id": 1, "pid": 1, "tid": 1, "ts": 1.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        _event(cat="cpu_op", name="record_param_comms", args={"Collective name": "allreduce"}),
        _event(cat="ESCAPED", name="escaped category: decoded, not passed over", ts=30.0,
               args={"device": 0, "stream": 7}),
        step,
        kernel,
    ]  # fmt: skip
    text = '{"schemaVersion": 1, "baseTimeNanoseconds": 1790000000000000000, "traceEvents": [\n'
    text += ",\n".join(json.dumps(e, ensure_ascii=False) for e in events).replace(
        '"ESCAPED"', r'"ker\u006eel"'
    )
    text += ',\n{"ph": "X", "cat": "cpu_op", "name": "cut'  # a record the file ends inside
    plain = tmp_path / "kineto-rank0.json"
    plain.write_text(text, encoding="utf-8")
    gz = tmp_path / "kineto-rank1.json.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    for path in (plain, gz):
        skipped, decoded = _both(path, monkeypatch)
        assert skipped == decoded
        kernels = skipped["profiler_kernels"]
        assert [k["start_ns"] - 1790000000000000000 for k in kernels] == [30_000, 20_000]
        assert skipped["profiler_steps"][0]["step"] == 3
        assert skipped["bad"][0] == 1  # the cut record, counted once either way


def test_a_run_of_records_is_passed_over_in_one_match_and_stops_before_a_kept_one():
    skip = skippable_record(r'\{"ph": "(?!X)')
    text = '{"ph": "f", "s": "}"}, {"ph": "s"} ,\n{"ph": "X", "x": 1}'
    found = skip.match(text, 0)
    assert found is not None
    assert text[found.end() :].lstrip(" ,\n").startswith('{"ph": "X"')
    assert skip.match('{"ph": "f", "cut": "', 0) is None  # no whole record: nothing passed over
