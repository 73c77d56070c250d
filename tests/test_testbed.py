"""The network-namespace testbed: real namespaces, real traffic, real tcpdump, real teardown."""

from __future__ import annotations

import collections
import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dpkt
import pytest

from tests.conftest import default_signals, netns_made_by, require_tool
from tracecore.runners.testbed import Testbed, TestbedError, cleanup_stale, list_netns

pytestmark = pytest.mark.netns

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _tools() -> None:
    for tool in ("ip", "tcpdump", "ethtool", "ping"):
        require_tool(tool)
    if os.geteuid() != 0:
        pytest.fail("network-namespace tests need root")


def _ip_packets(path: Path) -> list[tuple[str, str, int, int]]:
    """(src, dst, ip proto, frame length) of every IPv4 frame in a pcap."""
    out = []
    with path.open("rb") as fh:
        for _ts, buf in dpkt.pcap.Reader(fh):
            eth = dpkt.ethernet.Ethernet(buf)
            if isinstance(eth.data, dpkt.ip.IP):
                ip = eth.data
                out.append((socket.inet_ntoa(ip.src), socket.inet_ntoa(ip.dst), ip.p, ip.len + 14))
    return out


def _frame_lengths(path: Path) -> list[int]:
    with path.open("rb") as fh:
        reader = dpkt.pcap.Reader(fh)
        return [len(buf) for _ts, buf in reader]


def test_ping_capture_sender_only_and_both_directions(tmp_path: Path) -> None:
    with Testbed(n_workers=2) as tb:
        names = tb.namespaces
        assert names == [f"{tb.prefix}-br", f"{tb.prefix}-w0", f"{tb.prefix}-w1"]
        assert set(names) <= set(list_netns())
        assert tb.ips == ["192.168.17.50", "192.168.17.51"]
        addr = tb.exec(0, ["ip", "-4", "-o", "addr", "show", "dev", "eth1"]).stdout
        assert "192.168.17.50/24" in addr
        offload = tb.exec(0, ["ethtool", "-k", "eth1"]).stdout
        for feature in ("tcp-segmentation-offload: off", "generic-segmentation-offload: off",
                        "generic-receive-offload: off"):  # fmt: skip
            assert feature in offload
        with (
            tb.capture(0, tmp_path / "w0.pcap", sender_only=True) as st0,
            tb.capture(1, tmp_path / "w1.pcap", sender_only=False) as st1,
        ):
            ping = tb.exec(0, ["ping", "-c", "5", "-i", "0.05", "-W", "2", tb.ip(1)])
        assert " 5 received" in ping.stdout
    assert not set(names) & set(list_netns())

    sender = _ip_packets(tmp_path / "w0.pcap")
    both = _ip_packets(tmp_path / "w1.pcap")
    # Sender-only on w0: exactly the 5 echo requests, all from .50 to .51.
    assert sender == [("192.168.17.50", "192.168.17.51", 1, 98)] * 5
    # Both directions on w1: 5 requests in, 5 replies out.
    assert collections.Counter((s, d) for s, d, _, _ in both) == {
        ("192.168.17.50", "192.168.17.51"): 5,
        ("192.168.17.51", "192.168.17.50"): 5,
    }
    # 5 echo requests + .50's ARP request (BPF `src host` matches ARP senders too).
    assert st0.captured == 6
    assert st0.dropped_by_kernel == 0
    assert st1.dropped_by_kernel == 0
    # tcpdump's count is the frames in the file: the 10 ICMP packets plus ARP frames, how many of those
    # depends on neighbour-cache timing (a request and a reply at least)
    assert st1.captured == len(_frame_lengths(tmp_path / "w1.pcap")) >= 12


def _tx_bytes(tb: Testbed, i: int) -> int:
    return int(tb.exec(i, ["cat", "/sys/class/net/eth1/statistics/tx_bytes"]).stdout)


def _wait_until_settled(tb: Testbed, i: int) -> None:
    """Bounded wait until worker i's eth1 has sent nothing new for 0.3 s."""
    last = _tx_bytes(tb, i)
    for _ in range(50):
        time.sleep(0.3)
        now = _tx_bytes(tb, i)
        if now == last:
            return
        last = now


def _orig_lengths_sum(path: Path) -> int:
    """Sum of the records' original (wire) lengths, read from the pcap record headers."""
    data = path.read_bytes()
    total, off = 0, 24
    while off + 16 <= len(data):
        _sec, _frac, incl, orig = struct.unpack_from("<IIII", data, off)
        total += orig
        off += 16 + incl
    return total


