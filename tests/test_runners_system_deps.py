"""`make system-deps` (scripts/install-system-deps.sh) installs every tool the runners and their tests
call that a minimal Debian lacks: a tool is either in a package the script installs or in one of
Debian's `Priority: required` packages (what debootstrap's minbase and the debian:*-slim images hold).

Why: the ssh runner's probe and cleanup call `ps` (procps, Priority important: absent from minimal
images), and a tool nobody installs fails only on the first fresh machine.
"""

from __future__ import annotations

import re
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


def test_every_tool_the_runners_call_is_installed_by_the_script_or_in_every_debian() -> None:
    require_tool("dpkg-query")
    installs = set(re.findall(r"need\+=\(([a-z0-9.+-]+)\)", SCRIPT.read_text(encoding="utf-8")))
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
