#!/usr/bin/env python3
"""once_ingress.py: once-ingress in front of a counting upstream, three
replicas over one 3-node once cluster (harness: oncecluster.py,
ingresslib.py).

  1. refusals before any claim: bad signature 401, header garbage 400,
     a stale or future timestamp 400 (also 5 s outside either edge of the
     window, while 5 s inside is delivered), a body over --max-body 413;
     the upstream sees none of the refused ones;
  2. the same signed webhook to the three replicas at once: exactly one
     upstream delivery; every later copy 200 "duplicate" with the stored
     upstream body, without an upstream call;
  3. the upstream failing the first attempt: 503 with Retry-After, the
     sender's retry on another replica takes over: exactly one successful
     delivery (the upstream saw two attempts, the first answered 500);
  4. an upstream 400: 422, failed for good, no second attempt; and a
     message failing every time: 503, then 422 after --max-attempts (2);
  5. a replica killed (kill -9) in the middle of a delivery: while the
     lease lives another replica answers 409 with Retry-After; after it,
     the retry takes over (Once-Attempt 2) and completes. The upstream saw
     two attempts (the first one's answer had nobody left to read it); the
     cluster records one COMPLETED with owner_attempt 2;
  6. replicas with their clocks 5 minutes ahead and behind (libfaketime):
     a fresh message is accepted through either (the window is the
     cluster's log time), and no message is delivered a second time;
  7. SIGHUP: a rotated secret file takes effect, a broken one is refused
     and the previous secrets stay;
  8. the cluster down: 503 unavailable, /readyz 503, nothing forwarded;
     a full cluster restart, then the node set replaced and resized
     (3 -> 5 -> 3, two originals removed): the delivered message is still
     a duplicate everywhere, a new one is delivered once;
  9. the Stripe scheme (secrets from the environment, the id from the
     body) with /metrics, /healthz and /readyz on --http-addr; every
     replica stops at SIGTERM with exit 0 and no sanitizer report.
"""

import concurrent.futures
import json
import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ingresslib as il  # noqa: E402
import oncecluster as oc  # noqa: E402

BASE = 10100
SCOPE = "hooks"
LEASE = "3s"
FLAGS = ["--scope", SCOPE, "--lease", LEASE, "--upstream-timeout", "2s",
         "--retry-after", "1s", "--max-attempts", "2", "--timeout", "3s",
         "--max-body", "65536", "--threads", "4"]


class World:
    def __init__(self, t):
        self.t = t
        self.c = oc.Cluster(t, "ingress", BASE)
        self.nodes = self.c.start_cluster(["A", "B", "C"])
        self.up = il.Upstream(self.c.base + 40)
        self.secret = il.new_secret()
        self.secret_file = os.path.join(t.work, "secrets")
        with open(self.secret_file, "w") as f:
            f.write("# the test's secret\n%s\n" % self.secret)
        self.addrs = self.c.addrs(self.nodes)
        self.ing = []
        for i in range(3):
            self.ing.append(self.ingress("I%d" % (i + 1), 41 + i))
        for g in self.ing:
            g.start()
        t.check(True, "three once-ingress replicas ready")

    def ingress(self, name, off, faketime=None):
        return il.Ingress(self.t, name, self.c.base + off, self.addrs,
                          self.up.url, self.secret_file, FLAGS,
                          faketime=faketime)

    def message(self, tag, ts=None, secret=None):
        mid = "msg_%s_%s" % (tag, oc.rand_hex(4))
        body = json.dumps({"type": "test", "tag": tag}).encode()
        return mid, il.sw_headers(secret or self.secret, mid, body, ts), body


