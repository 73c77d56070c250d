"""`make system-deps` (scripts/install-system-deps.sh) installs every tool the runners and their tests
call that a minimal Debian lacks: a tool is either in a package the script installs or in one of
Debian's `Priority: required` packages (what debootstrap's minbase and the debian:*-slim images hold).
`make demo` installs only the demo's set (`--demo`): no daemons as root for a first look.

Why: the ssh runner's probe and cleanup call `ps` (procps, Priority important: absent from minimal
images), and a tool nobody installs fails only on the first fresh machine.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO, require_tool
from tracecore.runners import ssh

SCRIPT = REPO / "scripts" / "install-system-deps.sh"
# What the runners run besides the ssh probe's TOOLS: the testbed (ip, sysctl, ethtool, nft, tcpdump),
# the loss methods (tc, unshare), and the ssh tests' own look at a host's processes (ps).
CALLED = (*ssh.TOOLS, "sysctl", "ethtool", "nft", "tc", "unshare", "ssh", "ssh-keygen", "nc")


def _package(tool: str) -> str:
    """The Debian package that owns `tool` on this machine (dpkg -S; /bin and /usr/bin are one folder
    on a merged-/usr system, and dpkg knows a file under the name its package shipped)."""
    found = shutil.which(tool)
    assert found, f"{tool} not on PATH: run `make system-deps`"
    real = Path(found).resolve()
    names = {str(real), found, *(f"{d}/{real.name}" for d in ("/bin", "/sbin", "/usr/bin", "/usr/sbin"))}
    out = subprocess.run(["dpkg", "-S", *sorted(names)], capture_output=True, text=True, check=False).stdout
    owners = {line.split(":")[0] for line in out.splitlines() if ": " in line}
    assert len(owners) == 1, (tool, out)
    return owners.pop()


def _listed(*options: str) -> set[str]:
    """The packages of the script's set (`--list`: printed whether installed or not)."""
    argv = ["bash", str(SCRIPT), *options, "--list"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def _make_dry_run(target: str) -> list[str]:
    """The commands `make -n TARGET` would run, one a line."""
    out = subprocess.run(
        [require_tool("make"), "-n", "--no-print-directory", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def test_the_demo_set_is_the_kernels_build_and_no_daemon() -> None:
    demo, full = _listed("--demo"), _listed()
    assert demo == {"gcc", "python3-dev"}  # numba.pycc's compiler and Python.h: `make kernels`
    assert {"openssh-server", "slurmctld", "slurmd", "munge", "chromium", "tshark"} <= full - demo


def test_make_demo_installs_the_demo_set_and_make_test_the_full_one() -> None:
    demo = [line for line in _make_dry_run("demo") if SCRIPT.name in line]
    assert demo == [f"bash scripts/{SCRIPT.name} --demo"]
    full = [line for line in _make_dry_run("test") if SCRIPT.name in line]
    assert f"bash scripts/{SCRIPT.name}" in full


def test_an_unknown_option_is_refused() -> None:
    out = subprocess.run(["bash", str(SCRIPT), "--dmeo"], capture_output=True, text=True, check=False)
    assert (out.returncode, out.stderr.strip()) == (
        2,
        "install-system-deps: unknown option --dmeo (use --demo, --list)",
    )


def test_every_tool_the_runners_call_is_installed_by_the_script_or_in_every_debian() -> None:
    require_tool("dpkg-query")
    installs = _listed()
    owners = {tool: _package(tool) for tool in CALLED}
    priority = {
        pkg: subprocess.run(
            ["dpkg-query", "-W", "-f", "${Priority}", pkg], capture_output=True, text=True, check=True
        ).stdout
        for pkg in set(owners.values())
    }
    missing = sorted(
        f"{t} ({p}, {priority[p]})"
        for t, p in owners.items()
        if p not in installs and priority[p] != "required"
    )
    assert missing == [], f"{SCRIPT.name} does not install: {', '.join(missing)}"
    assert (owners["ps"], priority["procps"]) == ("procps", "important")  # the case this test is for
