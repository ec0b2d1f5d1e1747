#!/bin/sh
# tests/integration/run-py.sh: runs one Python scenario the way automake's
# test-driver wants it (exit 0 pass, 1 fail, 77 skip, 99 hard error). It is
# Makefile.am's PY_LOG_COMPILER, so TESTS lists the scenarios themselves
# (tests/integration/once_seed.py, ...) and every scenario gets the same
# environment, which 23 near-identical once-*.sh wrappers used to set one
# by one. By hand, from a build directory:
#   top_builddir=. ../../tests/integration/run-py.sh ../../tests/integration/once_seed.py
# (or make check TESTS=tests/integration/once_seed.py, which sets the rest).
#
# Usage: run-py.sh SCRIPT [ARGS...]
# Environment: top_srcdir (default: the source tree holding this script),
# top_builddir and what each scenario documents (ONCE_TEST_KEEP=1, ONCED,
# ONCECTL, ...). A scenario that needs more than python3 (PyYAML, openssl,
# promtool, libfaketime) checks for it itself and exits 77.
set -u
[ $# -ge 1 ] || { echo "usage: run-py.sh SCRIPT [ARGS...]" >&2; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
# No __pycache__ beside the sources (a read-only or shared source tree).
PYTHONDONTWRITEBYTECODE=1
export top_srcdir PYTHONDONTWRITEBYTECODE
exec python3 "$@"
