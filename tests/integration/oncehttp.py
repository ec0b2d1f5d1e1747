#!/usr/bin/env python3
"""oncehttp.py: HTTP helpers for the --http-addr scenarios (standard
library only): GETs over HTTP or HTTPS (a node with TLS: tls_context) and
raw requests to a node, and a real Prometheus (Debian's
/usr/bin/prometheus) started on loopback with its own config and data
directory, stopped by its PID.
"""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.parse

import oncecluster as oc


def tls_context(d, who=None, verify=True):
    """A TLS 1.3 client context trusting @d/ca.pem (the node's IP SAN
    checked), presenting @d/@who.pem when @who is given; verify False
    checks nothing, as a kubelet's HTTPS probe."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if verify:
        ctx.load_verify_locations(os.path.join(d, "ca.pem"))
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if who is not None:
        ctx.load_cert_chain(os.path.join(d, who + ".pem"),
                            os.path.join(d, who + ".key"))
    return ctx


def request(addr, path, method="GET", timeout=5, body=None, ctx=None,
            headers=None):
    """(status, headers dict with lower-case names, body text); status is
    None when the node could not be reached. @ctx: HTTPS with that
    ssl.SSLContext (tls_context)."""
    host, port = addr.rsplit(":", 1)
    if ctx is not None:
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout,
                                           context=ctx)
    else:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        text = r.read().decode("utf-8", "replace")
        return r.status, {k.lower(): v for k, v in r.getheaders()}, text
    except (OSError, http.client.HTTPException) as e:
        return None, {}, str(e)
    finally:
        conn.close()


def raw(addr, data, timeout=5):
    """Send @data on a fresh connection; what came back until the peer
    closed or @timeout passed."""
    host, port = addr.rsplit(":", 1)
    out = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            return out
        s.settimeout(timeout)
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        except (socket.timeout, OSError):
            pass
    return out


def wait_status(t, addr, path, want, timeout, ctx=None):
    """Poll until GET @path answers @want; the last (status, body)."""
    end = time.time() + timeout
    st, body = None, ""
    while time.time() < end:
        st, _, body = request(addr, path, timeout=2, ctx=ctx)
        if st == want:
            break
        time.sleep(0.2)
    return st, body


def parse_prom(text):
    """{name{labels}: value} of Prometheus text (format 0.0.4); raises
    ValueError on a line that is neither a comment nor a sample."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if not name:
            raise ValueError("not a sample: %r" % line)
        out[name] = float(value)
    return out


def scrape(addr, ctx=None, timeout=5):
    """GET /metrics of the node at @addr (over HTTPS with @ctx), parsed by
    parse_prom; None unless it answered 200."""
    st, _, body = request(addr, "/metrics", ctx=ctx, timeout=timeout)
    return parse_prom(body) if st == 200 else None


def tool(name):
    return shutil.which(name) or ("/usr/bin/" + name
                                  if os.path.exists("/usr/bin/" + name)
                                  else None)


class Prometheus:
    """One prometheus process scraping @targets every second (job "once");
    @tls_jobs: more jobs over HTTPS, each (job name, targets, CA file,
    client certificate file, its key file)."""

    def __init__(self, t, work, port, targets, tls_jobs=()):
        self.t = t
        self.port = port
        self.addr = "127.0.0.1:%d" % port
        self.dir = os.path.join(work, "prometheus")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        self.log = os.path.join(self.dir, "prometheus.log")
        self.config = os.path.join(self.dir, "prometheus.yml")
        with open(self.config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
                    "  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: once\n"
                    "    static_configs:\n      - targets: [%s]\n"
                    % ", ".join('"%s"' % a for a in targets))
            for job, addrs, ca, cert, key in tls_jobs:
                f.write("  - job_name: %s\n    scheme: https\n"
                        "    tls_config:\n      ca_file: %s\n"
                        "      cert_file: %s\n      key_file: %s\n"
                        "    static_configs:\n      - targets: [%s]\n"
                        % (job, ca, cert, key,
                           ", ".join('"%s"' % a for a in addrs)))
        self.proc = None

    def start(self, timeout=60):
        exe = tool("prometheus")
        if exe is None:
            raise oc.HardError("prometheus not installed (scripts/deps.sh)")
        logf = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(
                [exe, "--config.file=" + self.config,
                 "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                 "--web.listen-address=" + self.addr,
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        finally:
            logf.close()
        st, _ = wait_status(self.t, self.addr, "/-/ready", 200, timeout)
        if st != 200:
            raise oc.TestFailure("prometheus not ready on %s (log %s)"
                                 % (self.addr, self.log))
        self.t.info("prometheus pid %d on %s" % (self.proc.pid, self.addr))

    def query(self, expr):
        """The instant vector of @expr: a list of (labels, float)."""
        st, _, body = request(self.addr, "/api/v1/query?query="
                              + urllib.parse.quote(expr))
        if st != 200:
            return None
        data = json.loads(body)
        if data.get("status") != "success":
            return None
        return [(r["metric"], float(r["value"][1]))
                for r in data["data"]["result"]]

    def wait(self, expr, pred, timeout=40):
        """Poll @expr until @pred(result) holds; the last result."""
        end = time.time() + timeout
        res = None
        while time.time() < end:
            res = self.query(expr)
            if res is not None and pred(res):
                return res, True
            time.sleep(0.5)
        return res, False

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return rc