def test_iperf3_four_workers_wire_sized_frames(tmp_path: Path) -> None:
    require_tool("iperf3")
    nbytes = 3_000_000
    with Testbed(n_workers=4) as tb:
        names = tb.namespaces
        server = tb.popen(3, ["iperf3", "-s", "-1", "-B", tb.ip(3)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        # Wait (bounded) for the server's listening socket.
        for _ in range(100):
            if ":5201" in tb.exec(3, ["ss", "-ltn"]).stdout:
                break
            time.sleep(0.05)
        else:
            pytest.fail("iperf3 server did not listen")
        tx_before = _tx_bytes(tb, 2)
        with tb.capture(2, tmp_path / "w2.pcap", snaplen=96) as st:
            tb.exec(2, ["iperf3", "-c", tb.ip(3), "-n", str(nbytes), "-B", tb.ip(2)], timeout=60)
            server.wait(timeout=10)
            _wait_until_settled(tb, 2)
            tx_sent = _tx_bytes(tb, 2) - tx_before
    assert not set(names) & set(list_netns())

    pkts = _ip_packets(tmp_path / "w2.pcap")
    assert {(s, d) for s, d, _, _ in pkts} == {("192.168.17.52", "192.168.17.53")}
    # Every frame eth1 sent during the capture is in it: the kernel's counter equals the pcap's
    # original lengths. (iperf3 -n may leave much less than n on the wire: the client counts what
    # it wrote into its socket, the server closes the test on the client's word, and what was still
    # buffered is cut; a busy machine once put 45 % of n on the wire. The capture must still be
    # complete.)
    assert _orig_lengths_sum(tmp_path / "w2.pcap") == tx_sent
    wire = sum(n for _, _, _, n in pkts)
    assert nbytes // 10 < wire < nbytes * 1.1
    # Offloads off: no frame beyond MTU + Ethernet header; full segments are exactly 1514 bytes.
    assert max(n for _, _, _, n in pkts) == 1514
    frames = _frame_lengths(tmp_path / "w2.pcap")
    assert st.captured == len(frames) == len(pkts) + 1  # + .52's ARP request
    assert max(frames) == 96  # snaplen honoured


def test_loss_rule_drops_frames() -> None:
    with Testbed(n_workers=2, loss_pct=20) as tb:
        ping = tb.exec(0, ["ping", "-c", "60", "-i", "0.01", "-W", "1", tb.ip(1)], check=False, timeout=60)
        dropped = tb.loss_counter()
    received = int(ping.stdout.split(" received")[0].rsplit(" ", 1)[1])
    # P(echo and reply both survive) = 0.8² = 0.64: 60 pings never all arrive nor all vanish.
    assert 10 < received < 60
    assert dropped >= 60 - received


def test_teardown_on_exception_kills_processes(tmp_path: Path) -> None:
    tb = Testbed(n_workers=2)
    started = {}

    def fail_inside() -> None:
        with tb:
            started["names"] = tb.namespaces
            started["sleeper"] = tb.popen(1, ["sleep", "300"])
            started["cap"] = tb.start_capture(0, tmp_path / "x.pcap")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_inside()
    names, sleeper, cap = started["names"], started["sleeper"], started["cap"]
    assert sleeper.poll() is not None
    assert cap.proc.poll() is not None
    assert not set(names) & set(list_netns())


def test_parallel_testbeds_get_distinct_names() -> None:
    with Testbed(n_workers=1) as a, Testbed(n_workers=1) as b:
        assert a.prefix != b.prefix
        assert a.prefix.startswith(f"tb{os.getpid()}x")
        # Same address in both, isolated from each other.
        assert a.ip(0) == b.ip(0) == "192.168.17.50"
        names = a.namespaces + b.namespaces
    assert not set(names) & set(list_netns())


def test_bad_capture_filter_raises_and_cleans_up(tmp_path: Path) -> None:
    with Testbed(n_workers=1) as tb:
        names = tb.namespaces
        with pytest.raises(TestbedError, match="tcpdump on worker 0 did not start"):
            tb.start_capture(0, tmp_path / "bad.pcap", extra_filter="not a valid filter ((")
    assert not set(names) & set(list_netns())


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_tears_down(sig: signal.Signals) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from tracecore.runners.testbed import Testbed
        with Testbed(n_workers=2) as tb:
            tb.popen(0, ["sleep", "300"])
            print(" ".join(tb.namespaces), flush=True)
            for _ in range(600):
                time.sleep(0.1)
        """
    )
    # the child starts with every signal at its default, as a shell's job does: under `nohup make
    # test` SIGHUP is ignored and a child inherits that, so a hang-up would never reach the testbed
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)  # fmt: skip
    try:
        assert proc.stdout is not None
        names = proc.stdout.readline().split()
        assert len(names) == 3
        assert set(names) <= set(list_netns())
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert not set(names) & set(list_netns())


def test_a_signal_while_a_namespace_is_made_still_deletes_it(tmp_path: Path) -> None:
    """SIGINT lands while `ip netns add` runs (here: an `ip` that lingers after making it, as a loaded
    machine may): the namespace it made is deleted too (it leaked when recorded only afterwards)."""
    shim = tmp_path / "bin" / "ip"
    shim.parent.mkdir()
    real = require_tool("ip")
    shim.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = netns ] && [ "$2" = add ]; then "{real}" "$@" || exit; exec sleep 30; fi\n'
        f'exec "{real}" "$@"\n'
    )
    shim.chmod(0o755)
    script = "from tracecore.runners.testbed import Testbed\nwith Testbed(n_workers=1):\n    pass\n"
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    argv = [sys.executable, "-c", script]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not netns_made_by(proc.pid):
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        assert "KeyboardInterrupt" in err
        assert not netns_made_by(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for name in netns_made_by(proc.pid):
            subprocess.run([real, "netns", "del", name], check=False, capture_output=True)


def test_cleanup_stale_removes_dead_owner_namespaces() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    name = f"tb{dead.pid}x0-br"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in list_netns()
        assert name in cleanup_stale()
        assert name not in list_netns()
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def test_leftover_check_sees_only_this_process_testbeds() -> None:
    foreign = [f"foreign{os.getpid()}-br", f"tb{os.getppid()}x0-br"]  # another tool, another live process
    for name in foreign:
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert set(foreign) <= set(list_netns())
        with Testbed(n_workers=1) as tb:
            assert netns_made_by(os.getpid()) >= set(tb.namespaces)
        assert not netns_made_by(os.getpid())
        assert set(foreign) <= set(list_netns())
    finally:
        for name in foreign:
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)
