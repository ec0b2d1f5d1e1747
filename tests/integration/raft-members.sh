#!/bin/sh
# tests/integration/raft-members.sh: membership changes over real raftnode
# processes on 127.0.0.1 (docs/design.md §4): a one-node cluster grows by ADD, a new
# node learns old keys from a snapshot only, a removed follower and a removed
# leader tombstone themselves, a removed dead node comes back as a harmless
# zombie; at the end the members agree and every acked claim is there.
#
#   a. A: --id auto --bootstrap-self; claims.
#   b. B, C start empty; ADD as voters through the leader (load running);
#      both catch up.
#   c. SNAPSHOT on the leader, more claims until the leader's log starts
#      after every old key; D starts empty, ADD; D restores a snapshot and
#      has every acked key.
#   d. REMOVE B: B writes its tombstone and exits; a restart is refused
#      (exit 3); ADD of B's id: ERR PRECONDITION.
#   e. REMOVE the leader: ERR NOTLEADER (transferred), repeated on the new
#      leader: OK; the old leader tombstones itself. E is added so that three
#      voters remain.
#   f. kill -9 a follower, REMOVE it (dead), restart it: it must never
#      answer OK ACCEPTED for an already-claimed key; stop it.
#   g. the members converge (equal digests at equal applied index), every
#      acked key FOUND everywhere, acked keys replayed -> REPLAYED.
#
# automake test-driver: exit 0 pass, 1 fail, 77 skip, 99 hard error.
# Environment: top_builddir, top_srcdir, RAFT_MEMBERS_KEEP (keep the data).
set -u

builddir=${top_builddir:-.}
srcdir=${top_srcdir:-$(dirname "$0")/../..}
node_bin="$builddir/tests/integration/raftnode"
load_py="$srcdir/tests/integration/raft_load.py"
mem_py="$srcdir/tests/integration/raft_members.py"

