#!/bin/sh
# Installs the Debian packages once needs to build and test, when missing.
# Sourced by scripts/test and scripts/run; also runnable alone.
# Every dependency comes from Debian 12's archive (docs/design.md §8).
# Sourcing this file defines once_install_deps and changes no shell option.

ONCE_DEPS="build-essential git ca-certificates autoconf automake libtool pkg-config
autoconf-archive clang-14 clang libclang-rt-14-dev clang-format
libuv1-dev libraft-dev liburing-dev libprotobuf-c-dev protobuf-c-compiler
libssl-dev openssl libjansson-dev check python3 iptables libfaketime clojure
libmicrohttpd-dev libcurl4-openssl-dev prometheus libsystemd-dev python3-yaml
golang-go nodejs python3-venv python3-pip libgnutls28-dev
clang-tools-14 cppcheck"
# perf for bench/profile (scripts/test runs bench/profile/check).
ONCE_DEPS="$ONCE_DEPS linux-perf"

once_install_deps()
{
    missing=""
    for p in $ONCE_DEPS; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
            grep -q "install ok installed"; then
            missing="$missing $p"
        fi
    done
    if [ -z "$missing" ]; then
        return 0
    fi
    echo "deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || return 1
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -qq --no-install-recommends $missing || return 1
}

if [ "${0##*/}" = "deps.sh" ]; then
    once_install_deps || exit 1
fi
