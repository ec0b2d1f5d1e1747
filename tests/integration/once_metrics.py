#!/usr/bin/env python3
"""once_metrics.py: --http-addr on a 3-node cluster, scraped by a real
Prometheus.

  * every node: /healthz 200 "ok", /readyz 200 once the cluster formed, an
    unknown path 404, POST 405 with "Allow: GET", oversized headers refused
    while the node keeps serving, connections over the listener's limit
    closed;
  * /metrics of every node passes `promtool check metrics`, and names the
    families docs/server.md lists;
  * a Prometheus (Debian's) on loopback with its own config and data
    directory scrapes the three every second; after claims through every
    node, its query API shows up == 1 for each node, the claim counters
    moved by what was claimed (ACCEPTED and REPLAYED, nonce and
    idempotent), exactly one leader and three ready nodes; it is stopped by
    its PID.
"""

import os
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SCOPE = "metrics"
N_NONCE = 12
N_IDEM = 4

FAMILIES = (
    "once_build_info", "once_store_info", "once_claims_total",
    "once_lease_takeovers_total", "once_requests_total",
    "once_request_duration_seconds", "once_commit_duration_seconds",
    "once_batch_commands", "once_fsync_duration_seconds", "once_raft_term",
    "once_raft_commit_index", "once_raft_applied_index", "once_raft_is_leader",
    "once_raft_leader_changes_total", "once_membership_changes_total",
    "once_raft_log_bytes", "once_snapshots_total",
    "once_snapshot_duration_seconds", "once_snapshot_bytes", "once_records",
    "once_record_bytes", "once_shard_records", "once_shard_bytes",
    "once_forwarded_calls_total",
    "once_connections", "once_rejected_frames_total",
    "once_permission_denied_total", "once_ready", "once_idempotent_pending",
    "once_idempotent_pending_oldest_age_seconds",
    "once_snapshot_in_progress", "once_loop_busy_seconds",
    "once_loop_busy_max_seconds",
)


def check_endpoints(t, n):
    st, _, body = oh.request(n.http_addr, "/healthz")
    t.check(st == 200 and body == "ok\n", "%s: /healthz 200 ok" % n.name,
            "%s %r" % (st, body))
    st, body = oh.wait_status(t, n.http_addr, "/readyz", 200, 30)
    t.check(st == 200, "%s: /readyz 200" % n.name, "%s %r" % (st, body))
    st, _, _ = oh.request(n.http_addr, "/no-such-path")
    t.check(st == 404, "%s: unknown path 404" % n.name, str(st))
    st, hdrs, _ = oh.request(n.http_addr, "/metrics", method="POST", body="x")
    t.check(st == 405 and hdrs.get("allow") == "GET",
            "%s: POST /metrics 405 with Allow: GET" % n.name,
            "%s %s" % (st, hdrs))


def check_limits(t, n):
    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 + \
        b"\r\n\r\n"
    out = oh.raw(n.http_addr, big)
    t.check(not out.startswith(b"HTTP/1.1 200"),
            "%s: a 64 KiB header is not served" % n.name, repr(out[:80]))
    socks = []
    try:
        for _ in range(80):  # over the listener's 64
            socks.append(socket.create_connection(
                ("127.0.0.1", n.http_port), timeout=5))
        time.sleep(0.5)
        closed = 0
        for s in socks:
            s.settimeout(0.05)
            try:
                if s.recv(1) == b"":
                    closed += 1
            except OSError:
                pass
        t.check(closed >= 80 - 64, "%s: connections over 64 are closed at "
                "once (%d of 80)" % (n.name, closed))
    finally:
        for s in socks:
            s.close()
    st, _ = oh.wait_status(t, n.http_addr, "/healthz", 200, 10)
    t.check(st == 200, "%s: still serving after the floods" % n.name)


def check_exposition(t, n, promtool):
    st, hdrs, body = oh.request(n.http_addr, "/metrics")
    t.require(st == 200, "%s: /metrics 200" % n.name, str(st))
    t.check(hdrs.get("content-type", "").startswith(
        "text/plain; version=0.0.4"), "%s: content type 0.0.4" % n.name,
        hdrs.get("content-type", ""))
    missing = [f for f in FAMILIES if "# TYPE %s " % f not in body]
    t.check(not missing, "%s: every listed family is exposed" % n.name,
            "missing %s" % missing)
    p = subprocess.run([promtool, "check", "metrics"], input=body.encode(),
                       capture_output=True, timeout=60)
    t.check(p.returncode == 0, "%s: promtool check metrics passes" % n.name,
            (p.stdout + p.stderr).decode("utf-8", "replace")[-600:])


