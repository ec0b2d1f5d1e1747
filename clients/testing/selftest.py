#!/usr/bin/env python3
"""selftest.py: the controller's own test, run under it.

    clients/testing/selftest        (plain, then --tls)

Checks what the client suites rely on: the environment; every node's HTTP
port answers /v1/status (with --tls: HTTPS, the tenant's certificate
allowed in tenant-a and refused in tenant-b); info names the leader and the
cluster id; kill of the leader gives another leader and start brings the
node back; pause/resume; an unknown op, node and bad JSON are errors;
recreate gives another cluster id on the same URLs. Exit 0 when all pass.
"""

import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request

failures = []


def check(cond, what, detail=""):
    print("%s: %s%s" % ("PASS" if cond else "FAIL", what,
                        (" (%s)" % detail) if detail and not cond else ""),
          flush=True)
    if not cond:
        failures.append(what)
    return cond


class Control:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")

    def raw(self, line):
        self.f.write(line.encode() + b"\n")
        self.f.flush()
        return json.loads(self.f.readline())

    def __call__(self, **req):
        return self.raw(json.dumps(req))


def ctx(who):
    if not os.environ.get("ONCE_TEST_CA"):
        return None
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.load_verify_locations(os.environ["ONCE_TEST_CA"])
    if who:
        c.load_cert_chain(os.environ["ONCE_TEST_%s_CERT" % who],
                          os.environ["ONCE_TEST_%s_KEY" % who])
    return c


def call(url, path, body=None, who="ADMIN"):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={
        "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx(who)) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    urls = os.environ.get("ONCE_TEST_HTTP", "").split(",")
    tls = bool(os.environ.get("ONCE_TEST_CA"))
    check(len(urls) == 3 and all(u.startswith("https://" if tls else
                                              "http://") for u in urls),
          "ONCE_TEST_HTTP has three %s URLs" % ("https" if tls else "http"),
          repr(urls))
    if tls:
        for v in ("CA", "TENANT_CERT", "TENANT_KEY", "ADMIN_CERT",
                  "ADMIN_KEY"):
            check(os.path.isfile(os.environ.get("ONCE_TEST_" + v, "")),
                  "ONCE_TEST_%s is a file" % v)
    ctl = Control(os.environ["ONCE_TEST_CONTROL"])
    info = ctl(op="info")
    check(info.get("ok") and info.get("http") == urls
          and info.get("leader") in urls
          and len(info.get("cluster_id") or "") == 32,
          "info: the URLs, the leader, the cluster id", repr(info))
    for u in urls:
        st, ans = call(u, "/v1/status")
        check(st == 200 and ans.get("cluster_id") == info.get("cluster_id"),
              "%s/v1/status answers with the cluster id" % u, "%s %r" % (
                  st, ans))
    scope = "tenant-a" if tls else "selftest"
    st, ans = call(urls[0], "/v1/claim", {"scope": scope, "key": "k1"},
                   who="TENANT" if tls else None)
    check(st == 200 and ans.get("outcome") == "ACCEPTED",
          "a claim through the first node is ACCEPTED", "%s %r" % (st, ans))
    if tls:
        st, ans = call(urls[1], "/v1/claim", {"scope": "tenant-b",
                                              "key": "k1"}, who="TENANT")
        check(st == 403 and ans.get("error") == "PERMISSION_DENIED",
              "the tenant is refused in tenant-b", "%s %r" % (st, ans))

    # Errors.
    for line, what in (('{"op":"explode"}', "an unknown op"),
                       ('{"op":"kill","node":"http://nowhere"}',
                        "an unknown node"),
                       ('not json', "bad JSON"),
                       ('{"op":"resume","node":"a"}',
                        "resume of a node that is not paused")):
        ans = ctl.raw(line)
        check(ans.get("ok") is False and ans.get("error"),
              "%s is an error" % what, repr(ans))

    # Kill the leader: another is elected; start brings it back.
    old = info["leader"]
    ans = ctl(op="kill", node="leader")
    check(ans.get("ok") and ans.get("node") == old, "kill the leader",
          repr(ans))
    ans = ctl(op="wait_leader")
    check(ans.get("ok") and ans.get("leader") in urls
          and ans.get("leader") != old, "another leader after the kill",
          repr(ans))
    st, ans2 = call(ans.get("leader", urls[0]), "/v1/claim",
                    {"scope": scope, "key": "k2"},
                    who="TENANT" if tls else None)
    check(st == 200 and ans2.get("outcome") == "ACCEPTED",
          "the new leader serves a claim", "%s %r" % (st, ans2))
    ans = ctl(op="start", node=old)
    check(ans.get("ok"), "start the killed node", repr(ans))
    st, _ = call(old, "/v1/status")
    check(st == 200, "the restarted node answers", str(st))
    nodes = {n["url"]: n["state"] for n in ctl(op="info").get("nodes", [])}
    check(nodes.get(old) == "running", "info says it runs", repr(nodes))

    # Pause / resume a follower.
    ans = ctl(op="pause", node="follower")
    f = ans.get("node")
    check(ans.get("ok") and f in urls, "pause a follower", repr(ans))
    nodes = {n["url"]: n["state"] for n in ctl(op="info").get("nodes", [])}
    check(nodes.get(f) == "paused", "info says it is paused", repr(nodes))
    ans = ctl(op="resume", node=f)
    check(ans.get("ok"), "resume it", repr(ans))

    # Recreate: another cluster on the same URLs.
    ans = ctl(op="recreate")
    check(ans.get("ok") and ans.get("http") == urls
          and len(ans.get("cluster_id") or "") == 32
          and ans.get("cluster_id") != info.get("cluster_id"),
          "recreate: same URLs, another cluster id", repr(ans))
    st, ans2 = call(urls[2], "/v1/claim", {"scope": scope, "key": "k1"},
                    who="TENANT" if tls else None)
    check(st == 200 and ans2.get("outcome") == "ACCEPTED"
          and ans2.get("cluster_id") == ans.get("cluster_id"),
          "the new cluster is empty: k1 ACCEPTED again", "%s %r" % (st, ans2))
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
