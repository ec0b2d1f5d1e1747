#!/usr/bin/env python3
"""once_authz_tls.py: identities, roles and scopes over TLS, on a 3-node
cluster whose certificates scripts/make-certs.sh makes (docs/server.md,
"Authorization").

The access file: the nodes (DNS *.once.test) are members, ops is admin,
tenant-a (URI spiffe://test/tenant-a) a client of tenant-a and tenant-a/*,
tenant-b a client of tenant-b, prom (CN) a monitor; "nobody" has a
certificate of the same CA and no identity.

  * tenant A claims in its scope on the leader and through a follower
    (forwarded: the leader authorizes it as tenant A, whom a member is
    not) -> ACCEPTED; in tenant B's scope -> PERMISSION_DENIED, applied
    false, naming the missing right, on either node;
  * tenant A cannot lookup, complete, release or forget B's key (B's record
    is untouched), cannot forget its own keys, remove a member, transfer
    leadership, take a snapshot or ask for the state digest; status works;
  * the monitor reads status and the member list and cannot claim; nobody
    cannot even read status; the admin forgets B's key;
  * a node whose certificate (same CA) has no member identity cannot join;
  * SIGHUP with a changed access file: tenant B gains scope tenant-c.
"""

import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

ACCESS = oc.tenant_access()


def make_certs(d):
    oc.make_certs(d, oc.TENANT_CERTS +
                  [("node", "x", "127.0.0.1", "x.evil.test")])


def ctl_as(c, d, who, args, via, timeout="3s"):
    keep = c.ctl_flags
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, who + ".pem"),
                   "--tls-key", os.path.join(d, who + ".key")]
    try:
        return c.ctl(args, via=via, timeout=timeout)
    finally:
        c.ctl_flags = keep


def denied(t, r, what, word=None):
    msg = (r.get("message") or "") + (r.get("error_message") or "")
    ok = (r.rc == oc.RC_NOT_APPLIED and r.error == "PERMISSION_DENIED"
          and r.get("applied") == "false"
          and (word is None or word in json.dumps(r.obj)))
    t.check(ok, what + " -> PERMISSION_DENIED, applied false", r.describe()
            + (" message=%r" % msg if msg else ""))


def tenants(t, c, d, L, F):
    for n, how in ((L, "the leader"), (F, "a follower (forwarded)")):
        r = ctl_as(c, d, "tenant-a",
                   ["claim", "tenant-a/orders", "k-" + n.name], [n])
        t.check(r.is_outcome("ACCEPTED"),
                "tenant A claims in its scope via %s -> ACCEPTED" % how,
                r.describe())
        r = ctl_as(c, d, "tenant-a", ["claim", "tenant-b", "x-" + n.name],
                   [n])
        denied(t, r, "tenant A claims in B's scope via %s" % how,
               'in scope \\"tenant-b\\" is missing')
    r = ctl_as(c, d, "tenant-b", ["claim", "tenant-b", "job", "--idempotent"],
               [L])
    t.require(r.is_outcome("ACCEPTED") and r.get("owner_token"),
              "tenant B takes an idempotent key", r.describe())
    tok = r.get("owner_token")
    for args, what in (
            (["lookup", "tenant-b", "job"], "lookup"),
            (["complete", "tenant-b", "job", "--owner-token", tok,
              "--result", "forged"], "complete"),
            (["release", "tenant-b", "job", "--owner-token", tok],
             "release"),
            (["forget", "tenant-b", "job"], "forget")):
        for n in (L, F):
            r = ctl_as(c, d, "tenant-a", args, [n])
            denied(t, r, "tenant A %s of B's key via %s" % (what, n.name))
    r = ctl_as(c, d, "tenant-b", ["lookup", "tenant-b", "job"], [L])
    t.check(r.is_outcome("FOUND") and r.get("state") == "PENDING"
            and r.get("owner_token") == tok,
            "B's record is untouched (PENDING, B's owner token)",
            r.describe())
    return tok


