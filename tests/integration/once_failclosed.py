#!/usr/bin/env python3
"""once_failclosed.py: scenario 3, fail closed without a quorum.

A 3-node cluster, two rounds:
  a. kill -9 both followers (the leader stays, alone);
  b. kill -9 the leader and one follower (a follower stays, alone).
In each round, claims of fresh keys on the survivor with `--timeout 2s`
must end with exit 3 (not applied) or 4 (outcome unknown) within 2.5 s of
wall time (process start included), and never be ACCEPTED; a lookup fails
the same way. Then the killed nodes restart and the cluster serves again:
a fresh key is ACCEPTED; a key whose claim said "not applied" (exit 3)
must still be free (ACCEPTED now); one that said "unknown" (exit 4) may be
either ACCEPTED or REPLAYED.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "fc"
CLAIMS = 4
WALL_LIMIT = 2.5


def no_quorum_round(t, c, survivor, what):
    failed = {}  # key -> rc
    for i in range(CLAIMS):
        key = "%s-%d-%s" % (what, i, oc.rand_hex(4))
        r = c.claim(SCOPE, key, [survivor], timeout="2s", wall=20)
        t.check(r.rc in (oc.RC_NOT_APPLIED, oc.RC_UNKNOWN) and not r.accepted
                and r.error is not None,
                "%s: claim %d on %s without quorum -> exit %s (%s, applied "
                "%s)" % (what, i, survivor.name, r.rc, r.error,
                         r.get("applied")), r.describe())
        t.check(r.secs <= WALL_LIMIT,
                "%s: claim %d returned in %.2fs (<= %.1fs for --timeout 2s)"
                % (what, i, r.secs, WALL_LIMIT))
        if r.rc == oc.RC_NOT_APPLIED:
            t.check(r.get("applied") == "false",
                    "%s: exit 3 says applied \"false\"" % what, r.describe())
        elif r.rc == oc.RC_UNKNOWN:
            t.check(r.get("applied") == "unknown",
                    "%s: exit 4 says applied \"unknown\"" % what,
                    r.describe())
        failed[key] = r.rc
    r = c.ctl(["lookup", SCOPE, "nothing"], via=[survivor], timeout="2s",
              wall=20)
    t.check(r.rc in (oc.RC_NOT_APPLIED, oc.RC_UNKNOWN)
            and r.secs <= WALL_LIMIT,
            "%s: lookup without quorum -> exit %s in %.2fs" % (
                what, r.rc, r.secs), r.describe())
    return failed


def recovered(t, c, nodes, failed, what):
    for n in nodes:
        if not n.alive():
            n.start()
    c.wait_serving(nodes, timeout=45)
    r = c.claim(SCOPE, "%s-fresh-%s" % (what, oc.rand_hex(4)), nodes)
    t.check(r.is_outcome("ACCEPTED"), "%s: after restart a fresh key is "
            "ACCEPTED" % what, r.describe())
    for key, rc in failed.items():
        r = c.claim(SCOPE, key, nodes)
        if rc == oc.RC_NOT_APPLIED:
            t.check(r.is_outcome("ACCEPTED"),
                    "%s: %s (said not applied) is still free: ACCEPTED"
                    % (what, key), r.describe())
        else:
            t.check(r.is_outcome("ACCEPTED") or r.is_outcome("REPLAYED"),
                    "%s: %s (said unknown) -> %s" % (what, key, r.outcome),
                    r.describe())


def scenario(t):
    c = oc.Cluster(t, "failclosed", 8300)
    nodes = c.start_cluster(["A", "B", "C"])
    r = c.claim(SCOPE, "warm", nodes)
    t.require(r.is_outcome("ACCEPTED"), "a claim with all nodes up is "
              "ACCEPTED", r.describe())

    # a. the leader alone.
    ld = c.wait_leader(nodes)
    fols = [n for n in nodes if n is not ld]
    for n in fols:
        n.kill9()
    t.info("a: killed -9 followers %s; leader %s alone" % (
        " ".join(n.name for n in fols), ld.name))
    failed = no_quorum_round(t, c, ld, "a")
    recovered(t, c, nodes, failed, "a")

    # b. a follower alone.
    ld = c.wait_leader(nodes)
    fols = [n for n in nodes if n is not ld]
    survivor = fols[0]
    ld.kill9()
    fols[1].kill9()
    t.info("b: killed -9 leader %s and follower %s; %s alone" % (
        ld.name, fols[1].name, survivor.name))
    time.sleep(0.5)
    failed = no_quorum_round(t, c, survivor, "b")
    recovered(t, c, nodes, failed, "b")


if __name__ == "__main__":
    oc.main("once-failclosed", scenario)
