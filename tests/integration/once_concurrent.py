#!/usr/bin/env python3
"""once_concurrent.py: scenario 2, concurrent claims over every node.

A 3-node cluster; SESSIONS_PER_NODE `oncectl session` processes per node,
each given only its node's address (so followers forward), fed at the same
time from python threads. In one run:

  * HOT_CLAIMS claims of one hot key, spread evenly over the sessions:
    exactly one ACCEPTED, every other one REPLAYED naming the accepted
    request id; a lookup then counts every later claim as an attempt;
  * DISTINCT keys, each claimed twice from sessions on two different nodes:
    each exactly once ACCEPTED and once REPLAYED.

Every answer is checked: an error (exit 3/4) on a healthy cluster fails the
test, since it would leave "exactly one" undecided.
"""

import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SESSIONS_PER_NODE = 3
HOT_CLAIMS = 1200
DISTINCT = 300
SCOPE = "conc"


def scenario(t):
    c = oc.Cluster(t, "concurrent", 8200)
    nodes = c.start_cluster(["A", "B", "C"])
    hot = "hot-" + oc.rand_hex(6)
    sessions = []
    for n in nodes:
        for _ in range(SESSIONS_PER_NODE):
            sessions.append((n, c.session([n], timeout="20s")))
    ns = len(sessions)

    # Work per session: its share of the hot key, and for each distinct
    # key one of its two claims (the two on sessions of different nodes).
    work = [[] for _ in range(ns)]
    for i in range(HOT_CLAIMS):
        work[i % ns].append(("hot", hot,
                             oc.session_claim(SCOPE, hot, ttl="1h",
                                              execution_id="hot-%d" % i)))
    for j in range(DISTINCT):
        key = "d%d-%s" % (j, oc.rand_hex(4))
        a = random.randrange(ns)
        b = random.randrange(ns)
        while sessions[b][0] is sessions[a][0]:
            b = random.randrange(ns)
        for s in (a, b):
            work[s].append(("distinct", key,
                            oc.session_claim(SCOPE, key, ttl="1h")))
    for w in work:
        random.shuffle(w)

    results = [None] * ns
    errors = []

    def feed(i):
        try:
            results[i] = sessions[i][1].pipeline([w[2] for w in work[i]],
                                                 timeout=240)
        except oc.TestFailure as e:
            errors.append(str(e))

    t0 = time.time()
    threads = [threading.Thread(target=feed, args=(i,)) for i in range(ns)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    secs = time.time() - t0
    t.require(not errors, "every session answered every request",
              "; ".join(errors[:3]))
    total = sum(len(w) for w in work)
    t.info("%d claims over %d sessions (%d per node) in %.1fs: %.0f/s"
           % (total, ns, SESSIONS_PER_NODE, secs, total / secs))

    hot_acc, hot_rep, other = [], [], []
    per_key = {}
    rids = set()
    for i in range(ns):
        for (kind, key, _), r in zip(work[i], results[i]):
            rid = r.get("request_id")
            if rid:
                rids.add(rid)
            if kind == "hot":
                if r.is_outcome("ACCEPTED"):
                    hot_acc.append(r)
                elif r.is_outcome("REPLAYED"):
                    hot_rep.append(r)
                else:
                    other.append((key, r))
            else:
                per_key.setdefault(key, []).append(r)
    t.check(not other, "every hot-key answer is ACCEPTED or REPLAYED",
            "%d others, e.g. %s" % (len(other), "; ".join(
                r.describe() for _, r in other[:3])))
    t.check(len(hot_acc) == 1,
            "%d claims of one key: exactly one ACCEPTED (%d ACCEPTED, %d "
            "REPLAYED)" % (HOT_CLAIMS, len(hot_acc), len(hot_rep)),
            "; ".join(r.describe() for r in hot_acc[:3]))
    if len(hot_acc) == 1:
        first = hot_acc[0].get("request_id")
        wrong = [r for r in hot_rep if r.get("first_request_id") != first]
        t.check(not wrong, "every REPLAYED names the accepted request id",
                "; ".join(r.describe() for r in wrong[:3]))
    t.check(len(rids) == total, "every call had its own request id "
            "(%d distinct of %d)" % (len(rids), total))

    bad = []
    for key, rs in per_key.items():
        acc = [r for r in rs if r.is_outcome("ACCEPTED")]
        rep = [r for r in rs if r.is_outcome("REPLAYED")]
        if len(rs) != 2 or len(acc) != 1 or len(rep) != 1:
            bad.append("%s: %s" % (key, " | ".join(r.describe()
                                                   for r in rs)))
    t.check(not bad, "%d distinct keys, claimed twice each on two nodes: "
            "each ACCEPTED once, REPLAYED once" % DISTINCT,
            "%d wrong, e.g. %s" % (len(bad), "; ".join(bad[:3])))

    for n, s in sessions:
        rc = s.close()
        t.check(rc == 0, "session on %s ends with exit 0" % n.name,
                "rc=%s" % rc)

    r = c.ctl(["lookup", SCOPE, hot], via=nodes)
    t.check(r.is_outcome("FOUND")
            and r.get("attempts_total") == HOT_CLAIMS - 1,
            "lookup of the hot key: FOUND with attempts_total %d"
            % (HOT_CLAIMS - 1), r.describe()[:800])
    att = r.get("attempts") or []
    t.check(len(att) == 5 and all(isinstance(a, dict) for a in att),
            "lookup keeps 5 attempts (the first and the last 4)",
            "%d kept" % len(att))


if __name__ == "__main__":
    oc.main("once-concurrent", scenario)
