#!/usr/bin/env python3
"""once_member_cert.py: a member cannot speak for another (docs/security.md,
"A member is bound to its certificate").

A TLS 3-node cluster whose nodes a, b, c listen on 127.0.0.1, 127.0.0.2 and
127.0.0.3 (all loopback), each with a certificate of its own from
scripts/make-certs.sh (IP SAN its address, DNS NAME.once.test); the access
file makes *.once.test members and ops an admin. Two member certificates,
b's and c's, then try to speak for a member they are not:

  1. the cluster forms at all: the joins and every Raft link are bound
     (each member's certificate names its own address);
  2. on a's Raft port, with b's certificate, raft's handshake naming
     c's id at c's address (b's certificate does not name 127.0.0.3),
     c's id at b's address (the directory pairs c with another address),
     a new id at b's address (that is member b's address): each link is
     closed, logged and counted in a's once_raft_member_refused_total;
     b's certificate naming b's own id and address stays open and is not
     counted;
  3. on the client port, b's certificate asks the leader to add a member
     at c's addresses, and under c's id: PERMISSION_DENIED, applied false
     ("a member adds only itself"), and the directory still has 3 members;
     the admin certificate adding a new id at b's Raft address is refused
     FAILED_PRECONDITION before anything is proposed (no directory entry);
  4. SIGHUP on a with an access file that pins b's identity to another
     Raft address ("raft_addrs"): a closes b's links and refuses the new
     ones (counted), while a and c still decide claims; the file put back
     and SIGHUP again, b is bound again and catches up.
"""

import json
import os
import random
import re
import signal
import socket
import ssl
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SCOPE = "membercert"


class IpNode(oc.Node):
    """A node on its own loopback address: 127.0.0.(slot + 1)."""

    @property
    def ip(self):
        return "127.0.0.%d" % (self.slot + 1)

    @property
    def client_addr(self):
        return "%s:%d" % (self.ip, self.client_port)

    @property
    def raft_addr(self):
        return "%s:%d" % (self.ip, self.raft_port)

    @property
    def http_addr(self):
        return "%s:%d" % (self.ip, self.http_port)


def access(pin_b=None):
    ids = [{"match": "dns:*.once.test", "role": "member"},
           {"match": "dns:ops", "role": "admin"}]
    if pin_b:
        ids.insert(0, {"match": "dns:b.once.test", "role": "member",
                       "raft_addrs": [pin_b]})
    return {"identities": ids}


def write_access(d, pin_b=None):
    path = os.path.join(d, "access.json")
    with open(path + ".tmp", "w") as f:
        json.dump(access(pin_b), f)
    os.rename(path + ".tmp", path)


def raft_handshake(rid, addr):
    """raft_uv_tcp's handshake: protocol 1, the id, the address (with its
    NUL, padded to 8 bytes)."""
    a = addr.encode() + b"\x00"
    a += b"\x00" * (-len(a) % 8)
    return struct.pack("<QQQ", 1, rid, len(a)) + a


def raft_link(d, who, node, rid, addr, wait=3.0):
    """Open a TLS link to @node's Raft port with @who's certificate and send
    a handshake naming @rid at @addr. True: the node closed it within
    @wait seconds; False: it is still open."""
    ctx = oh.tls_context(d, who)
    raw = socket.create_connection((node.ip, node.raft_port), timeout=5)
    try:
        s = ctx.wrap_socket(raw, server_hostname=node.ip)
    except (OSError, ssl.SSLError):
        raw.close()
        return True
    try:
        s.sendall(raft_handshake(rid, addr))
        s.settimeout(wait)
        try:
            return s.recv(1) == b""
        except socket.timeout:
            return False
        except (OSError, ssl.SSLError):
            return True
    finally:
        s.close()


def refused_count(d, n):
    """@n's once_raft_member_refused_total, from /metrics (admin ops)."""
    st, _, body = oh.request(n.http_addr, "/metrics",
                             ctx=oh.tls_context(d, "ops"))
    if st != 200:
        return None
    m = re.search(r"^once_raft_member_refused_total (\S+)$", body, re.M)
    return int(float(m.group(1))) if m else None


def wait_count(d, n, at_least, timeout=10):
    deadline = time.time() + timeout
    v = None
    while time.time() < deadline:
        v = refused_count(d, n)
        if v is not None and v >= at_least:
            return v
        time.sleep(0.2)
    return v


def ctl_as(c, d, who, args, via):
    keep = c.ctl_flags
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, who + ".pem"),
                   "--tls-key", os.path.join(d, who + ".key")]
    try:
        return c.ctl(args, via=via, timeout="3s")
    finally:
        c.ctl_flags = keep


def impostors(t, d, a, b, cn):
    base = refused_count(d, a)
    t.require(base is not None, "a's /metrics has "
              "once_raft_member_refused_total", "got %r" % base)
    bid, cid = int(b.id, 16), int(cn.id, 16)
    fresh = random.getrandbits(63) | 1
    for rid, addr, what in (
            (cid, cn.raft_addr, "c's id at c's address (b's certificate "
             "does not name 127.0.0.3)"),
            (cid, b.raft_addr, "c's id at b's address (the directory "
             "pairs c with c's)"),
            (fresh, b.raft_addr, "a new id at b's address (member b's)")):
        t.check(raft_link(d, "b", a, rid, addr),
                "b's certificate naming %s: a closes the link" % what)
    got = wait_count(d, a, base + 3)
    t.check(got == base + 3, "each is counted in a's "
            "once_raft_member_refused_total",
            "before %s, after %s" % (base, got))
    t.check("may not speak as member %016x" % cid in a.log_text(),
            "a logs which member the certificate may not speak as")
    t.check(not raft_link(d, "b", a, bid, b.raft_addr, wait=2.0),
            "b's certificate naming b's own id and address: the link stays "
            "open")
    t.check(refused_count(d, a) == base + 3, "and is not counted")


