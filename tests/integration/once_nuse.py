#!/usr/bin/env python3
"""once_nuse.py: N-use nonces and sliding idempotency records over 3-node
clusters (docs/state-machine.md "N-use nonces", "Sliding retention").

  a. `claim --max-uses 3` through three nodes: ACCEPTED with uses 1, 2, 3
     and uses_left 2, 1, 0; a retry of use 1 (its request id) is ACCEPTED
     retry true and counts nothing; the fourth request id is REPLAYED
     naming the first; another --max-uses is CONFLICT; the HTTP API takes
     "max_uses" and answers uses/uses_left; a max_uses of 65 is refused by
     both (exit 2, HTTP 400).
  b. `claim --idempotent --ttl 3s --sliding`, completed: DUPLICATE answers
     every second keep it past its ttl (expires_ms = the answer's log time
     + 3 s), while a record without --sliding expires; "sliding": true
     through the HTTP API; --sliding on a nonce is refused.
  c. a cluster bootstrapped by a node acting as a schema-2 binary
     (ONCE_TEST_SCHEMA_MAX=2, a debug-build hook): --max-uses and --sliding
     are FAILED_PRECONDITION "schema 3 required" (HTTP: 503 with
     Retry-After; a batch item alone, in a 200), nothing reaches the log
     and the three nodes hold one state digest; `schema upgrade` names the
     old node; after it restarts as an ordinary binary the upgrade applies
     and a --max-uses claim counts its uses on every node.
"""

import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

BASE = 9800
OLD = {"ONCE_TEST_SCHEMA_MAX": "2"}
JSON = {"Content-Type": "application/json"}


def post_claim(n, body):
    st, _, text = oh.request(n.http_addr, "/v1/claim", method="POST",
                             body=json.dumps(body), headers=JSON)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, {"raw": text}


def post_batch(n, items):
    st, _, text = oh.request(n.http_addr, "/v1/claims", method="POST",
                             body=json.dumps(items), headers=JSON)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, {"raw": text}


def nuse(t, c, A, B, C):
    r = c.claim("inv", "link-1", [A], "--max-uses", "3")
    t.require(r.is_outcome("ACCEPTED") and r.get("uses") == 1
              and r.get("uses_left") == 2 and r.get("max_uses") == 3,
              "a: use 1 of 3 ACCEPTED, uses_left 2", r.describe())
    first = r.get("request_id")
    r = c.claim("inv", "link-1", [B], "--max-uses", "3")
    t.check(r.is_outcome("ACCEPTED") and not r.get("retry")
            and r.get("uses") == 2 and r.get("uses_left") == 1,
            "a: use 2 of 3 through B ACCEPTED, uses_left 1", r.describe())
    r = c.claim("inv", "link-1", [C], "--max-uses", "3", "--request-id",
                first)
    t.check(r.is_outcome("ACCEPTED") and r.get("retry") is True
            and r.get("uses") == 2,
            "a: a retry of use 1 is ACCEPTED retry, not counted",
            r.describe())
    r = c.claim("inv", "link-1", [C], "--max-uses", "3")
    t.check(r.is_outcome("ACCEPTED") and r.get("uses") == 3
            and r.get("uses_left") == 0,
            "a: use 3 of 3 ACCEPTED, uses_left 0", r.describe())
    r = c.claim("inv", "link-1", [A], "--max-uses", "3")
    t.check(r.is_outcome("REPLAYED") and r.get("first_request_id") == first
            and r.get("uses_left") == 0,
            "a: the fourth request id is REPLAYED naming the first",
            r.describe())
    r = c.claim("inv", "link-1", [B], "--max-uses", "2")
    t.check(r.is_outcome("CONFLICT")
            and "another max_uses" in str(r.get("reason", "")),
            "a: another --max-uses is CONFLICT", r.describe())
    r = c.claim("inv", "link-2", [A], "--max-uses", "65")
    t.check(r.rc == oc.RC_USAGE, "a: --max-uses 65 is refused (exit 2)",
            r.describe())
    st, o = post_claim(B, {"scope": "inv", "key": "link-h", "max_uses": 2})
    t.check(st == 200 and o.get("outcome") == "ACCEPTED"
            and o.get("uses") == 1 and o.get("uses_left") == 1,
            "a: HTTP max_uses 2: ACCEPTED, uses_left 1", "%s %s" % (st, o))
    st, o = post_claim(C, {"scope": "inv", "key": "link-h", "max_uses": 2})
    t.check(st == 200 and o.get("outcome") == "ACCEPTED"
            and o.get("uses") == 2 and o.get("uses_left") == 0,
            "a: HTTP second use ACCEPTED, uses_left 0", "%s %s" % (st, o))
    st, o = post_claim(A, {"scope": "inv", "key": "link-h", "max_uses": 2})
    t.check(o.get("outcome") == "REPLAYED",
            "a: HTTP third request REPLAYED", "%s %s" % (st, o))
    st, o = post_claim(A, {"scope": "inv", "key": "x", "max_uses": 65})
    t.check(st == 400, "a: HTTP max_uses 65 -> 400", "%s %s" % (st, o))


