#!/usr/bin/env python3
"""once_idem.py: once-ingress --mode idempotency-key, three proxy replicas
over one 3-node once cluster in front of a real HTTP API (harness:
oncecluster.py, ingresslib.py, idemlib.py).

  1. the happy path: a POST with a key is forwarded once (path and query
     kept, Once-Attempt 1) and its 201 returned; the same request again,
     on every replica, is the stored response byte for byte (status, body,
     Content-Type, Location; not X-Not-Stored) with Idempotent-Replayed:
     true; every answer carries Once-Retention; a GET passes through
     with no claim;
  2. concurrent identical requests on the three replicas while the API
     holds the first: one API call; the others 409 with Retry-After, or
     (the --wait replica) the stored response;
  3. the key with another body, path or query: 422 problem+json, nothing
     forwarded;
  4. the API failing (503) the first call: the 503 is returned and the
     key released, the retry is forwarded with Once-Attempt 2 and stored;
     an API 400 is stored and replayed; a key failing every time: after
     --max-attempts (2) the failure is the stored answer; a response
     over --max-response: 502 not_stored now and on every retry, one call
     (a 200 kB GET passed through is returned whole);
     --scope-header: the same key under two tenants is two keys, and a
     request without the header is 400; with TLS and --scope-from-cert
     the verified client certificate's CN is the scope (none, or one
     from another CA: 403);
  5. bad input: no key (--require-key), an empty, 256-byte or non-ASCII
     key: 400; a quoted (sf-string) key works; a body over --max-body,
     by Content-Length or chunked: 413; a chunked body within it is
     forwarded; 200 headers: 431; a client that sends half a body and
     goes away: nothing claimed; after each, the key still works;
  6. kill -9 of the replica holding a key's lease: another replica says
     409 while the lease lives, then takes over (Once-Attempt 2);
  7. fencing: a replica stopped (SIGSTOP) past its lease while the API
     answers it; the takeover completes; the old owner, continued, cannot
     complete (its client gets no 2xx) and the record keeps attempt 2's
     response; and an owner whose clocks run slow (libfaketime) gets the
     API's answer after its lease: its complete is refused NOT_OWNER and
     its client gets 503 not_recorded;
  8. a full cluster restart: 503 unavailable with Retry-After and nothing
     forwarded while it is down; after it, the stored key replays and a
     released key is forwarded again;
  9. clients in other languages: Node's fetch and Python's urllib get the
     first answer and its replay;
 10. /metrics counts replays, conflicts, 409s, upstream failures, stored
     bytes; every replica stops at SIGTERM with exit 0 and no sanitizer
     report.
"""

import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idemlib as idl  # noqa: E402
import ingresslib as il  # noqa: E402
import oncecluster as oc  # noqa: E402

BASE = 12300
SCOPE = "payments"
LEASE_S = 3
FLAGS = ["--scope", SCOPE, "--lease", "%ds" % LEASE_S,
         "--upstream-timeout", "2s", "--retry-after", "1s",
         "--max-attempts", "2", "--timeout", "3s", "--max-body", "65536",
         "--threads", "4", "--require-key", "--max-response", "8192",
         "--retention", "1h"]


class World:
    def __init__(self, t):
        self.t = t
        self.c = oc.Cluster(t, "idem", BASE)
        self.nodes = self.c.start_cluster(["A", "B", "C"])
        self.api = idl.Api(self.c.base + 40)
        self.addrs = self.c.addrs(self.nodes)
        self.px = [self.proxy("P1", 41), self.proxy("P2", 42),
                   self.proxy("P3", 43, ["--wait", "6s"])]
        for p in self.px:
            p.start()
        t.check(True, "three once-ingress --mode idempotency-key replicas "
                "ready")

    def proxy(self, name, off, extra=()):
        return idl.Proxy(self.t, name, self.c.base + off, self.addrs,
                         self.api.url, FLAGS + list(extra))

    def key(self, tag):
        return "%s-%s" % (tag, oc.rand_hex(6))


def body_of(tag):
    return json.dumps({"amount": 100, "tag": tag}).encode()


