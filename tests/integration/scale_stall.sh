#!/bin/sh
# tests/integration/scale_stall.sh: the longest window without a successful claim while a filled cluster (default flags) snapshots.
# The scenario is scale_stall.py (harness: oncecluster.py); this wrapper is what
# automake's test-driver runs (exit 0 pass, 1 fail, 77 skip, 99 hard error).
# Environment: top_builddir (onced, oncectl, once-bench), top_srcdir,
# ONCE_TEST_KEEP=1 (keep the work directory), SCALE_STALL_RECORDS,
# SCALE_STALL_SECONDS, SCALE_STALL_MAX_MS (see scale_stall.py).
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
# make check's size (under ASan a fill of ~30 s); make check-scale: 2 M.
SCALE_STALL_RECORDS=${SCALE_STALL_RECORDS:-1000000}
export PYTHONDONTWRITEBYTECODE SCALE_STALL_RECORDS
exec python3 "$srcdir/tests/integration/scale_stall.py"
