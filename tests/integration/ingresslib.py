#!/usr/bin/env python3
"""ingresslib.py: once-ingress processes, a counting upstream and a signer,
for the scenarios once_ingress.py and once_ingress_load.py (standard
library only; the cluster side is oncecluster.py).

  Upstream   an HTTP server in the test process (ThreadingHTTPServer on
             127.0.0.1) that records every delivery it receives: message
             id, Once-Attempt, time, the status it answered. Per message id
             it can fail the first N attempts (500), refuse (400), fail
             always, or hold the first attempt for some seconds (a slow
             consumer the ingress is killed in front of).
  Ingress    one once-ingress process: start with flags, kill -9, stop by
             SIGTERM (exit 0 expected), SIGHUP, all by PID; its log file and
             the sanitizer check.
  sign_sw    a Standard Webhooks signature (v1, HMAC-SHA256, base64) of
             "id.timestamp.body" with a whsec_ secret.
  post       one POST, its status, headers and body; post_raw sends bytes.
  blast      N requests of the same message on N connections opened first,
             then sent together, answers read with selectors: the answer
             statuses and each one's latency.

Environment: top_builddir (once-ingress), ONCE_INGRESS (another binary).
"""

import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time

import oncecluster as oc

FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def ingress_binary():
    top = os.environ.get("top_builddir", ".")
    b = os.environ.get("ONCE_INGRESS") or os.path.join(top, "once-ingress")
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        raise oc.HardError("not built: %s" % b)
    return os.path.abspath(b)


def new_secret():
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


def sign_sw(secret, msg_id, ts, body):
    key = base64.b64decode(secret[len("whsec_"):])
    content = ("%s.%s." % (msg_id, ts)).encode() + body
    mac = hmac.new(key, content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def stripe_headers(secret, body, ts=None):
    """Stripe-Signature: t=...,v1=<hex HMAC-SHA256 of "t.body">, keyed with
    the secret's text."""
    ts = int(time.time()) if ts is None else ts
    mac = hmac.new(secret.encode(), ("%d." % ts).encode() + body,
                   hashlib.sha256).hexdigest()
    return {"Stripe-Signature": "t=%d,v1=%s" % (ts, mac),
            "Content-Type": "application/json"}


def sw_headers(secret, msg_id, body, ts=None):
    ts = int(time.time()) if ts is None else ts
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts),
            "webhook-signature": sign_sw(secret, msg_id, ts, body),
            "Content-Type": "application/json"}


class Reply:
    def __init__(self, status, headers, body, secs, error=None):
        self.status = status
        self.headers = headers
        self.body = body
        self.secs = secs
        self.error = error

    @property
    def outcome(self):
        return self.headers.get("once-outcome", "")

    def describe(self):
        if self.error:
            return "error %s" % self.error
        return "%s %s %r" % (self.status, self.outcome, self.body[:160])


def post(addr, headers, body, path="/hook", timeout=30):
    host, port = addr.split(":")
    t0 = time.time()
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        hs = {k.lower(): v for k, v in r.getheaders()}
        return Reply(r.status, hs, data, time.time() - t0)
    except (OSError, http.client.HTTPException) as e:
        return Reply(None, {}, b"", time.time() - t0, error=repr(e))
    finally:
        conn.close()


def get(addr, path, timeout=10):
    host, port = addr.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        return None, repr(e)
    finally:
        conn.close()


def post_until_decided(addr, headers, body, timeout=60):
    """POST again while the answer is 503 (no decision yet, e.g. during a
    restart); the last reply."""
    deadline = time.time() + timeout
    while True:
        r = post(addr, headers, body)
        if (r.status not in (503, None)) or time.time() > deadline:
            return r
        time.sleep(0.5)


# ---------------------------------------------------------------------------
# the upstream
# ---------------------------------------------------------------------------

class Upstream:
    def __init__(self, port):
        self.lock = threading.Lock()
        self.deliveries = []   # on arrival: id, attempt, t, status
        self.fail_first = {}   # id -> attempts left to fail with 500
        self.refuse = set()    # ids answered 400
        self.hold_first = {}   # id -> seconds to hold its first attempt
        self.seen = {}
        up = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                mid = self.headers.get("Once-Message-Id", "")
                att = self.headers.get("Once-Attempt", "")
                status, hold = up.decide(mid)
                up.record(mid, att, status, hold)
                if hold:
                    time.sleep(hold)
                reply = json.dumps({"received": mid, "attempt": att,
                                    "bytes": len(body)}).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                except OSError:
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port),
                                                      Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d/deliver" % port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()

    def decide(self, mid):
        with self.lock:
            k = self.seen.get(mid, 0)
            self.seen[mid] = k + 1
            hold = self.hold_first.get(mid, 0) if k == 0 else 0
            if mid in self.refuse:
                return 400, hold
            left = self.fail_first.get(mid, 0)
            if left > 0:
                self.fail_first[mid] = left - 1
                return 500, hold
            return 200, hold

    def record(self, mid, att, status, hold):
        with self.lock:
            self.deliveries.append({"id": mid, "attempt": att,
                                    "status": status, "held": hold,
                                    "t": time.time()})

    def arrived(self, mid):
        """Attempts that reached the upstream (also one still held)."""
        with self.lock:
            return self.seen.get(mid, 0)

    def of(self, mid):
        with self.lock:
            return [d for d in self.deliveries if d["id"] == mid]

    def ok(self, mid):
        return [d for d in self.of(mid) if d["status"] == 200]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------
# once-ingress processes
# ---------------------------------------------------------------------------