def admin_rights(t, c, d, L, F):
    for args, what in ((["forget", "tenant-a/orders", "k-" + L.name],
                        "forget its own key"),
                       (["members", "remove", F.id], "remove a member"),
                       (["transfer"], "transfer leadership"),
                       (["snapshot", "take"], "take a snapshot"),
                       (["status", "--state-digest"], "read the digest")):
        r = ctl_as(c, d, "tenant-a", args, [L])
        denied(t, r, "tenant A cannot " + what)
    r = ctl_as(c, d, "tenant-a", ["status"], [F])
    t.check(r.rc == oc.RC_OK, "tenant A reads status", r.describe())
    r = ctl_as(c, d, "prom", ["status", "--state-digest"], [F])
    t.check(r.rc == oc.RC_OK, "the monitor reads status (and its digest)",
            r.describe())
    r = ctl_as(c, d, "prom", ["members", "list"], [F])
    t.check(r.rc == oc.RC_OK, "the monitor lists the members", r.describe())
    r = ctl_as(c, d, "prom", ["claim", "tenant-a", "m"], [L])
    denied(t, r, "the monitor claims", "has role monitor")
    r = ctl_as(c, d, "nobody", ["status"], [L])
    denied(t, r, "a certificate without an identity reads status",
           "no identity")
    r = ctl_as(c, d, "ops", ["forget", "tenant-b", "job"], [F])
    t.check(r.is_outcome("FORGOTTEN"), "the admin forgets B's key (via a "
            "follower)", r.describe())


def rogue_join(t, c, d, nodes):
    x = c.node("x")
    x.start(join=nodes, extra=["--tls-cert", os.path.join(d, "x.pem"),
                               "--tls-key", os.path.join(d, "x.key"),
                               "--tls-ca", os.path.join(d, "ca.pem"),
                               "--access", os.path.join(d, "access.json")])
    rc = x.wait_exit(30)
    t.check(rc == 1, "a node without the member role cannot join (exit 1)",
            "rc=%s" % rc)
    ms = c.members(nodes)
    t.check(ms is not None and len(ms) == 3, "still 3 members",
            "members=%s" % ms)


def reload(t, c, d, nodes, L):
    r = ctl_as(c, d, "tenant-b", ["claim", "tenant-c", "k"], [L])
    denied(t, r, "tenant B in tenant-c before the reload")
    ACCESS["identities"][3]["scopes"].append("tenant-c")
    with open(os.path.join(d, "access.json"), "w") as f:
        json.dump(ACCESS, f)
    for n in nodes:
        n.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline and not all(
            "what=access detail=\"identities=5" in n.log_text()
            and n.log_text().count("what=access") >= 1 for n in nodes):
        time.sleep(0.1)
    r = ctl_as(c, d, "tenant-b", ["claim", "tenant-c", "k"], [L])
    t.check(r.is_outcome("ACCEPTED"),
            "SIGHUP with a changed access file: tenant B claims in "
            "tenant-c", r.describe())


def scenario(t):
    d = os.path.join(t.work, "certs")
    make_certs(d)
    with open(os.path.join(d, "access.json"), "w") as f:
        json.dump(ACCESS, f)
    c = oc.Cluster(t, "authztls", 9400)
    c.node_extra = lambda n: (
        ["--tls-cert", os.path.join(d, n.name + ".pem"),
         "--tls-key", os.path.join(d, n.name + ".key"),
         "--tls-ca", os.path.join(d, "ca.pem"),
         "--access", os.path.join(d, "access.json")]
        if n.name != "x" else [])
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, "ops.pem"),
                   "--tls-key", os.path.join(d, "ops.key")]
    nodes = c.start_cluster(["a", "b", "c"])
    L = c.wait_leader(nodes)
    F = [n for n in nodes if n is not L][0]
    tenants(t, c, d, L, F)
    admin_rights(t, c, d, L, F)
    rogue_join(t, c, d, nodes)
    reload(t, c, d, nodes, L)


if __name__ == "__main__":
    oc.main("once-authz-tls", scenario)