def sliding(t, c, A, B, C):
    r = c.claim("pay", "order-s", [A], "--idempotent", "--ttl", "3s",
                "--lease", "1s", "--sliding")
    t.require(r.is_outcome("ACCEPTED") and r.get("sliding") is True,
              "b: sliding idempotent claim ACCEPTED", r.describe())
    r2 = c.ctl(["complete", "pay", "order-s", "--owner-token",
                r.get("owner_token"), "--result", "done"], via=[B])
    t.require(r2.is_outcome("COMPLETED"), "b: completed", r2.describe())
    r = c.claim("pay", "order-f", [A], "--idempotent", "--ttl", "3s",
                "--lease", "1s")
    t.require(r.is_outcome("ACCEPTED") and not r.get("sliding"),
              "b: fixed idempotent claim ACCEPTED", r.describe())
    r2 = c.ctl(["complete", "pay", "order-f", "--owner-token",
                r.get("owner_token"), "--result", "done"], via=[B])
    t.require(r2.is_outcome("COMPLETED"), "b: completed", r2.describe())
    start = time.time()
    ok = True
    last = None
    while time.time() - start < 6:
        via = [A, B, C][int(time.time() - start) % 3]
        last = c.claim("pay", "order-s", [via], "--idempotent", "--ttl", "3s")
        ok = ok and last.is_outcome("DUPLICATE", oc.RC_NO) and \
            last.get("expires_ms") == last.get("log_time_ms") + 3000
        time.sleep(0.7)
    t.check(ok, "b: 6 s of DUPLICATE answers, each moving expires_ms to "
            "its log time + 3 s", last.describe() if last else "")
    r = c.claim("pay", "order-f", [C], "--idempotent", "--ttl", "3s")
    t.check(r.is_outcome("ACCEPTED"),
            "b: the record without --sliding expired after its 3 s",
            r.describe())
    st, o = post_claim(B, {"scope": "pay", "key": "order-h", "ttl": "5s",
                           "idempotent": True, "sliding": True})
    t.check(st == 200 and o.get("outcome") == "ACCEPTED"
            and o.get("sliding") is True,
            "b: HTTP \"sliding\": true ACCEPTED", "%s %s" % (st, o))
    r = c.claim("pay", "nonce-s", [A], "--sliding")
    t.check(r.rc == oc.RC_USAGE, "b: --sliding on a nonce is refused",
            r.describe())


def digests(t, c, nodes, what):
    for _ in range(50):
        sts = [c.ctl(["status", "--state-digest"], via=[n], timeout="5s")
               for n in nodes]
        idx = set(r.get("applied_index") for r in sts)
        dig = set(r.get("state_digest") for r in sts)
        if len(idx) == 1 and len(dig) == 1 and None not in dig:
            break
        time.sleep(0.2)
    t.check(len(idx) == 1 and len(dig) == 1 and None not in dig,
            "%s: the nodes hold one state (digest %s at %s)"
            % (what, dig, idx), " ".join(r.describe() for r in sts))


def old_cluster(t):
    c = oc.Cluster(t, "nuse-old", BASE + 200, http=True)
    A, B, C = c.node("A"), c.node("B"), c.node("C")
    A.start(bootstrap=True, env=OLD)
    c.wait_serving([A])
    c.node_id(A)
    B.start(join=[A])
    c.wait_answering(B)
    c.wait_role(B.id, "voter", [A])
    C.start(join=[A, B])
    c.wait_answering(C)
    c.wait_role(C.id, "voter", [A, B])
    st = c.status(B)
    t.require(st is not None and st.get("schema") == 2,
              "c: a cluster bootstrapped by a schema-2 node runs schema 2",
              str(st))
    return c, A, B, C