def happy(t, w):
    k = w.key("happy")
    b = body_of("happy")
    r = idl.post(w.px[0].addr, k, b, path="/payments?currency=eur&x=1")
    calls = w.api.of(k)
    t.check(r.status == 201 and r.outcome == "forwarded" and not r.replayed,
            "the first request: forwarded, the API's 201", r.describe())
    t.check(len(calls) == 1 and calls[0]["path"] == "/payments?currency=eur&x=1"
            and calls[0]["attempt"] == "1" and calls[0]["body"] == b and
            calls[0]["method"] == "POST",
            "the API got it once, path and query kept, Once-Attempt 1",
            repr(calls)[:300])
    t.check(r.headers.get("once-retention") == "3600",
            "the answer carries Once-Retention: 3600", repr(r.headers))
    t.check("x-not-stored" not in r.headers and
            r.headers.get("location", "").startswith("/payments/"),
            "only allow-listed headers (Location) are returned",
            repr(r.headers))
    for p in w.px:
        r2 = idl.post(p.addr, k, b, path="/payments?currency=eur&x=1")
        t.check(r2.replayed and r2.outcome == "replayed" and
                idl.same_answer(r, r2),
                "%s: the same request replays the stored response byte for "
                "byte with Idempotent-Replayed: true" % p.name,
                "%s vs %s" % (r.describe(), r2.describe()))
    t.check(len(w.api.of(k)) == 1, "still one API call")
    g = idl.request(w.px[1].addr, "GET", "/payments/7?full=1",
                    {"Idempotency-Key": k})
    calls = w.api.of(k)
    t.check(g.status == 201 and g.outcome == "pass_through" and
            len(calls) == 2 and calls[1]["method"] == "GET" and
            calls[1]["attempt"] == "" and
            "x-not-stored" in g.headers,
            "a GET (not in --methods) passes through untouched, no claim",
            g.describe())
    return k, b, r, "/payments?currency=eur&x=1"


def fan_in(t, w):
    k = w.key("conc")
    b = body_of("conc")
    w.api.hold[k] = 1.2
    jobs = [w.px[i % 3] for i in range(12)]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
        rs = list(ex.map(lambda p: (p.name, idl.post(p.addr, k, b)), jobs))
    calls = w.api.of(k)
    t.check(len(calls) == 1, "12 concurrent identical requests on three "
            "replicas: one API call", "calls=%d" % len(calls))
    first = [r for _, r in rs if r.outcome == "forwarded"]
    t.check(len(first) == 1 and first[0].status == 201,
            "one of them is the forwarded 201",
            "; ".join("%s %s" % (n, r.describe()[:60]) for n, r in rs))
    bad = []
    for name, r in rs:
        if r.outcome == "forwarded":
            continue
        if name == "P3":
            ok = r.replayed and idl.same_answer(r, first[0]) if first else 0
        else:
            ok = (r.status == 409 and r.outcome == "in_flight" and
                  1 <= int(r.headers.get("retry-after", "0")) <= LEASE_S) or \
                (r.replayed and first and idl.same_answer(r, first[0]))
        if not ok:
            bad.append("%s %s" % (name, r.describe()))
    t.check(not bad, "the others: 409 with Retry-After within the lease, "
            "or (P3, --wait) the stored response", "; ".join(bad)[:600])
    return k


def conflicts(t, w, k, b):
    for what, body, path in (("another body", body_of("other"), "/payments"),
                             ("another query", b, "/payments?currency=usd"),
                             ("another path", b, "/refunds")):
        n0 = w.api.count()
        r = idl.post(w.px[1].addr, k, body, path=path)
        try:
            doc = json.loads(r.body)
        except ValueError:
            doc = {}
        t.check(r.status == 422 and r.outcome == "conflict" and
                r.headers.get("content-type") == "application/problem+json"
                and doc.get("status") == 422 and w.api.count() == n0,
                "the key with %s: 422 problem+json, nothing forwarded" % what,
                r.describe())