def refusals(t, w):
    mid, h, body = w.message("refused")
    h_bad = dict(h, **{"webhook-signature": il.sign_sw(
        il.new_secret(), mid, h["webhook-timestamp"], body)})
    r = il.post(w.ing[0].addr, h_bad, body)
    t.check(r.status == 401 and r.outcome == "bad_signature",
            "a wrong secret's signature: 401 bad_signature", r.describe())
    r = il.post(w.ing[0].addr, h, body + b" ")
    t.check(r.status == 401, "a tampered body: 401", r.describe())
    r = il.post(w.ing[0].addr, dict(h, **{"webhook-timestamp": "soon"}), body)
    t.check(r.status == 400 and r.outcome == "malformed",
            "a timestamp that is not digits: 400 malformed", r.describe())
    r = il.post(w.ing[0].addr, {"Content-Type": "application/json"}, body)
    t.check(r.status == 400, "no signature headers: 400", r.describe())
    old = int(time.time()) - 3600
    mid2, h2, b2 = w.message("stale", ts=old)
    r = il.post(w.ing[1].addr, h2, b2)
    t.check(r.status == 400 and r.outcome == "stale",
            "signed an hour ago: 400 stale", r.describe())
    mid3, h3, b3 = w.message("future", ts=int(time.time()) + 3600)
    r = il.post(w.ing[1].addr, h3, b3)
    t.check(r.status == 400 and r.outcome == "future",
            "signed an hour ahead: 400 future", r.describe())
    # Near the window's edges (the cluster's log time decides; a few
    # seconds of slack for this machine's load): --tolerance 5m behind,
    # the cluster's max_skew 30s ahead.
    now = int(time.time())
    near = [("edge_old_in", now - 300 + 5, 200, "accepted"),
            ("edge_old_out", now - 300 - 5, 400, "stale"),
            ("edge_new_in", now + 30 - 5, 200, "accepted"),
            ("edge_new_out", now + 30 + 5, 400, "future")]
    for tag, ts, code, outcome in near:
        m, hh, bb = w.message(tag, ts=ts)
        r = il.post(w.ing[0].addr, hh, bb)
        t.check(r.status == code and r.outcome == outcome,
                "signed %+d s from now: %d %s" % (ts - now, code, outcome),
                r.describe())
    big = b"{" + b" " * 70000 + b"}"
    mid4, h4, _ = w.message("big")
    h4 = il.sw_headers(w.secret, mid4, big)
    r = il.post(w.ing[2].addr, h4, big)
    t.check(r.status == 413, "a body over --max-body: 413", r.describe())
    r = il.post(w.ing[2].addr, dict(h, **{"X-Pad": "x" * 70000}), body)
    # Refused either with a status or, when the server closes before the
    # client has sent the whole header, by the connection closing under it.
    closed = r.status is None and r.error is not None and (
        "BrokenPipe" in r.error or "ConnectionReset" in r.error)
    t.check(r.status in (413, 431) or closed, "headers over the bound: refused",
            r.describe())
    for m in (mid, mid2, mid3, mid4):
        t.check(w.up.arrived(m) == 0, "upstream never saw %s" % m)


def fan_in(t, w):
    mid, h, body = w.message("fanin")
    barrier = threading.Barrier(3)

    def send(g):
        barrier.wait()
        return il.post(g.addr, h, body)

    with concurrent.futures.ThreadPoolExecutor(3) as ex:
        replies = list(ex.map(send, w.ing))
    codes = sorted((r.status, r.outcome) for r in replies)
    t.check(w.up.arrived(mid) == 1,
            "the same webhook to three replicas at once: one upstream "
            "delivery", "arrived=%d answers=%s" % (w.up.arrived(mid), codes))
    t.check(sum(1 for r in replies if r.outcome == "accepted") == 1 and
            all(r.status in (200, 409) for r in replies),
            "one 'accepted', the others 409 in_progress or 200 duplicate",
            str(codes))
    for g in w.ing:
        r = il.post(g.addr, h, body)
        t.check(r.status == 200 and r.outcome == "duplicate" and
                json.loads(r.body).get("received") == mid and
                r.headers.get("once-upstream-status") == "200",
                "%s: a later copy is 200 duplicate with the stored upstream "
                "body" % g.name, r.describe())
    t.check(w.up.arrived(mid) == 1, "still one upstream delivery")
    return mid, h, body


