"""The NIC counter sampler (runners/counters.py) and its file's reading (tracecore/logs/nic_counters.py).

The RDMA fixture tree is laid out as a ConnectX (mlx5) port shows it in sysfs: the Linux kernel's
Documentation/ABI/stable/sysfs-class-infiniband (ports/N/counters/*, ports/N/hw_counters/*,
ports/N/gid_attrs/ndevs/N) and drivers/infiniband/hw/mlx5/counters.c (the hw_counters names), with
/sys/class/net/IF/device/infiniband/DEV linking the interface to its RDMA device.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from tests.conftest import netns_made_by, require_tool
from tests.test_runners_run import TINY
from tracecore.cli.app import app
from tracecore.ingest import ingest, open_catalog
from tracecore.logs import detect_parser
from tracecore.logs.nic_counters import MAGIC, parse
from tracecore.runners.counters import main as sampler_main
from tracecore.runners.experiment import load_experiment
from tracecore.runners.preflight import needs, problems, run_here

NETDEV_HEAD = (
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls"
    " carrier compressed\n"
)
IB_COUNTERS = {  # ports/1/counters: port_*_data in 4-byte words
    "port_xmit_data": 1000,
    "port_rcv_data": 2000,
    "port_xmit_packets": 30,
    "port_rcv_packets": 40,
    "port_xmit_wait": 5,
    "port_xmit_discards": 0,
    "symbol_error": 0,
    "link_downed": 0,
}
HW_COUNTERS = {  # ports/1/hw_counters (mlx5)
    "np_cnp_sent": 3,
    "np_ecn_marked_roce_packets": 4,
    "rp_cnp_handled": 2,
    "out_of_sequence": 1,
    "packet_seq_err": 0,
    "local_ack_timeout_err": 0,
}


def netdev_line(name: str, rx: int, tx: int) -> str:
    return f"{name:>6}: {rx} 10 0 0 0 0 0 0 {tx} 20 0 0 0 0 0 0\n"


def host_tree(root: Path, rx: int = 5000, tx: int = 7000) -> Path:
    """A host's /proc/net/dev (lo, eth1) and an mlx5 device mlx5_0 with two ports, port 1 on eth1."""
    (root / "proc/net").mkdir(parents=True, exist_ok=True)
    (root / "proc/net/dev").write_text(NETDEV_HEAD + netdev_line("lo", 1, 1) + netdev_line("eth1", rx, tx))
    (root / "sys/class/net/eth1/device/infiniband/mlx5_0").mkdir(parents=True, exist_ok=True)
    for port, ndev in (("1", "eth1"), ("2", "eth2")):
        base = root / "sys/class/infiniband/mlx5_0/ports" / port
        for folder, values in (("counters", IB_COUNTERS), ("hw_counters", HW_COUNTERS)):
            (base / folder).mkdir(parents=True, exist_ok=True)
            for name, value in values.items():
                (base / folder / name).write_text(f"{value}\n")
        (base / "gid_attrs/ndevs").mkdir(parents=True, exist_ok=True)
        (base / "gid_attrs/ndevs/0").write_text(f"{ndev}\n")
    return root


def sample(root: Path, out: Path, *args: str) -> int:
    return sampler_main(["--interface", "eth1", "--out", str(out), "--root", str(root), "--interval", "1ms",
                         "--ethtool-every", "0", *args])  # fmt: skip


def test_the_sampler_reads_the_interface_and_its_rdma_port_and_ingest_reads_the_file(tmp_path: Path) -> None:
    """Port 1 (whose GID table names eth1) is sampled, port 2 is not; InfiniBand data words become
    bytes; the file is recognised by content and its rows carry what was read."""
    root = host_tree(tmp_path / "root")
    out = tmp_path / "worker-0-counters.tsv"
    assert sample(root, out, "--samples", "3") == 0
    text = out.read_text().splitlines()
    assert text[0] == MAGIC
    assert text[-1].startswith("# end\tsamples\t3\t")
    columns = next(line for line in text if line.startswith("# columns")).split("\t")[2:]
    assert columns[:2] == ["eth1//rx_bytes", "eth1//rx_packets"]
    assert "mlx5_0/1/port_xmit_data" in columns
    assert "mlx5_0/1/np_cnp_sent" in columns
    assert not [c for c in columns if c.startswith("mlx5_0/2/")]
    assert len(columns) == 16 + len(IB_COUNTERS) + len(HW_COUNTERS)
    parser = detect_parser(out)
    assert parser is not None
    assert parser.table == "counters"
    parsed = parse(out)
    assert parsed.bad_lines == 0
    rows = parsed.table.to_pylist()
    assert len(rows) == 3 * len(columns)
    first = {(r["source"], r["counter"]): r for r in rows[: len(columns)]}
    assert first[("netdev", "rx_bytes")]["value"] == 5000
    assert first[("netdev", "tx_bytes")]["value"] == 7000
    assert first[("rdma", "port_xmit_data")] | {"ts_ns": 0} == {
        "worker": None, "host": first[("rdma", "port_xmit_data")]["host"], "source": "rdma",
        "device": "mlx5_0", "port": 1, "counter": "port_xmit_data", "unit": "bytes", "ts_ns": 0,
        "value": 4000, "delta": None, "dt_ns": None, "event": None,
    }  # fmt: skip
    assert first[("rdma", "np_cnp_sent")]["unit"] == "count"
    assert first[("rdma", "port_rcv_packets")]["unit"] == "packets"
    assert {r["delta"] for r in rows[len(columns) :]} == {0}
    (source,) = parsed.more["counter_sources"].to_pylist()
    assert (source["interface"], source["samples"], source["stopped"]) == ("eth1", 3, True)
    assert source["missed"] >= 0  # ticks a loaded machine skipped at 1 ms
    assert source["interval_ns"] == 1_000_000
    assert source["dt_p50_ns"] >= 1_000_000


