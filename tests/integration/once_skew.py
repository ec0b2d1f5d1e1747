#!/usr/bin/env python3
"""once_skew.py: log time under a leader whose wall clock is wrong.

The cluster is bootstrapped with --max-window 2s --max-skew 500ms (K). Node
C is restarted under libfaketime with its wall clock 5 minutes ahead, then
5 minutes behind (monotonic time real, as on a skewed host), and is made
leader each time. Ahead, it first follows while the cluster serves a few
claims (so it has applied batches live: the base of its clamp); behind, it
is made leader at once, before any claim reaches it, and its base is the
log-time anchor it kept in its data directory before the restart
(src/raft/anchor.h; without it such a leader stamped its wall clock, and
log time stood still, every fresh nonce FUTURE, for 5 minutes). Every answer carries
log_time_ms, the log time the state machine decided it at (docs/design.md
§1.7: the leader stamps max(fsm_now, clamp(wall, est - K, est + K))), so the
test checks from the answers themselves:
  * the skew took effect: C's own log lines carry its skewed wall time;
  * log time stays within 2K (+ the call's latency) of the true time,
    never minutes away, and never goes backwards across the answers;
  * a request signed by a correct clock 1 s before it arrives (window 2 s)
    is ACCEPTED, one signed by the skewed clock is FUTURE (+5 min) or STALE
    (-5 min), each consistent with the answer's log time (FUTURE:
    ts > log_time + K; STALE: ts < log_time - window; ACCEPTED: inside both);
  * a record accepted under the skewed leader is STALE after its retention
    ts + max_window + K, and the replay's log time is past that retention.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "skew"
MAX_WINDOW_MS = 2000
MAX_SKEW_MS = 500
FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
# how far log time may be from the true time: K for this leader's clamp, K
# more for what the previous leader's clamp left in est, plus latency
SLACK_MS = 2 * MAX_SKEW_MS + 400


def skewed_env(c, offset):
    env = c.test.child_env
    asan = env.get("ASAN_OPTIONS", "")
    return {"LD_PRELOAD": ":".join(x for x in (env.get("LD_PRELOAD"), FAKETIME) if x),
            "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_NO_CACHE": "1",
            # libfaketime is preloaded before the ASan runtime
            "ASAN_OPTIONS": (asan + ":" if asan else "") + "verify_asan_link_order=0"}


def logged_skew_ms(n):
    """The node's own wall clock minus ours, from its last logfmt line."""
    last = None
    with open(n.log, errors="replace") as f:
        for line in f:
            m = re.match(r"ts=(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})Z", line)
            if m:
                last = m
    if last is None:
        return None
    y, mo, d, h, mi, s, ms = (int(x) for x in last.groups())
    t = time.mktime((y, mo, d, h, mi, s, 0, 0, 0)) - time.timezone
    return int(t * 1000) + ms - oc.now_ms()


def make_leader(t, c, want, members):
    ld = c.wait_leader(members)
    deadline = time.time() + 30
    while ld is not want and time.time() < deadline:
        r = c.ctl(["members", "transfer", want.id], via=members)
        t.info("transfer to %s: %s" % (want.name, r.describe()))
        time.sleep(1.0)
        ld = c.wait_leader(members)
    return t.require(ld is want, "%s is leader" % want.name,
                     "leader is %s" % (ld.name if ld else "-"))


class Clock:
    """Every answer's log time, checked against the true time around it."""

    def __init__(self, t):
        self.t = t
        self.last = None

    def claim(self, c, key, via, ts, window="2s"):
        before = oc.now_ms()
        r = c.claim(SCOPE, key, via, "--ts", str(ts), "--window", window)
        after = oc.now_ms()
        lt = r.get("log_time_ms")
        if isinstance(lt, int):
            self.t.info("%s: log time - true time: %+d .. %+d ms" % (key, lt - after, lt - before))
        self.t.check(isinstance(lt, int) and before - SLACK_MS <= lt <= after + SLACK_MS,
                     "%s: log_time_ms %s within %d ms of the true time [%d, %d]"
                     % (key, lt, SLACK_MS, before, after), r.describe())
        if isinstance(lt, int):
            self.t.check(self.last is None or lt >= self.last,
                         "%s: log time does not go back (%s after %s)" % (key, lt, self.last))
            self.last = lt if self.last is None else max(self.last, lt)
        return r, lt


def consistent(t, r, lt, ts, window_ms, what):
    out = r.outcome
    ok = {"STALE": isinstance(lt, int) and ts < lt - window_ms,
          "FUTURE": isinstance(lt, int) and ts > lt + MAX_SKEW_MS,
          "ACCEPTED": isinstance(lt, int) and lt - window_ms <= ts <= lt + MAX_SKEW_MS
          }.get(out, False)
    t.check(ok, "%s: %s holds at log_time_ms %s (ts %d, window %d ms, K %d ms)"
            % (what, out, lt, ts, window_ms, MAX_SKEW_MS), r.describe())


