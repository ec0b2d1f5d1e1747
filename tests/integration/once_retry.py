#!/usr/bin/env python3
"""once_retry.py: scenario 4, request ids: a retry versus a replay.

On a 3-node cluster, for a NONCE key:
  * claim with request id R (execution id exec-1) on A: ACCEPTED, not retry;
  * the same request id R again (execution id exec-2) on B: ACCEPTED with
    retry true, the same first index;
  * a fresh request id (execution id exec-3) on C: REPLAYED, first request id
    R;
  * lookup: FOUND, first_request_id R, attempts_total 2, and the attempts
    show both later executions with their execution ids: exec-2 (request id
    R, retry, ACCEPTED) and exec-3 (the fresh id, REPLAYED).
The same for an IDEMPOTENT key: the owner's retry is ACCEPTED with retry and
the same owner token.
"""

import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "retry"


def find_attempt(atts, rid, exe):
    for a in atts:
        if a.get("request_id") == rid and a.get("execution_id") == exe:
            return a
    return None


def scenario(t):
    c = oc.Cluster(t, "retry", 8400)
    A, B, C = c.start_cluster(["A", "B", "C"])

    key = "k-" + oc.rand_hex(6)
    rid = oc.rand_hex(16)
    r1 = c.claim(SCOPE, key, [A], "--request-id", rid, "--execution-id",
                 "exec-1")
    t.require(r1.is_outcome("ACCEPTED") and r1.get("request_id") == rid
              and not r1.get("retry"),
              "claim with request id R on A -> ACCEPTED (retry false)",
              r1.describe())
    r2 = c.claim(SCOPE, key, [B], "--request-id", rid, "--execution-id",
                 "exec-2")
    t.check(r2.is_outcome("ACCEPTED") and r2.get("retry") is True
            and r2.get("request_id") == rid,
            "the same request id R on B -> ACCEPTED with retry true",
            r2.describe())
    t.check(r2.get("first_index") == r1.get("first_index")
            and r2.get("first_time_ms") == r1.get("first_time_ms"),
            "the retry reports the first acceptance (same first index and "
            "time)", "%s vs %s" % (r1.describe(), r2.describe()))
    r3 = c.claim(SCOPE, key, [C], "--execution-id", "exec-3")
    fresh = r3.get("request_id")
    t.check(r3.is_outcome("REPLAYED") and fresh and fresh != rid
            and r3.get("first_request_id") == rid,
            "a fresh request id on C -> REPLAYED, first request id R",
            r3.describe())

    lk = c.ctl(["lookup", SCOPE, key], via=[A, B, C])
    t.require(lk.is_outcome("FOUND"), "lookup -> FOUND", lk.describe())
    t.check(lk.get("first_request_id") == rid,
            "lookup: first_request_id is R", lk.describe())
    t.check(lk.get("attempts_total") == 2, "lookup: attempts_total 2",
            lk.describe())
    atts = lk.get("attempts") or []
    a2 = find_attempt(atts, rid, "exec-2")
    a3 = find_attempt(atts, fresh, "exec-3")
    t.check(a2 is not None and a2.get("retry") is True
            and a2.get("outcome") == "ACCEPTED",
            "lookup: attempt exec-2 with request id R, ACCEPTED, retry",
            "attempts=%s" % atts)
    t.check(a3 is not None and a3.get("outcome") == "REPLAYED"
            and not a3.get("retry"),
            "lookup: attempt exec-3 with the fresh request id, REPLAYED",
            "attempts=%s" % atts)
    if a2 and a3:
        t.check(a2.get("index", 0) < a3.get("index", 0)
                and a2.get("index", 0) > (r1.get("first_index") or 0),
                "lookup: attempts in log order after the first claim",
                "attempts=%s first_index=%s" % (atts, r1.get("first_index")))

    # IDEMPOTENT: the owner's retry keeps the owner token.
    ikey = "i-" + oc.rand_hex(6)
    irid = oc.rand_hex(16)
    i1 = c.claim(SCOPE, ikey, [A], "--idempotent", "--request-id", irid)
    t.require(i1.is_outcome("ACCEPTED") and i1.get("owner_token"),
              "idempotent claim -> ACCEPTED with an owner token",
              i1.describe())
    i2 = c.claim(SCOPE, ikey, [C], "--idempotent", "--request-id", irid)
    t.check(i2.is_outcome("ACCEPTED") and i2.get("retry") is True
            and i2.get("owner_token") == i1.get("owner_token"),
            "idempotent: the same request id -> ACCEPTED retry, same owner "
            "token %s" % i1.get("owner_token"), i2.describe())
    i3 = c.claim(SCOPE, ikey, [B], "--idempotent")
    t.check(i3.is_outcome("IN_PROGRESS") and not i3.get("owner_token"),
            "idempotent: a fresh request id -> IN_PROGRESS, no owner token",
            i3.describe())


if __name__ == "__main__":
    oc.main("once-retry", scenario)
