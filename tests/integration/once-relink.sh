#!/bin/sh
# tests/integration/once-relink.sh: a follower cut off by iptables, then healed, catches up within a bound.
# The scenario is once_relink.py (harness: oncecluster.py). It runs in a
# network namespace of its own (unshare -n), so its iptables rules touch no
# other test: that needs root, unshare and iptables, else it is skipped
# (exit 77). This wrapper is what automake's test-driver runs (exit 0 pass,
# 1 fail, 77 skip, 99 hard error).
# Environment: top_builddir (onced, oncectl), top_srcdir, ONCE_TEST_KEEP=1
# (keep the work directory), ONCED / ONCECTL (other binaries).
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 ||
    ! command -v iptables >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "needs root, unshare, ip and iptables (its own network namespace): skip"
    exit 77
fi
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec unshare -n -- sh -c 'ip link set lo up && exec python3 "$0"' \
    "$srcdir/tests/integration/once_relink.py"
