#!/bin/sh
# tests/integration/scale-backup.sh: the longest stall of a filled cluster while it is backed up.
# The scenario is scale_backup.py (harness: oncecluster.py); not in TESTS:
# make check-scale-backup. Exit 0 pass, 1 fail, 77 skip, 99 hard error.
# Environment: top_builddir (onced, oncectl, once-bench), top_srcdir,
# SCALE_BACKUP_RECORDS, SCALE_BACKUP_MAX_MS, ONCE_TEST_KEEP=1.
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec python3 "$srcdir/tests/integration/scale_backup.py"