def make_claims(t, c, nodes):
    keys = []
    for i in range(N_NONCE):
        k = "n-%d-%s" % (i, oc.rand_hex(4))
        r = c.claim(SCOPE, k, [nodes[i % 3]])
        t.require(r.accepted, "nonce claim %d ACCEPTED" % i, r.describe())
        keys.append(k)
    for i, k in enumerate(keys[:3]):
        r = c.claim(SCOPE, k, [nodes[(i + 1) % 3]])
        t.require(r.is_outcome("REPLAYED"), "replay %d REPLAYED" % i,
                  r.describe())
    for i in range(N_IDEM):
        r = c.claim(SCOPE, "i-%d-%s" % (i, oc.rand_hex(4)), [nodes[i % 3]],
                    "--idempotent", "--payload-hash", "ab")
        t.require(r.accepted, "idempotent claim %d ACCEPTED" % i,
                  r.describe())


def total(res):
    return sum(v for _, v in res or [])


def check_prometheus(t, prom, nodes):
    want = sorted(n.http_addr for n in nodes)
    res, ok = prom.wait('up{job="once"}', lambda r: sorted(
        m["instance"] for m, v in r if v == 1) == want)
    t.check(ok, "prometheus: up == 1 for each of the 3 nodes", str(res))
    for outcome, kind, n in (("ACCEPTED", "nonce", N_NONCE),
                             ("REPLAYED", "nonce", 3),
                             ("ACCEPTED", "idempotent", N_IDEM)):
        expr = 'sum(once_claims_total{kind="%s",outcome="%s"})' % (kind,
                                                                  outcome)
        res, ok = prom.wait(expr, lambda r, n=n: total(r) == n)
        t.check(ok, "prometheus: %s == %d" % (expr, n), str(res))
    res, ok = prom.wait("sum(once_raft_is_leader)", lambda r: total(r) == 1)
    t.check(ok, "prometheus: exactly one leader", str(res))
    res, ok = prom.wait("sum(once_ready)", lambda r: total(r) == 3)
    t.check(ok, "prometheus: three ready nodes", str(res))
    res, ok = prom.wait('sum(once_requests_total{method="CLAIM",'
                        'status="OK"})', lambda r: total(r) >= N_NONCE)
    t.check(ok, "prometheus: the claims' requests were counted", str(res))
    # The idempotent claims stay PENDING (never completed): every node's
    # state machine counts them, and the oldest is some seconds old.
    res, ok = prom.wait("min(once_idempotent_pending)",
                        lambda r: total(r) == N_IDEM)
    t.check(ok, "prometheus: every node counts %d pending" % N_IDEM, str(res))
    res, ok = prom.wait("min(once_idempotent_pending_oldest_age_seconds)",
                        lambda r: 0 < total(r) < 600)
    t.check(ok, "prometheus: the oldest pending has an age", str(res))
    # Nothing expired yet (no pruning backlog): the shard summaries add up
    # to the node's record count, and to its bytes less the 64 KiB result
    # reservation of each PENDING idempotent record, exactly.
    for expr in ("max(abs(once_shard_records_sum - once_records))",
                 "max(abs(once_record_bytes - once_shard_bytes_sum"
                 " - 65536 * once_idempotent_pending))"):
        res, ok = prom.wait(expr, lambda r: r and total(r) == 0)
        t.check(ok, "prometheus: %s == 0" % expr, str(res))
    res, ok = prom.wait("min(once_shard_bytes_sum)",
                        lambda r: total(r) > 0)
    t.check(ok, "prometheus: every node counts shard bytes", str(res))
    res, ok = prom.wait("sum(once_forwarded_calls_total)",
                        lambda r: total(r) >= 1)
    t.check(ok, "prometheus: followers forwarded calls", str(res))


def scenario(t):
    promtool = oh.tool("promtool")
    t.require(promtool is not None and oh.tool("prometheus") is not None,
              "promtool and prometheus installed (scripts/deps.sh)")
    c = oc.Cluster(t, "metrics", 9000, http=True)
    nodes = c.start_cluster(["A", "B", "C"])
    for n in nodes:
        check_endpoints(t, n)
    check_limits(t, nodes[1])
    prom = oh.Prometheus(t, c.work, c.base + 3 * oc.SLOTS - 1,
                         [n.http_addr for n in nodes])
    try:
        prom.start()
        make_claims(t, c, nodes)
        for n in nodes:
            check_exposition(t, n, promtool)
        check_prometheus(t, prom, nodes)
    finally:
        rc = prom.stop()
    t.check(rc == 0, "prometheus stops at SIGTERM with exit 0", str(rc))


if __name__ == "__main__":
    oc.main("once-metrics", scenario)
