"""Log parsers on real samples (seed 002's wandb rows, seed 004's kungfu/Horovod output, a bench DDP
run's loss, Horovod's timeline writer format) and on damaged copies of them."""

from __future__ import annotations

import json
import pkgutil
from pathlib import Path

import polars as pl
import pytest

from tracecore import logs
from tracecore.logs import (
    HEAD_BYTES,
    benchmark_output,
    detect_parser,
    horovod_timeline,
    loss_csv,
    nccl,
    wandb,
)

DATA = Path(__file__).parent / "data" / "logs"
REPO = Path(__file__).resolve().parent.parent
SAMPLE_RUN = REPO / "tracecore" / "sample" / "torch_ddp-resnet8w8-sgd-16-gloo-normal-ring"

EXPECTED_TABLE = {
    "wandb_history_seed002.csv": "wandb_history",
    "wandb_grouped_seed002.csv": "wandb_history",
    "horovod_timeline.json": "horovod_timeline",
    "loss_ddp_resnet8w8_b16.csv": "loss_curve",
    "optimus_fits_seed003.csv": None,  # model input, not a log
    **{p.name: "benchmark_output" for p in DATA.glob("*.txt")},
}


def _frame(parsed) -> pl.DataFrame:
    return pl.from_arrow(parsed.table)


def _damaged(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- detection -----------------------------------------------------------------------------------


def test_detection_order_is_the_explicit_list_and_names_every_parser_module() -> None:
    assert logs.PARSER_MODULES == (
        "nic_counters",
        "train_history",
        "nccl_profiler",
        "horovod_timeline",
        "pytorch_profiler",
        "nccl_inspector",
        "wandb",
        "loss_csv",
        "benchmark_output",
        "nccl",
    )
    modules = {m.name for m in pkgutil.iter_modules(logs.__path__) if not m.name.startswith("_")}
    assert modules == set(logs.PARSER_MODULES), "a parser module missing from PARSER_MODULES is never tried"
    assert [p.table for p in logs.parsers()] == [
        "counters",
        "train_log",
        "collectives",
        "horovod_timeline",
        "collectives",
        "collectives",
        "wandb_history",
        "loss_curve",
        "benchmark_output",
        "nccl_ranks",
    ]
    assert logs.parsers()[-1].tables == (
        "nccl_ranks",
        "nccl_rings",
        "nccl_trees",
        "nccl_channels",
        "nccl_qps",
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_TABLE))
def test_each_sample_is_claimed_by_its_own_parser_only(name: str) -> None:
    parser = detect_parser(DATA / name)
    assert (parser.table if parser else None) == EXPECTED_TABLE[name]


def test_dml_train_history_and_run_metadata_are_not_claimed_by_these_parsers() -> None:
    head = (SAMPLE_RUN / "train_history.log").read_text()[:HEAD_BYTES]
    prefixed = "\n".join(f"[127.0.0.1.10000::stdout] {line}" for line in head.splitlines())
    toml = (SAMPLE_RUN / "run.toml").read_text()[:HEAD_BYTES]
    for mine in (wandb, horovod_timeline, benchmark_output, loss_csv, nccl):
        assert not mine.detect(head), mine.__name__
        assert not mine.detect(prefixed), mine.__name__
        assert not mine.detect(toml), mine.__name__
    assert detect_parser(SAMPLE_RUN / "train_history.log").table == "train_log"


# --- wandb ---------------------------------------------------------------------------------------


def test_wandb_history_rows_as_printed_by_seed002() -> None:
    parsed = wandb.parse(DATA / "wandb_history_seed002.csv")
    assert parsed.bad_lines == 0
    df = _frame(parsed)
    loss = df.filter(pl.col("key") == "train_loss_step")
    assert loss["value"].to_list() == [
        2.420080,
        2.769084,
        3.562219,
        3.776740,
        3.318298,
        1.172103,
        1.230016,
        1.342752,
        1.132757,
    ]
    assert loss["step"].to_list() == [0, 1, 2, 3, 4, 193, 194, 195, 196]
    last = df.filter(pl.col("row") == 9)
    # Row 197 has no loss (NaN in the seed): only trainer/global_step and epoch, at 1649128400 s.
    assert sorted(last["key"].to_list()) == ["epoch", "trainer/global_step"]
    assert last["ts_ns"].unique().to_list() == [1_649_128_400_000_000_000]
    assert last["runtime_s"].unique().to_list() == [38.0]


