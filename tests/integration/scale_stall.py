#!/usr/bin/env python3
"""scale_stall.py: the longest stall of a filled cluster while it snapshots.

A 3-node cluster with onced's default timing and a snapshot every 1024
entries (--snapshot-threshold 1024), filled with SCALE_STALL_RECORDS unique
records (default 1000000, make check's size; make check-scale: 2000000) by
once-bench --count (4 connections x pipeline
256, ttl 24h), then one client claiming in a closed loop for
SCALE_STALL_SECONDS (default 20). Every claim of that loop is one entry, so
the leader snapshots every ~1024 claims; its log directory is polled for
new snap-* files, and the run goes on (10 s more, up to 60 s) until at
least 2 were taken. The test fails if the longest window without a
successful claim is over SCALE_STALL_MAX_MS (default 1000, a bound for the
debug ASan build).

It prints the fill rate, the snapshots, their size, the longest window and
every window over 100 ms. When snapshots were encoded on the event loop
(before fsm v3 snapshots, 2026-12-01) the longest window was 4.7 s at 2 M
records under ASan (1 M: 1.7 s; 200 k: 0.36 s).

Environment: as oncecluster.py, plus ONCE_BENCH (default
top_builddir/once-bench), SCALE_STALL_RECORDS, SCALE_STALL_SECONDS,
SCALE_STALL_MAX_MS.
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


RECORDS = env_int("SCALE_STALL_RECORDS", 1000000, 1000, 100000000)
SECONDS = env_int("SCALE_STALL_SECONDS", 20, 5, 3600)
MAX_MS = env_int("SCALE_STALL_MAX_MS", 1000, 1, 3600000)
MIN_SNAPSHOTS = 2


def once_bench():
    top = os.environ.get("top_builddir", ".")
    b = os.environ.get("ONCE_BENCH") or os.path.join(top, "once-bench")
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        raise oc.HardError("not built: %s" % b)
    return os.path.abspath(b)


class SnapWatch(threading.Thread):
    """Every 20 ms: the snap-* files of one node's log directory (each
    new name is one snapshot; the size of the latest)."""

    def __init__(self, node):
        super().__init__(daemon=True)
        self.dir = os.path.join(node.dir, "log")
        self.seen = {}
        self.ev = threading.Event()

    def run(self):
        while not self.ev.is_set():
            try:
                for nm in os.listdir(self.dir):
                    if nm.startswith("snap-") and nm not in self.seen:
                        try:
                            sz = os.path.getsize(os.path.join(self.dir, nm))
                        except OSError:
                            sz = 0
                        self.seen[nm] = sz
            except OSError:
                pass
            time.sleep(0.02)

    def stop(self):
        self.ev.set()
        self.join()


def bench(t, c, nodes, args, wall):
    cmd = [t.bench, "--cluster", c.addrs(nodes), "--json"] + args
    t.info("run: %s" % " ".join(cmd))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = p.communicate(timeout=wall)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise oc.TestFailure("once-bench did not end in %d s" % wall)
    try:
        js = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise oc.TestFailure("once-bench rc %d, no JSON: %s"
                             % (p.returncode, err.strip()[-400:]))
    return p.returncode, js, err.strip()


def scenario(t):
    t.bench = once_bench()
    c = oc.Cluster(t, "scalestall", 8950)
    # Default timing (the harness's fast timings would make every stall an
    # election), and a snapshot every 1024 entries: the default byte rule
    # would take none of a 2 M-record table in this short a run, and
    # frequent snapshots of the whole table are the case to measure.
    storage = os.environ.get("ONCE_TEST_STORAGE")
    c.node_flags = ["--snapshot-threshold", "1024"]
    c.node_flags += ["--storage", storage] if storage else []
    nodes = c.start_cluster(["A", "B", "C"], timeout=90)
    ld = c.wait_leader(nodes)

    t0 = time.time()
    rc, js, err = bench(t, c, nodes, [
        "--count", str(RECORDS), "--connections", "4", "--pipeline", "256",
        "--ttl", "24h", "--scope", "fill", "--timeout", "60s",
        "--duration", "600s"], 700)
    fill_s = time.time() - t0
    t.require(rc == 0 and js.get("ops") == RECORDS,
              "filled %d records" % RECORDS,
              "rc %d, ops %s: %s" % (rc, js.get("ops"), err))
    t.info("fill: %d records in %.1f s (%.0f claims/s)"
           % (RECORDS, fill_s, RECORDS / fill_s))

    ld = c.wait_leader(nodes)
    watch = SnapWatch(ld)
    watch.start()
    worst = 0.0
    gaps = []
    ops = 0
    spent = 0
    dur = SECONDS
    try:
        while True:
            rc, js, err = bench(t, c, nodes, [
                "--duration", "%ds" % dur, "--ttl", "24h", "--gap", "100ms",
                "--scope", "stall", "--timeout", "60s"], dur + 120)
            t.check(rc == 0, "the 1-client loop ran %d s" % dur, err)
            worst = max(worst, js.get("longest_gap_ms", 0.0))
            gaps += [g["ms"] for g in js.get("gaps", [])]
            ops += js.get("ops", 0)
            spent += dur
            time.sleep(0.1)
            if len(watch.seen) >= MIN_SNAPSHOTS or spent >= SECONDS + 60:
                break
            dur = 10
    finally:
        watch.stop()
    snaps = len(watch.seen)
    size = max(watch.seen.values()) if watch.seen else 0
    t.info("measured: %d s, %d claims (%.0f/s), leader %s took %d "
           "snapshots (latest %.1f MB), longest window without a "
           "successful claim %.1f ms; windows over 100 ms: %s"
           % (spent, ops, ops / spent, ld.name, snaps, size / 1e6, worst,
              " ".join("%.0f" % g for g in sorted(gaps, reverse=True)[:20])
              or "none"))
    t.require(snaps >= MIN_SNAPSHOTS,
              "at least %d snapshots on the leader while measuring"
              % MIN_SNAPSHOTS, "%d" % snaps)
    t.check(worst <= MAX_MS,
            "longest window without a successful claim %.1f ms <= %d ms "
            "(%d records, %d snapshots)" % (worst, MAX_MS, RECORDS, snaps))


if __name__ == "__main__":
    oc.main("scale_stall", scenario)
