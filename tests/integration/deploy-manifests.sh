#!/bin/sh
# tests/integration/deploy-manifests.sh: deploy/kubernetes, deploy/image and deploy/systemd hold what deploy/README.md promises.
# The checks are deploy_manifests.py (python3 with PyYAML, Debian's
# python3-yaml). No Kubernetes: `kubectl kustomize` (offline) is compared
# when a kubectl is installed; a client-side dry run needs an API server's
# OpenAPI document, so it is not attempted. systemd-analyze verify and
# shellcheck run when installed. Exit 0 pass, 1 fail, 77 skip.
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
python3 -c 'import yaml' 2>/dev/null || { echo "PyYAML (python3-yaml) not found: skip"; exit 77; }
PYTHONDONTWRITEBYTECODE=1 exec python3 "$srcdir/tests/integration/deploy_manifests.py" "$srcdir"
