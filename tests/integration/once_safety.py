#!/usr/bin/env python3
"""once_safety.py: membership changes that would leave a cluster unable to
lose a node are refused unless --force (docs/server.md, "Membership
safety").

On a 3-node cluster A, B, C:
  * C is killed (-9); once the leader has not heard from it for an
    election timeout, removing the live B (and demoting it with members
    assign B spare) is refused, exit 1 FAILED_PRECONDITION, with a reason
    that names the unreachable majority; the cluster still has 3 voters;
  * removing the dead C is allowed (both remaining voters are reachable):
    OK, 2 voters;
  * removing B now would leave a single voter: refused, with its reason;
  * `members remove B --force` removes it; A alone still accepts claims.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402


def refused(t, c, args, via, want, what, timeout=30):
    """@args is refused with FAILED_PRECONDITION (exit 1) whose reason
    contains @want; a not-applied error (no leader yet) is repeated."""
    deadline = time.time() + timeout
    r = None
    while time.time() < deadline:
        r = c.ctl(args, via=via, timeout="5s")
        if r.rc != oc.RC_NOT_APPLIED:
            break
        time.sleep(0.3)
    t.check(r.rc == oc.RC_NO and r.outcome == "FAILED_PRECONDITION"
            and want in (r.get("reason") or ""), what, r.describe())


def voters(c, via):
    ld = c.wait_leader(via)
    st = c.status(ld)
    return sorted(st.get("config_voters") or [])


def scenario(t):
    c = oc.Cluster(t, "safety", 9100)
    A, B, C = c.start_cluster(["A", "B", "C"])

    C.kill9()
    # The leader marks a member unreachable after an election timeout
    # without a message from it (400 ms here); two to be sure.
    c.wait_leader([A, B])
    time.sleep(1.0)
    refused(t, c, ["members", "remove", B.id], [A, B], "reachable",
            "C dead: removing the live B -> FAILED_PRECONDITION (no "
            "reachable majority would remain)")
    refused(t, c, ["members", "assign", B.id, "spare"], [A, B], "reachable",
            "C dead: demoting B to spare -> FAILED_PRECONDITION")
    t.check(len(voters(c, [A, B])) == 3, "still 3 voters after the refusals")

    r, gone = oc.remove_member(t, c, C.id, [A, B])
    t.require(gone, "removing the dead C -> OK", r.describe() if r else "")
    t.check(len(voters(c, [A, B])) == 2, "2 voters after removing C")

    refused(t, c, ["members", "remove", B.id], [A, B], "single voter",
            "removing B from 2 voters -> FAILED_PRECONDITION (a single "
            "voter would remain)")

    deadline = time.time() + 30
    r = None
    while time.time() < deadline:
        r = c.ctl(["members", "remove", B.id, "--force"], via=[A, B],
                  timeout="5s")
        if r.rc == oc.RC_OK:
            break
        time.sleep(0.3)
    t.require(r.rc == oc.RC_OK and r.outcome == "OK",
              "members remove B --force -> OK", r.describe())
    t.check(B.wait_exit(30) == 0, "the removed B stops by itself (exit 0)")
    c.wait_serving([A])
    r = c.claim("safety", "k-" + oc.rand_hex(6), [A])
    t.check(r.is_outcome("ACCEPTED"), "A alone accepts a claim",
            r.describe())
    log = A.log_text()
    t.check("unsafe membership change refused" in log
            and "unsafe membership change forced" in log,
            "A's log has the refused and the forced change")


if __name__ == "__main__":
    oc.main("once-safety", scenario)