[ -x "$node_bin" ] || { echo "raftnode not built: $node_bin"; exit 99; }
[ -f "$mem_py" ] && [ -f "$load_py" ] || { echo "missing helpers"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skip"; exit 77; }

t_start=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/raft-members.XXXXXX") || exit 99
pidA= pidB= pidC= pidD= pidE= pidX= load_pid=
NAMES="A B C D E"

cleanup() {
    rc=$?
    for p in $pidA $pidB $pidC $pidD $pidE $pidX $load_pid; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    if [ "$rc" -ne 0 ] && [ -d "$work" ]; then
        for n in $NAMES; do
            echo "--- last lines of node $n's log:"
            tail -n 12 "$work/$n.log" 2>/dev/null
        done
        echo "--- load log:"
        tail -n 5 "$work/load.log" 2>/dev/null
    fi
    if [ -n "${RAFT_MEMBERS_KEEP:-}" ]; then
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

mp() {
    python3 "$mem_py" "$@"
}

# Free ports from a range derived from this shell's pid ($$).
ports=$(python3 "$load_py" ports 11) || exit 99
set -- $ports
for n in $NAMES; do
    eval "rp$n=\$1 cp$n=\$2"
    shift 2
done
rpX=$1 # the zombie's raft port (step f)
echo "data in $work; ports: raft $rpA $rpB $rpC $rpD $rpE, client $cpA $cpB $cpC $cpD $cpE"

ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export ASAN_OPTIONS

# start_node NAME [extra flags...]: --id auto, empty unless told otherwise.
start_node() {
    n=$1
    shift
    eval "rp=\$rp$n cp=\$cp$n"
    mkdir -p "$work/n$n"
    "$node_bin" --dir "$work/n$n" --id auto --raft-addr "127.0.0.1:$rp" \
        --client-port "$cp" --snapshot-threshold 16 --snapshot-trailing 8 \
        "$@" >>"$work/$n.log" 2>&1 &
    eval "pid$n=\$!"
}

# node_id NAME: its id (waits until the client port answers).
node_id() {
    eval "cp=\$cp$1"
    i=0
    while [ $i -lt 50 ]; do
        r=$(mp call "$cp" ID --timeout 1 2>/dev/null)
        case "$r" in
        ID\ *) echo "${r#ID }"; return 0 ;;
        esac
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# wait_exit NAME SECONDS: the node's process ends by itself; sets $st.
wait_exit() {
    eval "p=\$pid$1"
    i=0
    while kill -0 "$p" 2>/dev/null; do
        [ $i -ge $(($2 * 10)) ] && return 1
        sleep 0.1
        i=$((i + 1))
    done
    wait "$p"
    st=$?
    eval "pid$1="
    return 0
}

nodes_of() {
    out=
    for n in "$@"; do
        eval "out=\$out\${out:+,}$n:\$cp$n"
    done
    echo "$out"
}

field() { # field NAME KEY: a STATUS field of a node
    eval "cp=\$cp$1"
    mp call "$cp" STATUS --timeout 2 | tr ' ' '\n' | sed -n "s/^$2=//p"
}

name_of_id() {
    for n in $NAMES; do
        eval "v=\${id$n:-}"
        [ "$v" = "$1" ] && { echo "$n"; return 0; }
    done
    return 1
}

acked="$work/acked"
: >"$acked"

# --- a. a one-node cluster ---------------------------------------------------
start_node A --bootstrap-self
idA=$(node_id A) || fail "A does not answer ID"
mp wait-leader --nodes "$(nodes_of A)" --timeout 15 >/dev/null ||
    fail "A is not a ready leader"
mp claim --nodes "$(nodes_of A)" --acked "$acked" --prefix old --n 40 ||
    fail "claims on A"
echo "a. A=$idA bootstrapped alone: voters=$(field A voters) applied=$(field A applied)"

# --- b. B and C join as voters under load ------------------------------------
start_node B
start_node C
idB=$(node_id B) || fail "B does not answer ID"
idC=$(node_id C) || fail "C does not answer ID"
[ "$(field B voters)" = 0 ] || fail "B did not start empty"
python3 "$mem_py" load --nodes "$(nodes_of A B C D E)" --acked "$acked" \
    --stop "$work/stop" --prefix load --conns 2 >"$work/load.log" 2>&1 &
load_pid=$!
for n in B C; do
    eval "id=\$id$n rp=\$rp$n cp=\$cp$n"
    r=$(mp admin --nodes "$(nodes_of A B C)" --timeout 20 \
        ADD "$id" "127.0.0.1:$rp" "127.0.0.1:$cp" voter)
    [ "$r" = OK ] || fail "ADD $n: $r"
done
cp "$acked" "$work/acked.b"
mp caught-up --nodes "$(nodes_of A B C)" --acked "$work/acked.b" --timeout 20 ||
    fail "B, C did not catch up"
echo "b. B=$idB C=$idC added: voters=$(field A voters) keys=$(wc -l <"$work/acked.b")"

# --- c. a snapshot, then D learns the old keys from it -----------------------
set -- $(mp wait-leader --nodes "$(nodes_of A B C)" --timeout 10) ||
    fail "no leader"
lname=$1
old_mark=$(field "$lname" applied)
cp "$acked" "$work/acked.old"
r=$(mp admin --nodes "$(nodes_of A B C)" --timeout 10 SNAPSHOT)
case "$r" in OK\ *) ;; *) fail "SNAPSHOT: $r" ;; esac
echo "c. SNAPSHOT on $lname: $r (old keys applied by $old_mark)"
# The log must start after every old key: more claims (the load runs) and
# snapshots until the leader's first log index passes the mark.
i=0
while :; do
    set -- $(mp wait-leader --nodes "$(nodes_of A B C)" --timeout 10) ||
        fail "no leader"
    lname=$1
    first=$(field "$lname" log_first)
    [ "$first" -gt "$old_mark" ] && break
    [ $i -ge 40 ] && fail "the leader's log still starts at $first <= $old_mark"
    mp claim --nodes "$(nodes_of A B C)" --acked "$acked" --prefix mid$i \
        --n 20 >/dev/null || fail "claims"
    mp admin --nodes "$(nodes_of A B C)" --timeout 5 SNAPSHOT >/dev/null
    i=$((i + 1))
