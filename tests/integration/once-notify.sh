#!/bin/sh
# tests/integration/once-notify.sh: onced's sd_notify READY=1 (systemd's Type=notify) only once the node is ready.
# The scenario is once_notify.py (harness: oncecluster.py): it listens on
# unix datagram sockets given to onced as NOTIFY_SOCKET, as systemd would.
# This wrapper is what automake's test-driver runs (exit 0 pass, 1 fail,
# 77 skip, 99 hard error).
# Environment: top_builddir (onced, oncectl), top_srcdir, ONCE_TEST_KEEP=1
# (keep the work directory), ONCED / ONCECTL (other binaries).
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec python3 "$srcdir/tests/integration/once_notify.py"
