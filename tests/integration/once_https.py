#!/usr/bin/env python3
"""once_https.py: --http-addr on a TLS cluster is HTTPS (docs/server.md,
"The HTTP listener"), on 3 nodes whose certificates scripts/make-certs.sh
makes. Clients are Python's ssl module (TLS 1.3) and a real Prometheus.

The access file: the nodes (DNS *.once.test) are members, ops is admin,
tenant-a a client of tenant-a and tenant-a/*, tenant-b a client of
tenant-b, prom (CN) a monitor; "nobody" has a certificate of the same CA
and no identity; "intruder" a certificate of another CA.

  * /healthz and /readyz answer without a client certificate (a kubelet's
    probe, which checks nothing either);
  * /metrics: 403 with a plain-text reason without a certificate, with a
    client's (tenant-a) and with one that has no identity; 200 with the
    monitor's and the admin's, and the text parses as the Prometheus
    exposition format; the refusals raise once_permission_denied_total;
  * /v1/claim as tenant A in its scope, on the leader and through a
    follower (forwarded: the leader authorizes tenant A's certificate)
    -> ACCEPTED; in tenant B's scope -> 403 PERMISSION_DENIED, applied
    false, naming the scope; lookup of B's key 403; without a certificate
    403; the admin claims in B's scope;
  * refused at the handshake: a certificate of another CA; plain HTTP to
    the port gets no answer (the node logs the plaintext); a garbage
    first flight and a TLS record header claiming 64 KiB followed by junk
    are dropped; of 80 connections that send nothing those over the
    listener's 64 are closed at once and the rest by the handshake
    deadline; the node keeps serving after each; once_http_connections
    counts open connections, handshaking ones too; and
    once_http_tls_refused_total counts them; a flood of 300 garbage
    connections is counted whole but logged at most 100 times per 10 s,
    and the first line after the window says that lines were left out;
  * a client that pipelines 100,000s of /metrics requests and reads
    nothing: the node stops reading it, closes it within 25 s and logs
    it, and keeps serving;
  * a Prometheus scrapes every node over HTTPS with the monitor's
    certificate (up == 1) and, as a second job, with tenant A's (up == 0:
    403);
  * SIGHUP with a new certificate in the same files: a new HTTPS
    connection is served the new one (its DER), while connections made
    before keep working.
"""

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

BASE = 9600
ACCESS = oc.tenant_access()


def make_certs(d):
    oc.make_certs(d, oc.TENANT_CERTS)
    oc.make_certs(d, [("ca", "ca2"), ("client", "intruder")], ca="ca2")


def ctx(d, who=None):
    return oh.tls_context(d, who)


def get(n, path, d, who=None, timeout=5):
    return oh.request(n.http_addr, path, ctx=ctx(d, who), timeout=timeout)


def post(n, path, body, d, who):
    st, _, text = oh.request(n.http_addr, path, method="POST",
                             body=json.dumps(body), ctx=ctx(d, who),
                             headers={"Content-Type": "application/json"},
                             timeout=10)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, {"text": text}


def scrape(n, d, who="prom"):
    return oh.scrape(n.http_addr, ctx(d, who)) or {}


def check_health(t, n, d):
    st, _, body = oh.request(n.http_addr, "/healthz",
                             ctx=oh.tls_context(d, verify=False))
    t.check(st == 200 and body == "ok\n",
            "%s: HTTPS /healthz without a client certificate (a probe "
            "that checks nothing) 200 ok" % n.name, "%s %r" % (st, body))
    st, body = oh.wait_status(t, n.http_addr, "/readyz", 200, 30,
                              ctx=ctx(d))
    t.check(st == 200, "%s: HTTPS /readyz without a client certificate 200"
            % n.name, "%s %r" % (st, body))


def check_metrics_rights(t, n, d):
    before = scrape(n, d).get("once_permission_denied_total", -1)
    for who, word in ((None, "needs a client certificate"),
                      ("tenant-a", "has role client"),
                      ("nobody", "no identity")):
        st, hdrs, body = get(n, "/metrics", d, who)
        t.check(st == 403 and word in body
                and hdrs.get("content-type", "").startswith("text/plain"),
                "/metrics as %s: 403 in plain text (%s)"
                % (who or "no certificate", word), "%s %r" % (st, body))
    for who in ("prom", "ops"):
        st, hdrs, body = get(n, "/metrics", d, who)
        try:
            samples = oh.parse_prom(body)
        except ValueError as e:
            samples = {}
            body = str(e)
        t.check(st == 200 and hdrs.get("content-type", "").startswith(
            "text/plain; version=0.0.4")
                and "once_raft_term" in samples,
                "/metrics as %s: 200, Prometheus text that parses" % who,
                "%s %r" % (st, body[:200]))
    after = scrape(n, d).get("once_permission_denied_total", -1)
    t.check(before >= 0 and after >= before + 3,
            "the three refusals raise once_permission_denied_total",
            "before %s after %s" % (before, after))


