#!/bin/sh
# tests/integration/raft-crash.sh: three raftnode processes on 127.0.0.1
# under claim load, all three killed with SIGKILL at random moments in
# several rounds and restarted from their data directories. At the end the
# nodes must agree (same applied index, same digest: identical commands)
# and every claim acked "OK ACCEPTED" must be FOUND on every node.
#
# automake test-driver: exit 0 pass, 1 fail, 77 skip, 99 hard error.
# Environment: top_builddir (build dir), top_srcdir (source dir),
# RAFT_CRASH_ROUNDS (default 4), RAFT_CRASH_CONNS (default 8),
# RAFT_CRASH_KEEP (set: keep the data and logs directory).
set -u

builddir=${top_builddir:-.}
srcdir=${top_srcdir:-$(dirname "$0")/../..}
node_bin="$builddir/tests/integration/raftnode"
load_py="$srcdir/tests/integration/raft_load.py"
rounds=${RAFT_CRASH_ROUNDS:-4}
conns=${RAFT_CRASH_CONNS:-8}
[ "$rounds" -ge 1 ] 2>/dev/null || { echo "RAFT_CRASH_ROUNDS must be >= 1"; exit 99; }
load_rc=1

[ -x "$node_bin" ] || { echo "raftnode not built: $node_bin"; exit 99; }
[ -f "$load_py" ] || { echo "missing $load_py"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }

t_start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/raft-crash.XXXXXX") || exit 99
pid1= pid2= pid3= load_pid=

cleanup() {
    rc=$?
    for p in $pid1 $pid2 $pid3 $load_pid; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$rc" -ne 0 ] && [ -d "$work" ]; then
        for i in 1 2 3; do
            echo "--- last lines of node $i's log:"
            tail -n 15 "$work/node$i.log" 2>/dev/null
        done
        echo "--- load log:"
        tail -n 15 "$work/load.log" 2>/dev/null
    fi
    if [ -n "${RAFT_CRASH_KEEP:-}" ]; then
        echo "kept $work"
    else
        rm -rf "$work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 99' INT TERM HUP

fail() {
    echo "FAIL: $*"
    exit 1
}

# Random integer in [0, $1).
rnd() {
    n=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
    echo $((n % $1))
}

# Sleep a random time in [$1, $1 + $2) milliseconds.
rsleep() {
    ms=$(($1 + $(rnd "$2")))
    sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

ports=$(python3 "$load_py" ports 6) || exit 99
set -- $ports
rp1=$1 rp2=$2 rp3=$3 cp1=$4 cp2=$5 cp3=$6
peers="1@127.0.0.1:$rp1,2@127.0.0.1:$rp2,3@127.0.0.1:$rp3"
nodes="1:$cp1,2:$cp2,3:$cp3"
echo "raft ports $rp1 $rp2 $rp3, client ports $cp1 $cp2 $cp3, data in $work"

# Sanitizer builds: no leak report on the SIGKILLed processes anyway; keep
# the clean-stop ones quiet about libuv/raft internals we do not own.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export ASAN_OPTIONS

start_node() {
    i=$1
    eval "rp=\$rp$i cp=\$cp$i"
    "$node_bin" --dir "$work/n$i" --id "$i" --raft-addr "127.0.0.1:$rp" \
        --client-port "$cp" --peers "$peers" \
        --snapshot-threshold 64 --snapshot-trailing 128 \
        >>"$work/node$i.log" 2>&1 &
    eval "pid$i=\$!"
}

kill_node() {
    i=$1
    eval "p=\$pid$i"
    if [ -n "$p" ]; then
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        eval "pid$i="
    fi
}

alive() {
    eval "p=\$pid$1"
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

# Wait until some node is a ready leader (or $1 seconds pass).
wait_leader() {
    deadline=$(($(date +%s) + $1))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if python3 "$load_py" status --nodes "$nodes" 2>/dev/null |
            grep -q "state=leader.*ready=1.*fsm_boot=1"; then
            return 0
        fi
        sleep 0.2
    done
    return 1
}

check_alive() {
    for i in 1 2 3; do
        alive "$i" || fail "node $i died by itself (see its log)"
    done
}

for i in 1 2 3; do
    mkdir -p "$work/n$i"
    start_node "$i"
done
wait_leader 20 || fail "no ready leader after the first start"
python3 "$load_py" garbage --nodes "$nodes" || fail "malformed input"

python3 "$load_py" load --nodes "$nodes" --acked "$work/acked" \
    --stop "$work/stop" --conns "$conns" >"$work/load.log" 2>&1 &
load_pid=$!

r=1
while [ "$r" -le "$rounds" ]; do
    if [ "$r" -eq "$rounds" ]; then
        # The last round crashes the nodes right after the load stopped:
        # entries may still be committing and snapshots being written.
        rsleep 1500 1000
        : >"$work/stop"
        wait "$load_pid"
        load_rc=$?
        load_pid=
        rsleep 0 300
    else
        rsleep 1500 1500
    fi
    check_alive
    # Kill all three at random moments, in a random order.
    order=$(printf '1\n2\n3\n' | while read -r x; do
        echo "$(rnd 1000) $x"
    done | sort -n | cut -d' ' -f2 | tr '\n' ' ')
    for i in $order; do
        kill_node "$i"
        rsleep 0 400
    done
    echo "round $r: killed nodes $order"
    # Restart them at random moments too (a minority alone cannot elect).
    for i in $order; do
        rsleep 0 600
        start_node "$i"
    done
    wait_leader 20 || fail "no ready leader after round $r"
    r=$((r + 1))
done

[ "$load_rc" -eq 0 ] || fail "load client reported unexpected outcomes"
load_figures=$(tail -n 1 "$work/load.log")
acked=$(wc -l <"$work/acked" | tr -d ' ')
[ "$acked" -gt 0 ] || fail "no claim was acked"

conv=$(python3 "$load_py" converge --nodes "$nodes" --timeout 20)
conv_rc=$?
echo "$conv"
[ "$conv_rc" -eq 0 ] || fail "nodes did not converge to identical state"
case "$conv" in
*snapshot_index=0\ *) fail "no snapshot was taken: the test does not cover them" ;;
esac
check_alive
python3 "$load_py" check --nodes "$nodes" --acked "$work/acked" ||
    fail "acked claims missing"
python3 "$load_py" status --nodes "$nodes"

# Clean stop: SIGTERM, every node must exit 0.
for i in 1 2 3; do
    eval "p=\$pid$i"
    kill -TERM "$p"
done
for i in 1 2 3; do
    eval "p=\$pid$i"
    wait "$p"
    st=$?
    eval "pid$i="
    [ "$st" -eq 0 ] || fail "node $i exited $st after SIGTERM"
done

applied=$(echo "$conv" | sed -n 's/^applied=\([0-9]*\).*/\1/p')
snapidx=$(echo "$conv" | sed -n 's/.*snapshot_index=\([0-9]*\).*/\1/p')
echo "figures: acked_claims=$acked rounds=$rounds final_applied_index=$applied" \
    "snapshot_index=$snapidx" \
    "runtime_s=$(($(date +%s) - t_start))"
echo "load: $load_figures"
exit 0