def test_wandb_grouped_export_splits_runs() -> None:
    df = _frame(wandb.parse(DATA / "wandb_grouped_seed002.csv"))
    runs = df.group_by("wandb_run").agg(
        pl.col("step").first(), pl.col("ts_ns").first(), pl.col("runtime_s").first()
    )
    got = {r["wandb_run"]: r for r in runs.iter_rows(named=True)}
    four = got["SGD_dp_batch_size_8192_4gpus"]
    assert (four["step"], four["ts_ns"], four["runtime_s"]) == (7.5, 1_648_372_577_000_000_000, 49.0)
    two = got["SGD_dp_batch_size_8192_2gpus"]
    assert (two["step"], two["ts_ns"], two["runtime_s"]) == (None, 1_648_371_000_000_000_000, 49.875)
    epoch = df.filter((pl.col("wandb_run") == "SGD_dp_batch_size_8192_2gpus") & (pl.col("key") == "epoch"))
    assert epoch["value"].to_list() == [0.625]
    # `Relative Time (Wall)` is the shared axis, not a run.
    assert set(got) == {"SGD_dp_batch_size_8192_4gpus", "SGD_dp_batch_size_8192_2gpus"}


def test_wandb_damaged_rows_are_counted(tmp_path: Path) -> None:
    text = (DATA / "wandb_history_seed002.csv").read_text().splitlines()
    text[3] = "2,2,19,3.562219"  # truncated row
    text[5] = "4,four,19,3.318298,0,1649128381"  # unreadable _step
    text.insert(7, '"unterminated,1,2')
    path = _damaged(tmp_path, "history.csv", "\n".join(text) + "\n")
    parsed = wandb.parse(path)
    assert parsed.bad_lines == 3
    assert parsed.first_bad[0].startswith("line 4: 2,2,19,3.562219")
    assert _frame(parsed)["row"].n_unique() == 8  # 10 rows − 2 damaged; the inserted line is the 3rd bad one


def test_wandb_header_only_is_an_empty_table_with_the_problem_reported(tmp_path: Path) -> None:
    parsed = wandb.parse(_damaged(tmp_path, "h.csv", "_step,_runtime,_timestamp,loss\n"))
    assert parsed.table.num_rows == 0
    assert parsed.bad_lines == 1
    assert parsed.first_bad == ["no wandb history line in the file"]


def test_unreadable_file_raises_oserror_for_ingest_to_report(tmp_path: Path) -> None:
    for parser in (wandb, horovod_timeline, benchmark_output, loss_csv):
        with pytest.raises(FileNotFoundError):
            parser.parse(tmp_path / "missing.log")


# --- Horovod timeline ----------------------------------------------------------------------------


def test_horovod_timeline_events_and_absolute_time() -> None:
    parsed = horovod_timeline.parse(DATA / "horovod_timeline.json")
    assert parsed.bad_lines == 0
    df = _frame(parsed)
    assert df.height == 26
    start_us = 1795332680644387
    first = df.row(0, named=True)
    assert (first["ph"], first["name"], first["tensor"]) == ("i", "CYCLE_START", None)
    assert first["ts_ns"] == (start_us + 1005) * 1000
    gloo = df.filter(pl.col("name") == "GLOO_ALLREDUCE")
    # E events carry no name in the file; they take the name of the B they close.
    assert gloo["ph"].to_list() == ["B", "B", "E", "E"]
    assert (gloo["ts_us"].to_list()[2] - gloo["ts_us"].to_list()[0]) == 2310 - 1141
    assert set(gloo["tensor"]) == {
        "DistributedSGD_Allreduce/HorovodAllreduce_grad_conv1_0",
        "DistributedSGD_Allreduce/HorovodAllreduce_grad_fc_0",
    }
    ticks = df.filter(pl.col("ph") == "X")
    assert ticks["name"].to_list() == ["0", "1", "0", "1"]
    assert ticks["dur_us"].to_list() == [0.0] * 4
    end = df.filter((pl.col("ph") == "E") & (pl.col("name") == "ALLREDUCE"))
    assert json.loads(end["args"][1]) == {"dtype": "float32", "shape": "[10, 64]"}


