#!/usr/bin/env python3
"""once_idem_load.py: once-ingress --mode idempotency-key under load.
10,000 requests over 500 idempotency keys (20 copies of each, shuffled)
from 64 keep-alive connections spread over three proxy replicas (with
--wait, so a copy that meets its key in flight waits for the stored
response) in front of one API, over a 3-node cluster.

Checked: every request answered 201; exactly 500 API calls, one per key;
each key's 20 answers carry the same body (the first one's), 19 of them
with Idempotent-Replayed: true; the wall time and answers per second
are printed (measured, not asserted).

ONCE_IDEM_LOAD_REQUESTS and ONCE_IDEM_LOAD_KEYS change the sizes.
"""

import http.client
import os
import random
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import idemlib as idl  # noqa: E402
import ingresslib as il  # noqa: E402
import oncecluster as oc  # noqa: E402

BASE = 12500
CONNS = 64
REQUESTS = int(os.environ.get("ONCE_IDEM_LOAD_REQUESTS", "10000"))
KEYS = int(os.environ.get("ONCE_IDEM_LOAD_KEYS", "500"))
FLAGS = ["--scope", "load", "--lease", "20s", "--upstream-timeout", "10s",
         "--timeout", "10s", "--wait", "30s", "--threads", "24",
         "--require-key"]


def worker(addr, jobs, out, errors):
    host, port = addr.split(":")
    conn = None
    for key in jobs:
        for _ in range(3):
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(host, int(port),
                                                      timeout=60)
                conn.request("POST", "/orders?k=%s" % key,
                             body=('{"order":"%s"}' % key).encode(),
                             headers={"Idempotency-Key": key,
                                      "Content-Type": "application/json"})
                r = conn.getresponse()
                body = r.read()
                out.append((key, r.status, r.getheader("Idempotent-Replayed"),
                            r.getheader("Once-Outcome"), body))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
                break
            except (OSError, http.client.HTTPException) as e:
                errors.append("%s: %r" % (key, e))
                if conn is not None:
                    conn.close()
                conn = None
    if conn is not None:
        conn.close()


def scenario(t):
    c = oc.Cluster(t, "idemload", BASE)
    nodes = c.start_cluster(["A", "B", "C"])
    api = idl.Api(c.base + 40)
    addrs = c.addrs(nodes)
    px = [idl.Proxy(t, "P%d" % (i + 1), c.base + 41 + i, addrs, api.url,
                    FLAGS) for i in range(3)]
    try:
        for p in px:
            p.start()
        keys = ["load-%04d-%s" % (i, oc.rand_hex(3)) for i in range(KEYS)]
        reqs = [keys[i % KEYS] for i in range(REQUESTS)]
        random.shuffle(reqs)
        out, errors = [], []
        threads = []
        for i in range(CONNS):
            th = threading.Thread(target=worker, args=(
                px[i % 3].addr, reqs[i::CONNS], out, errors))
            threads.append(th)
        t0 = time.time()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.time() - t0
        t.info("%d requests over %d keys from %d connections: %.1f s, "
               "%.0f answers/s; %d transport errors retried"
               % (REQUESTS, KEYS, CONNS, wall, len(out) / wall, len(errors)))
        by_status = {}
        for _, st, _, oc_, _ in out:
            by_status[(st, oc_)] = by_status.get((st, oc_), 0) + 1
        t.check(len(out) == REQUESTS and all(st == 201 for _, st, _, _, _
                                              in out),
                "all %d requests answered 201" % REQUESTS,
                "answers=%d %r errors=%r" % (len(out), by_status,
                                             errors[:3]))
        t.check(api.count() == KEYS and
                len(set(cl["key"] for cl in api.calls)) == KEYS,
                "exactly %d API calls, one per key" % KEYS,
                "calls=%d" % api.count())
        bodies = {}
        replays = 0
        for key, st, rep, _, body in out:
            bodies.setdefault(key, set()).add(body)
            replays += rep == "true"
        t.check(all(len(b) == 1 for b in bodies.values()),
                "each key's answers are the same bytes",
                repr([k for k, b in bodies.items() if len(b) > 1][:3]))
        t.check(replays == REQUESTS - KEYS,
                "%d replays with Idempotent-Replayed" % (REQUESTS - KEYS),
                "replays=%d" % replays)
        il.stop_ingresses(t, px)
    finally:
        il.kill_all(px)
        api.close()


if __name__ == "__main__":
    oc.main("idemload", scenario)
