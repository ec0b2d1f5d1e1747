#!/bin/sh
# deploy/image/entrypoint.sh: start onced as member ORDINAL of a StatefulSet
# (deploy/README.md, "The entrypoint").
#
# Addresses. libraft 0.15 keeps IPv4 literals in its configuration, and a
# pod's IP changes when it is rescheduled, so the Raft and client addresses
# this node announces are those of its own per-pod Service
# ($ONCE_MEMBER_SERVICE with the ordinal: a ClusterIP that lives as long as
# the Service), resolved here once per start. onced listens on the pod IP
# ($POD_IP, from the downward API) with --raft-listen/--client-listen;
# kube-proxy carries the stable address to whatever IP the pod has today.
#
# Bootstrap, join, restart:
#   * DATA_DIR/node-id exists: a restart; onced gets --join too (ignored
#     once the node is in a configuration; it finishes a join cut short).
#   * empty volume, ONCE_BOOTSTRAP=1 and ordinal 0: bootstrap, unless a
#     member already answers with a cluster id (then this is a lost volume
#     of an existing cluster: it joins).
#   * any other empty volume joins as a new member (a new id). If the
#     cluster still lists a member at this pod's stable address, that is the
#     id of the lost volume: the entrypoint waits, saying which id to remove
#     (`oncectl members remove ID`), and joins once it is gone. It never
#     removes a member itself.
#
# Environment (defaults in brackets):
#   HOSTNAME             NAME-ORDINAL, as a StatefulSet names its pods
#   ONCE_ORDINAL         [from HOSTNAME] ONCE_SET [from HOSTNAME]
#   ONCE_REPLICAS        [3] members 0..N-1 whose client addresses --join gets
#   ONCE_MEMBER_SERVICE  [$ONCE_SET-member-%d] per-pod Service name (printf)
#   POD_IP               [0.0.0.0] where to listen (raft, client, http)
#   ONCE_RAFT_PORT [7201] ONCE_CLIENT_PORT [7101] ONCE_HTTP_PORT [9101]
#   ONCE_DATA_DIR        [/var/lib/once] the pod's volume
#   ONCE_RUN_DIR         [/run/once] where the addresses are written for
#                        prestop.sh
#   ONCE_BOOTSTRAP       [0] 1 on the first rollout only
#   ONCE_RESTORE         a backup file: with the bootstrap only, --restore
#   ONCE_TLS_DIR         [/etc/once/tls] tls.crt, tls.key, ca.crt: TLS on
#                        both ports (and for oncectl here)
#   ONCE_ACCESS          [/etc/once/access/access.json] the access file
#                        (onced --access): required with TLS; the nodes'
#                        own certificates must have the role member
#   ONCE_INSECURE        [0] 1: plaintext off loopback (onced --insecure)
#   ONCE_STORAGE         [onced's choice] --storage uring|pwrite|uv
#   ONCE_ONCED_ARGS      more onced flags (split on spaces)
#   ONCE_RESOLVE_TIMEOUT [120] seconds to wait for this pod's Service name
#   ONCED, ONCECTL       [/usr/bin/onced, /usr/bin/oncectl]
# Exit: onced's own status (exec), or 1 for a configuration it cannot use.
set -eu

