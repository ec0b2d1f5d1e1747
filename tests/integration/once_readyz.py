#!/usr/bin/env python3
"""once_readyz.py: /readyz turns 503 on a node cut off from the others and
200 again after healing.

Runs inside its own network namespace (once-readyz.sh: unshare -n), where
iptables rules touch nobody else. On a 3-node cluster with --http-addr:
  * all three /readyz 200;
  * a follower F is cut: every packet to or from its Raft port is dropped,
    so the leader's AppendEntries never reach it;
  * within a few election timeouts F's /readyz is 503 with a reason, while
    its /healthz stays 200 (the loop answers) and the two others stay
    ready and keep accepting claims;
  * healed: F's /readyz is 200 again, and its applied index has caught up
    with the claims made while it was cut.
"""

import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SCOPE = "readyz"


def iptables(t, op, port):
    rules = (["-p", "tcp", "--dport", str(port), "-j", "DROP"],
             ["-p", "tcp", "--sport", str(port), "-j", "DROP"])
    for r in rules:
        p = subprocess.run(["iptables", "-w", op, "INPUT"] + r,
                           capture_output=True)
        t.require(p.returncode == 0, "iptables %s INPUT %s" % (op, " ".join(r)),
                  p.stderr.decode("utf-8", "replace"))


def metric(addr, name):
    st, _, body = oh.request(addr, "/metrics")
    if st != 200:
        return None
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scenario(t):
    c = oc.Cluster(t, "readyz", 9200, http=True)
    nodes = c.start_cluster(["A", "B", "C"])
    for n in nodes:
        st, body = oh.wait_status(t, n.http_addr, "/readyz", 200, 30)
        t.require(st == 200, "%s: /readyz 200 before the cut" % n.name,
                  "%s %r" % (st, body))
    leader = c.wait_leader(nodes)
    f = next(n for n in nodes if n is not leader)
    others = [n for n in nodes if n is not f]
    t.info("cutting follower %s (raft port %d)" % (f.name, f.raft_port))
    iptables(t, "-I", f.raft_port)
    healed = False
    try:
        st, body = oh.wait_status(t, f.http_addr, "/readyz", 503, 20)
        t.check(st == 503 and body.startswith("not ready: "),
                "%s cut: /readyz 503 with a reason" % f.name,
                "%s %r" % (st, body))
        t.info("%s says %r" % (f.name, body.strip()))
        st, _, _ = oh.request(f.http_addr, "/healthz")
        t.check(st == 200, "%s cut: /healthz still 200" % f.name, str(st))
        for i in range(20):
            r = c.claim(SCOPE, "k-%d-%s" % (i, oc.rand_hex(4)), others)
            t.require(r.accepted, "claim %d ACCEPTED by the majority" % i,
                      r.describe())
        for n in others:
            st, _, body = oh.request(n.http_addr, "/readyz")
            t.check(st == 200, "%s (not cut): /readyz 200" % n.name,
                    "%s %r" % (st, body))
        st, _, body = oh.request(f.http_addr, "/readyz")
        t.check(st == 503, "%s: still 503 after the claims" % f.name,
                "%s %r" % (st, body))
        target = metric(leader.http_addr, "once_raft_commit_index")
        iptables(t, "-D", f.raft_port)
        healed = True
        t.info("healed %s" % f.name)
        st, body = oh.wait_status(t, f.http_addr, "/readyz", 200, 30)
        t.check(st == 200, "%s healed: /readyz 200 again" % f.name,
                "%s %r" % (st, body))
        # Ready allows METRICS_READY_LAG (64) entries of lag: the catch-up
        # itself finishes just after.
        end = time.time() + 15
        applied = None
        while time.time() < end:
            applied = metric(f.http_addr, "once_raft_applied_index")
            if applied is not None and target is not None and \
                    applied >= target:
                break
            time.sleep(0.1)
        t.check(applied is not None and target is not None
                and applied >= target,
                "%s healed: applied index %s reached the commit %s made "
                "while it was cut" % (f.name, applied, target))
    finally:
        if not healed:  # our own namespace: flushing touches only us
            subprocess.run(["iptables", "-w", "-F", "INPUT"])


if __name__ == "__main__":
    oc.main("once-readyz", scenario)
