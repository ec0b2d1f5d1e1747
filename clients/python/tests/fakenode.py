"""Test doubles of a node's HTTP port, for the tests that need no cluster.

FakeNode     an HTTP server on 127.0.0.1 whose answers a test scripts
             (status + JSON object, or a connection closed after the
             request was read, or a node that reads and never answers);
             it records every request (path, parsed body).
Tripwire     a listening socket that counts the connections made to it:
             a call refused before any network call leaves it at 0.
"""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLUSTER = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


def decision(outcome="ACCEPTED", cluster=CLUSTER, **kw):
    o = {"outcome": outcome, "retry": False, "log_time_ms": 1796172561545,
         "cluster_id": cluster, "node_id": "0348f626b1e2556a",
         "boot_id": "e6eae456f00becb8b6152ba7536f4cb0"}
    o.update(kw)
    return o


def error(name, applied="false", cluster=CLUSTER, **kw):
    o = {"error": name, "applied": applied, "leader_hint": "",
         "message": "scripted %s" % name, "cluster_id": cluster,
         "node_id": "0348f626b1e2556a", "boot_id": ""}
    o.update(kw)
    return o


class FakeNode:
    """script: a list of actions, consumed one per request (the last one
    repeats): (status, obj) answers; "close" reads the request and closes
    the connection without an answer; ("hang", secs) reads it and answers
    nothing for secs, then closes."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        self.lock = threading.Lock()
        node = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                body = json.loads(raw) if raw else None
                with node.lock:
                    node.requests.append((self.command, self.path, body,
                                          time.monotonic()))
                    act = node.script[0] if len(node.script) == 1 \
                        else node.script.pop(0)
                if act == "close":
                    self.close_connection = True
                    return
                if isinstance(act, tuple) and act[0] == "hang":
                    time.sleep(act[1])
                    self.close_connection = True
                    return
                status, obj = act
                data = (json.dumps(obj) + "\n").encode() \
                    if not isinstance(obj, str) else obj.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = _serve
            do_POST = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       args=(0.02,), daemon=True)
        self.thread.start()

    def bodies(self):
        with self.lock:
            return [r[2] for r in self.requests]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Tripwire:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]

    def connections(self):
        n = 0
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return n
            c.close()
            n += 1

    def close(self):
        self.sock.close()
