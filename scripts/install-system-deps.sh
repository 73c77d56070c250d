#!/usr/bin/env bash
# Installs the system tools tracecore uses, only those missing. Debian/Ubuntu (apt-get), as root or through
# sudo. Idempotent and quiet when all is there.
#   (no option)  everything the tests, bench and runners use (`make test`, `make system-deps`)
#   --demo       only what `make demo` needs: a C compiler and Python's headers for the reader's kernels
#   --list       print the set's packages, one a line, whether installed or not, and install nothing
set -euo pipefail

demo=0 list=0
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    --list) list=1 ;;
    *) echo "install-system-deps: unknown option $arg (use --demo, --list)" >&2; exit 2 ;;
  esac
done

need=()
have() { command -v "$1" >/dev/null 2>&1; }
# want PKG CHECK...: PKG is in the set; it is installed when CHECK fails (with --list: always printed)
want() { local pkg=$1; shift; if [ "$list" -eq 1 ] || ! "$@"; then need+=("$pkg"); fi; }
ps_sysctl() { have ps && have sysctl; }
python_h() {
  python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}

# the demo's set: `make kernels` compiles the reader's kernels ahead of time (numba.pycc)
want gcc         have cc        # the C compiler
want python3-dev python_h       # ... and Python.h

if [ "$demo" -eq 0 ]; then
  want tcpdump        have tcpdump
  want tshark         have tshark
  want iperf3         have iperf3
  want nftables       have nft
  want iproute2       have ip
  want ethtool        have ethtool
  want iputils-ping   have ping
  want procps         ps_sysctl                      # the ssh runner's probe and cleanup (ps), the testbed (sysctl); not in minimal images
  want time           test -x /usr/bin/time          # GNU time: peak RSS in bench/peers.py (bash's `time` is a keyword)
  want zstd           have zstd
  want xz-utils       have xz
  want chromium       have chromium                  # the report's tests load it in headless Chromium
  want fonts-liberation test -f /usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf  # the figures' font, for SVGs drawn in Chromium
  want openssh-client have ssh                       # the ssh runner backend's client (ssh, scp, ssh-keyscan)
  want openssh-server test -x /usr/sbin/sshd         # its tests start a real sshd per worker namespace
  want netcat-openbsd have nc                        # ... and reach it with ProxyCommand 'ip netns exec NS nc %h %p'
  want slurm-client   have sbatch                    # the slurm runner backend's client (sbatch, squeue, scontrol, scancel)
  want slurmctld      test -x /usr/sbin/slurmctld    # its tests start a real slurmctld ...
  want slurmd         test -x /usr/sbin/slurmd       # ... and one slurmd per worker namespace
  want munge          test -x /usr/sbin/munged       # ... authenticated by their own munged
  want valgrind       have valgrind                  # instruction counts: bench/ab_commits.py --instructions
fi

if [ "$list" -eq 1 ]; then
  printf '%s\n' "${need[@]}"
  exit 0
fi
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
