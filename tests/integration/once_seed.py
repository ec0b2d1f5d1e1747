#!/usr/bin/env python3
"""once_seed.py: scenario 1, the seed scenario, every step through oncectl.

  1. A bootstraps, B and C join. Nonce N1 claimed on A: ACCEPTED; replayed
     on B and C: REPLAYED (with N1's first request id).
  2. A is made leader (transfer if needed) and removed while leader. A
     prober claims N1 on A all along: A never answers ACCEPTED. A exits by
     itself, leaves a tombstone, and refuses to start again from its dir.
     N1 is REPLAYED on every member.
  3. Filler claims push N1 out of the log; `oncectl snapshot take`
     (--snapshot-trailing is small); D joins empty and learns N1 from the
     snapshot only: REPLAYED on D.
  4. N2 on a follower F; F removed while follower: same checks as 2. E
     joins: N1, N2 REPLAYED on E.
  5. N3 on a follower K; kill -9 K; K removed while dead; every member
     REPLAYs N1..N3; K restarted from its (untombstoned) dir is a zombie that
     never answers ACCEPTED for them.
  6. F2 joins (3 members), then G and H (5): REPLAYED on the new nodes.
  7. Scale down to 3 so that no original member (A, B, C) remains, leaders
     included: REPLAYED on every remaining member.
  8. kill -9 all, restart all: each answer is REPLAYED or an error (exit 3
     or 4), never ACCEPTED, and each member ends up answering REPLAYED.
  9. Re-adding a retired id (A's, K's) is FAILED_PRECONDITION.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "seed"
TRAILING = 4      # --snapshot-trailing: the log keeps 4 entries past it
THRESHOLD = 1024  # --snapshot-threshold: only `snapshot take` snapshots
FILLERS = 24      # claims after N1, one log entry each, before the snapshot


def claim_accepted(t, c, key, node):
    r = c.claim(SCOPE, key, [node], "--execution-id", "seed-" + node.name)
    t.require(r.is_outcome("ACCEPTED") and bool(r.get("request_id")),
              "claim %s/%s on %s -> ACCEPTED" % (SCOPE, key, node.name),
              r.describe())
    return r


def replayed_on(t, c, nonces, nodes, what):
    """Every nonce, claimed with a fresh request id on every node of
    @nodes: REPLAYED, naming the first request id."""
    for key, first in nonces.items():
        for n in nodes:
            r = c.claim(SCOPE, key, [n])
            t.check(r.is_outcome("REPLAYED")
                    and r.get("first_request_id") == first,
                    "%s: %s REPLAYED on %s" % (what, key, n.name),
                    r.describe() + " (first request id %s)" % first)


def no_accept(t, prober, what):
    acc = prober.accepted()
    t.check(not acc and prober.results,
            "%s: never ACCEPTED (%d probes: %s)" % (
                what, len(prober.results), prober.summary()),
            "; ".join("%s: %s" % (k, r.describe()) for k, r in acc[:3])
            or "no probe ran")


def restart_refused(t, c, victim, nonces, what):
    """A tombstoned dir: onced must refuse to start (non-zero exit) and
    never answer ACCEPTED meanwhile."""
    victim.start()
    prober = oc.Prober(c, victim, SCOPE, list(nonces)).start()
    rc = victim.wait_exit(10)
    prober.stop()
    if rc is None:
        victim.stop()
    # `onced --help`: exit 3, the data directory belongs to a removed node.
    t.check(rc == 3,
            "%s: %s refuses to start from its tombstoned dir (exit %s)"
            % (what, victim.name, rc),
            "still running after 10 s" if rc is None else "exit %s" % rc)
    no_accept(t, prober, "%s: restarted %s" % (what, victim.name))


def remove_running(t, c, victim, others, nonces, what, restart=True):
    """Remove the running @victim through @others while a prober claims
    the nonces on it."""
    prober = oc.Prober(c, victim, SCOPE, list(nonces)).start()
    time.sleep(0.3)
    r, gone = oc.remove_member(t, c, victim.id, others)
    t.check(gone, "%s: members remove %s (%s) -> OK" % (
        what, victim.name, victim.id), r.describe() if r else "-")
    rc = victim.wait_exit(15)
    time.sleep(0.2)
    prober.stop()
    t.check(rc == 0, "%s: removed %s exits by itself with 0" % (
        what, victim.name), "still running 15 s after its removal"
        if rc is None else "exit %s" % rc)
    if rc is None:
        victim.stop()
    no_accept(t, prober, "%s: %s while being removed" % (what, victim.name))
    t.check(victim.tombstoned(), "%s: %s left a tombstone in its dir" % (
        what, victim.name))
    ids = c.member_ids(others)
    t.check(ids is not None and victim.id not in ids,
            "%s: %s gone from members list" % (what, victim.name),
            "members=%s" % ids)
    if restart:
        restart_refused(t, c, victim, nonces, what)


def snapshot_only(t, c, node, index):
    """From the files of the node's store: the new node holds a snapshot
    past @index, which it cannot have taken itself (--snapshot-threshold is
    far above its log), and no segment of its log starts at or before
    @index. So it knows the nonce at @index from the snapshot only. Two
    layouts: the "uring"/"pwrite" store in DIR/log (snap-TERM-INDEX,
    seg-FIRST; docs/store.md) and raft_uv's in DIR (snapshot-TERM-INDEX-
    STAMP, closed segments FIRST-LAST)."""
    logdir = os.path.join(node.dir, "log")
    snaps, segs = [], []
    if os.path.exists(os.path.join(logdir, "meta-a")):
        where = logdir
        for f in os.listdir(logdir):
            m = re.match(r"snap-(\d{20})-(\d{20})$", f)
            if m:
                snaps.append(int(m.group(2)))
            m = re.match(r"seg-(\d{20})$", f)
            if m:
                segs.append(int(m.group(1)))
    else:
        where = node.dir
        for f in os.listdir(node.dir):
            m = re.match(r"snapshot-(\d+)-(\d+)-(\d+)$", f)
            if m:
                snaps.append(int(m.group(2)))
            m = re.match(r"(\d{16})-(\d{16})$", f)
            if m:
                segs.append(int(m.group(1)))
    t.check(snaps and max(snaps) > index and all(s > index for s in segs),
            "3: %s installed a snapshot (index %s) and its log starts after "
            "N1's entry %d (segments from %s)" % (
                node.name, max(snaps) if snaps else None, index,
                min(segs) if segs else "-"),
            "files: %s" % sorted(os.listdir(where)))


def make_leader(t, c, want, members):
    ld = c.wait_leader(members)
    deadline = time.time() + 20
    while ld is not want and time.time() < deadline:
        r = c.ctl(["members", "transfer", want.id], via=members)
        t.info("transfer to %s: %s" % (want.name, r.describe()))
        time.sleep(1.0)
        ld = c.wait_leader(members)
    return t.check(ld is want, "%s is leader" % want.name,
                   "leader is %s" % ld.name)


def scenario(t):
    c = oc.Cluster(t, "seed", 8100,
                   snapshot={"threshold": THRESHOLD, "trailing": TRAILING})
    A, B, C = c.start_cluster(["A", "B", "C"])
    originals = {A.name, B.name, C.name}
    nonces = {}  # key -> first request id

    # 1. claim on A, replay on B and C.
    n1 = "n1-" + oc.rand_hex(6)
    r1 = claim_accepted(t, c, n1, A)
    nonces[n1] = r1.get("request_id")
    n1_index = r1.get("first_index") or 0
    replayed_on(t, c, {n1: nonces[n1]}, [B, C], "1")
    r = c.claim(SCOPE, n1, [A])
    t.check(r.is_outcome("REPLAYED"), "1: N1 REPLAYED on A itself",
            r.describe())

    # 2. remove A while it is the leader.
    make_leader(t, c, A, [A, B, C])
    remove_running(t, c, A, [B, C], nonces, "2 (leader removed)")
    members = [B, C]
    c.wait_serving(members)
    replayed_on(t, c, nonces, members, "2")

    # 3. push N1 out of the log, snapshot, D learns N1 from the snapshot.
    s = c.session(members)
    bad = []
    for i in range(FILLERS):
        r = s.call(oc.session_claim("fill", "f%d-%s" % (i, oc.rand_hex(4)),
                                    ttl="1h"))
        if not r.is_outcome("ACCEPTED"):
            bad.append(r.describe())
    t.check(not bad, "3: %d filler claims ACCEPTED" % FILLERS,
            "; ".join(bad[:3]))
    t.check(s.close() == 0, "3: session ends with exit 0 at EOF")
    r = c.ctl(["snapshot", "take"], via=members, timeout="10s")
    t.check(r.rc == oc.RC_OK and not r.error, "3: snapshot take", r.describe())
    snap_index = r.get("index")
    if isinstance(snap_index, int):
        t.check(snap_index > n1_index + TRAILING,
                "3: snapshot index %d is past N1's entry %d + trailing %d"
                % (snap_index, n1_index, TRAILING))
    else:
        t.info("snapshot take answered no index field: %s" % r.describe())
    D = c.join(c.node("D"), members)
    t.check(D.id not in (A.id, B.id, C.id), "3: D has a fresh id %s" % D.id)
    replayed_on(t, c, nonces, [D], "3 (snapshot-only catch-up)")
    snapshot_only(t, c, D, n1_index)
    members = [B, C, D]

    # 4. remove a follower.
    ld = c.wait_leader(members)
    F = C if ld is not C else B
    others = [n for n in members if n is not F]
    n2 = "n2-" + oc.rand_hex(6)
    nonces[n2] = claim_accepted(t, c, n2, F).get("request_id")
    replayed_on(t, c, {n2: nonces[n2]}, others, "4")
    remove_running(t, c, F, others, nonces, "4 (follower removed)")
    c.wait_serving(others)
    replayed_on(t, c, nonces, others, "4")
    E = c.join(c.node("E"), others)
    members = others + [E]
    replayed_on(t, c, nonces, [E], "4 (new node E)")

    # 5. kill -9 a follower, remove it dead, the zombie never accepts.
    ld = c.wait_leader(members)
    fols = [n for n in members if n is not ld]
    # Keep an original member for step 7 (scale down past the originals).
    fols.sort(key=lambda n: n.name in originals)
    K = fols[0]
    others = [n for n in members if n is not K]
    n3 = "n3-" + oc.rand_hex(6)
    nonces[n3] = claim_accepted(t, c, n3, K).get("request_id")
    replayed_on(t, c, {n3: nonces[n3]}, others, "5")
    K.kill9()
    t.info("killed -9 %s (%s)" % (K.name, K.id))
    r, gone = oc.remove_member(t, c, K.id, others)
    t.check(gone, "5: members remove %s (dead) -> OK" % K.name,
            r.describe() if r else "-")
    c.wait_serving(others)
    replayed_on(t, c, nonces, others, "5")
    K.start()
    prober = oc.Prober(c, K, SCOPE, list(nonces)).start()
    time.sleep(5)
    prober.stop()
    no_accept(t, prober, "5: zombie %s restarted after its removal" % K.name)
    if K.alive():
        rc, killed = K.stop()
        t.check(rc == 0 and not killed, "5: zombie %s stops at SIGTERM with "
                "exit 0" % K.name, "rc=%s%s" % (rc, " (SIGKILL)" if killed
                                                else ""))
    else:
        t.info("zombie %s exited by itself: %s" % (K.name, K.exit_codes[-1]))
    members = others
    retired = [A, F, K]

    # 6. back to 3, then 5.
    F2 = c.join(c.node("F2"), members)
    members = members + [F2]
    replayed_on(t, c, nonces, [F2], "6 (new node F2)")
    G = c.join(c.node("G"), members)
    members = members + [G]
    H = c.join(c.node("H"), members)
    members = members + [H]
    ms = c.members(members)
    voters = sorted(m.get("id") for m in ms or []
                    if str(m.get("role", "")).lower() == "voter")
    t.check(voters == sorted(n.id for n in members),
            "6: 5 voters %s" % " ".join(n.name for n in members),
            "members list: %s" % ms)
    replayed_on(t, c, nonces, [G, H], "6 (scaled to 5)")

    # 7. scale down to 3: no original member remains.
    victims = [n for n in members if n.name in originals]
    spare = [n for n in members if n.name not in originals]
    while len(members) - len(victims) > 3:
        victims.append(spare.pop(0))
    t.info("scale down: removing %s" % " ".join(n.name for n in victims))
    for v in victims:
        rest = [n for n in members if n is not v]
        remove_running(t, c, v, rest, nonces, "7 (scale down)")
        retired.append(v)
        members = rest
        c.wait_serving(members)
    t.check(not any(n.name in originals for n in members),
            "7: remaining members %s, none original" % " ".join(
                n.name for n in members))
    ms = c.members(members)
    t.check(ms is not None and sorted(m.get("id") for m in ms)
            == sorted(n.id for n in members),
            "7: members list has exactly the 3 remaining", "%s" % ms)
    replayed_on(t, c, nonces, members, "7")

    # 8. kill -9 all, restart: REPLAYED or an error, never ACCEPTED.
    for n in members:
        n.kill9()
    t.info("killed -9 %s" % " ".join(n.name for n in members))
    for n in members:
        n.start()
    deadline = time.time() + 45
    seen = {n.name: set() for n in members}
    bad = []
    counts = {}
    while time.time() < deadline and any(len(seen[n.name]) < len(nonces)
                                         for n in members):
        for n in members:
            for key in nonces:
                if key in seen[n.name]:
                    continue
                r = c.claim(SCOPE, key, [n], timeout="2s")
                k = r.outcome or r.error or "rc=%s" % r.rc
                counts[k] = counts.get(k, 0) + 1
                if r.accepted:
                    bad.append("%s on %s: %s" % (key, n.name, r.describe()))
                elif r.is_outcome("REPLAYED"):
                    seen[n.name].add(key)
                elif r.rc not in (oc.RC_NOT_APPLIED, oc.RC_UNKNOWN):
                    bad.append("%s on %s: %s" % (key, n.name, r.describe()))
        time.sleep(0.1)
    t.check(not bad, "8: after kill -9 of all and restart, no answer is "
            "ACCEPTED nor unexpected (%s)" % counts, "; ".join(bad[:3]))
    t.check(all(len(seen[n.name]) == len(nonces) for n in members),
            "8: every member answers REPLAYED for every nonce again",
            "%s" % {k: len(v) for k, v in seen.items()})

    # 9. re-adding retired ids.
    for v in (A, K):
        r = c.ctl(["members", "add", v.id, v.raft_addr, v.client_addr],
                  via=members)
        t.check((r.rc == oc.RC_NO and r.outcome == "FAILED_PRECONDITION")
                or (r.rc == oc.RC_NOT_APPLIED
                    and r.error == "FAILED_PRECONDITION"),
                "9: members add of retired %s (%s) -> FAILED_PRECONDITION"
                % (v.name, v.id), r.describe())
    ids = c.member_ids(members)
    t.check(ids is not None and sorted(ids) == sorted(n.id for n in members),
            "9: members unchanged", "%s" % ids)


if __name__ == "__main__":
    oc.main("once-seed", scenario)
