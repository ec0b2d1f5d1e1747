#!/bin/sh
# deploy/image/smoke-offline.sh [TAG]: run a built image's own files
# without a container runtime: buildah mounts the image (a throwaway
# working container), and its entrypoint runs in a chroot of it as the
# image's user (10001), in a private network namespace (unshare -n), as a
# one-member cluster (ONCE_REPLICAS=1, ONCE_BOOTSTRAP=1, POD_IP and the
# member address 127.0.1.1 from the image's /etc/hosts). Checks: /readyz
# 200, a claim ACCEPTED and the same key again not ACCEPTED (oncectl from
# the image), SIGTERM exits 0. Needs root, buildah, unshare, ip, curl.
# Its own command, like build-offline.sh; not in scripts/test.
set -eu
tag=${1:-once:$(sed -n 's/^AC_INIT(\[once\], *\[\([^]]*\)\].*/\1/p' \
    "$(dirname "$0")/../../configure.ac")}
driver=${BUILDAH_STORAGE_DRIVER:-vfs}
ctr=$(buildah --storage-driver "$driver" from "$tag")
cleanup() {
    buildah --storage-driver "$driver" rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
mnt=$(buildah --storage-driver "$driver" mount "$ctr")
printf '127.0.0.1 localhost\n127.0.1.1 once-member-0\n' >"$mnt/etc/hosts"
export mnt
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -n -- sh -eu -c '
ip link set lo up
chroot --userspec=10001:10001 "$mnt" /usr/bin/env -i PATH=/usr/bin:/bin \
    HOSTNAME=once-0 POD_IP=127.0.1.1 ONCE_REPLICAS=1 ONCE_BOOTSTRAP=1 \
    /usr/lib/once/entrypoint.sh >"$mnt/tmp/onced.log" 2>&1 &
pid=$!
ok=0
for i in $(seq 1 100); do
    if curl -fsS http://127.0.1.1:9101/readyz >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.2
done
fail() { echo "smoke: FAIL: $*" >&2; tail -20 "$mnt/tmp/onced.log" >&2; kill "$pid" 2>/dev/null; exit 1; }
[ "$ok" = 1 ] || fail "/readyz never 200"
echo "smoke: /readyz 200"
ctl() { chroot --userspec=10001:10001 "$mnt" /usr/bin/oncectl --cluster 127.0.1.1:7101 "$@"; }
ctl claim smoke k1 >/dev/null || fail "first claim not ACCEPTED"
echo "smoke: claim ACCEPTED"
if ctl claim smoke k1 >/dev/null; then fail "second claim ACCEPTED"; fi
echo "smoke: the same key again: not ACCEPTED"
grep -q "bootstrap: member 0" "$mnt/tmp/onced.log" || fail "no bootstrap line"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
[ "$rc" = 0 ] || fail "exit $rc after SIGTERM"
echo "smoke: SIGTERM, exit 0"
'
echo "smoke: PASS ($tag)"
