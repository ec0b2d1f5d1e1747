#!/usr/bin/env python3
"""once_ingress_load.py: many concurrent copies of one signed webhook over
three once-ingress replicas (a 3-node cluster, a counting upstream that
takes 200 ms per delivery): exactly one upstream delivery, every answer
200 (accepted / duplicate) or 409 (in_progress), none lost; the p50 / p99
/ max of the ingress answer printed (connection already open; from the
request's bytes written to its answer read).

ONCE_INGRESS_CONCURRENT sets the number (default 1000, what make check
runs); `make check-ingress-stress` runs 10,000.
"""

import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ingresslib as il  # noqa: E402
import oncecluster as oc  # noqa: E402

BASE = 7700


def explain(t, res, ing):
    """What a failed answer check needs to be understood from CI's output
    alone: when each kind of answer came (an answer after 30 s is the
    ingress's idle timeout; after 3 s, a cluster call's --timeout) and the
    ingresses' own warnings."""
    by = {}
    for st, outcome, secs in res:
        by.setdefault("%s %s" % (st, outcome), []).append(secs)
    for k, v in sorted(by.items()):
        t.info("answers %s: n=%d first %.2f s, last %.2f s" % (
            k, len(v), min(v), max(v)))
    for g in ing:
        lines = [ln for ln in g.log_text().splitlines()
                 if "level=info" not in ln]
        t.info("ingress %s: %d lines not at info level, the last ones:"
               % (g.name, len(lines)))
        for ln in lines[-12:]:
            print("    " + ln[:300], flush=True)


def scenario(t):
    n = int(os.environ.get("ONCE_INGRESS_CONCURRENT", "1000"))
    oc.raise_nofile(n + 512)
    c = oc.Cluster(t, "ingressload", BASE)
    nodes = c.start_cluster(["A", "B", "C"])
    up = il.Upstream(c.base + 40)
    secret = il.new_secret()
    path = os.path.join(t.work, "secrets")
    with open(path, "w") as f:
        f.write(secret + "\n")
    ing = [il.Ingress(t, "L%d" % i, c.base + 41 + i, c.addrs(nodes), up.url,
                      path, ["--scope", "load", "--max-connections",
                             str(n + 100), "--threads", "8"])
           for i in range(3)]
    try:
        for g in ing:
            g.start()
        mid = "msg_load_" + oc.rand_hex(4)
        body = json.dumps({"type": "load"}).encode()
        up.hold_first[mid] = 0.2
        h = il.sw_headers(secret, mid, body)
        res, wall = il.blast([g.addr for g in ing], h, body, n)
        codes = {}
        for st, outcome, _ in res:
            codes["%s %s" % (st, outcome)] = codes.get(
                "%s %s" % (st, outcome), 0) + 1
        lat = [x[2] for x in res if x[0] is not None]
        t.info("%d concurrent copies over 3 replicas in %.2f s: %s" % (
            n, wall, json.dumps(codes, sort_keys=True)))
        print("ingress answer latency: n=%d p50=%.1f ms p99=%.1f ms "
              "max=%.1f ms" % (len(lat), 1000 * il.percentile(lat, 50),
                               1000 * il.percentile(lat, 99),
                               1000 * max(lat) if lat else 0), flush=True)
        if not t.check(len(res) == n and
                       all(st in (200, 409) for st, _, _ in res),
                       "all %d answered 200 or 409" % n, json.dumps(codes)):
            explain(t, res, ing)
        t.check(codes.get("200 accepted", 0) == 1, "exactly one accepted",
                json.dumps(codes))
        t.check(up.arrived(mid) == 1, "exactly one upstream delivery",
                "arrived=%d" % up.arrived(mid))
        r = il.post(ing[0].addr, h, body)
        t.check(r.status == 200 and r.outcome == "duplicate",
                "afterwards: duplicate", r.describe())
        il.stop_ingresses(t, ing)
    finally:
        il.kill_all(ing)
        up.close()


if __name__ == "__main__":
    oc.main("ingressload", scenario)