def check_api_rights(t, d, L, F):
    for n, how in ((L, "the leader"), (F, "a follower (forwarded)")):
        st, r = post(n, "/v1/claim", {"scope": "tenant-a/orders",
                                      "key": "k-" + n.name}, d, "tenant-a")
        t.check(st == 200 and r.get("outcome") == "ACCEPTED",
                "tenant A claims in its scope via %s -> ACCEPTED" % how,
                "%s %r" % (st, r))
        st, r = post(n, "/v1/claim", {"scope": "tenant-b",
                                      "key": "x-" + n.name}, d, "tenant-a")
        t.check(st == 403 and r.get("error") == "PERMISSION_DENIED"
                and r.get("applied") == "false"
                and 'in scope "tenant-b"' in r.get("message", ""),
                "tenant A claims in B's scope via %s -> 403 "
                "PERMISSION_DENIED, applied false" % how, "%s %r" % (st, r))
    st, r = post(L, "/v1/claim", {"scope": "tenant-b", "key": "job"}, d,
                 "tenant-b")
    t.check(st == 200 and r.get("outcome") == "ACCEPTED",
            "tenant B claims in its scope -> ACCEPTED", "%s %r" % (st, r))
    st, _, body = get(L, "/v1/records/tenant-b/job", d, "tenant-a")
    t.check(st == 403 and "PERMISSION_DENIED" in body,
            "tenant A cannot look B's key up (403)", "%s %r" % (st, body))
    st, r = post(L, "/v1/claim", {"scope": "tenant-a", "key": "anon"}, d,
                 None)
    t.check(st == 403 and r.get("error") == "PERMISSION_DENIED"
            and "client certificate" in r.get("message", ""),
            "a claim without a client certificate -> 403", "%s %r" % (st, r))
    st, r = post(F, "/v1/claim", {"scope": "tenant-b", "key": "by-ops"}, d,
                 "ops")
    t.check(st == 200 and r.get("outcome") == "ACCEPTED",
            "the admin claims in any scope -> ACCEPTED", "%s %r" % (st, r))


def closed_without_answer(addr, data, timeout=8):
    """Send @data; True if the node closed the connection without a byte of
    HTTP (what a TLS port does to plaintext and garbage)."""
    out = oh.raw(addr, data, timeout=timeout)
    return not out.startswith(b"HTTP/")


def check_refusals(t, n, d):
    before = scrape(n, d).get("once_http_tls_refused_total", -1)
    c2 = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c2.load_verify_locations(os.path.join(d, "ca.pem"))
    c2.load_cert_chain(os.path.join(d, "intruder.pem"),
                       os.path.join(d, "intruder.key"))
    st, _, body = oh.request(n.http_addr, "/healthz", ctx=c2)
    t.check(st is None, "a client certificate of another CA is refused at "
            "the handshake", "%s %r" % (st, body))
    st, _, body = oh.request(n.http_addr, "/healthz")
    t.check(st is None and "not a TLS handshake" in n.log_text(),
            "plain HTTP to the HTTPS port gets no answer (the node logs "
            "the plaintext)", "%s %r" % (st, body))
    t.check(closed_without_answer(n.http_addr, os.urandom(4096)),
            "a garbage first flight is dropped")
    t.check(closed_without_answer(
        n.http_addr, b"\x16\x03\x01\xff\xff" + b"\x01" * (1 << 17)),
        "a record header claiming 64 KiB, then 128 KiB of junk: dropped")
    check_silent(t, n)
    # The 64 refused just now free their slots in the loop iteration that
    # closes them; a request racing that may be refused as the 65th (CI
    # saw it under load, the next call a few ms later served): it keeps
    # serving if it answers within 3 s, each failure said.
    errs = []
    deadline = time.time() + 3
    while True:
        st, _, body = get(n, "/healthz", d)
        if st == 200 or time.time() > deadline:
            break
        errs.append("%s %s" % (st, body[:80]))
        time.sleep(0.1)
    t.check(st == 200 and n.alive(), "%s keeps serving after the refusals"
            % n.name, "%s; earlier: %s" % (st, "; ".join(errs[:5])))
    if errs:
        t.info("healthz after the refusals needed %d retries: %s"
               % (len(errs), "; ".join(errs[:3])))
    after = scrape(n, d).get("once_http_tls_refused_total", -1)
    t.check(before >= 0 and after >= before + 5,
            "once_http_tls_refused_total counts the refused handshakes",
            "before %s after %s" % (before, after))