log() { printf '%s entrypoint: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
die() { log "$*"; exit 1; }

ONCED=${ONCED:-/usr/bin/onced}
ONCECTL=${ONCECTL:-/usr/bin/oncectl}
# shellcheck disable=SC3028 # Kubernetes sets HOSTNAME in the environment
host=${HOSTNAME:-$(hostname)}
ONCE_ORDINAL=${ONCE_ORDINAL:-${host##*-}}
ONCE_SET=${ONCE_SET:-${host%-*}}
ONCE_REPLICAS=${ONCE_REPLICAS:-3}
ONCE_MEMBER_SERVICE=${ONCE_MEMBER_SERVICE:-$ONCE_SET-member-%d}
POD_IP=${POD_IP:-0.0.0.0}
ONCE_RAFT_PORT=${ONCE_RAFT_PORT:-7201}
ONCE_CLIENT_PORT=${ONCE_CLIENT_PORT:-7101}
ONCE_HTTP_PORT=${ONCE_HTTP_PORT:-9101}
ONCE_DATA_DIR=${ONCE_DATA_DIR:-/var/lib/once}
ONCE_RUN_DIR=${ONCE_RUN_DIR:-/run/once}
ONCE_BOOTSTRAP=${ONCE_BOOTSTRAP:-0}
ONCE_TLS_DIR=${ONCE_TLS_DIR:-/etc/once/tls}
ONCE_ACCESS=${ONCE_ACCESS:-/etc/once/access/access.json}
ONCE_INSECURE=${ONCE_INSECURE:-0}
ONCE_RESOLVE_TIMEOUT=${ONCE_RESOLVE_TIMEOUT:-120}

case $ONCE_ORDINAL in
'' | *[!0-9]*) die "ordinal \"$ONCE_ORDINAL\" is not a number (HOSTNAME=$host; set ONCE_ORDINAL)" ;;
esac
case $ONCE_REPLICAS in
'' | *[!0-9]* | 0) die "ONCE_REPLICAS=\"$ONCE_REPLICAS\" is not a positive number" ;;
esac
[ "$ONCE_REPLICAS" -le 16 ] || die "ONCE_REPLICAS=$ONCE_REPLICAS: onced --join takes at most 16 addresses"
for p in "$ONCE_RAFT_PORT" "$ONCE_CLIENT_PORT" "$ONCE_HTTP_PORT"; do
    case $p in '' | *[!0-9]*) die "port \"$p\" is not a number" ;; esac
done

# The IPv4 address of a name (getent: /etc/hosts, then DNS), or nothing.
# ahostsv4 (getaddrinfo) first; "hosts" (gethostbyname) when that finds
# nothing, because getaddrinfo's AI_ADDRCONFIG finds nothing at all where
# loopback is the only interface (tests/integration/deploy-statefulset.sh).
resolve() {
    a=$(getent ahostsv4 "$1" 2>/dev/null | awk '$2 == "STREAM" { print $1; exit }')
    [ -n "$a" ] || a=$(getent hosts "$1" 2>/dev/null |
        awk '$1 ~ /^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$/ { print $1; exit }')
    printf '%s' "$a"
}

# shellcheck disable=SC2059 # the format is the operator's name template
member_name() { printf "$ONCE_MEMBER_SERVICE" "$1"; }

self_name=$(member_name "$ONCE_ORDINAL")
self_ip=""
waited=0
while :; do
    self_ip=$(resolve "$self_name")
    [ -n "$self_ip" ] && break
    [ "$waited" -ge "$ONCE_RESOLVE_TIMEOUT" ] &&
        die "cannot resolve $self_name (this pod's Service) after ${waited}s"
    sleep 2
    waited=$((waited + 2))
done

join=""
i=0
while [ "$i" -lt "$ONCE_REPLICAS" ]; do
    if [ "$i" != "$ONCE_ORDINAL" ]; then
        ip=$(resolve "$(member_name "$i")")
        if [ -n "$ip" ]; then
            join="$join${join:+,}$ip:$ONCE_CLIENT_PORT"
        else
            log "member $i ($(member_name "$i")) does not resolve: left out of --join"
        fi
    fi
    i=$((i + 1))
done

raft_addr=$self_ip:$ONCE_RAFT_PORT
client_addr=$self_ip:$ONCE_CLIENT_PORT

set -- --data-dir "$ONCE_DATA_DIR" \
    --raft-addr "$raft_addr" --client-addr "$client_addr" \
    --raft-listen "$POD_IP:$ONCE_RAFT_PORT" \
    --client-listen "$POD_IP:$ONCE_CLIENT_PORT" \
    --http-addr "$POD_IP:$ONCE_HTTP_PORT"