def test_horovod_timeline_killed_mid_record_keeps_the_rest(tmp_path: Path) -> None:
    text = (DATA / "horovod_timeline.json").read_text()
    cut = text[: text.index('"GLOO_ALLREDUCE", "ts": 1141, "pid": 2') + 20]  # half a record, no ']'
    parsed = horovod_timeline.parse(_damaged(tmp_path, "t.json", cut))
    assert parsed.bad_lines == 1
    df = _frame(parsed)
    # 1 marker + 2×4 negotiation events + 2 ALLREDUCE + 2×2 MEMCPY_IN + GLOO_ALLREDUCE of tensor 1.
    assert df.height == 16
    assert df["ts_ns"].null_count() == 0


def test_horovod_timeline_garbage_between_records_is_counted(tmp_path: Path) -> None:
    text = (DATA / "horovod_timeline.json").read_text()
    broken = text.replace(
        '{"ph": "X", "name": "1", "ts": 1067, "pid": 1, "dur": 0}', '{"ph": "X", "name": "1", "ts": }'
    )
    broken = broken.replace('{"ph": "E", "ts": 1068, "pid": 1}', '{"ph": "E", "pid": 1}')
    parsed = horovod_timeline.parse(_damaged(tmp_path, "t.json", broken))
    assert parsed.bad_lines == 2
    assert _frame(parsed).height == 24


def test_horovod_timeline_event_with_a_list_for_pid_is_a_bad_line(tmp_path: Path) -> None:
    """Before: `"pid": [1]` raised TypeError (unhashable) out of the parser, a traceback in ingest."""
    text = (DATA / "horovod_timeline.json").read_text()
    broken = text.replace('{"ph": "E", "ts": 1068, "pid": 1}', '{"ph": "E", "ts": 1068, "pid": [1]}')
    assert broken != text
    parsed = horovod_timeline.parse(_damaged(tmp_path, "t.json", broken))
    assert parsed.bad_lines == 1
    assert "pid is not a number or a string" in parsed.first_bad[0]
    assert _frame(parsed).height == 25


def test_horovod_timeline_anchor_and_names_after_the_events_still_apply(tmp_path: Path) -> None:
    """Rows are made as the records stream past, so what comes later (the anchor, a tensor's name) is
    filled in at the end: integer µs exactly, float µs as T + ts in floating point."""
    anchor = 1649128380123456
    records = [
        {"ph": "B", "name": "ALLREDUCE", "ts": 5, "pid": 3},
        {"ph": "E", "ts": 7.5, "pid": 3},
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": anchor}},
        {"ph": "X", "name": "1", "ts": 9, "pid": 3, "dur": 0},
        {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "grad_3"}},
        {"ph": "i", "name": "CYCLE_START", "ts": 11.25},
    ]
    path = _damaged(tmp_path, "t.json", "[" + ",\n".join(json.dumps(r) for r in records) + "]")
    rows = horovod_timeline.parse(path).table.select(["tensor", "name", "ts_ns"]).to_pylist()
    assert rows == [
        {"tensor": "grad_3", "name": "ALLREDUCE", "ts_ns": (anchor + 5) * 1000},
        {"tensor": "grad_3", "name": "ALLREDUCE", "ts_ns": round((anchor + 7.5) * 1000)},
        {"tensor": "grad_3", "name": "1", "ts_ns": (anchor + 9) * 1000},
        {"tensor": None, "name": "CYCLE_START", "ts_ns": round((anchor + 11.25) * 1000)},
    ]


