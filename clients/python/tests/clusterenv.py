"""What the cluster tests share: the environment clients/testing/
with_cluster.py gives (ONCE_TEST_HTTP, ONCE_TEST_CONTROL, the TLS files),
its control socket, clients as the tenant (TLS) or plain, and a TCP proxy
that can hold a node's answers back (a lost answer, on demand)."""

import json
import os
import socket
import struct
import sys
import threading
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import once_client as oc  # noqa: E402

URLS = [u for u in os.environ.get("ONCE_TEST_HTTP", "").split(",") if u]
CONTROL = os.environ.get("ONCE_TEST_CONTROL")
TLS_ON = bool(os.environ.get("ONCE_TEST_CA"))


def need_cluster(cls):
    return unittest.skipUnless(
        URLS and CONTROL, "no cluster: run under clients/testing/"
        "with_cluster.py (clients/python/test does)")(cls)


def tls(who="TENANT"):
    """TLS as the tenant (scopes tenant-a, tenant-a/*) or the ADMIN;
    None on a plain cluster."""
    if not TLS_ON:
        return None
    return oc.TLS(os.environ["ONCE_TEST_CA"],
                  os.environ["ONCE_TEST_%s_CERT" % who],
                  os.environ["ONCE_TEST_%s_KEY" % who])


def scope(name):
    """A scope of its own per test, inside the tenant's (so the same test
    runs as the tenant on a TLS cluster)."""
    return "tenant-a/py-%s-%s" % (name, uuid.uuid4().hex[:8])


def client(nodes=None, **kw):
    kw.setdefault("tls", tls())
    kw.setdefault("timeout", 10)
    return oc.Client(nodes or URLS, **kw)


class Control:
    """The cluster's control socket: one JSON object per line each way."""

    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(CONTROL)
        self.f = self.s.makefile("rwb")

    def __call__(self, op, **kw):
        kw["op"] = op
        self.f.write((json.dumps(kw) + "\n").encode())
        self.f.flush()
        ans = json.loads(self.f.readline())
        if not ans.get("ok"):
            raise AssertionError("control %s: %s" % (kw, ans.get("error")))
        return ans

    def close(self):
        self.f.close()
        self.s.close()


class HoldingProxy:
    """127.0.0.1:PORT -> a node's port, byte for byte (TLS passes through).
    Once armed, the node's next bytes toward the client are held back
    (`held` is set when they arrived); cut() then resets the client's
    connection without them: the call was decided, its answer is lost."""

    def __init__(self, target_url):
        self.target = int(target_url.rsplit(":", 1)[1])
        self.scheme = target_url.split("://", 1)[0]
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.url = "%s://127.0.0.1:%d" % (self.scheme,
                                          self.ls.getsockname()[1])
        self.armed = threading.Event()
        self.held = threading.Event()
        self._cut = threading.Event()
        self.socks = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            self.socks += [c, s]
            threading.Thread(target=self._pump, args=(c, s, False),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, True),
                             daemon=True).start()

    def _pump(self, src, dst, from_node):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if from_node and self.armed.is_set():
                self.held.set()
                self._cut.wait()
                # RST, not FIN: the connection is lost, not ended. The
                # other pump is blocked reading dst: SHUT_RD wakes it, so
                # that close() really releases the socket.
                dst.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                               struct.pack("ii", 1, 0))
                try:
                    dst.shutdown(socket.SHUT_RD)
                except OSError:
                    pass
                time.sleep(0.05)
                dst.close()
                src.close()
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def arm(self):
        self.armed.set()

    def cut(self):
        self._cut.set()

    def close(self):
        self._cut.set()
        self.ls.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
