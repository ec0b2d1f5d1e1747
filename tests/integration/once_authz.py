#!/usr/bin/env python3
"""once_authz.py: the access file and the connection bounds of one node,
over the wire (docs/server.md, "Access file", "Connections").

  * a node started with a bad --access file refuses to start (exit 1) and
    says which JSON path is wrong;
  * with a good file it serves (without TLS every caller is admin, so
    forget and members list work) and logs the identities it read;
  * SIGHUP with a broken file: refused with a log line, the node keeps the
    old identities and keeps serving; SIGHUP with a changed good file: the
    new one is read;
  * a raw socket that sends half a frame is closed after --frame-timeout
    (500 ms), with a log line, and the node keeps serving;
  * a raw socket that dribbles a frame byte by byte is closed though bytes
    keep coming (by the frame timeout, or the idle timer of 1 s that counts
    from the last whole frame; unit-conn tests each alone).
"""

import json
import os
import signal
import socket
import struct
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

GOOD = {"identities": [
    {"match": "uri:spiffe://example.org/ingress/tenant-a", "role": "client",
     "scopes": ["tenant-a", "tenant-a/*"]},
    {"match": "dns:ops.example.org", "role": "admin"},
]}


def write(path, obj):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def wait_log(t, n, text, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in n.log_text():
            return True
        time.sleep(0.1)
    return False


def closed_within(s, timeout):
    """Seconds until the peer closed @s (reading nothing), or None."""
    t0 = time.time()
    s.settimeout(0.2)
    while time.time() - t0 < timeout:
        try:
            b = s.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.time() - t0
        if b == b"":
            return time.time() - t0
        return None  # an answer: not what a half frame should get
    return None


def access_file(t, c, path):
    A = c.node("A")
    write(path, '{"identities": [{"match": "dns:a.b", "role": "root"}]}')
    A.start(bootstrap=True, extra=["--access", path])
    rc = A.wait_exit(20)
    t.check(rc == 1, "a bad access file refuses the start (exit 1)",
            "rc=%s" % rc)
    t.check("identities[0].role" in A.log_text(),
            "the refusal names the JSON path identities[0].role")
    write(path, GOOD)
    A.start(bootstrap=True, extra=["--access", path])
    c.wait_serving([A])
    t.check(wait_log(t, A, "identities=2"), "the node read 2 identities")
    r = c.claim("tenant-b", "k1", [A])
    t.check(r.is_outcome("ACCEPTED"),
            "without TLS every caller is admin: a claim in any scope",
            r.describe())
    r = c.ctl(["forget", "tenant-b", "k1"], via=[A])
    t.check(r.rc == oc.RC_OK, "and forget", r.describe())

    write(path, '{"identities": [')
    A.proc.send_signal(signal.SIGHUP)
    t.check(wait_log(t, A, "reload refused, keeping the old one\" "
                         "what=access"),
            "SIGHUP with a broken file: refused with a log line")
    r = c.claim("tenant-a", "k2", [A])
    t.check(A.alive() and r.is_outcome("ACCEPTED"),
            "the node keeps serving after the refused reload", r.describe())
    GOOD["identities"].append({"match": "cn:prometheus", "role": "monitor"})
    write(path, GOOD)
    A.proc.send_signal(signal.SIGHUP)
    t.check(wait_log(t, A, "detail=\"identities=3"),
            "SIGHUP with a changed file: 3 identities read")
    return A


def connection_bounds(t, c, A):
    port = int(A.client_addr.split(":")[1])
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(struct.pack(">I", 100) + b"\x08" * 10)
    secs = closed_within(s, 10)
    s.close()
    t.check(secs is not None and 0.4 <= secs < 5,
            "half a frame: closed after --frame-timeout 500ms",
            "after %s s" % secs)
    t.check(wait_log(t, A, "is not complete"),
            "the node logs the unfinished frame")

    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(0.05)
    t0 = time.time()
    closed = None
    frame = struct.pack(">I", 400) + b"\x08" * 400
    for i in range(len(frame)):
        try:
            s.send(frame[i:i + 1])
            if s.recv(16) == b"":
                closed = time.time() - t0
                break
        except socket.timeout:
            pass
        except (ConnectionResetError, BrokenPipeError):
            closed = time.time() - t0
            break
        time.sleep(0.03)
    s.close()
    # --frame-timeout is 500 ms here too: whichever comes first, the
    # connection must not live on while it dribbles.
    t.check(closed is not None and closed < 3,
            "a dribbling frame does not keep its connection",
            "closed after %s s" % closed)
    r = c.claim("tenant-a", "k3", [A])
    t.check(r.is_outcome("ACCEPTED"), "the node keeps serving", r.describe())


def scenario(t):
    c = oc.Cluster(t, "authz", 9250,
                   extra_flags=["--frame-timeout", "500ms",
                                "--idle-timeout", "1s"])
    path = os.path.join(c.work, "access.json")
    A = access_file(t, c, path)
    connection_bounds(t, c, A)


if __name__ == "__main__":
    oc.main("once-authz", scenario)