def upstream_fails_first(t, w):
    mid, h, body = w.message("failfirst")
    w.up.fail_first[mid] = 1
    r = il.post(w.ing[0].addr, h, body)
    t.check(r.status == 503 and r.outcome == "upstream_failed" and
            r.headers.get("retry-after") == "1",
            "upstream 500 on the first attempt: 503, Retry-After 1",
            r.describe())
    t.check(b"received" not in r.body and b"upstream answered 500" in r.body,
            "the sender is told the status, not the upstream's body",
            r.describe())
    r = il.post(w.ing[1].addr, h, body)
    t.check(r.status == 200 and r.outcome == "accepted",
            "the sender's retry on another replica: 200 accepted",
            r.describe())
    r = il.post(w.ing[2].addr, h, body)
    t.check(r.status == 200 and r.outcome == "duplicate",
            "then a duplicate", r.describe())
    seen = w.up.of(mid)
    t.check(len(seen) == 2 and [d["status"] for d in seen] == [500, 200] and
            len(w.up.ok(mid)) == 1,
            "delivered exactly once in total (attempts seen: 500 then 200)",
            json.dumps(seen))


def terminal_failures(t, w):
    mid, h, body = w.message("refuse")
    w.up.refuse.add(mid)
    r = il.post(w.ing[0].addr, h, body)
    t.check(r.status == 422 and r.outcome == "failed",
            "an upstream 400: 422 failed", r.describe())
    r = il.post(w.ing[1].addr, h, body)
    t.check(r.status == 422 and b"upstream answered 400" in r.body,
            "again: 422 with the stored error, from another replica",
            r.describe())
    t.check(w.up.arrived(mid) == 1, "the refused message reached the "
            "upstream once", "arrived=%d" % w.up.arrived(mid))
    mid, h, body = w.message("always")
    w.up.fail_first[mid] = 1000
    r1 = il.post(w.ing[0].addr, h, body)
    r2 = il.post(w.ing[1].addr, h, body)
    r3 = il.post(w.ing[2].addr, h, body)
    t.check(r1.status == 503 and r2.status == 422 and r3.status == 422,
            "failing every time: 503, then 422 at --max-attempts 2, then 422",
            "%s | %s | %s" % (r1.describe(), r2.describe(), r3.describe()))
    t.check(w.up.arrived(mid) == 2, "two attempts reached the upstream",
            "arrived=%d" % w.up.arrived(mid))


def killed_mid_delivery(t, w):
    mid, h, body = w.message("killed")
    w.up.hold_first[mid] = 5
    victim = w.ing[0]
    box = {}
    th = threading.Thread(target=lambda: box.update(r=il.post(
        victim.addr, h, body, timeout=20)))
    th.start()
    deadline = time.time() + 10
    while w.up.arrived(mid) == 0 and time.time() < deadline:
        time.sleep(0.05)
    t.require(w.up.arrived(mid) == 1, "the delivery reached the upstream")
    victim.kill9()
    th.join()
    t.check(box["r"].status is None, "the sender lost its connection when "
            "the replica died", box["r"].describe())
    r = il.post(w.ing[1].addr, h, body)
    t.check(r.status == 409 and r.outcome == "in_progress" and
            r.headers.get("retry-after") is not None,
            "while the dead replica's lease lives: 409 in_progress with "
            "Retry-After", r.describe())
    wait = int(r.headers.get("retry-after", "3"))
    time.sleep(wait + 0.3)
    r = post_after_lease(w.ing[1].addr, h, body)
    t.check(r.status == 200 and r.outcome == "accepted",
            "after the lease: the retry takes over and is delivered",
            r.describe())
    seen = w.up.of(mid)
    atts = sorted(d["attempt"] for d in seen)
    t.info("upstream saw for %s: %s" % (mid, json.dumps(seen)))
    t.check(w.up.arrived(mid) == 2 and atts == ["1", "2"],
            "the upstream saw two attempts (1: held, its answer unread; 2: "
            "the takeover)", json.dumps(seen))
    lk = w.c.ctl(["lookup", SCOPE, mid], via=w.nodes)
    t.check(lk.outcome == "FOUND" and lk.get("state") == "COMPLETED" and
            lk.get("owner_attempt") == 2,
            "the cluster records one completion, by attempt 2",
            lk.describe())
    victim.start()


def post_after_lease(addr, h, body):
    deadline = time.time() + 10
    while True:
        r = il.post(addr, h, body)
        if r.status != 409 or time.time() > deadline:
            return r
        time.sleep(0.3)