def check_conns_gauge(t, n, d):
    """once_http_connections counts the port's open connections, the
    ones still in their handshake too."""
    base = scrape(n, d).get("once_http_connections", -1)
    socks = [socket.create_connection(("127.0.0.1", n.http_port), timeout=5)
             for _ in range(5)]
    try:
        # The node accepts and counts them on its own thread: on a loaded
        # machine one may still be in the listen queue after 0.3 s (CI saw
        # before 2, during 6, after 2), so wait up to 3 s for all five.
        deadline = time.time() + 3
        during = -1
        while time.time() < deadline:
            time.sleep(0.3)
            during = scrape(n, d).get("once_http_connections", -1)
            if during >= base + 5:
                break
    finally:
        for s in socks:
            s.close()
    deadline = time.time() + 5
    after = during
    while time.time() < deadline:
        after = scrape(n, d).get("once_http_connections", -1)
        if after <= base:
            break
        time.sleep(0.2)
    # Against the settled value after the close, not the one before: a
    # connection of an earlier check may still be closing when `base` is
    # read (CI saw before 2, during 6, after 1), and it only goes down.
    t.check(base >= 1 and during >= after + 5 and after <= base,
            "once_http_connections counts 5 silent connections while they "
            "are open", "before %s during %s after %s" % (base, during, after))


def check_refusal_flood(t, n, d):
    """Refusals anyone can cause are logged under a budget (100 lines
    per 10 s), counted whole."""
    time.sleep(10.5)  # a fresh window: the refusals above used the last
    before = scrape(n, d).get("once_http_tls_refused_total", -1)
    lines0 = n.log_text().count("https: TLS refused")
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", n.http_port),
                                          timeout=5) as s:
                s.sendall(b"\x00" * 64)
                s.recv(1)
        except OSError:
            pass
    deadline = time.time() + 10
    after = before
    while time.time() < deadline:
        after = scrape(n, d).get("once_http_tls_refused_total", -1)
        if after >= before + 300:
            break
        time.sleep(0.2)
    lines = n.log_text().count("https: TLS refused") - lines0
    t.check(before >= 0 and after >= before + 300,
            "a flood of 300 refused handshakes is counted whole",
            "before %s after %s" % (before, after))
    t.check(1 <= lines <= 100, "and logged at most 100 times in its 10 s",
            "%d lines" % lines)
    time.sleep(10.5)
    t.check(closed_without_answer(n.http_addr, b"\x00" * 64),
            "one more refusal after the window")
    time.sleep(0.5)
    t.check("more refusals not logged" in n.log_text(),
            "its line says that refusals were left out of the log")


def eof_within(s, secs):
    s.settimeout(secs)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def check_silent(t, n):
    """80 connections that send nothing: those over the listener's 64 are
    closed at once, the rest by the handshake deadline (10 s)."""
    socks = [socket.create_connection(("127.0.0.1", n.http_port), timeout=5)
             for _ in range(80)]
    t0 = time.time()
    try:
        time.sleep(0.5)
        open_ = [s for s in socks if not eof_within(s, 0.05)]
        at_once = 80 - len(open_)
        t.check(at_once >= 80 - 64, "connections over 64 (handshakes "
                "included) are closed at once (%d of 80)" % at_once)
        closed = [s for s in open_ if eof_within(s, max(0.1, 15 - (
            time.time() - t0)))]
        secs = time.time() - t0
        t.check(open_ and len(closed) == len(open_) and 7 <= secs <= 15,
                "the silent ones are closed by the handshake deadline "
                "(10 s)", "%d of %d after %.1f s" % (len(closed), len(open_),
                                                     secs))
    finally:
        for s in socks:
            s.close()