def test_an_rdma_device_named_and_missing_sources_are_one_line(tmp_path: Path, capsys) -> None:
    root = host_tree(tmp_path / "root")
    out = tmp_path / "c.tsv"
    assert sample(root, out, "--samples", "1", "--rdma", "mlx5_0:2") == 0
    assert "mlx5_0/2/port_xmit_data" in out.read_text()
    assert "mlx5_0/1/" not in out.read_text()
    assert sample(root, out, "--samples", "1", "--rdma", "none") == 0
    assert "mlx5_0" not in out.read_text()
    for args, message in (
        (("--rdma", "mlx5_9"), "no RDMA device mlx5_9"),
        (("--rdma", "mlx5_0:7"), "RDMA device mlx5_0 has no port 7"),
        (("--interval", "10"), "interval '10' is not a duration"),
        (("--interval", "100us"), "below the sampler's 1 ms"),
    ):
        capsys.readouterr()
        assert sample(root, out, "--samples", "1", *args) == 2
        err = capsys.readouterr().err
        assert err.startswith("tracecore counters: "), err
        assert message in err, err
        assert err.count("\n") == 1, err
    capsys.readouterr()
    assert sampler_main(["--interface", "eth9", "--out", str(out), "--root", str(root)]) == 2
    assert "interface eth9 is not in" in capsys.readouterr().err


def test_the_sampler_stops_on_sigterm_with_its_last_line(tmp_path: Path) -> None:
    """Started as a run starts it, stopped as a run stops it: the file ends with its own account."""
    root = host_tree(tmp_path / "root")
    out = tmp_path / "c.tsv"
    argv = [sys.executable, "-m", "tracecore.runners.counters", "--interface", "eth1", "--out", str(out),
            "--root", str(root), "--interval", "2ms"]  # fmt: skip
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if out.exists() and out.read_text().count("\n") > 12:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait()
    parsed = parse(out)
    (source,) = parsed.more["counter_sources"].to_pylist()
    assert source["stopped"]
    assert source["samples"] >= 6
    assert parsed.bad_lines == 0
    assert source["missed"] is not None
    assert source["late_p99_us"] is not None


def write_counters(path: Path, lines: list[str], interval_ns: int = 10_000_000) -> Path:
    path.write_text(
        f"{MAGIC}\n# host\th0\n# interface\teth1\n# interval_ns\t{interval_ns}\n"
        "# columns\tts_ns\teth1//tx_bytes\tmlx5_0/1/port_xmit_data\tmlx5_0/1/np_cnp_sent\n"
        "# ethtool_columns\tts_ns\teth1\ttx_prio3_pause\n" + "".join(f"{line}\n" for line in lines)
    )
    return path


def test_wrap_reset_missing_values_gaps_and_bad_lines(tmp_path: Path) -> None:
    """A 32-bit wrap counts across 2^32; a drop to a small value is a reset (delta = the value); an
    empty value is NULL and the next delta NULL; a late sample is a gap whose delta spans it; bad
    lines are named by number and the lines around them kept (a cut last line too)."""
    w = 2**32
    path = write_counters(tmp_path / "c.tsv", [
        "1000000000\t100\t10\t0",
        "1010000000\t200\t20\t1",
        f"1020000000\t{w - 50}\t30\t1",
        "1030000000\t25\t\t2",  # tx wrapped by 75; port_xmit_data unread
        "1040000000\t40\t50\t2",  # port_xmit_data: no delta after the NULL
        "e\t1040000500\t7",
        "1050000000\t10\t60\t0",  # tx 40 → 10 (below 2^31 from 2^32): a reset; cnp 2 → 0: reset
        "1040000000\t99\t99\t9",  # line 14: not after the previous sample
        "1100000000\t30\t70\tx",  # line 15: not an integer
        "1110000000\t40\t80",  # line 16: a value short
        "e\t1110000500\t9",
        "1150000000\t50\t90\t0",  # 100 ms after the last good sample: a gap
        "1160000000\t60\t1",  # line 19: cut short by a killed sampler
    ])  # fmt: skip
    parsed = parse(path)
    assert parsed.bad_lines == 4, parsed.first_bad
    assert [e.split(":")[0] for e in parsed.first_bad] == ["line 14", "line 15", "line 16", "line 19"]
    rows = parsed.table.to_pylist()

    def series(counter: str) -> list[tuple]:
        return [(r["value"], r["delta"], r["event"]) for r in rows if r["counter"] == counter]

    assert series("tx_bytes") == [(100, None, None), (200, 100, None), (w - 50, w - 250, None),
                                  (25, 75, "wrap"), (40, 15, None), (10, 10, "reset"),
                                  (50, 40, "gap")]  # fmt: skip
    assert series("port_xmit_data") == [(40, None, None), (80, 40, None), (120, 40, None), (None, None, None),
                                        (200, None, None), (240, 40, None), (360, 120, "gap")]  # fmt: skip
    assert series("np_cnp_sent")[-2:] == [(0, 0, "reset"), (0, 0, "gap")]
    assert [(r["source"], r["device"], r["port"], r["value"], r["delta"], r["dt_ns"]) for r in rows
            if r["counter"] == "tx_prio3_pause"] == [("ethtool", "eth1", None, 7, None, None),
                                                     ("ethtool", "eth1", None, 9, 2, 70_000_000)]  # fmt: skip
    (source,) = parsed.more["counter_sources"].to_pylist()
    assert (source["samples"], source["gaps"], source["dt_max_ns"], source["stopped"]) == (
        7,
        1,
        100_000_000,
        False,
    )