def test_horovod_timeline_without_anchor_has_relative_time_only(tmp_path: Path) -> None:
    text = (
        (DATA / "horovod_timeline.json").read_text().replace('"start_time_since_epoch_in_micros"', '"other"')
    )
    df = _frame(horovod_timeline.parse(_damaged(tmp_path, "t.json", text)))
    assert df["ts_ns"].null_count() == df.height
    assert df["ts_us"].min() == 1005.0


# --- benchmark output ----------------------------------------------------------------------------


def test_kungfu_scalability_output_from_seed004() -> None:
    parsed = benchmark_output.parse(DATA / "kungfu_scalability_resnet50.txt")
    assert parsed.bad_lines == 0
    df = _frame(parsed)
    assert set(df["peer"].drop_nulls()) == {"10.0.0.40.10000"}
    iters = df.filter(pl.col("kind") == "iter")
    assert iters["step"].to_list() == [0, 1, 2, 3]
    assert iters["value"].to_list() == [44.4, 42.8, 43.3, 43.1]
    assert set(iters["device"]) == {"/gpu:0"}
    warm = df.filter(pl.col("kind") == "warmup")
    assert warm["took_s"].to_list() == [4.743, 0.742, 0.763, 0.803]
    mean = df.filter(pl.col("kind") == "img_sec_mean").row(0, named=True)
    assert (mean["value"], mean["error"]) == (43.4, 1.2)
    result = df.filter(pl.col("kind") == "result").row(0, named=True)
    assert (result["value"], result["error"], result["np"]) == (43.429020, 1.212320, 32)
    assert json.loads(result["attrs"])["strategy"] == "MULTI_BINARY_TREE_STAR"
    assert df.filter(pl.col("kind") == "init_took")["took_s"].to_list() == [1.157]


def test_horovod_output_from_seed004() -> None:
    df = _frame(benchmark_output.parse(DATA / "horovod_scalability_resnet50.txt"))
    total = df.filter(pl.col("kind") == "total_img_sec").row(0, named=True)
    assert (total["value"], total["error"], total["np"], total["device"]) == (406.5, 22.7, 32, "GPU")
    result = df.filter(pl.col("kind") == "result").row(0, named=True)
    assert json.loads(result["attrs"]) == {
        "framework": "horovod",
        "version": "0.16.1",
        "np": 32,
        "bs": 32,
        "model": "ResNet50",
    }


def test_resize_and_go_durations_from_seed004() -> None:
    df = _frame(benchmark_output.parse(DATA / "kungfu_resize.txt"))
    assert df.select("np", "np_to", "took_s").rows() == [(1, 2, 20.39), (2, 1, pytest.approx(0.04012))]
    finished = _frame(benchmark_output.parse(DATA / "kungfu_monitoring_sync_sgd.txt")).filter(
        pl.col("kind") == "peers_finished"
    )
    assert finished["took_s"].to_list() == [pytest.approx(60 + 56.574329056)]
    assert benchmark_output.duration_s("1h2m3s") == 3723.0


def test_adaptive_strategy_monitor_lines_from_seed004() -> None:
    df = _frame(benchmark_output.parse(DATA / "kungfu_adaptive_strategy.txt"))
    monitor = df.filter(pl.col("kind") == "monitor_throughput")
    assert monitor.height == 12
    assert monitor["reference"].unique().to_list() == [92.11]
    assert monitor["value"].to_list()[-1] == 68.82
    votes = df.filter(pl.col("kind") == "cluster_response")["value"].to_list()
    assert votes[-1] == 7.0
    assert df.filter(pl.col("kind") == "interference").height == 1
    # "Cluster response Iter #20: ..." is an iteration line printed after a bare "Cluster response".
    assert df.filter(pl.col("kind") == "iter")["step"].to_list() == list(range(20, 36))


def test_tensorflow_rate_lines_from_seed004() -> None:
    df = _frame(benchmark_output.parse(DATA / "kungfu_bert_elastic.txt"))
    rates = df.filter(pl.col("kind") == "tf_rate")
    assert rates.height == 14  # every line between the two "..." of the seed's block
    assert set(rates["stream"]) == {"stderr"}
    assert rates.filter(pl.col("unit") == "global_step/sec")["value"].max() == 1.58567