def joins(t, c, d, L, b, cn, nodes):
    fresh = "%016x" % (random.getrandbits(63) | 1)
    cases = ((fresh, cn.raft_addr, cn.client_addr, "a new id at c's "
              "addresses"),
             (cn.id, cn.raft_addr, cn.client_addr, "c's id and addresses"),
             (fresh, b.raft_addr, cn.client_addr, "a new id at b's Raft "
              "address (member b's)"))
    for mid, raddr, caddr, what in cases:
        r = ctl_as(c, d, "b", ["members", "add", mid, raddr, caddr], [L])
        ok = (r.rc == oc.RC_NOT_APPLIED and r.error == "PERMISSION_DENIED"
              and r.get("applied") == "false"
              and "adds only itself" in json.dumps(r.obj))
        t.check(ok, "b's certificate adds %s -> PERMISSION_DENIED, applied "
                "false" % what, r.describe())
    ms = c.members(nodes)
    t.check(ms is not None and len(ms) == 3, "still 3 members",
            "members=%s" % ms)


def admin_taken(t, c, L, b, nodes):
    """An admin may add any member, but not at a Raft address a member
    holds: refused before anything is proposed, so no stray entry."""
    fresh = "%016x" % (random.getrandbits(63) | 1)
    r = c.ctl(["members", "add", fresh, b.raft_addr, "127.0.0.9:9"], via=[L],
              timeout="3s")
    t.check(r.is_outcome("FAILED_PRECONDITION", oc.RC_NO) and
            "already member %s" % b.id in str(r.get("reason")),
            "ops adds a new id at b's Raft address -> FAILED_PRECONDITION "
            "naming b", r.describe())
    ms = c.members(nodes)
    t.check(ms is not None and len(ms) == 3 and
            fresh not in json.dumps(ms),
            "no directory entry for the refused id", "members=%s" % ms)


def reload_pin(t, c, d, a, b, cn, nodes):
    before = refused_count(d, a)
    write_access(d, pin_b="127.0.0.2:1")
    a.proc.send_signal(signal.SIGHUP)
    got = wait_count(d, a, before + 1)
    t.check(got is not None and got > before,
            "SIGHUP on a with b pinned elsewhere: a closes (and counts) "
            "b's links", "before %s, after %s" % (before, got))
    time.sleep(1.0)
    later = refused_count(d, a)
    t.check(later is not None and later > got,
            "b's new links are refused too", "%s then %s" % (got, later))
    r = c.claim(SCOPE, "while-b-is-cut", [a, cn], timeout="10s")
    t.check(r.is_outcome("ACCEPTED"), "a and c still decide claims",
            r.describe())
    write_access(d)
    a.proc.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    settled = refused_count(d, a)
    time.sleep(1.5)
    t.check(refused_count(d, a) == settled,
            "the file put back: no more refusals", "settled at %s" % settled)
    r = c.claim(SCOPE, "after-the-pin", [a, cn], timeout="10s")
    t.require(r.is_outcome("ACCEPTED"), "a claim after the file is back",
              r.describe())
    sa = c.status(a)
    want = int(sa.get("applied_index", 0)) if sa else None
    deadline = time.time() + 20
    sb = None
    while want is not None and time.time() < deadline:
        sb = c.status(b)
        if sb is not None and int(sb.get("applied_index", 0)) >= want:
            break
        time.sleep(0.3)
    t.check(want is not None and sb is not None and
            int(sb.get("applied_index", 0)) >= want,
            "b is bound again and applies what a has applied",
            "a at %s, b %s" % (want, sb and sb.get("applied_index")))


def scenario(t):
    d = os.path.join(t.work, "certs")
    oc.make_certs(d, [("ca",), ("client", "ops")] +
                  [("node", n, "127.0.0.%d" % (i + 1), n + ".once.test")
                   for i, n in enumerate(("a", "b", "c"))])
    write_access(d)
    c = oc.Cluster(t, "membercert", 9620, http=True)
    for name in ("a", "b", "c"):
        c.nodes[name] = IpNode(c, name, len(c.nodes))
    c.node_extra = lambda n: [
        "--tls-cert", os.path.join(d, n.name + ".pem"),
        "--tls-key", os.path.join(d, n.name + ".key"),
        "--tls-ca", os.path.join(d, "ca.pem"),
        "--access", os.path.join(d, "access.json")]
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, "ops.pem"),
                   "--tls-key", os.path.join(d, "ops.key")]
    nodes = c.start_cluster(["a", "b", "c"])
    a, b, cn = nodes
    L = c.wait_leader(nodes)
    r = c.claim(SCOPE, "formed", nodes, timeout="10s")
    t.check(r.is_outcome("ACCEPTED"), "the cluster of three bound members "
            "decides a claim", r.describe())
    impostors(t, d, a, b, cn)
    joins(t, c, d, L, b, cn, nodes)
    admin_taken(t, c, L, b, nodes)
    reload_pin(t, c, d, a, b, cn, nodes)


if __name__ == "__main__":
    oc.main("once-member-cert", scenario)