ctl_tls=""
if [ -f "$ONCE_TLS_DIR/tls.crt" ]; then
    for f in tls.crt tls.key ca.crt; do
        [ -r "$ONCE_TLS_DIR/$f" ] || die "$ONCE_TLS_DIR/$f: missing or unreadable"
    done
    [ -r "$ONCE_ACCESS" ] ||
        die "$ONCE_ACCESS: missing or unreadable (TLS needs the access file)"
    set -- "$@" --tls-cert "$ONCE_TLS_DIR/tls.crt" \
        --tls-key "$ONCE_TLS_DIR/tls.key" --tls-ca "$ONCE_TLS_DIR/ca.crt" \
        --access "$ONCE_ACCESS"
    ctl_tls="--tls-ca $ONCE_TLS_DIR/ca.crt --tls-cert $ONCE_TLS_DIR/tls.crt --tls-key $ONCE_TLS_DIR/tls.key"
elif [ "$ONCE_INSECURE" = 1 ]; then
    set -- "$@" --insecure
fi
if [ -n "${ONCE_STORAGE:-}" ]; then
    set -- "$@" --storage "$ONCE_STORAGE"
fi

# oncectl against the other members (TLS as onced); stdout only.
ctl() {
    # shellcheck disable=SC2086
    "$ONCECTL" --cluster "$join" --json --timeout 2s $ctl_tls "$@" 2>/dev/null
}

# A cluster id some other member answers with, or nothing.
existing_cluster() {
    [ -n "$join" ] || return 0
    for a in $(printf '%s' "$join" | tr ',' ' '); do
        # shellcheck disable=SC2086
        "$ONCECTL" --cluster "$a" --json --timeout 2s $ctl_tls status 2>/dev/null |
            sed -n 's/.*"cluster_id":"\([0-9a-f][0-9a-f]*\)".*/\1/p'
    done | head -n 1
}

# The id of a member holding this pod's Raft address, or nothing.
stale_member() {
    re=$(printf '%s' "$raft_addr" | sed 's/[.]/[.]/g')
    ctl members list | tr '{' '\n' |
        sed -n "s/^\"id\":\"\([0-9a-f]*\)\",\"raft_addr\":\"$re\".*/\1/p" |
        head -n 1
}

mkdir -p "$ONCE_RUN_DIR"
printf 'ONCE_SELF_CLIENT=%s\nONCE_SELF_RAFT=%s\nONCE_PEERS=%s\nONCE_CTL_TLS="%s"\n' \
    "$client_addr" "$raft_addr" "$join" "$ctl_tls" >"$ONCE_RUN_DIR/addresses"

mode="join"
if [ -f "$ONCE_DATA_DIR/node-id" ]; then
    mode=restart
elif [ "$ONCE_BOOTSTRAP" = 1 ] && [ "$ONCE_ORDINAL" = 0 ]; then
    cid=$(existing_cluster)
    if [ -n "$cid" ]; then
        log "ONCE_BOOTSTRAP=1 but cluster $cid already answers: this empty volume joins it (a new member)"
    else
        mode=bootstrap
    fi
fi

if [ "$mode" = join ]; then
    [ -n "$join" ] || die "no other member to join (ONCE_REPLICAS=$ONCE_REPLICAS)"
    if [ ! -f "$ONCE_DATA_DIR/node-id" ]; then
        n=0
        while :; do
            old=$(stale_member)
            [ -z "$old" ] && break
            [ $((n % 15)) = 0 ] &&
                log "the cluster still lists member $old at $raft_addr, this pod's address, but this volume is empty: that member's data is gone. Remove it: oncectl members remove $old"
            n=$((n + 1))
            sleep 2
        done
    fi
fi

case $mode in
bootstrap)
    set -- "$@" --bootstrap
    if [ -n "${ONCE_RESTORE:-}" ]; then
        set -- "$@" --restore "$ONCE_RESTORE"
    fi
    ;;
*)
    if [ -n "$join" ]; then
        set -- "$@" --join "$join"
    fi
    ;;
esac
log "$mode: member $ONCE_ORDINAL of $ONCE_SET, raft $raft_addr, client $client_addr, listening on $POD_IP"
# shellcheck disable=SC2086
exec "$ONCED" "$@" ${ONCE_ONCED_ARGS:-}