class Ingress:
    def __init__(self, t, name, port, cluster_addrs, upstream_url,
                 secret_file, extra=(), faketime=None, scheme="standard",
                 ops_port=None):
        self.t = t
        self.name = name
        self.addr = "127.0.0.1:%d" % port
        self.ops = "127.0.0.1:%d" % ops_port if ops_port else self.addr
        self.args = [ingress_binary(), "--listen", self.addr, "--cluster",
                     cluster_addrs, "--upstream", upstream_url, "--scheme",
                     scheme] + (["--secret-file", secret_file]
                                if secret_file else []) + list(extra)
        if ops_port:
            self.args += ["--http-addr", self.ops]
        self.log = os.path.join(t.work, "ingress-%s.log" % name)
        self.faketime = faketime
        self.proc = None
        self.exits = []

    def start(self, timeout=30):
        env = dict(self.t.child_env)
        if self.faketime:
            # Only the wall clock moves (what a skewed host has wrong).
            asan = env.get("ASAN_OPTIONS", "")
            env["ASAN_OPTIONS"] = (asan + ":" if asan else "") + \
                "verify_asan_link_order=0"
            env["LD_PRELOAD"] = FAKETIME_LIB
            env["FAKETIME"] = self.faketime
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            env["FAKETIME_NO_CACHE"] = "1"
        with open(self.log, "ab") as f:
            f.write(("=== %s start%s: %s\n" % (
                time.strftime("%H:%M:%S"),
                " FAKETIME=%s" % self.faketime if self.faketime else "",
                " ".join(self.args))).encode())
            self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=f, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise oc.TestFailure("ingress %s exited rc %s at start: %s" % (
                    self.name, self.proc.returncode, self.log_tail()))
            st, _ = get(self.ops, "/readyz", timeout=3)
            if st == 200:
                return
            time.sleep(0.2)
        raise oc.TestFailure("ingress %s not ready after %ds" % (self.name,
                                                                 timeout))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill9(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.exits.append(("kill9", self.proc.returncode))
            self.proc = None

    def stop(self, timeout=20):
        """SIGTERM by PID; the exit code (None if it needed SIGKILL)."""
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        self.exits.append(("sigterm", rc))
        self.proc = None
        return rc

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=20):
        return "\n".join(self.log_text().splitlines()[-n:])

    def logged_clock_offset(self):
        """Seconds between the wall clock of the replica's newest log
        line (its own CLOCK_REALTIME, libfaketime's if preloaded) and
        ours now; None if it logged no line."""
        import calendar
        import re
        stamps = re.findall(r"^ts=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+Z",
                            self.log_text(), re.M)
        if not stamps:
            return None
        t = calendar.timegm(time.strptime(stamps[-1], "%Y-%m-%dT%H:%M:%S"))
        return t - time.time()

    def sanitizer_lines(self):
        return [ln for ln in self.log_text().splitlines()
                if any(m in ln for m in oc.SANITIZER_MARKS)]


def stop_ingresses(t, ingresses):
    """SIGTERM each running one: exit 0 expected; then the sanitizer
    check of every log (also of those killed)."""
    for g in ingresses:
        if g.alive():
            rc = g.stop()
            t.check(rc == 0, "ingress %s stops at SIGTERM with exit 0"
                    % g.name, "rc=%s" % rc)
    for g in ingresses:
        bad = g.sanitizer_lines()
        t.check(not bad, "ingress %s: no sanitizer report" % g.name,
                "; ".join(bad[:3]))
        # libmicrohttpd complains (once per start) when its logger is not
        # its first option; a misbuilt daemon's options would show here.
        mhd = [ln for ln in g.log_text().splitlines()
               if "not the first option" in ln]
        t.check(not mhd, "ingress %s: no complaint from libmicrohttpd"
                % g.name, "; ".join(mhd[:2]))


def kill_all(ingresses):
    for g in ingresses:
        if g.alive():
            g.proc.kill()
            g.proc.wait()


# ---------------------------------------------------------------------------
# many requests at once
# ---------------------------------------------------------------------------

def raw_request(headers, body, path="/hook"):
    lines = ["POST %s HTTP/1.1" % path, "Host: ingress",
             "Content-Length: %d" % len(body), "Connection: close"]
    lines += ["%s: %s" % kv for kv in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def blast(addrs, headers, body, n, timeout=120):
    """@n connections spread over @addrs, all opened first, then the same
    request written on each as fast as possible; every answer read.
    Returns (list of (status or None, outcome, latency s), wall s)."""
    req = raw_request(headers, body)
    socks = []
    for i in range(n):
        host, port = addrs[i % len(addrs)].split(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(True)
        s.settimeout(30)
        s.connect((host, int(port)))
        socks.append(s)
    sel = selectors.DefaultSelector()
    state = {}
    t_start = time.time()
    for s in socks:
        s.sendall(req)
        state[s] = [time.time(), b""]
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    results = []
    deadline = time.time() + timeout
    while state and time.time() < deadline:
        for key, _ in sel.select(timeout=1):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if chunk:
                state[s][1] += chunk
                continue
            t0, data = state.pop(s)
            sel.unregister(s)
            s.close()
            results.append(parse_raw(data) + (time.time() - t0,))
    for s, (t0, data) in list(state.items()):
        sel.unregister(s)
        s.close()
        results.append((None, "timeout", time.time() - t0))
    return results, time.time() - t_start


def parse_raw(data):
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    try:
        status = int(lines[0].split(" ")[1])
    except (IndexError, ValueError):
        return (None, "garbled")
    outcome = ""
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        if k.strip().lower() == "once-outcome":
            outcome = v.strip()
    return (status, outcome)


def percentile(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]
