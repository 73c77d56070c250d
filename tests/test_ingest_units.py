"""Run names, capture file names, run.toml and train_history.log: the small parsers ingest relies on."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_ingest_support import copy_run
from tracecore.ingest import ingest, open_catalog
from tracecore.ingest.dataset_tables import BASE_SCHEMAS
from tracecore.ingest.discover import discover, worker_key
from tracecore.ingest.runname import parse_run_name
from tracecore.logs import detect_parser, train_history
from tracecore.reader import read_capture
from tracecore.sample import sample_run


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("horovod-resnet50-adam-64-mpi-0-ring", ("horovod", "resnet50", "adam", 64, "mpi", 0.0, "ring")),
        (
            "tensorflow-densenet201-adam-512-grpc_nccl-0.05-ring",
            ("tensorflow", "densenet201", "adam", 512, "grpc_nccl", 0.05, "ring"),
        ),
        (
            "tf_sync-mobilenetv2-adam-64-grpc_nccl-loss_0.1-ring",
            ("tf_sync", "mobilenetv2", "adam", 64, "grpc_nccl", 0.1, "ring"),
        ),
        (
            "horovod-mobilenetv2-adam-64-mpi-normal-ring",
            ("horovod", "mobilenetv2", "adam", 64, "mpi", 0.0, "ring"),
        ),
        (
            "kungfu_pairavg-resnet50-adam-64-kungfu-normal-BINARY_TREE_STAR",
            ("kungfu_pairavg", "resnet50", "adam", 64, "kungfu", 0.0, "BINARY_TREE_STAR"),
        ),
    ],
)
def test_run_names_raw_and_published(name: str, expect: tuple) -> None:
    meta = parse_run_name(name)
    assert meta.name_parsed
    got = (
        meta.framework,
        meta.model,
        meta.optimizer,
        meta.batch_size,
        meta.backend,
        meta.loss_pct,
        meta.topology,
    )
    assert got == expect
    assert isinstance(meta.batch_size, int)
    assert isinstance(meta.loss_pct, float)


@pytest.mark.parametrize(
    "name", ["my-run", "a-b-c-big-e-0-g", "a-b-c-64-e-lossy-g", "a-b-c-64-e-0-g-extra", "x--c-64-e-0-g"]
)
def test_names_that_do_not_parse(name: str) -> None:
    meta = parse_run_name(name)
    assert not meta.name_parsed
    assert meta.batch_size is None
    assert meta.framework is None


def test_capture_file_names_group_into_workers() -> None:
    assert worker_key("worker-0-tcpdump.pcap") == ("worker-0-tcpdump", 0)
    assert worker_key("worker-0-tcpdump.pcap3") == ("worker-0-tcpdump", 3)
    assert worker_key("worker-0-tcpdump.pcap.gz") == ("worker-0-tcpdump", 0)
    assert worker_key("w2.pcapng.zst") == ("w2", 0)
    assert worker_key("x.pcap12.xz") == ("x", 12)
    assert worker_key("trace") == ("trace", 0)


def test_unparsed_name_is_ingested_with_a_warning_and_run_toml_overrides(tmp_path: Path) -> None:
    folder = tmp_path / "in" / "my experiment"
    shutil.copytree(sample_run(), folder)
    (folder / "run.toml").write_text(
        'framework = "horovod"\nbatch_size = 128\nloss = "loss_0.5"\nnote = "x"\n'
    )
    (tmp_path / "in" / "plain").mkdir()
    shutil.copy(sample_run() / "worker-0-tcpdump.pcap", tmp_path / "in" / "plain" / "capture-file")
    summary = ingest([tmp_path / "in"], tmp_path / "out", jobs=1)
    assert not summary.failed
    assert any("'plain' is not framework-model" in w for w in summary.warnings)
    con = open_catalog(tmp_path / "out")
    rows = con.execute(
        "SELECT run, framework, batch_size, loss_pct, model, name_parsed, extra, n_workers"
        " FROM runs ORDER BY run"
    ).fetchall()
    assert rows == [
        ("my experiment", "horovod", 128, 0.5, None, False, '{"note": "x"}', 4),
        ("plain", None, None, None, None, False, None, 1),
    ]
    # a run name with a space: the hive folder is %-escaped, the column is the real name
    assert (tmp_path / "out" / "packets" / "run=my%20experiment" / "worker=W1").is_dir()
    n = con.execute("SELECT count(*) FROM packets WHERE run = 'my experiment'").fetchone()[0]
    assert n == 17027


def test_discovery_of_a_folder_of_runs(tmp_path: Path) -> None:
    copy_run(tmp_path / "runs")
    (tmp_path / "runs" / "notes").mkdir()
    (tmp_path / "runs" / "notes" / "README.txt").write_text("nothing to see")
    nested = tmp_path / "runs" / "more" / "horovod-resnet50-adam-64-mpi-0-ring"
    nested.mkdir(parents=True)
    shutil.copy(sample_run() / "worker-0-tcpdump.pcap", nested / "w0.pcap")
    found = discover([tmp_path / "runs"])
    assert [r.name for r in found.runs] == [sample_run().name]
    runs = tmp_path / "runs"
    assert found.warnings == [
        f"{runs / 'more'}: a folder of run folders inside {runs}; not ingested (pass it)"
    ]
    assert [r.name for r in discover([tmp_path / "runs" / "more"]).runs] == [nested.name]
    run = found.runs[0]
    assert [c.file for c in run.captures] == [f"worker-{i}-tcpdump.pcap" for i in range(4)]
    assert [p.name for p in run.logs] == ["train_history.log"]
    assert run.meta.worker_ips["worker-0-tcpdump.pcap"] == "192.168.17.50"


def test_train_history_tolerates_kungfu_prefixes_and_warnings(tmp_path: Path) -> None:
    log = tmp_path / "train_history.log"
    log.write_text(
        "2021-04-12 14:03:01.1: W tensorflow/core/platform/profile_utils: CPU Frequency: 2100000000 Hz\n"
        "[192.168.17.50.10000::stderr] Type,ID,Timestamp,Loss,Accuracy\n"
        "[192.168.17.50.10000::stdout] Batch,0,1618229000.123456,2.302585,0.093750\n"
        "[192.168.17.50.10000::stderr] WARNING:tensorflow:Callbacks method `on_train_batch_end` is slow\n"
        "[192.168.17.50.10000::stdout] Batch,1,1618229000.523456,2.290000,0.101562\n"
        "Epoch,0,1618229001.000001,2.280000,0.110000\n"
        "Batch,2,oops,2.3,0.1\n"
    )
    parser = detect_parser(log)
    assert parser is train_history.PARSER
    assert parser.table == "train_log"
    parsed = parser.parse(log)
    assert parsed.table.to_pylist() == [
        {"type": "Batch", "id": 0, "ts_ns": 1618229000123456000, "loss": 2.302585, "accuracy": 0.09375},
        {"type": "Batch", "id": 1, "ts_ns": 1618229000523456000, "loss": 2.29, "accuracy": 0.101562},
        {"type": "Epoch", "id": 0, "ts_ns": 1618229001000001000, "loss": 2.28, "accuracy": 0.11},
    ]
    assert parsed.bad_lines == 1
    assert "line 7" in parsed.first_bad[0]
    assert "'oops' is not a number" in parsed.first_bad[0]


def test_other_log_formats_become_their_own_tables(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "in")
    logs = Path(__file__).resolve().parent / "data" / "logs"
    shutil.copy(logs / "horovod_timeline.json", run / "timeline.json")
    (run / "notes.log").write_text("nothing a parser knows\n")
    out = tmp_path / "out"
    summary = ingest([run], out, jobs=1)
    assert f"{run / 'notes.log'}: not a log format tracecore knows; skipped" in summary.warnings
    con = open_catalog(out)
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    extra = tables - set(BASE_SCHEMAS) - {"_meta"}  # the NCCL tables are base ones, empty here
    assert len(extra) == 1
    (name,) = extra
    n = con.execute(f'SELECT count(*), count(DISTINCT run) FROM "{name}"').fetchone()
    assert n[0] == 26  # the file's 32 trace records less its 6 metadata ("ph": "M") records
    assert n[1] == 1
    con.close()
    assert (out / "tables" / f"{name}.parquet").is_file()
    (run / "timeline.json").unlink()
    ingest([run], out, jobs=1)
    con = open_catalog(out)
    assert con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] == 0
    con.close()


def _swap(recs: list[bytes], i: int) -> list[bytes]:
    """Records i and i+1 exchanged: the later-stamped packet is written first (real bytes, real stamps)."""
    out = list(recs)
    out[i], out[i + 1] = out[i + 1], out[i]
    return out


def test_part_files_stay_sorted_when_packets_are_out_of_order(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from tests.test_ingest_support import records, write_pcap
    from tracecore.ingest.control import LocalChannel
    from tracecore.ingest.writer import CaptureTask, ingest_capture

    header, recs = records(sample_run() / "worker-0-tcpdump.pcap")

    def stamp(i: int) -> tuple[int, int]:
        return struct.unpack_from("<II", recs[i])

    edge = next(i for i in range(999, len(recs)) if stamp(i) != stamp(i + 1))  # batches end after `edge`
    inner = next(i for i in range(edge // 2, edge) if stamp(i) != stamp(i + 1))
    cases = {
        "boundary": (_swap(recs, edge), True),  # disorder across a batch boundary: merged
        "inside": (_swap(recs, inner), True),  # within a batch: sorted
        "deep": (recs[2500:] + recs[:2500], False),  # the second half first: several sorted files
    }
    for name, (recs_x, one_part_each) in cases.items():
        src = write_pcap(tmp_path / f"{name}.pcap", header, recs_x)
        stage = tmp_path / name
        stage.mkdir()
        ticks: list[int] = []
        channel = LocalChannel(lambda nbytes, packets, into=ticks: into.append(packets))
        res = ingest_capture(CaptureTask(0, str(src), str(stage), batch_rows=edge + 1), channel)
        assert sum(ticks) == len(recs_x)
        assert res.status == "ok"
        assert res.packets == len(recs)
        # one dense part (TCP rows, required columns) and one sparse part (the sample's ARP/UDP rows)
        nullable = [pq.read_schema(path).field("ip_version").nullable for path, _, _ in res.parts]
        assert [layers for _, _, layers in res.parts] == nullable, name  # only nullable parts store them
        if one_part_each:
            assert sorted(nullable) == [False, True], name
        else:
            assert nullable.count(False) > 1, name
        total = []
        for path, rows, _ in res.parts:
            got = pq.read_table(path, columns=["ts_ns"])["ts_ns"].to_pylist()
            assert len(got) == rows
            assert got == sorted(got), name
            total += got
        assert sorted(total) == sorted(read_capture(src)["ts_ns"].to_pylist())


def test_cli_prints_a_summary_table_and_reruns_skip(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tracecore.cli.app import app

    runner = CliRunner()
    args = ["ingest", str(sample_run()), "--out", str(tmp_path / "out"), "--quiet"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    text = " ".join(first.output.split())
    assert "ingest →" in text
    assert text.count("ingested") == 4
    assert "1 run(s), 17,027 packets read in" in text
    second = runner.invoke(app, args)
    assert second.exit_code == 0
    assert " ".join(second.output.split()).count("unchanged") == 4


def test_run_toml_model_size_becomes_typed_columns(tmp_path: Path) -> None:
    from tracecore.ingest.runname import RunMeta, apply_run_toml

    toml = tmp_path / "run.toml"
    toml.write_text("[run]\nbatch_size = 16\n[model]\nn_params = 19954\ngradient_bytes = 79816\n")
    meta = RunMeta()
    assert apply_run_toml(meta, toml) == []
    assert (meta.grad_bytes, meta.n_params, meta.batch_size) == (79816, 19954, 16)
    toml.write_text("grad_bytes = 4000\n")
    meta = RunMeta()
    apply_run_toml(meta, toml)
    assert (meta.grad_bytes, meta.n_params) == (4000, None)


def test_sample_run_carries_gradient_bytes_into_runs(tmp_path: Path) -> None:
    from tracecore.sample import sample_root

    ingest([sample_root()], tmp_path / "data", progress=False)
    con = open_catalog(tmp_path / "data")
    try:
        assert con.sql("SELECT grad_bytes, n_params FROM runs").fetchall() == [(79816, 19954)]
    finally:
        con.close()


def _with_null_layers(dense):
    """A dense batch in DATASET_SCHEMA: the layer columns it leaves out, null."""
    import pyarrow as pa

    from tracecore.schema import DATASET_SCHEMA

    columns = [
        dense.column(f.name) if f.name in dense.schema.names else pa.nulls(dense.num_rows, f.type)
        for f in DATASET_SCHEMA
    ]
    return pa.RecordBatch.from_arrays(columns, schema=DATASET_SCHEMA)


def test_split_dense_sends_rows_with_any_null_to_the_nullable_part() -> None:
    import pyarrow as pa

    from tracecore.ingest.writer import DENSE_SCHEMA, split_dense, widen
    from tracecore.schema import DATASET_SCHEMA, LAYER_COLUMNS

    table = read_capture(sample_run() / "worker-0-tcpdump.pcap")
    batch = widen(table.combine_chunks().to_batches()[0])
    dense, sparse = split_dense(batch)
    # worker-0's 4531 packets: 3 ARP replies have null IP fields (tshark -Y 'not tcp': frames 1, 3, 5),
    # 6 SYNs carry a window scale option (a layer column: tshark -Y 'tcp.options.wscale.shift')
    assert (dense.num_rows, sparse.num_rows) == (4522, 9)
    assert dense.schema == DENSE_SCHEMA
    # the dense part: every column required, the layer columns (RDMA, tunnels: null on TCP rows) left out
    assert dense.schema.names == [name for name in DATASET_SCHEMA.names if name not in LAYER_COLUMNS]
    assert not any(f.nullable for f in dense.schema)
    assert all(dense.column(i).null_count == 0 for i in range(dense.num_columns))
    assert sparse.schema == DATASET_SCHEMA
    # every sparse row lacks some field besides the layer columns (ARP has no IP, UDP no TCP flags) or
    # carries a layer value (a SYN's window scale)
    core = [DATASET_SCHEMA.get_field_index(name) for name in DENSE_SCHEMA.names]
    has_null = [any(sparse.column(i)[r].as_py() is None for i in core) for r in range(sparse.num_rows)]
    scales = sparse.column("tcp_window_scale").to_pylist()
    assert sum(has_null) == 3
    assert all(n or w is not None for n, w in zip(has_null, scales, strict=True))
    assert sum(w is not None for w in scales) == 6
    assert dense.num_rows + sparse.num_rows == batch.num_rows
    both = pa.Table.from_batches([sparse, _with_null_layers(dense)]).sort_by("ts_ns")
    assert both["ts_ns"].to_pylist() == sorted(batch.column(0).to_pylist())
    assert both["tcp_flags"].null_count == batch.column("tcp_flags").null_count
    only_dense, none = split_dense(_with_null_layers(dense))
    assert none is None
    assert only_dense.num_rows == dense.num_rows
    # a row with every field set and a layer value (none today: RoCE and tunnels ride on UDP) would
    # lose that value in a dense part: it goes to the nullable part
    opcode = pa.array([None] * 7 + [0x0A] + [None] * (dense.num_rows - 8), pa.uint8())
    layered = _with_null_layers(dense).set_column(
        DATASET_SCHEMA.get_field_index("rdma_opcode"), DATASET_SCHEMA.field("rdma_opcode"), opcode
    )
    rest, one = split_dense(layered)
    assert (rest.num_rows, one.num_rows) == (dense.num_rows - 1, 1)
    assert one.column("rdma_opcode").to_pylist() == [0x0A]
    assert one.column("ts_ns").to_pylist() == [dense.column("ts_ns")[7].as_py()]
    none, only_sparse = split_dense(sparse)
    assert none is None
    assert only_sparse.num_rows == sparse.num_rows


def test_split_dense_keeps_every_row_and_layer_value_of_the_rdma_corpus() -> None:
    """Batches mixing TCP rows (dense) with RoCE, IPoIB and tunnel rows (sparse, layer columns set):
    the two parts hold every row of the batch with every value (the dense part's omitted layer
    columns are null in the batch), the all-null columns sliced and the others filtered."""
    import pyarrow as pa

    from tracecore.ingest.writer import split_dense, widen
    from tracecore.schema import DATASET_SCHEMA, LAYER_COLUMNS

    corpus = REPO.parent / "shared" / "corpus-rdma"
    files = sorted(corpus.glob("*.pcap"))
    assert len(files) == 17, corpus
    split = set_layers = 0
    for path in files:
        batch = widen(read_capture(path).combine_chunks().to_batches()[0])
        dense, sparse = split_dense(batch)
        parts = [_with_null_layers(dense)] if dense is not None else []
        both = pa.Table.from_batches(
            [*parts, *([sparse] if sparse is not None else [])], schema=DATASET_SCHEMA
        )
        key = lambda row: repr(sorted(row.items()))  # noqa: E731
        assert sorted(both.to_pylist(), key=key) == sorted(batch.to_pylist(), key=key), path.name
        split += dense is not None and sparse is not None
        set_layers += sparse is not None and any(
            sparse.column(c).null_count < len(sparse) for c in LAYER_COLUMNS
        )
    assert split == 11  # the perftest, NCCL and IPoIB captures hold TCP rows and others
    assert set_layers == 17  # RoCE or tunnel values, IPoIB's SYNs their window scale


def test_widen_keeps_every_value_and_null_of_the_byte_columns() -> None:
    import pyarrow as pa

    from tracecore.ingest.writer import widen
    from tracecore.schema import DATASET_SCHEMA

    batch = read_capture(sample_run() / "worker-0-tcpdump.pcap").combine_chunks().to_batches()[0]
    for sliced in (batch, batch.slice(7, 300)):  # an offset into the buffers, too
        wide = widen(sliced)
        assert wide.schema == DATASET_SCHEMA
        for name in ("frame_len", "cap_len", "l4_payload_len"):
            assert wide.column(name).type == pa.int64()
            assert wide.column(name).to_pylist() == sliced.column(name).to_pylist()
        assert wide.column("l4_payload_len").null_count == sliced.column("l4_payload_len").null_count
        for name in ("rdma_payload_len", "rdma_reth_dma_len"):  # no RoCE in the sample: built all-null
            assert wide.column(name).type == pa.int64()
            assert wide.column(name).null_count == len(wide.column(name)) == sliced.num_rows
    assert batch.column("l4_payload_len").null_count == 3  # the 3 ARP frames: the nullable cast path ran


def test_writing_a_capture_imports_no_pandas(tmp_path: Path) -> None:
    """A capture read into part files (reader, widen, split, Parquet) never imports pandas: a writer
    thread that did would wait for the warm-up thread's import of it while its reader stopped on the
    full queue (0.6-1 s of a 2 GB ingest's wall on 2 cores)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from tracecore.ingest.control import LocalChannel\n"
        "from tracecore.ingest.writer import CaptureTask, ingest_capture\n"
        "res = ingest_capture(CaptureTask(0, sys.argv[1], sys.argv[2]), LocalChannel(lambda b, p: None))\n"
        "print(res.error, res.packets, len(res.parts), 'pandas' in sys.modules)\n"
    )
    capture = sample_run() / "worker-0-tcpdump.pcap"
    argv = [sys.executable, "-c", script, str(capture), str(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["None", "4531", "2", "False"]  # ARP rows: a dense and a nullable part


def test_dataset_of_dense_and_sparse_parts_reads_the_same_everywhere(tmp_path: Path) -> None:
    """Required-column and nullable part files read as one table by DuckDB, Arrow datasets, pandas
    and Polars, and equal what the reader decodes (the columns every part stores; the layer columns,
    which dense parts omit, need DATASET_SCHEMA: tests/test_dataset_layers.py)."""
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as pads

    from tracecore.schema import DATASET_SCHEMA

    out = tmp_path / "out"
    ingest([sample_run()], out, jobs=1)
    packets = out / "packets"
    parts = sorted(packets.rglob("*.parquet"))
    import pyarrow.parquet as pq

    assert {pq.read_schema(p).field("tcp_flags").nullable for p in parts} == {False, True}
    expect = sum(read_capture(p).num_rows for p in sorted(sample_run().glob("*.pcap")))
    expect_nulls = sum(read_capture(p)["tcp_flags"].null_count for p in sorted(sample_run().glob("*.pcap")))
    arrow = pads.dataset(packets, partitioning="hive").to_table()
    assert arrow.num_rows == expect
    assert arrow["tcp_flags"].null_count == expect_nulls
    frame = pd.read_parquet(packets)
    assert len(frame) == expect
    assert int(frame["tcp_flags"].isna().sum()) == expect_nulls
    with pytest.raises(pl.exceptions.SchemaError, match="extra column"):  # dense and full parts differ
        pl.scan_parquet(packets, hive_partitioning=True).select(pl.len()).collect()
    schema = pl.from_arrow(DATASET_SCHEMA.empty_table()).schema  # README's recipe
    lazy = pl.scan_parquet(packets, schema=schema, missing_columns="insert", hive_partitioning=True)
    assert lazy.select(pl.len(), pl.col("tcp_flags").null_count()).collect().row(0) == (expect, expect_nulls)
    got = duckdb.sql(
        f"SELECT count(*), count(*) - count(tcp_flags) FROM read_parquet('{packets}/**/*.parquet')"
    ).fetchall()
    assert got == [(expect, expect_nulls)]


def test_catalog_drafts_start_from_the_cached_template(tmp_path: Path, monkeypatch) -> None:
    """The first draft binds the views and leaves a template; the next copies it, with the same
    views, and an ingest committed from either answers the same queries."""
    import duckdb

    from tracecore.ingest.catalog import CatalogDraft, template_path

    monkeypatch.setenv("TRACECORE_CACHE_DIR", str(tmp_path / "cache"))
    template = template_path()
    assert template.parent == tmp_path / "cache"
    assert re.fullmatch(r"catalog-template-[0-9a-f]{16}\.duckdb", template.name)
    assert not template.exists()
    first = ingest([sample_run()], tmp_path / "a", jobs=1)
    assert template.is_file()
    second = ingest([sample_run()], tmp_path / "b", jobs=1)
    assert first.packets == second.packets

    def views_of(folder: Path) -> list[tuple]:
        con = duckdb.connect(str(folder / "tracecore.duckdb"), read_only=True)
        try:
            rows = con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1")
            return [(name, sql.replace(str(folder), "ROOT")) for name, sql in rows.fetchall()]
        finally:
            con.close()

    assert views_of(tmp_path / "a") == views_of(tmp_path / "b")
    for folder in (tmp_path / "a", tmp_path / "b"):
        con = open_catalog(folder)
        # 22 4-tuples + 22 5-tuples + 11 connections + 6 host pairs (tests/test_dataset_portable.py)
        assert con.execute("SELECT sum(flows) FROM flow_counts").fetchone() == (61,)
        con.close()
    (tmp_path / "c").mkdir()
    draft = CatalogDraft(tmp_path / "c").prepare()
    assert draft.from_template
    draft.abandon()
    template.write_bytes(b"not a duckdb file")  # damaged: rebuilt, and the template replaced
    draft = CatalogDraft(tmp_path / "c").prepare()
    assert not draft.from_template
    draft.abandon()
    assert template.read_bytes()[:4] != b"not "
    monkeypatch.setenv("TRACECORE_CACHE_DIR", "")
    assert template_path() is None


def test_progress_bar_counts_files_and_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = ingest([sample_run()], tmp_path / "out", jobs=1, progress=True)
    err = capsys.readouterr().err
    assert summary.packets == 17027  # the sample run: tshark's count (tests/test_ingest.py)
    assert "4/4 files" in err
    assert "Mpkt/s" in err
    assert "GB/s" in err


def test_a_draft_that_fails_on_its_thread_is_redone_by_the_commit(tmp_path: Path, monkeypatch) -> None:
    import threading

    from tracecore.ingest import catalog

    prepare = catalog.CatalogDraft.prepare

    def fails_on_the_draft_thread(self: catalog.CatalogDraft) -> catalog.CatalogDraft:
        if threading.current_thread().name == "catalog-draft":
            raise OSError("disk hiccup")
        return prepare(self)

    monkeypatch.setattr(catalog.CatalogDraft, "prepare", fails_on_the_draft_thread)
    out = tmp_path / "out"
    summary = ingest([sample_run()], out, jobs=1)
    assert not summary.failed
    assert not list(out.glob(".tracecore.duckdb.tmp-*"))  # the failed draft left nothing behind
    con = open_catalog(out)
    assert con.execute("SELECT count(*) FROM packets").fetchone() == (summary.packets,)
    con.close()


def test_time_order_concat_and_take_pass_all_null_columns_through() -> None:
    """TimeOrder's merge (`_concat`, then `_take` in time order) gives Arrow's own concat and take,
    whether the layer columns are null in both batches (TCP), in one (TCP and RoCE) or in none."""
    import numpy as np
    import pyarrow as pa

    from tracecore.ingest.writer import _concat, _take

    tcp = read_capture(sample_run() / "worker-0-tcpdump.pcap").combine_chunks().to_batches()[0].slice(0, 900)
    roce = read_capture(REPO.parent / "shared" / "corpus-rdma" / "linlinw5_nccl_ring2_node0.pcap")
    roce = roce.combine_chunks().to_batches()[0]
    assert roce.column("rdma_opcode").null_count < roce.num_rows
    assert tcp.column("rdma_opcode").null_count == tcp.num_rows
    rng = np.random.default_rng(7)
    for first, second in [(tcp, roce), (roce, tcp), (tcp, tcp.slice(100, 50)), (roce, roce)]:
        got = _concat(first, second)
        want = pa.Table.from_batches([first, second]).unify_dictionaries().combine_chunks().to_batches()[0]
        assert got.schema == want.schema
        assert got.to_pylist() == want.to_pylist()
        order = rng.permutation(got.num_rows)
        taken = _take(got, order)
        assert taken.schema == want.schema
        assert taken.to_pylist() == want.take(order).to_pylist()
