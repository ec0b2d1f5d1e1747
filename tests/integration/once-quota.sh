#!/bin/sh
# tests/integration/once-quota.sh: per scope pattern quotas and the log schema upgrade.
# The scenario is once_quota.py (harness: oncecluster.py); this wrapper is what
# automake's test-driver runs (exit 0 pass, 1 fail, 77 skip, 99 hard error).
# Environment: top_builddir (onced, oncectl), top_srcdir, ONCE_TEST_KEEP=1
# (keep the work directory), ONCED / ONCECTL (other binaries).
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec python3 "$srcdir/tests/integration/once_quota.py"