def test_benchmark_damaged_lines_are_counted_not_dropped(tmp_path: Path) -> None:
    lines = (DATA / "kungfu_scalability_resnet50.txt").read_text().splitlines()
    lines[12] = "[10.0.0.40.10000::stdout] Iter #1: fast img/sec per /gpu:0"
    lines[16] = '[10.0.0.40.10000::stdout] RESULT: 43.4 +-1.2 {"framework":"kungfu",'
    lines.append("Traceback (most recent call last):")
    lines.append("[10.0.0.40.10000::stdout] resize 1 -> 2 took forever")
    parsed = benchmark_output.parse(_damaged(tmp_path, "out.txt", "\n".join(lines)))
    assert parsed.bad_lines == 4
    assert parsed.first_bad[0] == "line 13: [10.0.0.40.10000::stdout] Iter #1: fast img/sec per /gpu:0"
    assert "not a duration" in parsed.first_bad[3]
    df = _frame(parsed)
    assert df.filter(pl.col("kind") == "iter")["step"].to_list() == [0, 2, 3]


def test_benchmark_file_with_nothing_recognisable_is_empty_and_reported(tmp_path: Path) -> None:
    path = _damaged(tmp_path, "x.txt", "[1.2.3.4.10000::stdout] hello\n[1.2.3.4.10000::stdout] world\n")
    assert benchmark_output.detect(path.read_text())
    parsed = benchmark_output.parse(path)
    assert parsed.table.num_rows == 0
    assert parsed.bad_lines == 2
    assert parsed.first_bad == [
        "line 1: [1.2.3.4.10000::stdout] hello",
        "line 2: [1.2.3.4.10000::stdout] world",
    ]


# --- loss CSV ------------------------------------------------------------------------------------


def test_loss_csv_from_a_real_ddp_run() -> None:
    parsed = loss_csv.parse(DATA / "loss_ddp_resnet8w8_b16.csv")
    df = _frame(parsed)
    assert parsed.bad_lines == 0
    assert df["step"].to_list() == list(range(30))
    # The values are the Loss column of the bench run's train_history.log Batch rows.
    log = pl.read_csv(SAMPLE_RUN / "train_history.log").filter(pl.col("Type") == "Batch")
    assert df["loss"].to_list() == log["Loss"].to_list()


def test_loss_csv_with_index_column_epoch_and_damage(tmp_path: Path) -> None:
    text = ",step,loss,epoch\n0,0,2.5,0.1\n1,1,2.4,0.2\n2,2.5,2.3,0.3\n3,3,nope,0.4\n4,4,2.1\n5,5,2.0,0.6\n"
    parsed = loss_csv.parse(_damaged(tmp_path, "optimus_20_K80.csv", text))
    assert parsed.bad_lines == 3  # fractional step, non-numeric loss, missing field
    df = _frame(parsed)
    assert df.select("step", "loss", "epoch").rows() == [(0, 2.5, 0.1), (1, 2.4, 0.2), (5, 2.0, 0.6)]


def test_loss_csv_detection_is_strict() -> None:
    assert loss_csv.detect("step,loss\n0,1\n")
    assert loss_csv.detect("Unnamed: 0,epoch,loss\n")
    assert not loss_csv.detect("Type,ID,Timestamp,Loss,Accuracy\n")
    assert not loss_csv.detect("_step,loss\n")
    assert not loss_csv.detect("step,train_loss_step\n")
    assert not loss_csv.detect("run - step,run - loss\n")


def test_mpirun_tagged_horovod_output(tmp_path: Path) -> None:
    lines = (DATA / "horovod_scalability_resnet50.txt").read_text().splitlines()
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in lines) + "\n"
    plain = _frame(benchmark_output.parse(DATA / "horovod_scalability_resnet50.txt"))
    df = _frame(benchmark_output.parse(_damaged(tmp_path, "mpirun.log", tagged)))
    assert set(df["peer"]) == {"0"}
    assert set(df["stream"]) == {"stdout"}
    assert (
        df.select("kind", "step", "value", "error").rows()
        == plain.select("kind", "step", "value", "error").rows()
    )
