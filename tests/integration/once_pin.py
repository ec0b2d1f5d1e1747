#!/usr/bin/env python3
"""once_pin.py: scenario 7, a client pinned to a cluster id refuses an
amnesiac authority (docs/design.md §1.11).

  1. Cluster 1 (3 nodes): its cluster id C1 from `oncectl status`; a claim
     with `--cluster-id C1` is ACCEPTED; every node reports C1.
  2. Cluster 1 stopped (SIGTERM, exit 0), its data wiped, cluster 2
     bootstrapped on the same addresses: a new id C2 != C1.
  3. `oncectl --cluster-id C1` against cluster 2: a claim of the old key, a
     claim of a fresh key, a lookup: exit 3, error naming the cluster id
     mismatch, never ACCEPTED.
  4. Pinned to C2 (or not pinned), cluster 2 serves.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "pin"


def cluster_ids(t, c, nodes):
    ids = set()
    for n in nodes:
        st = c.status(n, timeout="2s")
        ids.add(st.get("cluster_id") if st else None)
    return ids


def mismatch(t, r, what):
    text = " ".join(str(r.get(k, "")) for k in ("error", "message")).lower()
    t.check(r.rc == oc.RC_NOT_APPLIED and not r.accepted
            and "cluster id" in text and "mismatch" in text,
            "%s -> exit 3, error names the cluster id mismatch" % what,
            r.describe())


def scenario(t):
    c = oc.Cluster(t, "pin", 8700)
    nodes = c.start_cluster(["A", "B", "C"])
    ids = cluster_ids(t, c, nodes)
    t.require(len(ids) == 1 and None not in ids, "cluster 1: every node "
              "reports one cluster id", "%s" % ids)
    c1 = ids.pop()
    t.require(isinstance(c1, str) and len(c1) == 32 and int(c1, 16) != 0,
              "cluster 1 id %s is 32 hex digits" % c1)
    key = "k-" + oc.rand_hex(6)
    r = c.claim(SCOPE, key, nodes, pin=c1)
    t.require(r.is_outcome("ACCEPTED") and r.get("cluster_id") == c1,
              "pinned to C1, claim on cluster 1 -> ACCEPTED", r.describe())
    bogus = oc.rand_hex(16)
    r = c.claim(SCOPE, "other-" + oc.rand_hex(4), nodes, pin=bogus)
    mismatch(t, r, "pinned to a random id, claim on cluster 1")

    for n in nodes:
        rc, killed = n.stop()
        t.check(rc == 0 and not killed, "cluster 1: %s stops with exit 0"
                % n.name, "rc=%s" % rc)
        n.wipe()
    nodes = c.start_cluster(["A", "B", "C"])
    ids = cluster_ids(t, c, nodes)
    t.require(len(ids) == 1 and None not in ids, "cluster 2: every node "
              "reports one cluster id", "%s" % ids)
    c2 = ids.pop()
    t.check(c2 != c1, "cluster 2 has a new id %s (cluster 1: %s)" % (c2, c1))

    mismatch(t, c.claim(SCOPE, key, nodes, pin=c1),
             "pinned to C1, claim of the old key on cluster 2")
    mismatch(t, c.claim(SCOPE, "new-" + oc.rand_hex(4), nodes, pin=c1),
             "pinned to C1, claim of a fresh key on cluster 2")
    mismatch(t, c.claim(SCOPE, key, [nodes[1]], pin=c1),
             "pinned to C1, claim through one follower address")
    mismatch(t, c.ctl(["lookup", SCOPE, key], via=nodes, pin=c1),
             "pinned to C1, lookup on cluster 2")

    r = c.claim(SCOPE, "c2-" + oc.rand_hex(4), nodes, pin=c2)
    t.check(r.is_outcome("ACCEPTED") and r.get("cluster_id") == c2,
            "pinned to C2, cluster 2 serves: ACCEPTED", r.describe())
    r = c.claim(SCOPE, "c2u-" + oc.rand_hex(4), nodes)
    t.check(r.is_outcome("ACCEPTED") and r.get("cluster_id") == c2,
            "not pinned, cluster 2 serves: ACCEPTED", r.describe())


if __name__ == "__main__":
    oc.main("once-pin", scenario)
