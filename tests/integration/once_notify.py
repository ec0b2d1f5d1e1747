#!/usr/bin/env python3
"""once_notify.py: onced tells a service manager READY=1 only when the node
is ready (the /readyz rule), and STOPPING=1 when it stops.

Each node gets NOTIFY_SOCKET, a unix datagram socket this test listens on
(what systemd does for Type=notify):
  * B is started first with --join to A, which is not running: B can never
    be a member, so within 3 s its socket gets STATUS="not ready: ..." and
    no READY=1 (and its /readyz is 503);
  * A is started with --bootstrap: READY=1 arrives, and /readyz is 200 on A
    at that moment; A has WATCHDOG_USEC=400000 (WatchdogSec=400ms): its
    loop sends WATCHDOG=1 about every 200 ms;
  * B's join now succeeds: B's READY=1 arrives, and its /readyz is 200;
  * a node started without NOTIFY_SOCKET still serves (the notification is
    optional);
  * SIGTERM to B: STOPPING=1 arrives before it exits 0.
"""

import os
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402


class Listener:
    """A unix datagram socket collecting sd_notify messages."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.msgs = []

    def drain(self, timeout):
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(4096)
        except socket.timeout:
            return
        self.msgs.append(data.decode("utf-8", "replace"))
        self.sock.settimeout(0.001)

    def lines(self):
        return [ln for m in self.msgs for ln in m.split("\n") if ln]

    def has(self, line):
        return line in self.lines()

    def wait(self, line, timeout):
        end = time.time() + timeout
        while time.time() < end and not self.has(line):
            self.drain(end - time.time())
        return self.has(line)

    def close(self):
        self.sock.close()


def scenario(t):
    c = oc.Cluster(t, "notify", 9700, http=True)
    a, b = c.node("A"), c.node("B")
    la = Listener(os.path.join(t.work, "a.sock"))
    lb = Listener(os.path.join(t.work, "b.sock"))
    try:
        b.start(join=[a], env={"NOTIFY_SOCKET": lb.path})
        end = time.time() + 3
        while time.time() < end:
            lb.drain(end - time.time())
        statuses = [ln for ln in lb.lines() if ln.startswith("STATUS=")]
        t.check(not lb.has("READY=1"),
                "B (joining a cluster that is not there): no READY=1",
                repr(lb.msgs))
        t.check(any(s.startswith("STATUS=not ready: ") for s in statuses),
                "B: STATUS says why it is not ready", repr(lb.msgs))
        st, body = oh.request(b.http_addr, "/readyz")[:2]
        t.check(st == 503, "B: /readyz 503 meanwhile", "%s" % st)

        a.start(bootstrap=True, env={"NOTIFY_SOCKET": la.path,
                                     "WATCHDOG_USEC": "400000"})
        t.check(la.wait("READY=1", 30), "A (bootstrap): READY=1",
                repr(la.msgs))
        st = oh.request(a.http_addr, "/readyz")[0]
        t.check(st == 200, "A: /readyz 200 when READY=1 arrived", "%s" % st)
        t.check(la.has("STATUS=ready"), "A: STATUS=ready", repr(la.msgs))
        end = time.time() + 2
        while time.time() < end:
            la.drain(end - time.time())
        pings = la.lines().count("WATCHDOG=1")
        t.check(pings >= 4, "A (WATCHDOG_USEC=400000): WATCHDOG=1 every "
                "~200 ms from the loop (%d)" % pings, repr(la.msgs[-5:]))

        t.check(lb.wait("READY=1", 60), "B (joined): READY=1",
                repr(lb.msgs))
        st = oh.request(b.http_addr, "/readyz")[0]
        t.check(st == 200, "B: /readyz 200 when READY=1 arrived", "%s" % st)
        t.check(lb.lines().count("READY=1") == 1, "B: READY=1 sent once",
                repr(lb.msgs))
        t.check("WATCHDOG=1" not in lb.lines(),
                "B (no WATCHDOG_USEC): no watchdog pings", repr(lb.msgs))

        cn = c.node("C")
        cn.start(join=[a, b])
        r = None
        end = time.time() + 30
        while time.time() < end:
            r = c.claim("notify", "k-%s" % oc.rand_hex(4), [cn])
            if r.accepted:
                break
            time.sleep(0.2)
        t.check(r is not None and r.accepted,
                "C without NOTIFY_SOCKET serves claims", r and r.describe())

        b.proc.terminate()
        rc = b.wait_exit(20)
        lb.drain(0.5)
        t.check(lb.has("STOPPING=1"), "B on SIGTERM: STOPPING=1",
                repr(lb.msgs))
        t.check(rc == 0, "B exits 0", "%s" % rc)
    finally:
        la.close()
        lb.close()


if __name__ == "__main__":
    oc.main("once-notify", scenario)
