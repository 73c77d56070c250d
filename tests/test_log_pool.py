"""A run's log files parsed on worker processes give what parsing them here gives, in the same order,
a file that cannot be parsed its one line at its place."""

from __future__ import annotations

import shutil
from pathlib import Path

from tracecore.ingest import log_pool
from tracecore.logs import detect_parser

RUN = (
    Path(__file__).resolve().parents[2]
    / "shared/corpus-gpu/gpu-nccl-4rank/torch_ddp-cnn3m-sgd-32-nccl-normal-ring-w4"
)


def _files(tmp_path: Path) -> list:
    names = sorted(p.name for p in RUN.iterdir() if p.suffix in (".json", ".log"))
    files = [(RUN / n, detect_parser(RUN / n)) for n in names if detect_parser(RUN / n) is not None]
    gone = tmp_path / "kineto-rank9.json"  # detected, then deleted before it is parsed
    shutil.copy(RUN / "kineto-rank0.json", gone)
    files.insert(3, (gone, detect_parser(gone)))
    gone.unlink()
    return files


def _plain(result: object) -> object:
    if isinstance(result, str):
        return result
    return [result.table.to_pylist(), {k: v.to_pylist() for k, v in result.more.items()}, result.bad_lines]


def test_files_parsed_on_two_processes_equal_those_parsed_here_in_order(tmp_path, monkeypatch):
    files = _files(tmp_path)
    assert len(files) == 14  # 4 profiler traces, 4 profiler-plugin files, 4 NCCL logs, training log, gone one
    here = [_plain(r) for r in log_pool.parse_in_order(files, jobs=1)]
    monkeypatch.setattr(log_pool, "POOL_MIN_BYTES", 0)
    pooled = [_plain(r) for r in log_pool.parse_in_order(files, jobs=2)]
    assert pooled == here
    assert isinstance(here[3], str)
    assert here[3].startswith("cannot parse as collectives: ")
    assert "No such file" in here[3]
    assert sum(len(r[1].get("profiler_kernels", [])) for r in here if not isinstance(r, str)) > 1400


def test_small_runs_stay_in_this_process(tmp_path, monkeypatch):
    files = _files(tmp_path)
    monkeypatch.setattr(log_pool, "ProcessPoolExecutor", None)  # a pool would fail to start
    assert len(list(log_pool.parse_in_order(files, jobs=2))) == 14


def test_a_runs_traces_show_a_bar_of_their_own_when_asked(tmp_path, monkeypatch, capsys):
    from tracecore.ingest import ingest
    from tracecore.ingest.progress import TraceProgress

    run = tmp_path / "torch_ddp-cnn3m-sgd-32-nccl-0-ring"
    run.mkdir()
    for name in ("kineto-rank0.json", "kineto-rank1.json", "run.toml"):
        shutil.copy(RUN / name, run / name)
    monkeypatch.setattr(TraceProgress, "MIN_BYTES", 0)
    ingest([run], tmp_path / "ds", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "traces" in err
    assert "2/2 files" in err
    monkeypatch.setattr(TraceProgress, "MIN_BYTES", 16 << 20)
    ingest([run], tmp_path / "ds2", jobs=1, progress=True)
    assert "traces" not in capsys.readouterr().err  # 2 MB: no bar