def failures(t, w):
    k = w.key("fail1")
    b = body_of("fail1")
    w.api.fail_first[k] = 1
    r = idl.post(w.px[0].addr, k, b)
    t.check(r.status == 503 and r.outcome == "upstream_failed" and
            r.headers.get("retry-after") == "1",
            "the API's 503: returned with Retry-After, the key released",
            r.describe())
    r2 = idl.post(w.px[1].addr, k, b)
    calls = w.api.of(k)
    t.check(r2.status == 201 and r2.outcome == "forwarded" and
            [c["attempt"] for c in calls] == ["1", "2"],
            "the retry is forwarded again with Once-Attempt: 2 and stored",
            "%s %r" % (r2.describe(), [c["attempt"] for c in calls]))
    r3 = idl.post(w.px[2].addr, k, b)
    t.check(r3.replayed and idl.same_answer(r2, r3) and len(w.api.of(k)) == 2,
            "then replayed; two API calls in all", r3.describe())

    k = w.key("refused")
    w.api.refuse.add(k)
    r = idl.post(w.px[0].addr, k, b)
    r2 = idl.post(w.px[2].addr, k, b)
    t.check(r.status == 400 and r.outcome == "forwarded" and r2.replayed and
            idl.same_answer(r, r2) and len(w.api.of(k)) == 1,
            "an API 400 is the answer: stored and replayed, one call",
            "%s / %s" % (r.describe(), r2.describe()))

    k = w.key("always")
    w.api.fail_always.add(k)
    r1 = idl.post(w.px[0].addr, k, b)
    r2 = idl.post(w.px[1].addr, k, b)
    r3 = idl.post(w.px[2].addr, k, b)
    t.check(r1.status == 503 and r1.outcome == "upstream_failed" and
            r2.status == 503 and r2.outcome == "failed" and
            r3.replayed and idl.same_answer(r2, r3) and
            len(w.api.of(k)) == 2,
            "a key failing every time: after --max-attempts 2 the failure "
            "is stored and replayed, two calls",
            "; ".join(x.describe() for x in (r1, r2, r3)))

    k = w.key("big")
    w.api.big[k] = 20000
    r1 = idl.post(w.px[0].addr, k, b)
    r2 = idl.post(w.px[1].addr, k, b)
    t.check(r1.status == 502 and r1.outcome == "not_stored" and
            b"201" in r1.body and r2.status == 502 and r2.replayed and
            r1.body == r2.body and len(w.api.of(k)) == 1,
            "a response over --max-response: 502 not_stored (naming the "
            "API's 201) now and on the retry, one call",
            "%s / %s" % (r1.describe(), r2.describe()))
    k = w.key("biglist")
    w.api.big[k] = 200000
    g = idl.request(w.px[2].addr, "GET", "/payments", {"Idempotency-Key": k})
    t.check(g.status == 201 and g.outcome == "pass_through" and
            len(g.body) > 200000 and len(w.api.of(k)) == 1,
            "a passed-through response is not bounded by --max-response "
            "(200 kB returned whole)", g.describe()[:120])


def tenants(t, w):
    """--scope-header: the same key under two tenants is two keys."""
    p = w.proxy("P4", 44, ["--scope-header", "X-Tenant"])
    p.start()
    try:
        k = w.key("tenant")
        b = body_of("tenant")
        ra = idl.post(p.addr, k, b, headers={"X-Tenant": "acme"})
        rb = idl.post(p.addr, k, b, headers={"X-Tenant": "globex"})
        ra2 = idl.post(p.addr, k, b, headers={"X-Tenant": "acme"})
        rn = idl.post(p.addr, k, b)
        t.check(ra.outcome == "forwarded" and rb.outcome == "forwarded" and
                ra2.replayed and idl.same_answer(ra, ra2) and
                len(w.api.of(k)) == 2,
                "--scope-header: one key under two tenants is forwarded "
                "once per tenant, replayed within each",
                "; ".join(x.describe() for x in (ra, rb, ra2)))
        t.check(rn.status == 400 and rn.outcome == "bad_request",
                "--scope-header: a request without it is 400",
                rn.describe())
        look = w.c.ctl(["lookup", "globex", k], via=w.nodes)
        t.check(look.is_outcome("FOUND"),
                "the record lives in the tenant's scope", look.describe())
    finally:
        il.stop_ingresses(t, [p])


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True,
                   capture_output=True, timeout=60)


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", crt,
            "-days", "2", "-subj", "/CN=" + name)
    return key, crt


