#!/bin/sh
# deploy/image/install-tree.sh DESTDIR [BUILDDIR]: build once from this
# source tree (release flags, --prefix=/usr) and install what the image
# holds into DESTDIR: onced, oncectl, once-ingress, once-bench, libonce,
# /usr/lib/once/entrypoint.sh and prestop.sh. Used by the Containerfile and
# by build-offline.sh, so both images hold the same files. Needs the
# build dependencies of scripts/deps.sh (Debian 12).
set -eu
dest=${1:?usage: install-tree.sh DESTDIR [BUILDDIR]}
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${2:-$src/build/image}
case $dest in /*) ;; *) dest=$(pwd)/$dest ;; esac
[ -x "$src/configure" ] || (cd "$src" && ./autogen.sh)
mkdir -p "$build"
cd "$build"
[ -f Makefile ] || "$src/configure" --prefix=/usr --sysconfdir=/etc
make -j"$(nproc)"
make install DESTDIR="$dest"
rm -rf "$dest/usr/include" "$dest/usr/lib/pkgconfig"
find "$dest/usr/lib" -maxdepth 1 \( -name '*.la' -o -name '*.a' \) -delete
install -D -m 0755 "$src/deploy/image/entrypoint.sh" \
    "$dest/usr/lib/once/entrypoint.sh"
install -D -m 0755 "$src/deploy/image/prestop.sh" \
    "$dest/usr/lib/once/prestop.sh"
