#!/bin/sh
# tests/integration/once-ingress-load.sh: 1000 concurrent copies of one webhook over three once-ingress replicas: one delivery, the answer p99 printed.
# The scenario is once_ingress_load.py (harness: oncecluster.py, ingresslib.py);
# this wrapper is what automake's test-driver runs (exit 0 pass, 1 fail, 77
# skip, 99 hard error). Environment: top_builddir (onced, oncectl,
# once-ingress), top_srcdir, ONCE_TEST_KEEP=1 (keep the work directory).
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec python3 "$srcdir/tests/integration/once_ingress_load.py"