def test_a_run_folder_with_counters_gets_them_per_worker(tmp_path: Path, sample_run: Path) -> None:
    """Beside the captures, `worker-<i>-counters.tsv` is read into `counters` as that worker's, and
    `counter_sources` holds the file's account; a file of no sample line is reported, not a table."""
    run = tmp_path / sample_run.name
    run.mkdir()
    for f in sample_run.iterdir():
        os.symlink(f, run / f.name)
    write_counters(run / "worker-1-counters.tsv", ["1000000000\t100\t10\t0", "1010000000\t300\t20\t1"])
    write_counters(run / "worker-2-counters.tsv", [])
    summary = ingest([run], tmp_path / "data", jobs=1)
    assert [p for p, why in summary.problems] == [str(run / "worker-2-counters.tsv")], summary.problems
    con = open_catalog(tmp_path / "data")
    try:
        got = con.execute(
            "SELECT c.worker, w.capture, sum(delta) FROM counters AS c JOIN workers AS w USING (run, worker)"
            " WHERE counter = 'tx_bytes' GROUP BY ALL"
        ).fetchall()
        sources = con.execute(
            "SELECT worker, samples, stopped FROM counter_sources ORDER BY worker"
        ).fetchall()
    finally:
        con.close()
    assert got == [("W2", "worker-1-tcpdump", 200)]
    assert sources == [("W2", 2, False), ("W3", 0, False)]


@pytest.fixture
def sample_run() -> Path:
    from tracecore.sample import sample_run

    return sample_run()