def skewed(t, w, delivered):
    ahead = w.ingress("I4", 44, faketime="+300")
    behind = w.ingress("I5", 45, faketime="-300")
    w.ing += [ahead, behind]
    ahead.start()
    behind.start()
    # The skew is real: each replica's own log clock is off by 5 min (a
    # libfaketime that did not load would leave this test meaningless).
    for g, want in ((ahead, 300), (behind, -300)):
        off = g.logged_clock_offset()
        t.check(off is not None and abs(off - want) < 30,
                "%s logs with its clock %+d s off (libfaketime took effect)"
                % (g.name, want), "offset %s" % off)
    mid, h, body = w.message("skew")
    r = il.post(ahead.addr, h, body)
    t.check(r.status == 200 and r.outcome == "accepted",
            "a replica 5 min ahead accepts a fresh message (the cluster "
            "judges the window)", r.describe())
    r = il.post(behind.addr, h, body)
    t.check(r.status == 200 and r.outcome == "duplicate",
            "the replica 5 min behind: duplicate", r.describe())
    for g in (ahead, behind):
        r = il.post(g.addr, delivered[1], delivered[2])
        t.check(r.status == 200 and r.outcome == "duplicate",
                "%s (skewed): an earlier message is a duplicate" % g.name,
                r.describe())
    t.check(w.up.arrived(mid) == 1 and w.up.arrived(delivered[0]) == 1,
            "clock skew: no second delivery")


def reload(t, w):
    g = w.ing[1]
    new = il.new_secret()
    with open(w.secret_file + ".new", "w") as f:
        f.write(new + "\n")
    os.replace(w.secret_file + ".new", w.secret_file)
    g.signal(signal.SIGHUP)
    time.sleep(0.5)
    mid, h, body = w.message("oldkey")
    r = il.post(g.addr, h, body)
    t.check(r.status == 401, "after SIGHUP the removed secret is refused",
            r.describe())
    mid, h, body = w.message("newkey", secret=new)
    r = il.post(g.addr, h, body)
    t.check(r.status == 200, "and the new one accepted", r.describe())
    with open(w.secret_file, "w") as f:
        f.write("whsec_***garbage***\n")
    g.signal(signal.SIGHUP)
    time.sleep(0.5)
    mid, h, body = w.message("newkey2", secret=new)
    r = il.post(g.addr, h, body)
    t.check(r.status == 200, "a broken secret file is refused at SIGHUP; "
            "the secrets in force stay", r.describe())
    st, text = il.get(g.addr, "/metrics")
    t.check(st == 200 and "once_ingress_secret_reloads_total 1" in text and
            "once_ingress_secret_reload_failures_total 1" in text,
            "/metrics counts one reload and one refused reload", text[-400:])
    log = g.log_text()
    t.check(w.secret not in log and new not in log and "garbage" not in log,
            "no secret (nor the broken one) in the log")
    with open(w.secret_file, "w") as f:
        f.write("%s\n%s\n" % (w.secret, new))
    for x in w.ing:
        x.signal(signal.SIGHUP)
    time.sleep(0.5)