def upgrade(t, c, A, B, C):
    nodes = [A, B, C]
    r = c.claim("inv", "old-1", [B], "--max-uses", "3")
    t.check(r.outcome == "FAILED_PRECONDITION" and r.rc == oc.RC_NO
            and "schema 3 required" in str(r.get("reason", "")),
            "c: --max-uses at schema 2 -> FAILED_PRECONDITION", r.describe())
    r = c.claim("pay", "old-2", [C], "--idempotent", "--sliding")
    t.check(r.outcome == "FAILED_PRECONDITION"
            and "schema 3 required" in str(r.get("reason", "")),
            "c: --sliding at schema 2 -> FAILED_PRECONDITION", r.describe())
    # Through the HTTP API: 503 (not applied) with Retry-After, the
    # outcome and its reason in the body (docs/http-api.md, "HTTP status
    # by class").
    st, hd, text = oh.request(B.http_addr, "/v1/claim", method="POST",
                              body=json.dumps({"scope": "inv", "key": "old-5",
                                               "max_uses": 3}), headers=JSON)
    try:
        ans = json.loads(text)
    except ValueError:
        ans = {"raw": text}
    t.check(st == 503 and hd.get("retry-after") == "1"
            and ans.get("outcome") == "FAILED_PRECONDITION"
            and "schema 3 required" in str(ans.get("reason", "")),
            "c: POST /v1/claim with max_uses at schema 2 -> 503, Retry-After, "
            "FAILED_PRECONDITION", "%s %r %s" % (st, hd.get("retry-after"), ans))
    # A batch item gets the same refusal alone (service_batch.c checks
    # each item's schema as serve_record does a single claim's).
    st, ans = post_batch(B, [{"scope": "inv", "key": "old-3", "max_uses": 3},
                             {"scope": "inv", "key": "old-4"}])
    t.check(st == 200 and isinstance(ans, list) and len(ans) == 2
            and ans[0].get("outcome") == "FAILED_PRECONDITION"
            and "schema 3 required" in str(ans[0].get("reason", ""))
            and ans[1].get("outcome") == "ACCEPTED",
            "c: a batch item with max_uses at schema 2 -> FAILED_PRECONDITION "
            "alone, the next item ACCEPTED", "%s %s" % (st, ans))
    r = c.claim("inv", "old-1", [A])
    t.check(r.is_outcome("ACCEPTED"),
            "c: the refused claim reached no log: a plain claim ACCEPTED",
            r.describe())
    digests(t, c, nodes, "c: at schema 2")
    r = c.ctl(["schema", "upgrade"], via=[B], timeout="10s")
    reason = str(r.get("reason", ""))
    t.check(r.outcome == "FAILED_PRECONDITION" and A.id in reason
            and B.id not in reason and C.id not in reason,
            "c: schema upgrade names the schema-2 node %s" % A.id,
            r.describe())
    A.stop()
    A.start()
    c.wait_serving(nodes)
    r = c.ctl(["schema", "upgrade"], via=[B], timeout="10s")
    t.check(r.is_outcome("OK") and r.get("schema") == 3,
            "c: after the restart schema upgrade -> OK, schema 3",
            r.describe())
    r = None
    for _ in range(50):
        r = c.claim("inv", "new-1", [C], "--max-uses", "2")
        if r.outcome != "FAILED_PRECONDITION":
            break
        time.sleep(0.2)
    t.check(r.is_outcome("ACCEPTED") and r.get("uses_left") == 1,
            "c: --max-uses 2 at schema 3 ACCEPTED, uses_left 1",
            r.describe())
    r = c.claim("inv", "new-1", [A], "--max-uses", "2")
    t.check(r.is_outcome("ACCEPTED") and r.get("uses_left") == 0,
            "c: its second use ACCEPTED", r.describe())
    digests(t, c, nodes, "c: at schema 3")


def scenario(t):
    c = oc.Cluster(t, "nuse", BASE, http=True)
    A, B, C = c.start_cluster(["A", "B", "C"])
    nuse(t, c, A, B, C)
    sliding(t, c, A, B, C)
    c2, A2, B2, C2 = old_cluster(t)
    upgrade(t, c2, A2, B2, C2)


if __name__ == "__main__":
    oc.main("once-nuse", scenario)
