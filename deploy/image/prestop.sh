#!/bin/sh
# deploy/image/prestop.sh: the StatefulSet's preStop hook. It only moves
# leadership away from this pod, so its SIGTERM does not cost the cluster an
# election timeout; it never removes the member (a restart keeps it).
# Reads the addresses entrypoint.sh wrote ($ONCE_RUN_DIR/addresses). Always
# exits 0: a failed transfer only means the stop costs an election.
ONCECTL=${ONCECTL:-/usr/bin/oncectl}
ONCE_RUN_DIR=${ONCE_RUN_DIR:-/run/once}
ONCE_PRESTOP_WAIT=${ONCE_PRESTOP_WAIT:-10}
f=$ONCE_RUN_DIR/addresses
[ -r "$f" ] || exit 0
# shellcheck disable=SC1090
. "$f"
ctl() {
    # shellcheck disable=SC2086
    "$ONCECTL" --json --timeout 2s $ONCE_CTL_TLS "$@" 2>/dev/null
}
leader() { ctl --cluster "$ONCE_SELF_CLIENT" status | grep -q '"role":"LEADER"'; }
leader || exit 0
echo "prestop: this node leads: transferring leadership" >&2
ctl --cluster "$ONCE_SELF_CLIENT${ONCE_PEERS:+,$ONCE_PEERS}" transfer >/dev/null
i=0
while leader && [ "$i" -lt $((ONCE_PRESTOP_WAIT * 5)) ]; do
    sleep 0.2
    i=$((i + 1))
done
exit 0