def test_the_capture_method_is_checked_and_a_dry_run_shows_the_sampler(tmp_path: Path) -> None:
    """method = "both" adds one sampler per host to the plan, as the namespace runs it; "counters" alone
    runs the samplers and no tcpdump; a bad interval or method is one line before anything starts."""
    exp = tmp_path / "e.toml"
    base = TINY.format(out="pcaps", python="python3")
    exp.write_text(base.replace("[capture]", '[capture]\nmethod = "both"\ncounters_interval = "5ms"'))
    res = CliRunner().invoke(app, ["run", str(exp), "--dry-run"])
    assert res.exit_code == 0, res.output
    shown = [line for line in res.output.splitlines() if "tracecore.runners.counters" in line]
    assert len(shown) == 2 * 2, res.output  # two hosts, each of two runs
    assert "--interface eth1 --interval 5ms --rdma auto --out" in shown[0]
    assert "worker-0-counters.tsv" in shown[0]
    assert "worker-1-counters.tsv" in shown[1]
    exp.write_text(base.replace("[capture]", '[capture]\nmethod = "counters"'))
    res = CliRunner().invoke(app, ["run", str(exp), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert sum("tracecore.runners.counters" in line for line in res.output.splitlines()) == 2 * 2, res.output
    assert "tcpdump" not in res.output, res.output
    for setting, message in (
        ('method = "both"\ncounters_interval = "fast"', "capture.counters_interval: interval 'fast' is not"),
        ('method = "pcap"', "capture.method: 'pcap' is not one of tcpdump, counters, both"),
        ('method = "counters"', 'capture.method: "counters" alone is not run on Slurm'),
    ):
        text = base.replace("[capture]", f"[capture]\n{setting}")
        if "Slurm" in message:
            text = text.replace('kind = "netns"', 'kind = "slurm"\nhosts = ["n1", "n2"]')
        exp.write_text(text)
        res = CliRunner().invoke(app, ["run", str(exp), "--dry-run"])
        assert res.exit_code == 3, res.output  # bad input
        assert message in res.output, res.output


def test_preflight_asks_the_hosts_python_for_the_sampler(tmp_path: Path) -> None:
    """With the sampler, the real probe (run on this machine) checks that the hosts' interpreter can
    import it: this venv's can; a python without tracecore (the system's, isolated from this checkout)
    is named with the fix."""
    require_tool("tcpdump")
    bare = tmp_path / "python3"
    bare.write_text('#!/bin/sh\nexec /usr/bin/python3 -I "$@"\n')
    bare.chmod(0o755)
    exp = tmp_path / "e.toml"
    exp.write_text(
        TINY.format(out="pcaps", python="python3").replace("[capture]", '[capture]\nmethod = "both"')
    )
    experiment = load_experiment(exp)
    assert needs(experiment, [], ("", ""), sys.executable).describe() == (
        f"tcpdump, {sys.executable} with the counter sampler"
    )
    for python, said in ((sys.executable, []), (str(bare), [
        f"this machine: {bare} cannot import tracecore.runners.counters (the counter sampler: pip install"
        " tracecore there, or set launcher.python)"
    ])):  # fmt: skip
        need = needs(experiment, [], ("", ""), python)
        assert problems("this machine", need, run_here(need.probe_argv(), "this machine")) == said
    exp.write_text(TINY.format(out="pcaps", python="python3"))
    assert needs(load_experiment(exp), [], ("", ""), str(bare)).sampler_python == ""


# each rank sends the other 24 MiB in 192 KiB pieces, 12 ms apart (about 1.5 s), and reads what comes
PACED = (
    "import socket,sys,threading,time\n"
    "rank, host = int(sys.argv[1]), sys.argv[2]\n"
    "if rank == 0:\n"
    "    srv = socket.socket(); srv.bind(('0.0.0.0', 29613)); srv.listen(); c = srv.accept()[0]\n"
    "else:\n"
    "    for _ in range(200):\n"
    "        try: c = socket.create_connection((host, 29613)); break\n"
    "        except OSError: time.sleep(0.05)\n"
    "def drain(n=24 << 20):\n"
    "    while n > 0: n -= len(c.recv(1 << 20))\n"
    "t = threading.Thread(target=drain); t.start()\n"
    "for _ in range(128): c.sendall(bytes(192 << 10)); time.sleep(0.012)\n"
    "t.join(); c.close()\n"
)


@pytest.fixture(scope="module")
def counted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two hosts of the netns testbed, capture method "both": tcpdump (what each host sends) and the
    counter sampler at 10 ms, running PACED; the run ingested."""
    for tool in ("tcpdump", "ip"):
        require_tool(tool)
    tmp = tmp_path_factory.mktemp("counted")
    program = json.dumps([sys.executable, "-c", PACED, "{rank}", "{master_addr}"])  # a TOML array
    text = TINY.format(out=tmp / "pcaps", python=sys.executable).replace('kind = "ddp"', 'kind = "command"')
    text = text.replace("loss = [0, 1]", "loss = [0]").replace(
        "[launcher]", f"[launcher]\nprogram = {program}"
    )
    text = text.replace(
        'filter = "src host {{ip}}"', 'filter = "host {{ip}}"'.replace("{{", "{").replace("}}", "}")
    )
    (tmp / "both.toml").write_text(text.replace("[capture]", '[capture]\nmethod = "both"'))
    res = CliRunner().invoke(app, ["run", str(tmp / "both.toml"), "--no-ingest"])
    assert res.exit_code == 0, res.output
    assert not netns_made_by(os.getpid())
    (run,) = [p for p in (tmp / "pcaps").iterdir() if p.is_dir() and not p.name.startswith("_")]
    assert not ingest([run], tmp / "data", jobs=1).failed
    return tmp / "data"


@pytest.mark.netns
@pytest.mark.slow
def test_counters_and_captures_of_a_namespace_run_agree(counted_run: Path) -> None:
    """counter_check on a namespace run: each worker's veth counts what the captures hold of it, bytes
    sent and received within 0.1 % over the run; of the 100 ms bins that carried ≥ 1 MB, nine in ten
    within 1 % and every one within 1 % + one burst; within 2 % at the median of the 10 ms bins that
    carried ≥ 100 kB (the sampler stamps a sample at the middle of its reads; a frame sent meanwhile
    lands on either side)."""
    con = open_catalog(counted_run)
    try:
        totals = con.execute(
            "SELECT worker, direction, sum(counted_bytes), sum(captured_bytes) FROM counter_check"
            " GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        bins = con.execute(
            "SELECT worker, direction, t_s, diff_pct, diff_bytes, captured_bytes FROM counter_check"
            " WHERE captured_bytes >= 1000000"
        ).fetchall()
        fine = con.execute(
            "SELECT median(abs(diff_pct)), count(*) FROM counter_check(bin_ns := 10000000)"
            " WHERE captured_bytes >= 100000"
        ).fetchall()[0]
        sources = con.execute(
            "SELECT worker, samples, dt_p50_ns, dt_p99_ns, missed FROM counter_sources"
        ).fetchall()
    finally:
        con.close()
    assert [t[:2] for t in totals] == [("W1", "rx"), ("W1", "tx"), ("W2", "rx"), ("W2", "tx")], totals
    for worker, direction, counted, captured in totals:
        assert captured > 24 << 20, (worker, direction)
        assert counted == pytest.approx(captured, rel=1e-3), (worker, direction, counted, captured)
    assert len(bins) >= 4 * 10, bins
    # a sample's time is known to ± half its read time (≤ 100 µs), in which a veth moves tens of kB of a
    # PACED burst; received bytes are counted at the receiver and captured at the sender, so frames in
    # flight at a sample move too: at most one burst (192 KiB) to the next bin, made up there
    off = [b for b in bins if abs(b[4]) > 0.01 * b[5] + (192 << 10)]
    assert not off, off
    spread = sorted(abs(b[3]) for b in bins)
    assert spread[len(spread) * 9 // 10] <= 1, spread  # nine bins in ten within 1 %
    assert fine[1] >= 4 * 50, fine
    assert fine[0] <= 2, fine
    for _worker, samples, p50, _p99, _missed in sources:
        assert samples > 100
        assert p50 == pytest.approx(10_000_000, rel=0.1)


@pytest.mark.netns
@pytest.mark.slow
def test_nic_util_answers_link_utils_question_from_the_counters(counted_run: Path) -> None:
    """nic_util's 100 ms bins (epoch-aligned as link_util's) keep every counted byte (each sample's
    delta shared by time); where a worker sent ≥ 1 MB in a bin, its bytes differ from link_util's from
    that worker by at most what the two samples across the bin's edges moved (+ 1 %); bins finer than
    the sampling are refused in one line."""
    con = open_catalog(counted_run)
    try:
        kept = con.execute(
            "SELECT worker, direction, round(sum(bytes)) FROM nic_util(bin_ns := 100000000) GROUP BY ALL"
            " ORDER BY ALL"
        ).fetchall()
        counted = con.execute(
            "SELECT worker, CASE counter WHEN 'tx_bytes' THEN 'tx' ELSE 'rx' END, sum(delta) FROM counters"
            " WHERE counter IN ('tx_bytes', 'rx_bytes') GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        pairs = con.execute(
            """
            WITH n AS (SELECT * FROM nic_util(bin_ns := 100000000) WHERE direction = 'tx'),
            l AS (SELECT run, src_worker, bin_start_ns, sum(bytes) AS bytes
                  FROM link_util(bin_ns := 100000000) GROUP BY ALL),
            s AS (SELECT worker, ts_ns - dt_ns AS t0, ts_ns AS t1, delta FROM counters
                  WHERE counter = 'tx_bytes' AND delta IS NOT NULL)
            SELECT n.worker, n.bin_start_ns, n.bytes, l.bytes, n.covered,
                   (SELECT coalesce(sum(delta), 0) FROM s WHERE s.worker = n.worker
                      AND (n.bin_start_ns BETWEEN s.t0 AND s.t1
                           OR n.bin_start_ns + n.bin_ns BETWEEN s.t0 AND s.t1))
            FROM n JOIN l ON l.run = n.run AND l.src_worker = n.worker AND l.bin_start_ns = n.bin_start_ns
            WHERE l.bytes >= 1000000
            ORDER BY ALL
            """
        ).fetchall()
        with pytest.raises(
            duckdb.InvalidInputException, match=r"bin_ns 1000000 is finer than run .* give bin_ns ≥"
        ):
            con.execute("SELECT * FROM nic_util(bin_ns := 1000000)").fetchall()
    finally:
        con.close()
    assert kept == [(w, d, float(b)) for w, d, b in counted], (kept, counted)
    assert len(pairs) >= 20, pairs
    # a sample that straddles a bin edge is shared by time: the bin may differ from the packets' count
    # by what those edge samples moved, never by more
    off = [p for p in pairs if abs(p[2] - p[3]) > p[5] + 0.01 * p[3] or p[4] != 1]
    assert not off, off


@pytest.mark.netns
@pytest.mark.slow
def test_the_figure_and_the_report_show_the_counters(counted_run: Path, tmp_path: Path) -> None:
    """`tracecore figure nic_util` draws a panel per worker at a width the sampling allows, and the
    report of a run with counters carries it (a run without them does not: tests/test_report.py)."""
    res = CliRunner().invoke(
        app, ["figure", "nic_util", "--data", str(counted_run), "--out", str(tmp_path / "n.json")]
    )
    assert res.exit_code == 0, res.output
    spec = json.loads((tmp_path / "n.json").read_text())
    rows = spec["data"]["values"]
    assert {r["panel"] for r in rows} == {"W1", "W2"}
    assert {(r["sent"], r["nic"]) for r in rows} == {("sent", "eth1"), ("received", "eth1")}
    # the finest bin the sampling allows: 10 ms, or 20 ms when a loaded machine stretched the samples
    assert spec["title"]["subtitle"][0].startswith(("10 ms bins", "20 ms bins"))
    assert max(r["gbps"] for r in rows) > 0.05
    res = CliRunner().invoke(app, ["report", str(tmp_path / "r"), "--data", str(counted_run)])
    assert res.exit_code == 0, res.output
    page = next((tmp_path / "r").glob("*.html")).read_text() if (tmp_path / "r").is_dir() else ""
    assert 'id="fig-nic_util"' in page
    assert 'id="fig-roce_congestion"' not in page  # a veth has no congestion counters


def test_the_overhead_bench_measures_each_interval(tmp_path: Path) -> None:
    """bench.counters_overhead, briefly: a row per interval and source with the sampler's own account,
    and the sleep-only floor."""
    out = tmp_path / "o.md"
    argv = [sys.executable, "-m", "bench.counters_overhead", "--seconds", "0.5", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines() if line.startswith("| ")][1:]
    assert [(r[0].strip().split(" ")[0], r[1].strip()) for r in rows] == [
        (source, interval)
        for interval in ("10ms", "5ms", "1ms")
        for source in (rows[0][0].split()[0], "eth1")
    ]
    assert all(int(r[3]) > 0 and float(r[6]) > 0 for r in rows), rows
    assert "The floor: a Python process that only sleeps" in out.read_text()


def test_roce_congestion_sums_each_steps_signals_per_worker(tmp_path: Path, sample_run: Path) -> None:
    """An mlx5-named port's congestion counters, sampled every 10 ms across the sample run's logged
    steps: each step gets the deltas of the samples taken in it, the whole-run row every delta; PFC
    pauses sum over priorities; a counter the port does not have is NULL."""
    from decimal import Decimal

    run = tmp_path / sample_run.name
    run.mkdir()
    for f in sample_run.iterdir():
        os.symlink(f, run / f.name)
    log = (sample_run / "train_history.log").read_text().splitlines()[1:]
    batches = [int(Decimal(line.split(",")[2]) * 10**9) for line in log if line.startswith("Batch,")]
    times = list(range(batches[0] - 50_000_000, batches[-1] + 50_000_000, 10_000_000))
    lines = []
    for k, ts in enumerate(times):
        lines.append(f"{ts}\t{1000 + k}\t{k * 7}\t{3 * k}")  # tx_bytes, port_xmit_data, np_cnp_sent
        if k % 10 == 0:
            lines.append(f"e\t{ts + 500}\t{k}")  # tx_prio3_pause
    path = run / "worker-2-counters.tsv"
    path.write_text(
        f"{MAGIC}\n# host\th2\n# interface\teth1\n# interval_ns\t10000000\n"
        "# columns\tts_ns\teth1//tx_bytes\tmlx5_0/1/port_xmit_data\tmlx5_0/1/np_cnp_sent\n"
        "# ethtool_columns\tts_ns\teth1\ttx_prio3_pause\n" + "".join(f"{line}\n" for line in lines)
    )
    assert not ingest([run], tmp_path / "data", jobs=1).failed
    con = open_catalog(tmp_path / "data")
    try:
        got = con.execute(
            "SELECT worker, step, start_ns, end_ns, cnp_sent, pfc_pauses_tx, pfc_pauses_rx, ecn_marked"
            " FROM roce_congestion"
        ).fetchall()
    finally:
        con.close()
    whole, *steps = got
    assert whole == ("W3", None, times[0], times[-1], 3 * (len(times) - 1), len(times[::10]) * 10 - 10,
                     None, None)  # fmt: skip
    assert len(steps) == len(batches) - 1
    for (worker, step, start, end, cnp, pfc_tx, _, _), (lo, hi) in zip(
        steps, itertools.pairwise(batches), strict=True
    ):
        taken = [k for k, ts in enumerate(times) if lo < ts <= hi and k > 0]
        paused = [k for k in range(0, len(times), 10) if lo < times[k] + 500 <= hi and k > 0]
        assert (worker, start, end, cnp) == ("W3", lo, hi, 3 * len(taken)), step
        assert pfc_tx == (10 * len(paused) if paused else None), step
    # the figure: a line per signal the port has, a point per step, the view's counts
    res = CliRunner().invoke(
        app,
        ["figure", "roce_congestion", "--data", str(tmp_path / "data"), "--out", str(tmp_path / "c.json")],
    )
    assert res.exit_code == 0, res.output
    drawn = json.loads((tmp_path / "c.json").read_text())["data"]["values"]
    assert {r["panel"] for r in drawn} == {"W3"}
    assert sorted((r["step"], r["signal"], r["count"]) for r in drawn) == sorted(
        [(step[1], "CNPs sent", step[4]) for step in steps]
        + [(step[1], "PFC pauses sent", step[5]) for step in steps if step[5] is not None]
    )


SENDER = "192.168.17.50"  # the sample run's W1, whose file is worker-0's
FIRST_SAMPLE_NS = 1795332667_705_000_000  # 4 ms after the sample run's first packet, 5 ms off the 10 ms grid


def test_nic_util_and_counter_check_on_the_sample_run_with_a_counter_file(
    tmp_path: Path, sample_run: Path
) -> None:
    """A counter file for worker-0 of the embedded sample, sampled every 10 ms half-way between 10 ms
    bins (tx +1,000 B, rx +2,000 B a sample): nic_util gives each inner 10 ms bin the halves of two
    samples (1,000 B, covered 1) and the edge bins half a sample (covered 0.5); counter_check sets
    each 100 ms bin's samples against the frames W1 sent (tx) and was sent (rx) in those samples' spans,
    counted here from the packets themselves."""
    run = tmp_path / sample_run.name
    run.mkdir()
    for f in sample_run.iterdir():
        os.symlink(f, run / f.name)
    times = [FIRST_SAMPLE_NS + k * 10_000_000 for k in range(660)]
    (run / "worker-0-counters.tsv").write_text(
        f"{MAGIC}\n# host\th0\n# interface\teth1\n# interval_ns\t10000000\n"
        "# columns\tts_ns\teth1//tx_bytes\teth1//rx_bytes\n"
        + "".join(f"{t}\t{1000 * k}\t{2000 * k}\n" for k, t in enumerate(times))
    )
    assert not ingest([run], tmp_path / "data", jobs=1).failed
    con = open_catalog(tmp_path / "data")
    try:
        tx = con.execute(
            "SELECT bin_start_ns, bytes, covered FROM nic_util WHERE direction = 'tx' ORDER BY bin_start_ns"
        ).fetchall()
        check = con.execute(
            "SELECT direction, bin_start_ns, samples, counted_bytes, captured_bytes FROM counter_check"
            " ORDER BY ALL"
        ).fetchall()
        frames = con.execute(
            "SELECT src_ip = ?, ts_ns, frame_len FROM packets WHERE ? IN (src_ip, dst_ip)", [SENDER, SENDER]
        ).fetchall()
    finally:
        con.close()
    assert len(tx) == 660
    assert tx[0] == (times[0] - 5_000_000, pytest.approx(500.0), pytest.approx(0.5))
    assert tx[-1] == (times[-1] - 5_000_000, pytest.approx(500.0), pytest.approx(0.5))
    assert all(b == pytest.approx(1000.0) and c == pytest.approx(1.0) for _, b, c in tx[1:-1])
    want = []
    for direction, step, sent in (("rx", 2000, False), ("tx", 1000, True)):
        for lo in range(times[1] // 10**8 * 10**8, times[-1] + 1, 10**8):
            spans = [(times[k - 1], times[k]) for k in range(1, len(times)) if lo <= times[k] < lo + 10**8]
            if spans:
                captured = sum(n for s, ts, n in frames if s == sent and spans[0][0] < ts <= spans[-1][1])
                want.append((direction, lo, len(spans), step * len(spans), captured))
    assert check == want
    assert sum(w[4] for w in want if w[0] == "tx") > 1_000_000  # W1 sent in those spans: not vacuous


@pytest.mark.netns
@pytest.mark.slow
def test_a_counters_only_run_answers_as_its_captured_twin(tmp_path: Path) -> None:
    """The same training (the built-in DDP workload, 60 logged steps, 2 namespace hosts) run twice:
    tcpdump beside the sampler, then the sampler alone (no capture file). The counters-only run ingests
    (workers from run.toml's addresses and the files' `worker-<i>` names), its nic_util moves the same
    bytes per worker and direction and its data_per_step (from the transmit counters) the same MB per
    step as the captured twin's (from the packets), each within 1 %."""
    require_tool("ip")
    require_tool("tcpdump")
    text = TINY.format(out=tmp_path / "pcaps-{method}", python=sys.executable)
    text = text.replace("loss = [0, 1]", "loss = [0]").replace("steps_per_epoch = 3", "steps_per_epoch = 61")
    text = text.replace('model = ["resnet8w4"]', 'model = ["resnet8"]').replace(
        "steps_per_epoch = 61", "steps_per_epoch = 61\ntorch_profiler = true"
    )
    answers = {}
    for method in ("both", "counters"):
        exp = tmp_path / f"{method}.toml"
        setting = f'[capture]\nmethod = "{method}"'
        exp.write_text(text.replace("{method}", method).replace("[capture]", setting))
        res = CliRunner().invoke(app, ["run", str(exp), "--no-ingest"])
        assert res.exit_code == 0, res.output
        (run,) = (tmp_path / f"pcaps-{method}").iterdir()
        captured = sorted(p.name for p in run.iterdir() if p.suffix in (".pcap", ".tsv"))
        pcaps = ["worker-0-tcpdump.pcap", "worker-1-tcpdump.pcap"] if method == "both" else []
        assert captured == sorted(["worker-0-counters.tsv", "worker-1-counters.tsv", *pcaps]), captured
        summary = ingest([run], tmp_path / f"data-{method}", jobs=1)
        assert not summary.failed
        assert not summary.problems, summary.problems
        con = open_catalog(tmp_path / f"data-{method}")
        try:
            answers[method] = (
                con.execute("SELECT worker, ip, capture, n_files FROM workers ORDER BY worker").fetchall(),
                con.execute("SELECT capture_mode FROM runs").fetchall(),
                con.execute(
                    "SELECT worker, direction, sum(bytes) FROM nic_util(bin_ns := 100000000) GROUP BY ALL"
                    " ORDER BY ALL"
                ).fetchall(),
                con.execute(
                    "SELECT steps, mb_per_step, bytes_from, payload_bytes FROM data_per_step"
                ).fetchall(),
            )
            if method == "counters":
                check_collective_nic(con)
        finally:
            con.close()
    both, alone = answers["both"], answers["counters"]
    assert alone[0] == [("W1", "192.168.17.50", "worker-0", 0), ("W2", "192.168.17.51", "worker-1", 0)]
    assert [w[:2] for w in both[0]] == [w[:2] for w in alone[0]]
    assert (both[1], alone[1]) == ([("sender-only",)], [("none",)])
    assert (
        [r[:2] for r in both[2]]
        == [r[:2] for r in alone[2]]
        == [("W1", "rx"), ("W1", "tx"), ("W2", "rx"), ("W2", "tx")]
    )
    for (worker, direction, twin), (_, _, counted) in zip(both[2], alone[2], strict=True):
        assert twin > 10e6, (worker, direction, twin)
        assert counted == pytest.approx(twin, rel=0.01), (worker, direction, counted, twin)
    ((steps, mb, source, payload),) = both[3]
    ((steps_alone, mb_alone, source_alone, payload_alone),) = alone[3]
    assert (steps, source, steps_alone, source_alone, payload_alone) == (60, "packets", 60, "counters", None)
    assert payload > 0
    assert mb_alone == pytest.approx(mb, rel=0.01), (mb_alone, mb)


def check_collective_nic(con: duckdb.DuckDBPyConnection, testbed: bool = True) -> None:
    """collective_nic against the counters read here: each window's share of the samples it overlaps,
    its groups as the collectives of a worker that touch a common sample (joined transitively), each
    group's bytes the whole samples it touches; on this testbed (MTU 1500, offloads off) the NIC sends
    2-8 % more than the all-reduce's payload (headers, ACKs)."""
    rows = con.execute(
        "SELECT worker, seq, op, start_ns, end_ns, predicted_bytes, nic_bytes, group_first_seq,"
        " group_predicted_bytes, group_nic_bytes, group_ratio FROM collective_nic ORDER BY worker, start_ns"
    ).fetchall()
    samples = con.execute(
        "SELECT worker, ts_ns - dt_ns, ts_ns, delta FROM counters WHERE dt_ns > 0 AND counter ="
        " (SELECT any_value(counter) FROM collective_nic) ORDER BY worker, ts_ns"
    ).fetchall()
    assert {r[0] for r in rows} == {"W1", "W2"}, rows
    for worker in ("W1", "W2"):
        tx = [s[1:] for s in samples if s[0] == worker]
        mine = [r for r in rows if r[0] == worker]
        touched = [{k for k, (t0, t1, _) in enumerate(tx) if t1 > r[3] and t0 < r[4]} for r in mine]
        groups: list[tuple[set[int], list[int]]] = []  # (samples, rows)
        for i, ks in enumerate(touched):
            joined = [g for g in groups if g[0] & ks]
            for g in joined:
                groups.remove(g)
            groups.append((ks.union(*(g[0] for g in joined)), [i, *(j for g in joined for j in g[1])]))
        for ks, members in groups:
            first = min(members, key=lambda i: mine[i][3])
            for i in members:
                r = mine[i]
                spans = [tx[k] for k in touched[i]]
                shared = sum(d * (min(t1, r[4]) - max(t0, r[3])) / (t1 - t0) for t0, t1, d in spans)
                assert r[6] == pytest.approx(shared, rel=1e-9), r
                assert r[7] == mine[first][1], (r, [mine[j][1] for j in members])
                assert r[8] == pytest.approx(sum(mine[j][5] for j in members)), r
                assert r[9] == sum(tx[k][2] for k in ks), r
    if not testbed:
        return
    big = [r for r in rows if r[2] == "all_reduce" and r[5] > 100_000]
    assert len(big) == 2 * 3, big  # two workers, the profiler's three active steps
    for r in big:
        assert 1.02 <= r[10] <= 1.08, r


GPU_RUN = (
    Path(__file__).parents[2] / "shared/corpus-gpu/gpu-nccl-profilers/torch_ddp-cnn3m-sgd-32-nccl-normal-ring"
)


def two_rank_gpu_run(tmp_path: Path, captures: bool) -> Path:
    """The corpus' 2-rank NCCL run linked into tmp_path/runs (its captures left out unless asked), a
    folder the test may add counter files to."""
    run = tmp_path / "runs" / GPU_RUN.name
    run.mkdir(parents=True)
    for f in GPU_RUN.iterdir():
        if captures or f.suffix != ".pcap":
            os.symlink(f, run / f.name)
    return run


def test_collective_nic_on_a_gpu_run_given_counter_files(tmp_path: Path) -> None:
    """collective_nic on the 2-rank GPU corpus run (NCCL's profiler plugin records) given a counter file
    per worker with an RDMA port (the port's transmit counter is the one used): every window's shared
    bytes, group and group bytes as check_collective_nic recomputes them from the counters."""
    run = two_rank_gpu_run(tmp_path, captures=True)
    start = 1795720746_000_000_000  # the captures span 1795720746.80 to 1795720754.49 s
    for w in (0, 1):
        write_counters(run / f"worker-{w}-counters.tsv", [
            f"{start + k * 10_000_000}\t{k * 1000}\t{25_000 * k + (k * 7919 * (w + 1)) % 20_011}\t0"
            for k in range(1000)
        ])  # fmt: skip
    summary = ingest([tmp_path / "runs"], tmp_path / "data", jobs=1)
    assert not summary.failed
    assert not summary.problems, summary.problems
    con = open_catalog(tmp_path / "data")
    try:
        counters = con.execute("SELECT DISTINCT counter, worker FROM collective_nic ORDER BY ALL").fetchall()
        assert counters == [("port_xmit_data", "W1"), ("port_xmit_data", "W2")]
        n, grouped = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE group_collectives > 1) FROM collective_nic"
        ).fetchone()
        assert n == 50  # 25 collectives of the plugin's records, on each of the two workers
        assert grouped > 10  # collectives shorter than a sample share it: the groups are tested
        check_collective_nic(con, testbed=False)
    finally:
        con.close()