def make_cert(d, name, cn, ca, san=None):
    key, csr = os.path.join(d, name + ".key"), os.path.join(d, name + ".csr")
    crt, ext = os.path.join(d, name + ".crt"), os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % (san or "DNS:" + cn))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
    openssl("x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0],
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


def tls_scope(t, w):
    """HTTPS on --listen; the scope from the verified client certificate."""
    import http.client
    import ssl
    d = os.path.join(w.t.work, "tls")
    os.makedirs(d, exist_ok=True)
    ca = make_ca(d, "ca")
    rogue = make_ca(d, "rogue")
    srv = make_cert(d, "server", "proxy", ca, "IP:127.0.0.1")
    certs = {n: make_cert(d, n, n, ca) for n in ("acme", "globex")}
    certs["rogue"] = make_cert(d, "rogue-acme", "acme", rogue)
    p = w.proxy("P5", 45, ["--tls-cert", srv[0], "--tls-key", srv[1],
                           "--tls-client-ca", ca[1], "--scope-from-cert"])
    p.args += ["--http-addr", "127.0.0.1:%d" % (w.c.base + 46)]
    p.ops = "127.0.0.1:%d" % (w.c.base + 46)
    p.start()

    def send(who, key, body):
        ctx = ssl.create_default_context(cafile=ca[1])
        if who:
            ctx.load_cert_chain(*certs[who])
        host, port = p.addr.split(":")
        conn = http.client.HTTPSConnection(host, int(port), context=ctx,
                                           timeout=30)
        try:
            conn.request("POST", "/payments", body=body,
                         headers={"Idempotency-Key": key,
                                  "Content-Type": "application/json"})
            r = conn.getresponse()
            return idl.Reply(r.status, {k.lower(): v for k, v in
                                        r.getheaders()}, r.read(), 0)
        except (OSError, http.client.HTTPException) as e:
            return idl.Reply(None, {}, b"", 0, error=repr(e))
        finally:
            conn.close()
    try:
        k = w.key("tls")
        b = body_of("tls")
        ra = send("acme", k, b)
        rg = send("globex", k, b)
        ra2 = send("acme", k, b)
        t.check(ra.status == 201 and ra.outcome == "forwarded" and
                rg.outcome == "forwarded" and ra2.replayed and
                idl.same_answer(ra, ra2) and len(w.api.of(k)) == 2,
                "HTTPS with --scope-from-cert: one key under two client "
                "certificates is two keys, replayed within each",
                "; ".join(x.describe() for x in (ra, rg, ra2)))
        look = w.c.ctl(["lookup", "acme", k], via=w.nodes)
        t.check(look.is_outcome("FOUND"), "the record lives in the "
                "certificate's CN as scope", look.describe())
        n0 = w.api.count()
        rn = send(None, w.key("nocert"), b)
        rr = send("rogue", k, b)
        t.check(rn.status == 403 and rr.status == 403 and
                w.api.count() == n0,
                "no client certificate, or one from another CA with the "
                "same CN: 403, nothing forwarded",
                "%s / %s" % (rn.describe(), rr.describe()))
    finally:
        il.stop_ingresses(t, [p])


def raw(addr, data, read=True, timeout=10):
    host, port = addr.split(":")
    s = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return None
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def raw_status(data):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", data or b"")
    return int(m.group(1)) if m else None


def bad_input(t, w):
    a = w.px[0].addr
    b = body_of("bad")
    n0 = w.api.count()
    r = idl.post(a, None, b)
    t.check(r.status == 400 and r.outcome == "bad_request",
            "no key (--require-key): 400", r.describe())
    for what, key in (("an empty key", ""), ("a 256-byte key", "k" * 256),
                      ("a key with a space", "a b"),
                      ("a quoted key with a bad escape", '"a\\b"')):
        r = idl.post(a, key, b)
        t.check(r.status == 400 and r.outcome == "bad_request",
                "%s: 400" % what, r.describe())
    # http.client refuses non-ASCII header values: raw bytes.
    req = (b"POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: caf\xc3\xa9"
           b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
    t.check(raw_status(raw(a, req)) == 400, "a non-ASCII key: 400")
    k2 = "a key"
    r = idl.post(a, None, b, headers={"Idempotency-Key": '"%s"' % k2})
    t.check(r.status == 201 and r.outcome == "forwarded" and
            w.api.of('"%s"' % k2), "a quoted sf-string key with a space: "
            "decoded, forwarded", r.describe())
    t.check(w.api.count() == n0 + 1, "none of the refused ones forwarded")
    k = w.key("bounded")
    r = idl.post(a, k, b"x" * 70000)
    t.check(r.status == 413 and r.outcome == "too_large",
            "a body over --max-body: 413", r.describe())
    chunks = b"".join(b"%x\r\n%s\r\n" % (8192, b"y" * 8192)
                      for _ in range(10)) + b"0\r\n\r\n"
    req = ("POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\n"
           "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           % k).encode() + chunks
    t.check(raw_status(raw(a, req)) == 413, "a chunked body over --max-body: "
            "413")
    req = ("POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\n"
           "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           % k).encode() + b"5\r\nhello\r\n0\r\n\r\n"
    out = raw(a, req)
    calls = w.api.of(k)
    t.check(raw_status(out) == 201 and len(calls) == 1 and
            calls[0]["body"] == b"hello",
            "a chunked body within it: forwarded (the key was not pinned by "
            "the refusals)", repr(out[:200]))
    flood = "".join("X-Flood-%d: %s\r\n" % (i, "v" * 20) for i in range(200))
    req = ("POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\n%s"
           "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
           % (w.key("flood"), flood)).encode()
    t.check(raw_status(raw(a, req)) == 431, "200 header fields: 431")
    big = "X-Big: %s\r\n" % ("v" * 70000)
    out = raw(a, ("POST /payments HTTP/1.1\r\nHost: x\r\n%s\r\n" % big)
              .encode())
    t.check(raw_status(out) in (413, 414, 431) or out == b"",
            "a 70 kB header: refused by the header memory bound",
            repr(out[:80]))
    k = w.key("slow")
    req = ("POST /payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\n"
           "Content-Length: 1000\r\n\r\n" % k).encode() + b"{" * 10
    raw(a, req, read=False)  # half a body, then gone
    r = idl.post(w.px[1].addr, k, b)
    t.check(r.status == 201 and r.outcome == "forwarded" and
            len(w.api.of(k)) == 1,
            "a client that sent half a body and left pinned nothing: the "
            "key is forwarded at once", r.describe())
    t.check(all(p.alive() for p in w.px), "no replica crashed")


def killed(t, w):
    k = w.key("killed")
    b = body_of("killed")
    w.api.hold[k] = 1.5
    ev = w.api.expect(k)
    victim = w.px[0]
    th = threading.Thread(target=idl.post, args=(victim.addr, k, b))
    th.start()
    t.require(ev.wait(10), "the API got the first call")
    victim.kill9()
    th.join()
    r = idl.post(w.px[1].addr, k, b)
    ra = int(r.headers.get("retry-after", "0"))
    t.check(r.status == 409 and 1 <= ra <= LEASE_S,
            "the owner killed (-9): another replica answers 409 with "
            "Retry-After within the lease", r.describe())
    time.sleep(ra + 0.3)
    r = idl.post(w.px[1].addr, k, b)
    calls = w.api.of(k)
    t.check(r.status == 201 and r.outcome == "forwarded" and
            [c["attempt"] for c in calls] == ["1", "2"],
            "after the lease the retry takes over: Once-Attempt 2, stored",
            "%s %r" % (r.describe(), [c["attempt"] for c in calls]))
    look = w.c.ctl(["lookup", SCOPE, k], via=w.nodes)
    t.check(look.is_outcome("FOUND") and look.get("state") == "COMPLETED"
            and look.get("owner_attempt") == 2,
            "the cluster: COMPLETED with owner_attempt 2",
            look.describe()[:400])
    victim.start()


def fenced(t, w):
    k = w.key("fenced")
    b = body_of("fenced")
    w.api.hold[k] = 0.5
    ev = w.api.expect(k)
    old = w.px[0]
    box = {}

    def first():
        box["r"] = idl.post(old.addr, k, b)
    th = threading.Thread(target=first)
    th.start()
    t.require(ev.wait(10), "the API got the first call")
    old.signal(signal.SIGSTOP)
    try:
        time.sleep(LEASE_S + 0.5)
        r = idl.post(w.px[1].addr, k, b)
        t.check(r.status == 201 and r.outcome == "forwarded",
                "the owner stopped past its lease: the retry takes over",
                r.describe())
    finally:
        old.signal(signal.SIGCONT)
    th.join(30)
    r1 = box.get("r")
    t.check(r1 is not None and r1.status is not None and
            not 200 <= r1.status < 300,
            "the old owner, continued, cannot complete: its client gets no "
            "2xx (%s)" % (r1.outcome if r1 else "-"),
            r1.describe() if r1 else "no answer")
    look = w.c.ctl(["lookup", SCOPE, k], via=w.nodes)
    r3 = idl.post(w.px[2].addr, k, b)
    t.check(look.get("state") == "COMPLETED" and
            look.get("owner_attempt") == 2 and r3.replayed and
            json.loads(r3.body).get("attempt") == "2",
            "the record keeps the takeover's response (attempt 2)",
            "%s %s" % (look.describe()[:300], r3.describe()))
    # Its upstream call outlived the stop, so curl reports a timeout and
    # the old owner releases: the cluster refuses that token (a complete
    # with it is refused the same way: fsm_claim.c, unit-fsm).
    t.check(re.search(r"(complete|release) fenced.*outcome=NOT_OWNER",
                      old.log_text()) is not None,
            "the old owner's complete or release was refused NOT_OWNER",
            old.log_tail(5))


def fenced_complete(t, w):
    """The owner's clocks run at a quarter speed (libfaketime), so its
    2 s upstream timeout lasts 8 s while its 3 s lease in the cluster
    does not: the API answers it after 5.5 s, when another replica has
    taken the key over; its complete with the old owner token is refused
    (NOT_OWNER) and nothing of it is stored."""
    old = idl.Proxy(w.t, "P6", w.c.base + 47, w.addrs, w.api.url, FLAGS,
                    slow="0,25")
    old.start(timeout=60)
    try:
        k = w.key("fencedc")
        b = body_of("fencedc")
        w.api.hold[k] = 5.5
        ev = w.api.expect(k)
        box = {}

        def first():
            box["r"] = idl.post(old.addr, k, b)
        th = threading.Thread(target=first)
        th.start()
        t.require(ev.wait(30), "the API got the slow owner's call")
        time.sleep(LEASE_S + 0.3)
        r = idl.post(w.px[1].addr, k, b)
        t.check(r.status == 201 and r.outcome == "forwarded",
                "past the slow owner's lease the retry takes over",
                r.describe())
        th.join(60)
        r1 = box.get("r")
        t.check(r1 is not None and r1.status == 503 and
                r1.outcome == "not_recorded" and
                re.search(r"complete fenced.*outcome=NOT_OWNER",
                          old.log_text()) is not None,
                "the old owner's complete is fenced (NOT_OWNER): its client "
                "gets 503 not_recorded", (r1.describe() if r1 else "none") +
                " " + old.log_tail(3))
        r3 = idl.post(w.px[2].addr, k, b)
        calls = w.api.of(k)
        t.check(r3.replayed and idl.same_answer(r, r3) and
                [c["attempt"] for c in calls] == ["1", "2"],
                "the record keeps the takeover's response", r3.describe())
    finally:
        il.stop_ingresses(t, [old])


def restart(t, w, stored):
    k_stored, b_stored, first, path = stored
    k = w.key("restart")
    b = body_of("restart")
    w.api.fail_first[k] = 1
    r = idl.post(w.px[0].addr, k, b)
    t.check(r.status == 503 and r.outcome == "upstream_failed",
            "a key released before the restart", r.describe())
    for n in w.nodes:
        n.stop()
    n0 = w.api.count()
    r = idl.post(w.px[1].addr, w.key("down"), b)
    t.check(r.status == 503 and r.outcome == "unavailable" and
            r.headers.get("retry-after") is not None and
            w.api.count() == n0,
            "the cluster down: 503 unavailable with Retry-After, nothing "
            "forwarded", r.describe())
    for n in w.nodes:
        n.start()
    w.c.wait_leader(w.nodes)
    w.c.wait_serving(w.nodes)
    r = idl.until_decided(lambda: idl.post(w.px[2].addr, k_stored, b_stored,
                                           path=path))
    t.check(r.replayed and idl.same_answer(first, r),
            "after a full cluster restart the stored key replays",
            r.describe())
    r = idl.until_decided(lambda: idl.post(w.px[1].addr, k, b))
    calls = w.api.of(k)
    t.check(r.status == 201 and [c["attempt"] for c in calls] == ["1", "2"],
            "and the released key is forwarded again (Once-Attempt 2)",
            r.describe())


NODE_CLIENT = r"""
const [url, key] = process.argv.slice(2);
async function once() {
  const r = await fetch(url, {method: "POST",
    headers: {"Idempotency-Key": key, "Content-Type": "application/json"},
    body: JSON.stringify({amount: 5, client: "node"})});
  return {status: r.status, replayed: r.headers.get("idempotent-replayed"),
          location: r.headers.get("location"), body: await r.text()};
}
(async () => {
  const a = await once(), b = await once();
  console.log(JSON.stringify([a, b]));
})().catch(e => { console.error(e); process.exit(1); });
"""


def other_languages(t, w):
    import urllib.request
    k = w.key("node")
    js = os.path.join(w.t.work, "client.mjs")
    with open(js, "w") as f:
        f.write(NODE_CLIENT)
    out = subprocess.run(["node", js, "http://%s/payments" % w.px[2].addr, k],
                         capture_output=True, timeout=60)
    try:
        a, b = json.loads(out.stdout)
    except ValueError:
        a = b = {}
    t.check(a.get("status") == 201 and a.get("replayed") is None and
            b.get("status") == 201 and b.get("replayed") == "true" and
            a.get("body") == b.get("body") and len(w.api.of(k)) == 1,
            "Node's fetch: 201, then the replay with Idempotent-Replayed",
            out.stdout.decode()[:300] + out.stderr.decode()[:300])

    k = w.key("urllib")
    answers = []
    for p in (w.px[0], w.px[1]):
        rq = urllib.request.Request(
            "http://%s/payments?via=urllib" % p.addr, method="POST",
            data=b'{"amount": 7}',
            headers={"Idempotency-Key": k,
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(rq, timeout=30) as resp:
            answers.append((resp.status, resp.headers.get(
                "Idempotent-Replayed"), resp.read()))
    t.check(answers[0][0] == 201 and answers[0][1] is None and
            answers[1][0] == 201 and answers[1][1] == "true" and
            answers[0][2] == answers[1][2] and len(w.api.of(k)) == 1,
            "Python's urllib: 201, then the replay", repr(answers)[:300])


def metrics(t, w):
    st, text = il.get(w.px[1].addr, "/metrics")
    vals = {}
    for ln in text.splitlines():
        m = re.match(r"^(once_ingress_idem_\w+) (\d+)$", ln)
        if m:
            vals[m.group(1)] = int(m.group(2))
    t.check(st == 200 and vals.get("once_ingress_idem_replays_total", 0) > 0
            and vals.get("once_ingress_idem_conflicts_total", 0) > 0 and
            vals.get("once_ingress_idem_in_flight_total", 0) > 0 and
            vals.get("once_ingress_idem_upstream_failures_total", 0) > 0 and
            vals.get("once_ingress_idem_stored_bytes_total", 0) > 0,
            "/metrics counts replays, conflicts, 409s, upstream failures "
            "and stored bytes", repr(vals))


def scenario(t):
    w = World(t)
    try:
        stored = happy(t, w)
        fan_in(t, w)
        conflicts(t, w, stored[0], stored[1])
        tenants(t, w)
        tls_scope(t, w)
        failures(t, w)
        bad_input(t, w)
        killed(t, w)
        fenced(t, w)
        fenced_complete(t, w)
        other_languages(t, w)
        metrics(t, w)
        restart(t, w, stored)
        il.stop_ingresses(t, w.px)
    finally:
        il.kill_all(w.px)
        w.api.close()


if __name__ == "__main__":
    oc.main("idem", scenario)
