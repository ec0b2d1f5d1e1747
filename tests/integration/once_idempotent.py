#!/usr/bin/env python3
"""once_idempotent.py: scenario 6, idempotency keys over a 3-node cluster.

  a. claim --idempotent: ACCEPTED (PENDING, owner token T1); a second caller:
     IN_PROGRESS with retry_after_ms; the owner completes with a result:
     COMPLETED; every later claim: DUPLICATE with that result; another
     payload hash: CONFLICT.
  b. lease expiry: the owner (lease 1s) goes silent; after the lease a
     second caller takes over: ACCEPTED with a new owner token T2; the old
     owner's complete with T1: NOT_OWNER; the new owner completes: COMPLETED.
  c. release: the owner releases: RELEASED; the next claim takes over
     (ACCEPTED, new token); the old token is fenced (NOT_OWNER).
  d. terminal release: FAILED with the stored error; later claims: FAILED
     with it.
Every step goes to a different node than the previous one.
"""

import base64
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "idem"
HASH = "aa" * 32
OTHER_HASH = "bb" * 32


def idem(c, key, via, *opts):
    return c.claim(SCOPE, key, via, "--idempotent", "--payload-hash", HASH,
                   *opts)


def scenario(t):
    c = oc.Cluster(t, "idempotent", 8600)
    A, B, C = c.start_cluster(["A", "B", "C"])

    # a.
    key = "order-" + oc.rand_hex(6)
    r = idem(c, key, [A], "--lease", "30s", "--execution-id", "worker-1")
    t.require(r.is_outcome("ACCEPTED") and r.get("owner_token"),
              "a: first claim -> ACCEPTED with an owner token", r.describe())
    t1 = r.get("owner_token")
    t.check(str(r.get("state", "PENDING")).upper() == "PENDING",
            "a: the record is PENDING", r.describe())
    lk = c.ctl(["lookup", SCOPE, key], via=[C])
    t.check(lk.is_outcome("FOUND") and str(lk.get("state")).upper()
            == "PENDING" and lk.get("owner_token") == t1,
            "a: lookup -> FOUND, PENDING, owner token %s" % t1, lk.describe())
    r = idem(c, key, [B], "--execution-id", "worker-2")
    t.check(r.is_outcome("IN_PROGRESS")
            and isinstance(r.get("retry_after_ms"), int)
            and 0 < r.get("retry_after_ms") <= 30000
            and not r.get("owner_token"),
            "a: second caller -> IN_PROGRESS with retry_after_ms, no token",
            r.describe())
    result = "shipped #42"
    r = c.ctl(["complete", SCOPE, key, "--owner-token", t1, "--result",
               result], via=[C])
    t.check(r.is_outcome("COMPLETED"), "a: owner completes -> COMPLETED",
            r.describe())
    want_b64 = base64.b64encode(result.encode()).decode()
    for n in (A, B):
        r = idem(c, key, [n])
        t.check(r.is_outcome("DUPLICATE") and r.get("result_b64") == want_b64,
                "a: later claim on %s -> DUPLICATE with the result" % n.name,
                r.describe() + " want result_b64 %s" % want_b64)
    r = c.claim(SCOPE, key, [C], "--idempotent", "--payload-hash", OTHER_HASH)
    t.check(r.is_outcome("CONFLICT"), "a: another payload hash -> CONFLICT",
            r.describe())
    r = c.claim(SCOPE, key, [A])
    t.check(r.is_outcome("CONFLICT"),
            "a: a NONCE claim of the key -> CONFLICT",
            r.describe())

    # b. lease expiry and takeover.
    key = "job-" + oc.rand_hex(6)
    r = idem(c, key, [B], "--lease", "1s")
    t.require(r.is_outcome("ACCEPTED") and r.get("owner_token"),
              "b: claim with lease 1s -> ACCEPTED", r.describe())
    t1 = r.get("owner_token")
    r = idem(c, key, [C])
    t.check(r.is_outcome("IN_PROGRESS"), "b: within the lease -> IN_PROGRESS",
            r.describe())
    time.sleep(1.6)
    r = idem(c, key, [C], "--lease", "30s")
    t2 = r.get("owner_token")
    t.check(r.is_outcome("ACCEPTED") and t2 and t2 != t1
            and not r.get("retry"),
            "b: after the lease -> ACCEPTED takeover with a new owner token "
            "(%s -> %s)" % (t1, t2), r.describe())
    r = c.ctl(["complete", SCOPE, key, "--owner-token", t1, "--result",
               "late"], via=[A])
    t.check(r.is_outcome("NOT_OWNER"), "b: the old owner's complete -> "
            "NOT_OWNER", r.describe())
    r = c.ctl(["complete", SCOPE, key, "--owner-token", t2, "--result",
               "done"], via=[B])
    t.check(r.is_outcome("COMPLETED"), "b: the new owner completes -> "
            "COMPLETED", r.describe())
    r = idem(c, key, [A])
    t.check(r.is_outcome("DUPLICATE") and r.get("result_b64")
            == base64.b64encode(b"done").decode(),
            "b: then DUPLICATE with the new owner's result", r.describe())

    # c. release and takeover.
    key = "pay-" + oc.rand_hex(6)
    r = idem(c, key, [C])
    t.require(r.is_outcome("ACCEPTED") and r.get("owner_token"),
              "c: claim -> ACCEPTED", r.describe())
    t1 = r.get("owner_token")
    r = c.ctl(["release", SCOPE, key, "--owner-token", t1], via=[A])
    t.check(r.is_outcome("RELEASED"), "c: release -> RELEASED", r.describe())
    r = idem(c, key, [B])
    t2 = r.get("owner_token")
    t.check(r.is_outcome("ACCEPTED") and t2 and t2 != t1,
            "c: the next claim takes over -> ACCEPTED, new token %s" % t2,
            r.describe())
    r = c.ctl(["complete", SCOPE, key, "--owner-token", t1, "--result", "x"],
              via=[C])
    t.check(r.is_outcome("NOT_OWNER"), "c: the released token is fenced -> "
            "NOT_OWNER", r.describe())
    r = c.ctl(["release", SCOPE, key, "--owner-token", t1], via=[C])
    t.check(r.is_outcome("NOT_OWNER"), "c: release with the old token -> "
            "NOT_OWNER", r.describe())

    # d. terminal release.
    key = "ship-" + oc.rand_hex(6)
    r = idem(c, key, [A])
    t.require(r.is_outcome("ACCEPTED"), "d: claim -> ACCEPTED", r.describe())
    t1 = r.get("owner_token")
    r = c.ctl(["release", SCOPE, key, "--owner-token", t1, "--terminal",
               "--error", "card declined"], via=[B])
    # `oncectl release --help`: FAILED is a terminal release's success.
    t.check(r.rc == oc.RC_OK and r.outcome == "FAILED",
            "d: terminal release -> FAILED", r.describe())
    r = idem(c, key, [C])
    t.check(r.is_outcome("FAILED")
            and r.get("stored_error") == "card declined",
            "d: a later claim -> FAILED with the stored error", r.describe())


if __name__ == "__main__":
    oc.main("once-idempotent", scenario)
