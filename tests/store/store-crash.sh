#!/bin/sh
# tests/store/store-crash.sh: kill -9 a process appending to the log store
# at random moments, reload, compare with what it acknowledged
# (tests/store/store_crash.py, tests/store/crash_child.c).
#
# automake test-driver: exit 0 pass, 1 fail, 77 skip, 99 hard error.
# Environment: top_builddir, top_srcdir; STORE_CRASH_ITERATIONS (default
# 30; the long profile runs hundreds), STORE_CRASH_SEED (default: time).
set -u
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-$(dirname "$0")/../..}
child="$builddir/tests/store/store-crash-child"
[ -x "$child" ] || { echo "store-crash-child not built: $child"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
# The killed children cannot report leaks; the verify runs end cleanly.
ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
export ASAN_OPTIONS
exec python3 "$srcdir/tests/store/store_crash.py" "$child" \
    "${STORE_CRASH_ITERATIONS:-30}" ${STORE_CRASH_SEED:+"$STORE_CRASH_SEED"}
