"""Ingest of real captures: Parquet and catalog counts equal the reader's and tshark's; dedup; layout."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from tests.test_ingest_support import copy_run, tshark
from tracecore.errors import DatasetError
from tracecore.ingest import ingest, open_catalog
from tracecore.reader import read_capture
from tracecore.sample import BOTH_DIRECTIONS_RUN, SAMPLE_RUN, both_directions_run, sample_root, sample_run
from tracecore.schema import DATASET_SCHEMA

IPS = ["192.168.17.50", "192.168.17.51", "192.168.17.52", "192.168.17.53"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ds") / "data"
    summary = ingest([sample_root(), both_directions_run()], out, jobs=1)
    assert not summary.failed, summary.to_json()
    return out


def test_counts_equal_reader_and_tshark(dataset: Path) -> None:
    con = open_catalog(dataset)
    for i, ip in enumerate(IPS):
        pcap = sample_run() / f"worker-{i}-tcpdump.pcap"
        table = read_capture(pcap)
        frames, wire = tshark(pcap)
        got = con.execute(
            "SELECT count(*), sum(frame_len), min(ts_ns), max(ts_ns) FROM packets"
            " WHERE run = ? AND worker = ?",
            [SAMPLE_RUN, f"W{i + 1}"],
        ).fetchone()
        assert got[0] == table.num_rows == frames
        assert got[1] == table["frame_len"].to_numpy().sum() == wire
        assert (got[2], got[3]) == (table["ts_ns"].to_numpy().min(), table["ts_ns"].to_numpy().max())
        w = con.execute(
            "SELECT ip, ip_source FROM workers WHERE run = ? AND worker = ?", [SAMPLE_RUN, f"W{i + 1}"]
        )
        assert w.fetchone() == (ip, "run.toml")


def test_worker_ip_is_inferred_without_run_toml(tmp_path: Path) -> None:
    for which, name in (("sample", SAMPLE_RUN), ("both", BOTH_DIRECTIONS_RUN)):
        run = copy_run(tmp_path / which, which)
        (run / "run.toml").unlink()
        ingest([run], tmp_path / f"out-{which}", jobs=1)
        con = open_catalog(tmp_path / f"out-{which}")
        rows = con.execute(
            "SELECT worker, ip, ip_source, capture FROM workers WHERE run = ? ORDER BY worker", [name]
        )
        assert rows.fetchall() == [
            (f"W{i + 1}", ip, "inferred", f"worker-{i}-tcpdump") for i, ip in enumerate(IPS)
        ]


def test_run_metadata_and_train_log(dataset: Path) -> None:
    con = open_catalog(dataset)
    run = con.execute(
        "SELECT framework, model, optimizer, batch_size, backend, loss_pct, topology, n_workers, capture_mode"
        " FROM runs WHERE run = ?",
        [SAMPLE_RUN],
    ).fetchone()
    assert run == ("torch_ddp", "resnet8w8", "sgd", 16, "gloo", 0.0, "ring", 4, "sender-only")
    both = con.execute("SELECT capture_mode FROM runs WHERE run = ?", [BOTH_DIRECTIONS_RUN]).fetchone()
    assert both == ("both",)
    with open(sample_run() / "train_history.log", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    got = con.execute(
        "SELECT type, id, ts_ns, loss FROM train_log WHERE run = ? ORDER BY ts_ns", [SAMPLE_RUN]
    )
    got = got.fetchall()
    assert len(got) == len(rows) == 32
    assert [(r[0], r[1]) for r in got] == [(r["Type"], int(r["ID"])) for r in rows]
    assert got[0][2] == round(float(rows[0]["Timestamp"]) * 1e6) * 1000
    assert got[-1][3] == pytest.approx(float(rows[-1]["Loss"]))


def test_both_direction_capture_counts_each_packet_once(dataset: Path) -> None:
    """Every worker-to-worker packet is in the sender's and the receiver's capture; `packets` keeps one."""
    con = open_catalog(dataset)
    run = both_directions_run()
    stored = con.execute("SELECT count(*) FROM packets_all WHERE run = ?", [BOTH_DIRECTIONS_RUN]).fetchone()[
        0
    ]
    assert stored == sum(read_capture(p).num_rows for p in sorted(run.glob("worker-*.pcap")))
    for i, a in enumerate(IPS):
        for j, b in enumerate(IPS):
            if a == b:
                continue
            pair = f"ip.src=={a} && ip.dst=={b}"
            at_sender = tshark(run / f"worker-{i}-tcpdump.pcap", pair)
            at_receiver = tshark(run / f"worker-{j}-tcpdump.pcap", pair)
            got = con.execute(
                "SELECT count(*), coalesce(sum(frame_len), 0), count(DISTINCT worker) FROM packets"
                " WHERE run = ? AND src_ip = ? AND dst_ip = ?",
                [BOTH_DIRECTIONS_RUN, a, b],
            ).fetchone()
            assert got[:2] == at_sender  # the sender's copy, counted once
            assert got[2] in (0, 1)  # ... from one capture only
            if at_sender[0]:
                # the receiver saw the same packets (captures start/stop a few ms apart)
                assert abs(at_receiver[0] - at_sender[0]) <= 0.05 * at_sender[0] + 10
    hidden = con.execute("SELECT sum(dup_rows) FROM workers WHERE run = ?", [BOTH_DIRECTIONS_RUN]).fetchone()[
        0
    ]
    kept = con.execute("SELECT count(*) FROM packets WHERE run = ?", [BOTH_DIRECTIONS_RUN]).fetchone()[0]
    assert hidden == 741 + 752 + 735 + 678  # per worker, from dpkt in tests/test_dedup.py
    assert kept == stored - hidden
    # sender-only runs: nothing is hidden
    so = con.execute(
        "SELECT (SELECT count(*) FROM packets WHERE run = $1),"
        " (SELECT count(*) FROM packets_all WHERE run = $1)",
        [SAMPLE_RUN],
    ).fetchone()
    assert so[0] == so[1] == 17027


def test_parquet_layout_readable_by_polars_and_pandas(dataset: Path) -> None:
    files = sorted((dataset / "packets").rglob("*.parquet"))
    rel = {f.relative_to(dataset).parent.as_posix() for f in files}
    assert f"packets/run={SAMPLE_RUN}/worker=W1" in rel
    assert all(f.name.startswith("part-") for f in files)
    schema = pl.from_arrow(DATASET_SCHEMA.empty_table()).schema  # dense parts omit the layer columns
    lf = pl.scan_parquet(dataset / "packets", schema=schema, missing_columns="insert", hive_partitioning=True)
    by = lf.group_by("run").agg(pl.len().alias("n")).collect().sort("run")
    con = open_catalog(dataset)
    expect = dict(con.execute("SELECT run, count(*) FROM packets_all GROUP BY run").fetchall())
    assert dict(zip(by["run"], by["n"], strict=True)) == expect
    df = pd.read_parquet(
        dataset / "packets" / f"run={SAMPLE_RUN}",
        schema=DATASET_SCHEMA.append(pa.field("worker", pa.string())),
    )
    assert len(df) == expect[SAMPLE_RUN]
    assert list(df.columns) == [*DATASET_SCHEMA.names, "worker"]
    assert sorted(df["worker"].astype(str).unique()) == ["W1", "W2", "W3", "W4"]
    runs = pl.read_parquet(dataset / "tables" / "runs.parquet")
    assert set(runs["run"]) == {SAMPLE_RUN, BOTH_DIRECTIONS_RUN}
    for f in files:  # sorted by time within each file
        ts = pl.read_parquet(f, columns=["ts_ns"])["ts_ns"]
        assert ts.is_sorted()


def count_packets_with_plain_duckdb(catalog: Path) -> str:
    """`select count(*) from packets` in a fresh process started in `/`, as a user's own duckdb runs it."""
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True);"
        " print(con.execute('select count(*) from packets').fetchone()[0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(catalog)], cwd="/", capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_catalog_works_from_any_cwd_and_after_a_move(dataset: Path, tmp_path: Path) -> None:
    expect = str(open_catalog(dataset).execute("select count(*) from packets").fetchone()[0])
    assert count_packets_with_plain_duckdb(dataset / "tracecore.duckdb") == expect
    moved = tmp_path / "moved"
    shutil.copytree(dataset, moved)
    hidden = tmp_path / "gone"
    dataset.rename(hidden)  # the original location no longer exists
    try:
        con = open_catalog(moved)
        assert str(con.execute("select count(*) from packets").fetchone()[0]) == expect
        con.close()
        # open_catalog refreshed the views in place: plain duckdb works from anywhere again
        assert count_packets_with_plain_duckdb(moved / "tracecore.duckdb") == expect
    finally:
        hidden.rename(dataset)


