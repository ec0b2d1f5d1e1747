#!/usr/bin/env python3
"""once_novote.py: the no-vote stall after a majority cut a torn tail, and
the operator's way out, onced --accept-cut-tail (docs/operations.md, "A
cluster that elects no leader after a power loss").

  * a 3-node cluster (HTTP on, for /metrics) takes claims; every node's
    once_raft_no_vote is 0;
  * two nodes are stopped by their PIDs; each gets a torn tail: a partial
    record of the next index at the end of its last segment (the header
    and part of the payload of a write that never completed; zeros after
    it), the way a power loss during an append leaves it; both restart;
  * their load cuts it (the log names the cut), and then: no leader for
    some seconds, once_raft_no_vote 1 and once_raft_no_vote_cut_index the
    cut index on both, /readyz 503 naming it, oncectl status showing
    no_vote_cut_index, vote traffic dropped, claims
    through any node fail closed (exit 3 or 4, never ACCEPTED);
  * one of the two restarts with --accept-cut-tail: it logs at error level
    what it cleared, a leader is elected, every claim taken before is
    REPLAYED and a fresh one ACCEPTED, once_raft_no_vote is 0 and status
    has no no_vote_cut_index on it (and on the other once the leader's log
    passes its cut index).
  * the node that cut nothing restarts with the flag too: it logs that it
    had nothing to do, and the cluster serves as before;
  * the flag with --restore, with --storage uv, or twice is refused.
  Without the flag's effect the restarted node stays in no-vote and no
  leader is ever elected: the test fails.

The uv store keeps no cut index: ONCE_TEST_STORAGE=uv is ignored here (the
nodes run onced's default store). Ports from 9500.
"""

import glob
import json
import os
import struct
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SCOPE = "novote"
N_CLAIMS = 8
STALL_S = 6  # how long a cluster in no-vote must stay leaderless
REC_MAGIC = 0x31434552  # "REC1" (src/store/store_format.h)
SEG_HDR, REC_HDR = 64, 32


def pad8(n):
    return (n + 7) & ~7


