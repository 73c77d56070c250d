"""The loss method's choice and the clock-offset estimate, without a testbed (the netns and ssh tests
run both for real: tests/test_runners_run.py, tests/test_runners_ssh.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracecore.runners.clocks import CLOCK_LOOP, measure_offsets, parse_clock_ns
from tracecore.runners.launchers import Host
from tracecore.runners.loss import LossMethodError, choose_method, netem_dropped

EXP = Path("exp.toml")
HOSTS = [Host(0, "w0", "10.0.0.1", "eth1"), Host(1, "w1", "10.0.0.2", "eth1")]


def _no_probe() -> str | None:
    raise AssertionError("this method needs no probe")


def test_nftables_and_none_are_taken_as_written_without_a_probe() -> None:
    assert choose_method("nftables", _no_probe, EXP) == "nftables"
    assert choose_method("none", _no_probe, EXP) == "none"


def test_auto_takes_netem_where_it_works_and_nftables_where_not() -> None:
    assert choose_method("auto", lambda: None, EXP) == "netem"
    assert choose_method("auto", lambda: "w1 has no netem", EXP) == "nftables"
    assert choose_method("netem", lambda: None, EXP) == "netem"


def test_explicit_netem_without_netem_is_one_line_exit_6() -> None:
    with pytest.raises(LossMethodError) as err:
        choose_method("netem", lambda: "w1 has no netem (tc: Error: Specified qdisc kind is unknown.)", EXP)
    assert err.value.exit_code == 6
    assert str(err.value) == (
        "exp.toml: loss.method = netem, but w1 has no netem (tc: Error: Specified qdisc kind is unknown.);"
        ' use method = "auto" (falls back to nftables) or "nftables"'
    )


def test_netem_drop_counter_is_read_from_tc_statistics() -> None:
    shown = (
        "qdisc netem 8001: root refcnt 2 limit 1000 loss 1%\n"
        " Sent 151230 bytes 1012 pkt (dropped 11, overlimits 0 requeues 0)\n"
        " backlog 0b 0p requeues 0\n"
    )
    assert netem_dropped(shown) == 11
    other = "qdisc noqueue 0: root refcnt 2\n Sent 0 bytes 0 pkt (dropped 3, overlimits 0 requeues 0)\n"
    assert netem_dropped(other) == 0  # a drop count of some other qdisc is not the loss's


def _loop(answer: str) -> list[str]:
    """A real shell loop standing in for a host: `answer` (shell text) printed per line it reads."""
    return ["sh", "-c", f"while read -r _; do {answer} || exit; done"]


def test_one_clock_gives_an_offset_inside_half_the_round_trip() -> None:
    found = measure_offsets(lambda _h: ["sh", "-c", CLOCK_LOOP], HOSTS)
    assert sorted(found) == [0, 1]
    for entry in found.values():
        assert 0 < entry["clock_rtt_ns"] < 1_000_000_000
        assert abs(entry["clock_offset_ns"]) <= entry["clock_rtt_ns"] // 2 + 1


def test_a_host_three_seconds_ahead_is_measured_so() -> None:
    ahead = _loop("echo $(( $(date +%s%N) + 3000000000 ))")
    found = measure_offsets(lambda h: ahead if h.index else ["sh", "-c", CLOCK_LOOP], HOSTS)
    for host in HOSTS:
        entry = found[host.index]
        assert abs(entry["clock_offset_ns"] - 3_000_000_000 * host.index) <= entry["clock_rtt_ns"] // 2 + 1


def test_a_clock_that_cannot_be_read_is_named_and_a_backend_without_clocks_records_none() -> None:
    assert parse_clock_ns("1795440453396315000\n", "w0") == 1795440453396315000
    busybox = _loop("echo 1795440453N")
    found = measure_offsets(lambda h: busybox if h.index else ["sh", "-c", CLOCK_LOOP], HOSTS)
    assert set(found[0]) == {"clock_offset_ns", "clock_rtt_ns"}
    why = "w1: `date +%s%N` gave '1795440453N', not nanoseconds (GNU date needed)"
    assert found[1] == {"clock_error": why}
    gone = ["sh", "-c", "echo no such host >&2; exit 255"]
    assert measure_offsets(lambda _h: gone, HOSTS[:1]) == {
        0: {"clock_error": "w0: the clock loop ended (no such host)"}
    }
    assert measure_offsets(lambda _h: None, HOSTS) == {}