def restart_and_membership(t, w, delivered):
    c = w.c
    for n in w.nodes:
        n.stop()
    # No authority: fail closed, nothing forwarded.
    mid, h, body = w.message("nocluster")
    r = il.post(w.ing[0].addr, h, body)
    t.check(r.status == 503 and r.outcome == "unavailable" and
            r.headers.get("retry-after") is not None,
            "the cluster down: 503 unavailable with Retry-After",
            r.describe())
    st, _ = il.get(w.ing[0].addr, "/readyz", timeout=10)
    t.check(st == 503, "and /readyz 503", str(st))
    t.check(w.up.arrived(mid) == 0, "nothing forwarded without a claim")
    for n in w.nodes:
        n.start()
    c.wait_leader(w.nodes)
    c.wait_serving(w.nodes)
    for g in w.ing[:3]:
        r = il.post_until_decided(g.addr, delivered[1], delivered[2])
        t.check(r.status == 200 and r.outcome == "duplicate",
                "%s after a full cluster restart: duplicate" % g.name,
                r.describe())
    t.check(w.up.arrived(delivered[0]) == 1, "still one delivery")
    A, B, C = w.nodes
    D = c.join(c.node("D"), w.nodes)
    E = c.join(c.node("E"), w.nodes + [D])
    for victim in (A, B):
        _, gone = oc.remove_member(t, c, victim.id, [C, D, E])
        t.require(gone, "%s removed" % victim.name)
        victim.wait_exit(20)
    t.check(True, "3 -> 5 -> 3: A and B replaced by D and E")
    for g in w.ing[:3]:
        r = il.post_until_decided(g.addr, delivered[1], delivered[2])
        t.check(r.status == 200 and r.outcome == "duplicate",
                "%s after the membership changes: duplicate" % g.name,
                r.describe())
    mid, h, body = w.message("after")
    r = il.post_until_decided(w.ing[2].addr, h, body)
    t.check(r.status == 200 and r.outcome == "accepted",
            "a new message after them: delivered", r.describe())
    t.check(w.up.arrived(delivered[0]) == 1 and w.up.arrived(mid) == 1,
            "each delivered once")


def ops(t, w):
    g = w.ing[2]
    st, text = il.get(g.addr, "/healthz")
    t.check(st == 200, "/healthz 200", text)
    st, text = il.get(g.addr, "/readyz")
    t.check(st == 200, "/readyz 200 with a leader", text)
    st, text = il.get(g.addr, "/metrics")
    t.check(st == 200 and 'once_ingress_outcomes_total{outcome="ACCEPTED"}'
            in text and "once_ingress_answer_seconds_count" in text,
            "/metrics in the Prometheus text format", text[:300])


def stripe(t, w):
    secret = "whsec_" + oc.rand_hex(16)
    w.t.child_env["ONCE_TEST_STRIPE"] = "  %s\n" % secret
    g = il.Ingress(t, "S1", w.c.base + 46, w.addrs, w.up.url, None,
                   ["--secret-env", "ONCE_TEST_STRIPE", "--scope", "stripe"],
                   scheme="stripe", ops_port=w.c.base + 47)
    w.ing.append(g)
    g.start()
    del w.t.child_env["ONCE_TEST_STRIPE"]
    evt = "evt_" + oc.rand_hex(8)
    body = json.dumps({"id": evt, "object": "event",
                       "type": "invoice.paid"}).encode()
    h = il.stripe_headers(secret, body)
    r = il.post(g.addr, h, body)
    t.check(r.status == 200 and r.outcome == "accepted",
            "Stripe: a signed event is delivered", r.describe())
    r = il.post(g.addr, h, body)
    t.check(r.status == 200 and r.outcome == "duplicate",
            "Stripe: its replay is a duplicate", r.describe())
    t.check(w.up.arrived(evt) == 1, "Stripe: one delivery, keyed by the "
            "body's id")
    nid = json.dumps({"object": "event"}).encode()
    r = il.post(g.addr, il.stripe_headers(secret, nid), nid)
    t.check(r.status == 400 and r.outcome == "malformed",
            "Stripe: a signed body without an id: 400", r.describe())
    r = il.post(g.addr, il.stripe_headers("whsec_" + oc.rand_hex(16), body),
                body)
    t.check(r.status == 401, "Stripe: another secret: 401", r.describe())
    st, text = il.get(g.ops, "/metrics")
    t.check(st == 200 and "once_ingress_secrets 1" in text,
            "--http-addr serves /metrics", text[-200:])
    st, _ = il.get(g.addr, "/metrics")
    t.check(st == 405, "and --listen then takes webhooks only", str(st))


def scenario(t):
    w = World(t)
    try:
        refusals(t, w)
        delivered = fan_in(t, w)
        upstream_fails_first(t, w)
        terminal_failures(t, w)
        killed_mid_delivery(t, w)
        skewed(t, w, delivered)
        reload(t, w)
        restart_and_membership(t, w, delivered)
        ops(t, w)
        stripe(t, w)
        il.stop_ingresses(t, w.ing)
    finally:
        il.kill_all(w.ing)
        w.up.close()


if __name__ == "__main__":
    oc.main("ingress", scenario)