def anchor_loaded(n):
    with open(n.log, errors="replace") as f:
        return sum(1 for line in f if 'msg="log-time anchor loaded"' in line)


def skewed_term(t, c, nodes, clock, C, offset, sign, warm):
    A, B, _ = nodes
    loaded = anchor_loaded(C)
    C.stop()
    C.start(env=skewed_env(c, offset))
    c.wait_answering(C)
    t.check(anchor_loaded(C) > loaded, "%s loaded its log-time anchor at the restart"
            % C.name)
    if warm:
        # C applies batches live as a follower first: the leader's clamp
        # bounds log time by est, the log time of its last live batch plus
        # monotonic time (src/raft/ltime.h).
        c.wait_serving(nodes)
        for i in range(3):
            r = c.claim(SCOPE, "%s-warm-%d-%s" % (offset, i, oc.rand_hex(3)), [A, B],
                        "--ttl", "1m")
            t.check(r.is_outcome("ACCEPTED"), "a claim while %s follows" % C.name,
                    r.describe())
        time.sleep(0.3)
    # else: C leads before any claim reached it; its base is the anchor
    make_leader(t, c, C, nodes)
    sk = logged_skew_ms(C)
    t.check(sk is not None and abs(sk - sign * 300000) < 60000,
            "%s's own log lines carry its skewed wall clock (%s ms off, want about %+d)"
            % (C.name, sk, sign * 300000))
    tag = "p" if sign > 0 else "m"
    for i in range(5):
        # signed 1 s before it arrives: a slow leader's log time trails real
        # time by up to K plus a commit latency (src/raft/ltime.h), so a ts
        # of exactly now can be FUTURE
        ts = oc.now_ms() - 1000
        r, lt = clock.claim(c, "%s-ok-%d-%s" % (tag, i, oc.rand_hex(3)), [C], ts)
        t.check(r.is_outcome("ACCEPTED"), "signed now by a true clock -> ACCEPTED",
                r.describe())
        consistent(t, r, lt, ts, MAX_WINDOW_MS, "true-clock request")
    ts = oc.now_ms() + sign * 300000
    r, lt = clock.claim(c, "%s-skewed-%s" % (tag, oc.rand_hex(3)), [C], ts)
    t.check(r.is_outcome("FUTURE" if sign > 0 else "STALE"),
            "signed by the skewed clock (%s) -> %s" % (offset, "FUTURE" if sign > 0 else "STALE"),
            r.describe())
    consistent(t, r, lt, ts, MAX_WINDOW_MS, "skewed-clock request")
    # retention under the skewed leader: ts + max_window + K in log time
    key = "%s-ret-%s" % (tag, oc.rand_hex(3))
    ts = oc.now_ms() - 1000
    r, lt = clock.claim(c, key, [C], ts)
    t.require(r.is_outcome("ACCEPTED"), "a nonce for the retention check -> ACCEPTED",
              r.describe())
    t.check(r.get("expires_ms") == ts + MAX_WINDOW_MS + MAX_SKEW_MS,
            "kept until ts + max_window + max_skew", r.describe())
    time.sleep((MAX_WINDOW_MS + MAX_SKEW_MS + SLACK_MS + 300) / 1000.0)
    r, lt = clock.claim(c, key, [C, A, B], ts)
    t.check(r.is_outcome("STALE"), "after its retention, the replay -> STALE", r.describe())
    t.check(isinstance(lt, int) and lt >= ts + MAX_WINDOW_MS + MAX_SKEW_MS,
            "decided past the retention (log_time_ms %s >= %d)"
            % (lt, ts + MAX_WINDOW_MS + MAX_SKEW_MS))
    C.stop()
    C.start()
    c.wait_answering(C)
    c.wait_serving(nodes)


def scenario(t):
    t.require(os.path.exists(FAKETIME), "libfaketime is installed (%s; scripts/deps.sh)"
              % FAKETIME)
    c = oc.Cluster(t, "skew", 9450,
                   settings={"max-window": "2s", "max-skew": "500ms"})
    nodes = c.start_cluster(["A", "B", "C"])
    clock = Clock(t)
    ts = oc.now_ms()
    r, lt = clock.claim(c, "base-" + oc.rand_hex(3), nodes, ts)
    t.check(r.is_outcome("ACCEPTED"), "true clocks: ACCEPTED", r.describe())
    consistent(t, r, lt, ts, MAX_WINDOW_MS, "true clocks")
    skewed_term(t, c, nodes, clock, nodes[2], "+5m", +1, warm=True)
    skewed_term(t, c, nodes, clock, nodes[2], "-5m", -1, warm=False)


if __name__ == "__main__":
    oc.main("once-skew", scenario)