done
echo "c. leader $lname log_first=$first > $old_mark snap=$(field "$lname" snap)"
start_node D --snapshot-threshold 8 --snapshot-trailing 4
idD=$(node_id D) || fail "D does not answer ID"
r=$(mp admin --nodes "$(nodes_of A B C)" --timeout 20 \
    ADD "$idD" "127.0.0.1:$rpD" "127.0.0.1:$cpD" voter)
[ "$r" = OK ] || fail "ADD D: $r"
cp "$acked" "$work/acked.c"
mp caught-up --nodes "$(nodes_of A B C D)" --acked "$work/acked.c" \
    --timeout 20 || fail "D did not catch up"
restored=$(field D restored)
[ "$restored" -ge 1 ] || fail "D did not restore a snapshot"
echo "c. D=$idD added: restored=$restored voters=$(field "$lname" voters) keys=$(wc -l <"$work/acked.c")"

# --- d. remove a follower ------------------------------------------------------
r=$(mp admin --nodes "$(nodes_of A B C D)" --timeout 20 REMOVE "$idB")
[ "$r" = OK ] || fail "REMOVE B: $r"
wait_exit B 10 || fail "B did not stop after its removal"
[ -f "$work/nB/tombstone" ] || fail "B wrote no tombstone"
echo "d. B removed: exited $st, tombstone: $(head -c 120 "$work/nB/tombstone" | tr '\n' ' ')"
start_node B
wait_exit B 10 || fail "B restarted on its tombstoned directory"
[ "$st" -ne 0 ] || fail "B restarted on its tombstone with exit 0"
grep -q "tombstone\|removed" "$work/B.log" || fail "no tombstone message"
echo "d. B restart refused: exit $st: $(grep -i 'level=error' "$work/B.log" | tail -n 1 | cut -c1-160)"
r=$(mp admin --nodes "$(nodes_of A C D)" --timeout 10 \
    ADD "$idB" "127.0.0.1:$rpB" "127.0.0.1:$cpB" voter)
case "$r" in ERR\ PRECONDITION*) ;; *) fail "ADD of B's retired id: $r" ;; esac
echo "d. ADD of B's retired id: $r"

# --- e. remove the leader -------------------------------------------------------
set -- $(mp wait-leader --nodes "$(nodes_of A C D)" --timeout 10) || fail "no leader"
lname=$1 lport=$2 lid=$3
# ERR BUSY is transient: the leader's own upkeep (the configuration
# refresh, every snapshot_threshold*4+trailing entries under the load) holds
# the one membership slot, or the transfer missed its election timeout on a
# loaded machine. libonce retries BUSY the same way.
i=0
while :; do
    r=$(mp call "$lport" REMOVE "$lid" --timeout 20)
    case "$r" in ERR\ BUSY*) ;; *) break ;; esac
    i=$((i + 1))
    [ $i -ge 50 ] && break
    echo "e. REMOVE of the leader $lname: $r (try $i; again)"
    sleep 0.2
done
case "$r" in ERR\ NOTLEADER*) ;; *) fail "REMOVE of the leader $lname: $r" ;; esac
echo "e. REMOVE leader $lname=$lid: $r"
rest=
for n in A C D; do [ "$n" != "$lname" ] && rest="$rest $n"; done
r=$(mp admin --nodes "$(nodes_of $rest)" --timeout 20 REMOVE "$lid")
[ "$r" = OK ] || fail "repeated REMOVE of $lname: $r"
wait_exit "$lname" 10 || fail "old leader $lname did not stop"
[ -f "$work/n$lname/tombstone" ] || fail "old leader wrote no tombstone"
echo "e. repeated on the new leader: OK; $lname exited $st with a tombstone"
start_node E
idE=$(node_id E) || fail "E does not answer ID"
r=$(mp admin --nodes "$(nodes_of $rest)" --timeout 20 \
    ADD "$idE" "127.0.0.1:$rpE" "127.0.0.1:$cpE" voter)