def tear_tail(t, n):
    """Append a torn record to @n's last segment; return its index."""
    segs = sorted(glob.glob(os.path.join(n.dir, "log", "seg-*")))
    t.require(segs, "%s: has log segments" % n.name)
    path = segs[-1]
    first = int(os.path.basename(path)[4:])
    with open(path, "r+b") as f:
        data = f.read()
        p, index, term = SEG_HDR, first, 0
        while p + REC_HDR <= len(data):
            magic, _, idx, tm, _, _, ln = struct.unpack_from("<IIQQHHI", data,
                                                             p)
            if magic != REC_MAGIC:
                break
            t.require(idx == index, "%s: record %d where %d was expected"
                      % (n.name, idx, index))
            p += REC_HDR + pad8(ln)
            index, term = idx + 1, tm
        t.require(all(b == 0 for b in data[p:]),
                  "%s: only zeros after the records of %s" % (n.name, path))
        length = 256
        t.require(p + REC_HDR + length <= len(data),
                  "%s: room for a torn record in %s" % (n.name, path))
        # The header and the first half of the payload landed, the rest
        # did not (its crc cannot hold): a torn tail, by the load rules.
        rec = struct.pack("<IIQQHHI", REC_MAGIC, 0x5EED, index, max(term, 1),
                          1, 0, length) + b"\xa5" * (length // 2)
        f.seek(p)
        f.write(rec)
        f.flush()
        os.fsync(f.fileno())
    t.info("%s: torn record of index %d at %s offset %d"
           % (n.name, index, os.path.basename(path), p))
    return index


def metrics(n):
    """The node's /metrics as {series: value}, or None."""
    return oh.scrape(n.http_addr)


def wait_metrics(n, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if n.proc is not None and n.proc.poll() is not None:
            return False
        if metrics(n) is not None:
            return True
        time.sleep(0.2)
    return False


def wait_metric(n, name, want, timeout):
    deadline = time.time() + timeout
    m = None
    while time.time() < deadline:
        m = metrics(n)
        if m is not None and m.get(name) == want:
            return m
        time.sleep(0.2)
    return m


def claims_fail_closed(t, c, nodes, what):
    for i, n in enumerate(nodes):
        key = "%s-%d-%s" % (what, i, oc.rand_hex(4))
        r = c.claim(SCOPE, key, [n], timeout="2s", wall=20)
        t.check(r.rc in (oc.RC_NOT_APPLIED, oc.RC_UNKNOWN) and
                not r.accepted and r.error is not None,
                "%s: a claim through %s fails closed (exit %s, %s)"
                % (what, n.name, r.rc, r.error), r.describe())


def refusals(t, c):
    """The flag where it makes no sense: refused before anything starts."""
    d = os.path.join(c.work, "refused")
    base = [t.onced, "--data-dir", d, "--raft-addr", "127.0.0.1:1",
            "--client-addr", "127.0.0.1:2", "--accept-cut-tail"]
    for extra, why in ((["--bootstrap", "--restore", d + "/x"],
                        "not with --restore"),
                       (["--storage", "uv"], "not with --storage uv"),
                       (["--accept-cut-tail"], "given twice")):
        p = subprocess.run(base + extra, capture_output=True, timeout=30,
                           env=t.child_env, stdin=subprocess.DEVNULL)
        err = p.stderr.decode("utf-8", "replace")
        t.check(p.returncode == 2 and why in err,
                "--accept-cut-tail %s: refused (%s)" % (" ".join(extra), why),
                "rc=%s %s" % (p.returncode, err.strip()))
    t.check(not os.path.exists(d), "a refused start made no data directory")


def scenario(t):
    os.environ.pop("ONCE_TEST_STORAGE", None)  # uv keeps no cut (docstring)
    c = oc.Cluster(t, "novote", 9500, http=True)
    refusals(t, c)
    nodes = c.start_cluster(["a", "b", "c"])
    a, b, cc = nodes
    c.wait_serving(nodes)
    keys = []
    for i in range(N_CLAIMS):
        k = "k-%d-%s" % (i, oc.rand_hex(4))
        r = c.claim(SCOPE, k, [nodes[i % 3]])
        t.require(r.accepted, "claim %d ACCEPTED" % i, r.describe())
        keys.append(k)
    for n in nodes:
        m = metrics(n)
        t.require(m is not None, "%s: /metrics answers" % n.name)
        t.check(m.get("once_raft_no_vote") == 0 and
                m.get("once_raft_no_vote_cut_index") == 0,
                "%s: once_raft_no_vote 0 in a healthy cluster" % n.name,
                str(m.get("once_raft_no_vote")))

    # Two of three stop; each comes back with a torn tail.
    cut = {}
    for n in (b, cc):
        rc, killed = n.stop()
        t.require(rc == 0 and not killed, "%s stops at SIGTERM" % n.name,
                  "rc=%s killed=%s" % (rc, killed))
    # As after a power loss of the whole cluster, no leader is left when
    # they come back: a, alone, steps down within an election timeout (a
    # leader that b and c answered again would give them their entries).
    m = wait_metric(a, "once_raft_is_leader", 0, 20)
    t.require(m is not None and m.get("once_raft_is_leader") == 0,
              "a, alone, is not the leader")
    for n in (b, cc):
        cut[n.name] = tear_tail(t, n)
        n.start()
        # Not wait_answering: without a leader a restarted node may not
        # have applied the cluster id its status answer needs.
        t.require(wait_metrics(n, 20), "%s: /metrics answers after its "
                  "restart" % n.name)
    for n in (b, cc):
        t.check("cut a torn record at the tail" in n.log_text(),
                "%s: its log names the cut" % n.name, n.log_tail(8))
        m = wait_metric(n, "once_raft_no_vote", 1, 10)
        t.check(m is not None and m.get("once_raft_no_vote") == 1 and
                m.get("once_raft_no_vote_cut_index") == cut[n.name],
                "%s: once_raft_no_vote 1, cut index %d" % (n.name,
                                                          cut[n.name]),
                str(m and {k: v for k, v in m.items() if "no_vote" in k}))
    for n in (b, cc):
        # Polled: a restarted node may still take the AppendEntries a
        # queued for it before stepping down, and look ready for an
        # election timeout.
        note = "neither votes nor campaigns until its log holds index %d" \
            % cut[n.name]
        deadline = time.time() + 10
        while True:
            st, _, body = oh.request(n.http_addr, "/readyz")
            if (st == 503 and note in body) or time.time() > deadline:
                break
            time.sleep(0.2)
        t.check(st == 503 and note in body,
                "%s: /readyz 503 names the no-vote state" % n.name,
                "%s %r" % (st, body))
        r = c.ctl(["status"], via=[n], timeout="2s")
        t.check(r.rc == oc.RC_OK and r.obj and
                r.get("no_vote_cut_index") == cut[n.name],
                "%s: oncectl status shows no_vote_cut_index %d"
                % (n.name, cut[n.name]), r.describe())
    deadline = time.time() + STALL_S
    ld = None
    while ld is None and time.time() < deadline:
        ld = c.leader_of(nodes)
        time.sleep(0.3)
    t.require(ld is None, "no leader for %ds with two nodes in no-vote"
              % STALL_S, "leader %s" % ld)
    dropped = [(metrics(n) or {}).get("once_raft_no_vote_dropped_total", 0)
               for n in (b, cc)]
    t.check(all(d > 0 for d in dropped),
            "vote traffic dropped in no-vote (%s)" % dropped)
    claims_fail_closed(t, c, nodes, "stalled")

    # The way out: one of the two accepts its cut.
    rc, killed = b.stop()
    t.require(rc == 0 and not killed, "b stops at SIGTERM")
    b.start(extra=["--accept-cut-tail"])
    t.require(wait_metrics(b, 20), "b: /metrics answers after its restart")
    said = [ln for ln in b.log_text().splitlines()
            if "accept-cut-tail: cleared the cut index %d " % cut["b"] in ln]
    t.check(len(said) == 1 and "level=error" in said[0],
            "b: logs at error level what --accept-cut-tail cleared",
            b.log_tail(8))
    ld = c.wait_leader(nodes, timeout=30)
    t.check(ld is not None, "a leader is elected after --accept-cut-tail "
            "(%s)" % ld.name)
    c.wait_serving(nodes, timeout=45)
    for i, k in enumerate(keys):
        r = c.claim(SCOPE, k, [nodes[i % 3]])
        t.check(r.is_outcome("REPLAYED"), "claim %d taken before is "
                "REPLAYED" % i, r.describe())
    r = c.claim(SCOPE, "fresh-%s" % oc.rand_hex(4), nodes)
    t.check(r.is_outcome("ACCEPTED"), "a fresh claim is ACCEPTED",
            r.describe())
    for n in (b, cc):
        m = wait_metric(n, "once_raft_no_vote", 0, 20)
        t.check(m is not None and m.get("once_raft_no_vote") == 0 and
                m.get("once_raft_no_vote_cut_index") == 0,
                "%s: once_raft_no_vote back to 0" % n.name,
                str(m and {k: v for k, v in m.items() if "no_vote" in k}))
        st = c.status(n)
        t.check(st is not None and "no_vote_cut_index" not in st,
                "%s: oncectl status without no_vote_cut_index" % n.name,
                json.dumps(st))

    # Without a cut the flag changes nothing, and says so.
    rc, killed = a.stop()
    t.require(rc == 0 and not killed, "a stops at SIGTERM")
    a.start(extra=["--accept-cut-tail"])
    t.require(wait_metrics(a, 20), "a: /metrics answers after its restart")
    t.check("accept-cut-tail: nothing to do" in a.log_text() and
            "accept-cut-tail: cleared" not in a.log_text(),
            "a (no cut): --accept-cut-tail logs that it had nothing to do",
            a.log_tail(8))
    c.wait_serving(nodes, timeout=45)
    r = c.claim(SCOPE, keys[0], [a])
    t.check(r.is_outcome("REPLAYED"), "after a's restart claim 0 is still "
            "REPLAYED", r.describe())


if __name__ == "__main__":
    oc.main("once_novote", scenario)
