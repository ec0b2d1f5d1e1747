#!/usr/bin/env python3
"""idemlib.py: once-ingress --mode idempotency-key processes and a real
upstream API for once_idem.py and once_idem_load.py (standard library
only; the cluster is oncecluster.py, process handling ingresslib.py).

  Api     an HTTP API in the test process (ThreadingHTTPServer on
          127.0.0.1, HTTP/1.1 keep-alive) that records every call it gets:
          method, path with query, Idempotency-Key, Once-Attempt, body.
          Each answer is 201 with a body unique to the call (a counter
          and random bytes), Location and X-Not-Stored headers. Per key it
          can fail the first N calls (503), answer 400, answer a large
          body, or hold a call for some seconds.
  Proxy   one once-ingress --mode idempotency-key (ingresslib.Ingress
          with the mode's flags instead of a scheme and secrets).
  request one HTTP request with any method, its status, headers, body.
"""

import http.client
import http.server
import json
import os
import subprocess
import threading
import time

import ingresslib as il


class Api:
    def __init__(self, port):
        self.lock = threading.Lock()
        self.calls = []
        self.fail_first = {}  # key -> calls left to answer 503
        self.fail_always = set()
        self.refuse = set()   # keys answered 400
        self.big = {}         # key -> body size
        self.hold = {}        # key -> seconds to hold its first call
        self.arrived_ev = {}  # key -> Event set when a call arrives
        self.n = 0
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle_any(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else b""
                key = self.headers.get("Idempotency-Key", "")
                att = self.headers.get("Once-Attempt", "")
                status, extra, hold = api.decide(key)
                call = api.record(self.command, self.path, key, att, body,
                                  status, dict(self.headers.items()))
                ev = api.arrived_ev.get(key)
                if ev is not None:
                    ev.set()
                if hold:
                    time.sleep(hold)
                reply = json.dumps({"call": call, "rand": os.urandom(8).hex(),
                                    "path": self.path, "attempt": att,
                                    "bytes": len(body)}).encode()
                reply += b" " * extra
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Location", "/payments/%d" % call)
                    self.send_header("X-Not-Stored", "call-%d" % call)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(reply)
                except OSError:
                    pass

            do_POST = do_PATCH = do_PUT = do_GET = do_DELETE = handle_any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port),
                                                      Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def decide(self, key):
        with self.lock:
            first = not any(c["key"] == key for c in self.calls)
            hold = self.hold.get(key, 0) if first else 0
            extra = self.big.get(key, 0)
            if key in self.refuse:
                return 400, extra, hold
            if key in self.fail_always:
                return 503, extra, hold
            left = self.fail_first.get(key, 0)
            if left > 0:
                self.fail_first[key] = left - 1
                return 503, extra, hold
            return 201, extra, hold

    def record(self, method, path, key, att, body, status, headers):
        with self.lock:
            self.n += 1
            self.calls.append({"n": self.n, "method": method, "path": path,
                               "key": key, "attempt": att, "body": body,
                               "status": status, "headers": headers,
                               "t": time.time()})
            return self.n

    def of(self, key):
        with self.lock:
            return [c for c in self.calls if c["key"] == key]

    def count(self):
        with self.lock:
            return len(self.calls)

    def expect(self, key):
        ev = threading.Event()
        self.arrived_ev[key] = ev
        return ev

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Proxy(il.Ingress):
    """@slow: run every clock of the process (monotonic included) at this
    rate under libfaketime, e.g. "0,25": its timeouts then last 4 times
    longer in real time, while the cluster's leases do not."""

    def __init__(self, t, name, port, cluster_addrs, upstream_url, extra=(),
                 ops_port=None, slow=None):
        il.Ingress.__init__(self, t, name, port, cluster_addrs, upstream_url,
                            None, extra, ops_port=ops_port)
        self.args = [il.ingress_binary(), "--mode", "idempotency-key",
                     "--listen", self.addr, "--cluster", cluster_addrs,
                     "--upstream", upstream_url] + list(extra)
        if ops_port:
            self.args += ["--http-addr", self.ops]
        self.slow = slow

    def start(self, timeout=30):
        if not self.slow:
            return il.Ingress.start(self, timeout)
        env = dict(self.t.child_env)
        asan = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + \
            "verify_asan_link_order=0"
        env["LD_PRELOAD"] = il.FAKETIME_LIB
        env["FAKETIME"] = "+0 x" + self.slow
        env["FAKETIME_NO_CACHE"] = "1"
        with open(self.log, "ab") as f:
            f.write(("=== start FAKETIME=%s: %s\n" % (
                env["FAKETIME"], " ".join(self.args))).encode())
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=f, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise il.oc.TestFailure("proxy %s exited at start: %s"
                                        % (self.name, self.log_tail()))
            st, _ = il.get(self.ops, "/readyz", timeout=10)
            if st == 200:
                return
            time.sleep(0.3)
        raise il.oc.TestFailure("proxy %s not ready" % self.name)


class Reply(il.Reply):
    @property
    def replayed(self):
        return self.headers.get("idempotent-replayed") == "true"


def request(addr, method, path, headers=None, body=b"", timeout=30):
    host, port = addr.split(":")
    t0 = time.time()
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        hs = {k.lower(): v for k, v in r.getheaders()}
        return Reply(r.status, hs, data, time.time() - t0)
    except (OSError, http.client.HTTPException) as e:
        return Reply(None, {}, b"", time.time() - t0, error=repr(e))
    finally:
        conn.close()


def post(addr, key, body, path="/payments", headers=None):
    h = {"Content-Type": "application/json"}
    if key is not None:
        h["Idempotency-Key"] = key
    h.update(headers or {})
    return request(addr, "POST", path, h, body)


def until_decided(fn, timeout=60):
    """fn() again while the answer is 503 unavailable or no answer."""
    deadline = time.time() + timeout
    while True:
        r = fn()
        if (r.status not in (503, None) or r.outcome not in
                ("unavailable", "")) or time.time() > deadline:
            return r
        time.sleep(0.5)


def same_answer(a, b):
    """Status, stored headers and body equal."""
    return (a.status == b.status and a.body == b.body and
            a.headers.get("content-type") == b.headers.get("content-type")
            and a.headers.get("location") == b.headers.get("location"))