def check_stalled_reader(t, n, d):
    """A client that pipelines requests for /metrics and reads nothing:
    the node stops reading it when its queues are full, closes it after an
    idle timeout without progress, and keeps serving."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(5)
    raw.connect(("127.0.0.1", n.http_port))
    s = ctx(d, "prom").wrap_socket(raw, server_hostname="127.0.0.1")
    batch = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 1000
    sent = 0
    s.settimeout(2)
    try:
        for _ in range(500):
            s.sendall(batch)
            sent += 1000
    except (socket.timeout, OSError):
        pass  # the node stopped reading us: its queues are full
    # MHD's idle timeout (10 s) ends a connection whose answer cannot be
    # written, or the terminator's own check (an idle timeout without
    # progress): either way within 25 s. Then what was queued is read and
    # the stream ends, long before the 100,000 answers asked for.
    time.sleep(25)
    s.settimeout(10)
    got, eof = 0, False
    t0 = time.time()
    try:
        while time.time() - t0 < 10:
            b = s.recv(65536)
            if not b:
                eof = True
                break
            got += len(b)
    except socket.timeout:
        eof = False  # still open: not closed
    except (OSError, ssl.SSLError):
        eof = True  # a reset or a cut TLS stream: closed all the same
    t.check(eof and sent >= 10000,
            "a client that reads nothing of its answers is closed "
            "(%d requests sent before the node stopped reading, %d bytes "
            "of answers queued)" % (sent, got))
    log = n.log_text()
    t.check("closed: writing to the HTTP server failed" in log
            or "read nothing of its answer" in log, "the closing is logged")
    s.close()
    st, _, _ = get(n, "/healthz", d)
    t.check(st == 200, "%s serves after the stalled reader" % n.name,
            str(st))


def check_prometheus(t, c, d, nodes):
    if oh.tool("prometheus") is None:
        raise oc.HardError("prometheus not installed (scripts/deps.sh)")
    addrs = [n.http_addr for n in nodes]
    jobs = [("once-tls", addrs, os.path.join(d, "ca.pem"),
             os.path.join(d, "prom.pem"), os.path.join(d, "prom.key")),
            ("once-tenant", addrs, os.path.join(d, "ca.pem"),
             os.path.join(d, "tenant-a.pem"), os.path.join(d, "tenant-a.key"))]
    prom = oh.Prometheus(t, c.work, c.base + 3 * oc.SLOTS - 1, [],
                         tls_jobs=jobs)
    try:
        prom.start()
        want = sorted(addrs)
        res, ok = prom.wait('up{job="once-tls"}', lambda r: sorted(
            m["instance"] for m, v in r if v == 1) == want)
        t.check(ok, "prometheus scrapes the 3 nodes over HTTPS with the "
                "monitor's certificate (up == 1)", str(res))
        res, ok = prom.wait('up{job="once-tls"} * on(instance) '
                            'once_raft_term', lambda r: len(r) == 3)
        t.check(ok, "prometheus: the HTTPS scrapes hold the node's series",
                str(res))
        res, ok = prom.wait('up{job="once-tenant"}', lambda r: len(r) == 3
                            and all(v == 0 for _, v in r))
        t.check(ok, "prometheus with a client's certificate: up == 0 (403)",
                str(res))
    finally:
        rc = prom.stop()
    t.check(rc == 0, "prometheus stops at SIGTERM with exit 0", str(rc))


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def served_der(n, d):
    with socket.create_connection(("127.0.0.1", n.http_port),
                                  timeout=5) as raw:
        with ctx(d).wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True)


def check_reload(t, n, d):
    old = der_of(os.path.join(d, n.name + ".pem"))
    t.check(served_der(n, d) == old, "before SIGHUP the node serves its "
            "certificate over HTTPS")
    keep = http_keepalive(n, d)
    script = os.path.join(os.environ.get("top_srcdir", "."), "scripts",
                          "make-certs.sh")
    subprocess.run(["sh", script, "node", d, n.name, "127.0.0.1",
                    n.name + ".once.test"], check=True, capture_output=True)
    new = der_of(os.path.join(d, n.name + ".pem"))
    t.require(new != old, "a new certificate in the same files")
    n.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    got = None
    while time.time() < deadline:
        got = served_der(n, d)
        if got == new:
            break
        time.sleep(0.2)
    t.check(got == new, "SIGHUP: a new HTTPS connection is served the new "
            "certificate")
    keep.request("GET", "/healthz")
    r = keep.getresponse()
    t.check(r.status == 200 and r.read() == b"ok\n",
            "a connection made before the reload still serves")
    keep.close()


def http_keepalive(n, d):
    conn = http.client.HTTPSConnection("127.0.0.1", n.http_port,
                                          timeout=5, context=ctx(d))
    conn.request("GET", "/healthz")
    conn.getresponse().read()
    return conn


def scenario(t):
    d = os.path.join(t.work, "certs")
    make_certs(d)
    with open(os.path.join(d, "access.json"), "w") as f:
        json.dump(ACCESS, f)
    c = oc.Cluster(t, "https", BASE, http=True)
    c.node_extra = lambda n: [
        "--tls-cert", os.path.join(d, n.name + ".pem"),
        "--tls-key", os.path.join(d, n.name + ".key"),
        "--tls-ca", os.path.join(d, "ca.pem"),
        "--access", os.path.join(d, "access.json")]
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, "ops.pem"),
                   "--tls-key", os.path.join(d, "ops.key")]
    nodes = c.start_cluster(["a", "b", "c"])
    L = c.wait_leader(nodes)
    F = [n for n in nodes if n is not L][0]
    for n in nodes:
        check_health(t, n, d)
    check_metrics_rights(t, F, d)
    check_api_rights(t, d, L, F)
    check_conns_gauge(t, F, d)
    check_refusals(t, F, d)
    check_refusal_flood(t, F, d)
    check_stalled_reader(t, F, d)
    check_prometheus(t, c, d, nodes)
    check_reload(t, F, d)


if __name__ == "__main__":
    oc.main("once-https", scenario)
