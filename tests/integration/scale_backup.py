#!/usr/bin/env python3
"""scale_backup.py: the leader's longest stall while a filled cluster is
backed up (`oncectl snapshot backup`).

A 3-node cluster with onced's default flags, filled with
SCALE_BACKUP_RECORDS unique records (default 2000000) by once-bench
--count (4 connections x pipeline 256, ttl 24h); then one client claims in
a closed loop (once-bench --gap 100ms) while `oncectl snapshot backup FILE`
runs, and the loop goes on 5 s after it. The backup must be OK and verify;
the test fails if the longest window without a successful claim is over
SCALE_BACKUP_MAX_MS (default 1000, a bound for the debug ASan build).

It prints the fill rate; the same loop for 15 s without a backup (what
the machine gives anyway); the backup's size and duration (open to a
verified FILE), the longest window and every window over 100 ms.

Not in `make check` (minutes, and gigabytes at 10 M records):
  make check-scale-backup [SCALE_BACKUP_RECORDS=N]

Environment: as oncecluster.py, plus ONCE_BENCH (default
top_builddir/once-bench), SCALE_BACKUP_RECORDS, SCALE_BACKUP_MAX_MS.
"""

import json
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402


def env_int(name, default, lo, hi):
    v = int(os.environ.get(name, default))
    if not lo <= v <= hi:
        raise oc.HardError("%s=%d: want %d..%d" % (name, v, lo, hi))
    return v


RECORDS = env_int("SCALE_BACKUP_RECORDS", 2000000, 1000, 100000000)
MAX_MS = env_int("SCALE_BACKUP_MAX_MS", 1000, 1, 3600000)
BASELINE_S = 15


def once_bench():
    top = os.environ.get("top_builddir", ".")
    b = os.environ.get("ONCE_BENCH") or os.path.join(top, "once-bench")
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        raise oc.HardError("not built: %s" % b)
    return os.path.abspath(b)


def bench_cmd(t, c, nodes, args):
    return [t.bench, "--cluster", c.addrs(nodes), "--json"] + args


def run_json(cmd, wall):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=wall)
    try:
        return p.returncode, json.loads(p.stdout.strip().splitlines()[-1]), \
            p.stderr.strip()
    except (ValueError, IndexError):
        raise oc.TestFailure("%s: rc %d, no JSON: %s" % (
            cmd[0], p.returncode, p.stderr.strip()[-400:]))


class Backup(threading.Thread):
    def __init__(self, c, nodes, path):
        super().__init__(daemon=True)
        self.c, self.nodes, self.path = c, nodes, path
        self.r = None
        self.secs = 0.0

    def run(self):
        t0 = time.time()
        self.r = self.c.ctl(["snapshot", "backup", self.path], via=self.nodes,
                            timeout="30s", wall=3600)
        self.secs = time.time() - t0


def scenario(t):
    t.bench = once_bench()
    c = oc.Cluster(t, "scalebackup", 8900)
    c.node_flags = []  # onced's defaults: timing and snapshot policy
    storage = os.environ.get("ONCE_TEST_STORAGE")
    c.node_flags += ["--storage", storage] if storage else []
    nodes = c.start_cluster(["A", "B", "C"], timeout=90)

    t0 = time.time()
    rc, js, err = run_json(bench_cmd(t, c, nodes, [
        "--count", str(RECORDS), "--connections", "4", "--pipeline", "256",
        "--ttl", "24h", "--scope", "fill", "--timeout", "60s",
        "--duration", "3000s"]), 3100)
    fill_s = time.time() - t0
    t.require(rc == 0 and js.get("ops") == RECORDS,
              "filled %d records" % RECORDS,
              "rc %d, ops %s: %s" % (rc, js.get("ops"), err))
    t.info("fill: %d records in %.1f s (%.0f claims/s)"
           % (RECORDS, fill_s, RECORDS / fill_s))

    # The same loop without a backup first: what this machine gives anyway.
    rc, base, err = run_json(bench_cmd(t, c, nodes, [
        "--duration", "%ds" % BASELINE_S, "--ttl", "24h", "--gap", "100ms",
        "--scope", "base", "--timeout", "60s"]), BASELINE_S + 120)
    t.check(rc == 0, "baseline: the 1-client loop ran %d s" % BASELINE_S, err)
    t.info("baseline (no backup), %d s: %d claims, longest window without a "
           "successful claim %.1f ms; windows over 100 ms: %d"
           % (BASELINE_S, base.get("ops", 0), base.get("longest_gap_ms", 0.0),
              len(base.get("gaps", []))))

    path = os.path.join(c.work, "scale.backup")
    loop = subprocess.Popen(bench_cmd(t, c, nodes, [
        "--duration", "3600s", "--ttl", "24h", "--gap", "100ms",
        "--scope", "stall", "--timeout", "60s"]), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    bk = Backup(c, nodes, path)
    bk.start()
    bk.join(3600)
    time.sleep(5)
    loop.send_signal(oc.signal.SIGINT)  # once-bench reports and exits
    out, err = loop.communicate(timeout=120)
    try:
        js = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise oc.TestFailure("1-client loop: no JSON: %s" % err[-400:])
    r = bk.r
    t.require(r is not None and r.is_outcome("OK", oc.RC_OK),
              "snapshot backup OK", r.describe() if r else "no answer")
    v = c.ctl(["snapshot", "verify", path], via=nodes, wall=3600)
    t.check(v.is_outcome("OK", oc.RC_OK) and v.get("records", 0) >= RECORDS,
            "the backup verifies (%s records)" % v.get("records"),
            v.describe())
    worst = js.get("longest_gap_ms", 0.0)
    gaps = [g["ms"] for g in js.get("gaps", [])]
    t.info("backup: %.1f MB in %.1f s (%.1f MB/s, open to a verified "
           "file: encoding waited %s ms, transfer %s ms, verify %s ms); the "
           "1-client loop: %d claims, longest window without a "
           "successful claim %.1f ms; windows over 100 ms: %s"
           % (r.get("bytes", 0) / 1e6, bk.secs,
              r.get("bytes", 0) / 1e6 / max(bk.secs, 1e-3),
              r.get("encode_wait_ms"), r.get("transfer_ms"),
              r.get("verify_ms"), js.get("ops", 0),
              worst, " ".join("%.0f" % g for g in sorted(gaps, reverse=True)
                              [:20]) or "none"))
    t.check(worst <= MAX_MS,
            "longest window without a successful claim %.1f ms <= %d ms "
            "(%d records, backup of %.1f MB)"
            % (worst, MAX_MS, RECORDS, r.get("bytes", 0) / 1e6))


if __name__ == "__main__":
    oc.main("scale_backup", scenario)
