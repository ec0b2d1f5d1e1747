#!/bin/sh
# tests/integration/deploy-check.sh: deploy/prometheus (promtool check and test rules, check config) and deploy/grafana (JSON, metric names) against what onced exposes.
# The checks are deploy_check.py; this wrapper is what automake's
# test-driver runs (exit 0 pass, 1 fail, 77 skip, 99 hard error).
# Environment: top_srcdir.
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
python3 -c 'import yaml' 2>/dev/null || { echo "PyYAML (python3-yaml) not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
top_srcdir=$srcdir
export top_srcdir
exec python3 "$srcdir/tests/integration/deploy_check.py"