[ "$r" = OK ] || fail "ADD E: $r"
members="$rest E"
: >"$work/stop"
wait "$load_pid"
load_rc=$?
load_pid=
load_figures=$(tail -n 1 "$work/load.log")
[ "$load_rc" -eq 0 ] || fail "load: unexpected outcomes: $load_figures"
set -- $(mp wait-leader --nodes "$(nodes_of $members)" --timeout 10) || fail "no leader"
lname=$1
echo "e. E=$idE added: members$members voters=$(field "$lname" voters); load: $load_figures"

# --- f. a dead node is removed, comes back as a zombie ---------------------------
victim=
for n in $members; do [ "$n" != "$lname" ] && victim=$n; done
eval "p=\$pid$victim"
kill -9 "$p"
wait "$p" 2>/dev/null
eval "pid$victim="
eval "vid=\$id$victim"
members2=
for n in $members; do [ "$n" != "$victim" ] && members2="$members2 $n"; done
r=$(mp admin --nodes "$(nodes_of $members2)" --timeout 20 REMOVE "$vid")
[ "$r" = OK ] || fail "REMOVE of the dead $victim: $r"
echo "f. $victim=$vid killed and removed: voters=$(field "$lname" voters)"
[ -f "$work/n$victim/tombstone" ] && fail "the dead $victim has a tombstone"
# Restart it from its directory: it never learnt. Its raft address is a
# fresh port: raft_uv on the leader keeps the last few messages it could not
# deliver to the old address (heartbeats from before raft_remove, carrying
# the RetireMember entry and a commit index covering it) and delivers them
# when that address answers again, so on its old address the node would
# learn its retirement and tombstone itself (harmless, but no zombie).
term0=$(field "$lname" term)
eval "cp=\$cp$victim"
"$node_bin" --dir "$work/n$victim" --id auto --raft-addr "127.0.0.1:$rpX" \
    --client-port "$cp" >>"$work/$victim.log" 2>&1 &
pidX=$!
node_id "$victim" >/dev/null || fail "zombie does not answer"
mp zombie "$cp" --acked "$acked" --seconds 4 || fail "zombie $victim"
zst=$(mp call "$cp" STATUS --timeout 2)
case "$zst" in *state=leader*) fail "the zombie is a leader: $zst" ;; esac
kill -0 "$pidX" 2>/dev/null || fail "the zombie died by itself"
kill -TERM "$pidX"
wait "$pidX"
zrc=$?
pidX=
term1=$(field "$lname" term)
[ "$term0" = "$term1" ] || fail "the zombie disturbed the leader: term $term0 -> $term1"
echo "f. zombie $victim stopped (exit $zrc); leader term $term0 unchanged; zombie: $(echo "$zst" | cut -d' ' -f2-8,21-23)"

# --- g. the remaining members agree -------------------------------------------------
mp claim --nodes "$(nodes_of $members2)" --acked "$acked" --prefix final --n 10 ||
    fail "claims after the removals"
conv=$(mp converge --nodes "$(nodes_of $members2)" --timeout 20)
conv_rc=$?
echo "g. $conv"
[ "$conv_rc" -eq 0 ] || fail "members did not converge"
mp check --nodes "$(nodes_of $members2)" --acked "$acked" || fail "acked keys missing"
mp replay --nodes "$(nodes_of $members2)" --acked "$acked" --n 5 ||
    fail "replay"
mp status --nodes "$(nodes_of $members2)"
for n in $members2; do
    eval "p=\$pid$n"
    kill -TERM "$p"
done
for n in $members2; do
    eval "p=\$pid$n"
    wait "$p"
    st=$?
    eval "pid$n="
    [ "$st" -eq 0 ] || fail "node $n exited $st after SIGTERM"
done
echo "figures: ids A=$idA B=$idB C=$idC D=$idD E=$idE" \
    "members=$(echo $members2 | tr ' ' ',') acked_keys=$(wc -l <"$acked" | tr -d ' ')" \
    "final_applied=$(echo "$conv" | sed -n 's/^applied=\([0-9]*\).*/\1/p')" \
    "runtime_s=$(($(date +%s) - t_start))"
exit 0
