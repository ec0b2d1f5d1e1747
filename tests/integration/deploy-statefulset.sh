#!/bin/sh
# tests/integration/deploy-statefulset.sh: deploy/image/entrypoint.sh run as the StatefulSet would, without Kubernetes.
# The scenario is deploy_statefulset.py. It runs in a network and mount
# namespace of its own (unshare -n -m): /etc/hosts is bind-mounted there to
# give the per-pod Service names their "ClusterIPs" (127.0.1.N), and
# iptables DNAT plays kube-proxy (ClusterIP -> the pod's current IP,
# 127.0.G.N, which changes at every restart). Needs root, unshare, ip and
# iptables, else it is skipped (exit 77). Exit 0 pass, 1 fail, 99 hard.
# Environment: top_builddir (onced, oncectl), top_srcdir, ONCE_TEST_KEEP=1.
set -u
srcdir=${top_srcdir:-$(dirname "$0")/../..}
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 ||
    ! command -v iptables >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
    echo "needs root, unshare, ip and iptables (its own namespaces): skip"
    exit 77
fi
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec unshare -n -m -- sh -c 'ip link set lo up && exec python3 "$0"' \
    "$srcdir/tests/integration/deploy_statefulset.py"
