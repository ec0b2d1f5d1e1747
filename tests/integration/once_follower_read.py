#!/usr/bin/env python3
"""once_follower_read.py: lookups served by followers (docs/design.md §5,
"Reads on any node").

A 3-node cluster:
  a. claims acknowledged through the leader, then at once a lookup through
     each follower: FOUND every time, served_by that follower's id (it
     read its own table after a read barrier); `lookup --leader` through a
     follower is served by the leader (the old path);
  b. the leader and one follower SIGSTOPped: the follower left alone is
     cut off from any leader; a lookup through it with --timeout 2s fails
     with exit 3 (UNAVAILABLE or DEADLINE_EXCEEDED, applied false) within
     2.5 s of wall time, and never answers FOUND/NOT_FOUND;
  c. only the leader SIGSTOPped: a lookup through a follower of a key
     acknowledged before answers FOUND (after the new election) or fails
     not applied, within the deadline; never NOT_FOUND;
  d. everything resumed (SIGCONT): every node serves again and finds
     every key acknowledged.
Every stopped process gets SIGCONT in a finally, before the harness stops
it by its PID.
"""

import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "fr"
KEYS = 10
WALL_LIMIT = 2.5


def lookup(c, key, node, *extra, timeout="2s"):
    return c.ctl(["lookup", SCOPE, key] + list(extra), via=[node],
                 timeout=timeout, wall=20)


def acknowledged_then_read(t, c, ld, fols, ids):
    keys = []
    for i in range(KEYS):
        key = "k%d-%s" % (i, oc.rand_hex(4))
        r = c.claim(SCOPE, key, [ld], "--ttl", "10m")
        t.require(r.is_outcome("ACCEPTED"), "a: claim %s ACCEPTED" % key,
                  r.describe())
        keys.append(key)
        for f in fols:
            r = lookup(c, key, f)
            t.check(r.is_outcome("FOUND") and r.get("served_by") == ids[f],
                    "a: %s read on %s at once: %s served_by %s" % (
                        key, f.name, r.outcome, r.get("served_by")),
                    r.describe())
    r = lookup(c, keys[0], fols[0], "--leader")
    t.check(r.is_outcome("FOUND") and r.get("served_by") == ids[ld],
            "a: lookup --leader through %s is served by the leader (%s)" % (
                fols[0].name, r.get("served_by")), r.describe())
    r = lookup(c, keys[0], ld)
    t.check(r.is_outcome("FOUND") and r.get("served_by") == ids[ld],
            "a: a lookup through the leader is served by it", r.describe())
    r = lookup(c, "never-claimed", fols[1])
    t.check(r.is_outcome("NOT_FOUND") and r.get("served_by") == ids[fols[1]],
            "a: a key never claimed is NOT_FOUND on %s" % fols[1].name,
            r.describe())
    return keys


def stop(n):
    os.kill(n.proc.pid, signal.SIGSTOP)
    n.stopped = True


def cont(n):
    if getattr(n, "stopped", False) and n.alive():
        os.kill(n.proc.pid, signal.SIGCONT)
    n.stopped = False


def cut_off(t, c, ld, fols, keys):
    alone = fols[0]
    stop(ld)
    stop(fols[1])
    t.info("b: SIGSTOP leader %s and follower %s; %s alone" % (
        ld.name, fols[1].name, alone.name))
    for i, key in enumerate(keys[:3] + ["never-claimed"]):
        r = lookup(c, key, alone)
        t.check(r.rc == oc.RC_NOT_APPLIED and r.get("applied") == "false"
                and r.outcome is None,
                "b: lookup %d on the cut-off %s -> exit %s (%s)" % (
                    i, alone.name, r.rc, r.error), r.describe())
        t.check(r.secs <= WALL_LIMIT,
                "b: it returned in %.2fs (<= %.1fs for --timeout 2s)" % (
                    r.secs, WALL_LIMIT))
    cont(fols[1])
    cont(ld)


def leader_stopped(t, c, ld, fols, keys):
    stop(ld)
    t.info("c: SIGSTOP leader %s" % ld.name)
    t0 = time.time()
    found = 0
    while time.time() - t0 < 6:
        for f in fols:
            r = lookup(c, keys[-1], f)
            t.check(r.is_outcome("FOUND") or r.rc == oc.RC_NOT_APPLIED,
                    "c: lookup on %s with the leader stopped -> %s" % (
                        f.name, r.outcome or r.error), r.describe())
            t.check(r.secs <= WALL_LIMIT, "c: within %.2fs" % r.secs)
            found += r.is_outcome("FOUND")
        if found >= 4:
            break
    t.check(found >= 4, "c: the followers serve reads again under a new "
            "leader (%d FOUND)" % found)
    cont(ld)


def scenario(t):
    c = oc.Cluster(t, "fread", 9400)
    nodes = c.start_cluster(["A", "B", "C"])
    try:
        c.wait_serving(nodes)
        ids = {n: c.node_id(n) for n in nodes}
        ld = c.wait_leader(nodes)
        fols = [n for n in nodes if n is not ld]
        keys = acknowledged_then_read(t, c, ld, fols, ids)
        cut_off(t, c, ld, fols, keys)
        c.wait_serving(nodes, timeout=45)
        ld = c.wait_leader(nodes)
        fols = [n for n in nodes if n is not ld]
        leader_stopped(t, c, ld, fols, keys)
        c.wait_serving(nodes, timeout=45)
        for n in nodes:
            for key in keys:
                r = lookup(c, key, n)
                t.check(r.is_outcome("FOUND"), "d: %s FOUND on %s" % (
                    key, n.name), r.describe())
    finally:
        for n in nodes:
            cont(n)


if __name__ == "__main__":
    oc.main("once-follower-read", scenario)
