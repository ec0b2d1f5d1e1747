#!/usr/bin/env python3
"""once_quota.py: per scope pattern quotas and the log schema upgrade over
3-node clusters (docs/state-machine.md "Quotas", docs/design.md §3.3).

  a. a fresh cluster runs this binary's schema: status shows schema 3 and
     schema_max 3; `schema upgrade` answers OK (already in force).
  b. a bad pattern and a quota without limits are INVALID_ARGUMENT;
     `quota set tenant-a* --max-records 5`: tenant A's 6th new key is
     RESOURCE_EXHAUSTED naming the quota, while tenant B still claims; A's
     existing records still complete; `quota list` shows A's usage (5).
  c. after A's records expire, A claims again; `quota remove`, then a
     second remove is NOT_FOUND.
  d. a cluster bootstrapped by a node acting as a schema-1 binary
     (ONCE_TEST_SCHEMA_MAX=1, a debug-build hook) with one more such voter
     and such a standby (it applies the log too, so it counts):
     QuotaSet is FAILED_PRECONDITION "schema 2 required"; `schema upgrade`
     is FAILED_PRECONDITION naming the three members at schema_max 1 and
     changes nothing; after those three restart as ordinary binaries (the
     rolling upgrade) it answers OK, schema 2, every node applies it, and
     QuotaSet applies.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

OLD = {"ONCE_TEST_SCHEMA_MAX": "1"}


def fresh_cluster(t):
    c = oc.Cluster(t, "quota", 9550)
    A, B, C = c.start_cluster(["A", "B", "C"])
    for n in (A, B, C):
        st = c.status(n)
        t.check(st is not None and st.get("schema") == 3
                and st.get("schema_max") == 3,
                "a: %s status: schema 3, schema_max 3" % n.name, str(st))
    r = c.ctl(["schema", "upgrade"], via=[B])
    t.check(r.is_outcome("OK") and r.get("schema") == 3,
            "a: schema upgrade on a fresh cluster -> OK, schema 3",
            r.describe())
    return c, A, B, C


def quotas(t, c, via):
    r = c.ctl(["quota", "list"], via=via)
    t.require(r.is_outcome("OK") and isinstance(r.get("quotas"), list),
              "quota list -> OK with a list", r.describe())
    return {q["pattern"]: q for q in r.get("quotas")}


def enforce(t, c, A, B, C):
    r = c.ctl(["quota", "set", "a*b", "--max-records", "5"], via=[A])
    t.check(r.rc == oc.RC_USAGE and "'*' only at its end" in str(r.obj),
            "b: a pattern with an inner '*' -> INVALID_ARGUMENT, exit 2",
            r.describe())
    r = c.ctl(["quota", "set", "tenant-a*"], via=[B])
    t.check(r.rc == oc.RC_USAGE and "max_records or max_bytes" in str(r.obj),
            "b: a quota without limits -> INVALID_ARGUMENT, exit 2",
            r.describe())
    r = c.ctl(["quota", "set", "tenant-a*", "--max-records", "5"], via=[A])
    t.require(r.is_outcome("OK"), "b: quota set tenant-a* --max-records 5",
              r.describe())
    tokens = {}
    for i in range(3):
        key = "job-%d" % i
        r = c.claim("tenant-a", key, [B], "--idempotent", "--ttl", "4s",
                    "--lease", "2s")
        t.require(r.is_outcome("ACCEPTED") and r.get("owner_token"),
                  "b: tenant A idempotent claim %d ACCEPTED" % i,
                  r.describe())
        tokens[key] = r.get("owner_token")
    for i in range(2):
        r = c.claim("tenant-a/sub", "n-%d" % i, [C], "--ttl", "4s")
        t.require(r.is_outcome("ACCEPTED"),
                  "b: tenant A nonce claim %d ACCEPTED" % i, r.describe())
    r = c.claim("tenant-a", "sixth", [A], "--ttl", "4s")
    t.check(r.outcome == "RESOURCE_EXHAUSTED" and r.rc == oc.RC_NOT_APPLIED
            and "tenant-a*" in str(r.get("reason", "")),
            "b: tenant A's 6th new key -> RESOURCE_EXHAUSTED naming the quota",
            r.describe())
    for i in range(8):
        r = c.claim("tenant-b", "k-%d" % i, [(A, B, C)[i % 3]], "--ttl", "4s")
        t.check(r.is_outcome("ACCEPTED"),
                "b: tenant B claim %d ACCEPTED meanwhile" % i, r.describe())
    for key, tok in tokens.items():
        r = c.ctl(["complete", "tenant-a", key, "--owner-token", tok,
                   "--result", "done " + key], via=[C])
        t.check(r.is_outcome("COMPLETED"),
                "b: tenant A completes %s over its quota" % key, r.describe())
    q = quotas(t, c, [B]).get("tenant-a*")
    t.check(q is not None and q.get("records") == 5
            and q.get("max_records") == 5 and q.get("bytes", 0) > 0
            and q.get("max_bytes") == 0,
            "b: quota list shows tenant-a* with 5 records and their bytes",
            str(q))


def expiry_and_remove(t, c, A, B):
    time.sleep(6)  # every tenant A record had 4 s
    r = c.claim("tenant-a", "after-expiry", [A], "--ttl", "4s")
    t.check(r.is_outcome("ACCEPTED"),
            "c: after A's records expired, A claims again", r.describe())
    q = quotas(t, c, [B]).get("tenant-a*")
    t.check(q is not None and q.get("records") == 1,
            "c: the quota counts only the new record", str(q))
    r = c.ctl(["quota", "remove", "tenant-a*"], via=[B])
    t.check(r.is_outcome("OK"), "c: quota remove -> OK", r.describe())
    t.check(quotas(t, c, [A]) == {}, "c: quota list is empty")
    r = c.ctl(["quota", "remove", "tenant-a*"], via=[B])
    t.check(r.outcome == "NOT_FOUND" and r.rc == oc.RC_NO,
            "c: a second remove -> NOT_FOUND, exit 1", r.describe())


def old_cluster(t):
    c = oc.Cluster(t, "quota-old", 9600)
    A, B, C = c.node("A"), c.node("B"), c.node("C")
    A.start(bootstrap=True, env=OLD)
    c.wait_serving([A])
    c.node_id(A)
    B.start(join=[A])
    c.wait_answering(B)
    c.wait_role(B.id, "voter", [A])
    C.start(join=[A, B], env=OLD)
    c.wait_answering(C)
    c.wait_role(C.id, "voter", [A, B])
    D = c.node("D")
    D.start(join=[A, B], role="standby", env=OLD)
    c.wait_answering(D)
    c.wait_role(D.id, "standby", [A, B])
    st = c.status(B)
    t.check(st is not None and st.get("schema") == 1,
            "d: a cluster bootstrapped by a schema-1 node runs schema 1",
            str(st))
    return c, A, B, C, D


def upgrade(t, c, A, B, C, D):
    r = c.ctl(["quota", "set", "tenant-a*", "--max-records", "5"], via=[B])
    t.check(r.outcome == "FAILED_PRECONDITION" and r.rc == oc.RC_NO
            and "schema 2 required" in str(r.get("reason", "")),
            "d: quota set at schema 1 -> FAILED_PRECONDITION", r.describe())
    r = c.ctl(["schema", "upgrade"], via=[B], timeout="10s")
    reason = str(r.get("reason", ""))
    t.check(r.outcome == "FAILED_PRECONDITION" and r.get("schema") == 1
            and A.id in reason and C.id in reason and D.id in reason
            and B.id not in reason,
            "d: schema upgrade names the members at schema_max 1 (voters "
            "%s, %s, standby %s)" % (A.id, C.id, D.id), r.describe())
    st = c.status(B)
    t.check(st is not None and st.get("schema") == 1,
            "d: the refused upgrade changed nothing", str(st))
    for n in (A, C, D):  # the rolling upgrade: as ordinary binaries
        n.stop()
        n.start()
        c.wait_serving([n])
    r = c.ctl(["schema", "upgrade", "--to", "2"], via=[A], timeout="10s")
    t.check(r.is_outcome("OK") and r.get("schema") == 2,
            "d: after the restarts schema upgrade -> OK, schema 2",
            r.describe())
    for n in (A, B, C, D):
        deadline = time.time() + 10
        st = c.status(n)
        while (st is None or st.get("schema") != 2) and time.time() < deadline:
            time.sleep(0.2)
            st = c.status(n)
        t.check(st is not None and st.get("schema") == 2,
                "d: %s applies schema 2" % n.name, str(st))
    r = c.ctl(["quota", "set", "tenant-a*", "--max-records", "5"], via=[C])
    t.check(r.is_outcome("OK"), "d: quota set at schema 2 -> OK",
            r.describe())


def scenario(t):
    c, A, B, C = fresh_cluster(t)
    enforce(t, c, A, B, C)
    expiry_and_remove(t, c, A, B)
    c2, A2, B2, C2, D2 = old_cluster(t)
    upgrade(t, c2, A2, B2, C2, D2)


if __name__ == "__main__":
    oc.main("once-quota", scenario)
