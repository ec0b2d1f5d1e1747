#!/bin/sh
# deploy/image/build-offline.sh [TAG] [ARCHIVE]: build the once image with no
# container registry: a Debian 12 root from debootstrap (Debian's archive, or
# the mirror in $ONCE_MIRROR), the same files as the Containerfile
# (install-tree.sh, built on this Debian 12 host), committed with buildah
# from scratch. Writes the image to buildah's local storage as TAG
# (default once:VERSION) and, with ARCHIVE, also to an OCI archive that
# `podman load`, `ctr import` or `skopeo copy` take (deploy/README.md).
#
# Needs root, debootstrap and buildah (Debian's packages; not in
# scripts/deps.sh: the tests do not use them). It is its own command, not a
# stage of scripts/test. Environment: ONCE_MIRROR (default
# http://deb.debian.org/debian), ONCE_IMAGE_WORK (default a mktemp
# directory, removed at the end), BUILDAH_STORAGE_DRIVER (default vfs,
# which works without overlay support).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
version=$(sed -n 's/^AC_INIT(\[once\], *\[\([^]]*\)\].*/\1/p' "$src/configure.ac")
tag=${1:-once:${version:-dev}}
archive=${2:-}
mirror=${ONCE_MIRROR:-http://deb.debian.org/debian}
driver=${BUILDAH_STORAGE_DRIVER:-vfs}
# What the Containerfile's runtime stage installs, plus what debootstrap's
# minbase lacks for the entrypoint (getent, awk, sed: in minbase already).
pkgs="libuv1,libraft2,liburing2,libprotobuf-c1,libssl3,libjansson4,libmicrohttpd12,libsystemd0,libcurl4"

for c in debootstrap buildah; do
    command -v "$c" >/dev/null 2>&1 ||
        { echo "build-offline: $c not found (apt-get install $c)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "build-offline: needs root (debootstrap, chroot)" >&2; exit 1; }

work=${ONCE_IMAGE_WORK:-$(mktemp -d /tmp/once-image.XXXXXX)}
ctr=""
cleanup() {
    [ -n "$ctr" ] && buildah --storage-driver "$driver" rm "$ctr" >/dev/null 2>&1
    [ -z "${ONCE_IMAGE_WORK:-}" ] && rm -rf "$work"
    return 0
}
trap cleanup EXIT INT TERM
root=$work/root

echo "build-offline: debootstrap bookworm into $root ($mirror)"
debootstrap --variant=minbase --include="$pkgs" bookworm "$root" "$mirror"

echo "build-offline: building once (install-tree.sh)"
"$here/install-tree.sh" "$root" "$work/build"

echo "build-offline: user once (10001), directories, cleanup"
chroot "$root" groupadd --system --gid 10001 once
chroot "$root" useradd --system --uid 10001 --gid once \
    --home-dir /var/lib/once --no-create-home --shell /usr/sbin/nologin once
chroot "$root" install -d -o once -g once -m 0700 /var/lib/once /run/once
chroot "$root" ldconfig
# Nothing of the build or of apt's state that the Containerfile image lacks.
rm -rf "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin \
    "$root/var/cache/apt/archives/"*.deb "$root/var/log/"*.log \
    "$root/var/log/apt" "$root/tmp/"* 2>/dev/null || true
chroot "$root" /usr/bin/onced --help >/dev/null
chroot "$root" /usr/bin/oncectl --help >/dev/null

echo "build-offline: buildah commit $tag"
ctr=$(buildah --storage-driver "$driver" from scratch)
mnt=$(buildah --storage-driver "$driver" mount "$ctr")
cp -a "$root/." "$mnt/"
buildah --storage-driver "$driver" umount "$ctr" >/dev/null
buildah --storage-driver "$driver" config \
    --user 10001:10001 --workingdir /var/lib/once \
    --volume /var/lib/once --port 7101 --port 7201 --port 9101 \
    --entrypoint '["/usr/lib/once/entrypoint.sh"]' --cmd '' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label org.opencontainers.image.title=once \
    --label org.opencontainers.image.version="${version:-dev}" \
    --label org.opencontainers.image.base.name=debian:bookworm-debootstrap \
    "$ctr"
buildah --storage-driver "$driver" commit --rm "$ctr" "$tag"
ctr=""
if [ -n "$archive" ]; then
    buildah --storage-driver "$driver" push "$tag" "oci-archive:$archive:$tag"
    echo "build-offline: wrote $archive"
fi
echo "build-offline: done: $tag"
buildah --storage-driver "$driver" images "$tag"
