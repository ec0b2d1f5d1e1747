#!/usr/bin/env python3
"""once_relink.py: a Raft link cut and healed carries again within a
bound (docs/operations.md, "Multi-region placement": the dead-link bound).

Runs inside its own network namespace (once-relink.sh: unshare -n), where
iptables rules touch nobody else. On a 3-node cluster with --http-addr
(election timeout 400ms, so the bound is its floor, 1 s):
  * a follower F is cut for HOLD_S: every packet to or from its Raft port
    is dropped, so the links towards F (the leader's, the other
    follower's) hold bytes nobody acknowledges, while the two others keep
    accepting claims;
  * healed: F's applied index reaches the leader's commit index within
    REJOIN_S. Without the bound the links towards F stay silent until
    TCP's next retransmission: about 12.6 s after the cut began on
    loopback (RTO 200 ms doubling: 0.2, 0.6, 1.4, 3.0, 6.2, 12.6 s), so
    about 6 s after the heal. With it they were closed while cut and
    raft_uv redials every ~2 s (the 1 s bound on the SYN, then its 1 s
    retry delay): the first dial after the heal gets through.
"""

import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SCOPE = "relink"
HOLD_S = 6.5
REJOIN_S = 4.0


def iptables(t, op, port):
    rules = (["-p", "tcp", "--dport", str(port), "-j", "DROP"],
             ["-p", "tcp", "--sport", str(port), "-j", "DROP"])
    for r in rules:
        p = subprocess.run(["iptables", "-w", op, "INPUT"] + r,
                           capture_output=True)
        t.require(p.returncode == 0, "iptables %s INPUT %s" % (op, " ".join(r)),
                  p.stderr.decode("utf-8", "replace"))


def metric(addr, name):
    st, _, body = oh.request(addr, "/metrics", timeout=2)
    if st != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scenario(t):
    c = oc.Cluster(t, "relink", 9600, http=True)
    nodes = c.start_cluster(["A", "B", "C"])
    c.wait_serving(nodes)
    leader = c.wait_leader(nodes)
    f = next(n for n in nodes if n is not leader)
    others = [n for n in nodes if n is not f]
    t.info("cutting follower %s (raft port %d) for %.1f s" % (
        f.name, f.raft_port, HOLD_S))
    iptables(t, "-I", f.raft_port)
    healed = False
    try:
        end = time.time() + HOLD_S
        i = 0
        while time.time() < end:
            r = c.claim(SCOPE, "k-%d-%s" % (i, oc.rand_hex(4)), others)
            t.require(r.accepted, "claim %d ACCEPTED by the majority" % i,
                      r.describe())
            i += 1
            time.sleep(0.2)
        target = metric(leader.http_addr, "once_raft_commit_index")
        t.require(target is not None, "the leader's commit index: %s" % target)
        iptables(t, "-D", f.raft_port)
        healed = True
        t0 = time.time()
        applied = None
        while time.time() < t0 + 30:
            applied = metric(f.http_addr, "once_raft_applied_index")
            if applied is not None and applied >= target:
                break
            time.sleep(0.1)
        took = time.time() - t0
        t.info("%s caught up (applied %s of %s) %.2f s after the heal" % (
            f.name, applied, target, took))
        t.check(applied is not None and applied >= target and
                took <= REJOIN_S,
                "%s rejoined %.2f s after a %.1f s cut (bound %.1f s)" % (
                    f.name, took, HOLD_S, REJOIN_S),
                "applied %s, the leader's commit index %s" % (applied, target))
    finally:
        if not healed:  # our own namespace: flushing touches only us
            subprocess.run(["iptables", "-w", "-F", "INPUT"])


if __name__ == "__main__":
    oc.main("once-relink", scenario)