def test_a_collective_whose_nic_ran_at_its_peak_while_cnps_rose_is_network(tmp_path: Path) -> None:
    """The 2-rank GPU corpus run without its captures, given a counter file per worker (an RDMA port):
    with flat counters no collective's wire can be judged (rule 'no packets', no finding); when W1's port
    sends at four times its usual rate during the run's 12 MB all-reduces and its np_cnp_sent rises
    then, those are 'NIC congested' (verdict network, W1 named) and the findings list a congested NIC
    (counted over a fifth of the collectives), while every other collective keeps its verdict."""
    run = two_rank_gpu_run(tmp_path, captures=False)
    start, n = 1795720746_000_000_000, 1000  # 10 ms samples over the run (1795720746.8 to 1795720754.5 s)

    def write(windows: list[tuple[int, int]]) -> None:
        for w in (0, 1):
            words, cnps, lines = 0, 0, []
            for k in range(n):
                t = start + k * 10_000_000
                hot = w == 0 and any(t0 < t and t - 10_000_000 < t1 for t0, t1 in windows)
                words += 100_000 if hot else 25_000
                cnps += 3 if hot else 0
                lines.append(f"{t}\t{k * 1000}\t{words}\t{cnps}")
            write_counters(run / f"worker-{w}-counters.tsv", lines)

    def verdicts() -> list[tuple]:
        summary = ingest([tmp_path / "runs"], tmp_path / "data", jobs=1)
        assert not summary.failed
        assert not summary.problems, summary.problems
        con = open_catalog(tmp_path / "data")
        try:
            return con.execute(
                "SELECT seq, op, bytes, start_ns, end_ns, rule, verdict, link_src FROM collective_verdicts"
                " WHERE source = 'nccl_profiler' ORDER BY seq"
            ).fetchall(), con.execute(
                # the congested all-reduces are a fifth of the collectives: systematic from that share on
                "SELECT finding, subject, claim FROM findings(min_count_share := 0.2)"
            ).fetchall()
        finally:
            con.close()

    write([])
    flat, flat_findings = verdicts()
    assert "no packets" in {v[5] for v in flat}
    assert not {v[5] for v in flat} & {"NIC congested"}
    assert [f for f in flat_findings if f[0] == "congested NIC"] == []
    judged = [v for v in flat if v[5] == "no packets" and v[2] >= 1 << 20]
    assert len(judged) >= 3, flat
    write([(v[3], v[4]) for v in judged])
    hot, hot_findings = verdicts()
    by_seq = {v[0]: v for v in hot}
    for v in flat:
        if v in judged:
            assert by_seq[v[0]][5:] == ("NIC congested", "network", "W1"), by_seq[v[0]]
        else:
            assert by_seq[v[0]][5:] == v[5:], (v, by_seq[v[0]])
    congested = [f for f in hot_findings if f[0] == "congested NIC"]
    assert [f[1] for f in congested] == ["W1"], hot_findings
    assert f"in {len(judged)} of " in congested[0][2], congested
