#!/usr/bin/env bash
# Installs the system tools tracecore's tests, bench and runners use, only those missing.
# Debian/Ubuntu (apt-get), as root or through sudo. Idempotent and quiet when all is there.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have tcpdump  || need+=(tcpdump)
have tshark   || need+=(tshark)
have iperf3   || need+=(iperf3)
have nft      || need+=(nftables)
have ip       || need+=(iproute2)
have ethtool  || need+=(ethtool)
have ping     || need+=(iputils-ping)
{ have ps && have sysctl; } || need+=(procps)  # the ssh runner's probe and cleanup (ps), the testbed (sysctl); not in minimal images
[ -x /usr/bin/time ] || need+=(time)   # GNU time: peak RSS in bench/peers.py (bash's `time` is a keyword)
have zstd     || need+=(zstd)
have xz       || need+=(xz-utils)
have chromium || need+=(chromium)
[ -f /usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf ] || need+=(fonts-liberation)  # the figures' font, for SVGs drawn in Chromium
have ssh      || need+=(openssh-client)  # the ssh runner backend's client (ssh, scp, ssh-keyscan)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)  # its tests start a real sshd per worker namespace
have nc       || need+=(netcat-openbsd)  # ... and reach it with ProxyCommand 'ip netns exec NS nc %h %p'
have sbatch   || need+=(slurm-client)    # the slurm runner backend's client (sbatch, squeue, scontrol, scancel)
[ -x /usr/sbin/slurmctld ] || need+=(slurmctld)  # its tests start a real slurmctld ...
[ -x /usr/sbin/slurmd ]    || need+=(slurmd)     # ... and one slurmd per worker namespace
[ -x /usr/sbin/munged ]    || need+=(munge)      # ... authenticated by their own munged
have cc       || need+=(gcc)         # numba.pycc compiles the reader's kernels ahead of time
have valgrind || need+=(valgrind)    # instruction counts: bench/ab_commits.py --instructions
python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
              || need+=(python3-dev)  # ... and includes Python.h

[ ${#need[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  have sudo || { echo "install-system-deps: need root or sudo to install: ${need[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-system-deps: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