def test_open_catalog_without_dataset(tmp_path: Path) -> None:
    with pytest.raises(
        DatasetError, match=r"no dataset at .*run `tracecore ingest PCAPS` first or pass --data"
    ):
        open_catalog(tmp_path / "nothing")


def test_query_views_are_installed(dataset: Path) -> None:
    from tracecore.views import view_names

    con = open_catalog(dataset)
    names = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
    assert {"packets", "packets_all"} <= names
    assert set(view_names()) <= names


def test_moved_dataset_opens_in_memory_while_an_ingest_holds_it(dataset: Path, tmp_path: Path) -> None:
    """Views cannot be refreshed in place while another ingest holds the lock: built in memory instead."""
    from tracecore.ingest.lock import dataset_lock

    moved = tmp_path / "copy"
    shutil.copytree(dataset, moved)
    expect = open_catalog(dataset).execute("SELECT count(*), sum(frame_len) FROM packets").fetchone()
    with dataset_lock(moved):
        con = open_catalog(moved)
        assert con.execute("SELECT count(*), sum(frame_len) FROM packets").fetchone() == expect
        assert con.execute("SELECT value FROM _meta WHERE key = 'root'").fetchone() == (str(moved.resolve()),)
        con.close()
    # the file itself still names the old root until a refresh can take the lock
    con = open_catalog(moved)
    assert con.execute("SELECT count(*), sum(frame_len) FROM packets").fetchone() == expect
    con.close()
