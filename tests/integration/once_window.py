#!/usr/bin/env python3
"""once_window.py: scenario 5, signed-timestamp windows and retention.

The cluster is bootstrapped with --max-window 2s --max-skew 500ms, so a
nonce claimed with `--ts T --window W` is kept until T + 2.5 s (log time,
which follows real time here).
  * ts older than the window: STALE; ts beyond now + max skew: FUTURE;
    a window over max_window: INVALID_ARGUMENT (exit 2).
  * ts = now, window 1s: ACCEPTED; replays while the record lives:
    REPLAYED, with any window.
  * after T + 2.5 s (+ margin): a replay is STALE with the same window, and
    also with a larger one (2s = max_window); the record is gone (lookup
    NOT_FOUND) and it stays STALE: it never comes back as ACCEPTED.
  * every answer carries log_time_ms (the log time it was decided at), and
    each outcome holds against it: STALE ts < log_time - window, FUTURE
    ts > log_time + max_skew, ACCEPTED inside both, and a replay after
    retention at a log time past ts + max_window + max_skew.
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

SCOPE = "win"
MAX_WINDOW_MS = 2000
MAX_SKEW_MS = 500


def ts_claim(c, key, via, ts, window):
    return c.claim(SCOPE, key, via, "--ts", str(ts), "--window", window)


def check_log_time(t, r, ts, window_ms, what):
    """The answer's log time exists and its outcome holds against it."""
    lt = r.get("log_time_ms")
    if not isinstance(lt, int) or lt <= 0:
        t.check(False, "%s: the answer carries log_time_ms" % what,
                r.describe())
        return
    out = r.outcome
    ok = {"STALE": ts < lt - window_ms,
          "FUTURE": ts > lt + MAX_SKEW_MS,
          "ACCEPTED": lt - window_ms <= ts <= lt + MAX_SKEW_MS}.get(out, True)
    t.check(ok, "%s: %s holds at log_time_ms %d (ts %d, window %d ms)"
            % (what, out, lt, ts, window_ms), r.describe())


def scenario(t):
    c = oc.Cluster(t, "window", 8500,
                   settings={"max-window": "2s", "max-skew": "500ms"})
    nodes = c.start_cluster(["A", "B", "C"])
    A, B, C = nodes

    now = oc.now_ms()
    r = ts_claim(c, "old-" + oc.rand_hex(4), [A], now - 5000, "2s")
    t.check(r.is_outcome("STALE"), "ts 5 s old, window 2s -> STALE",
            r.describe())
    check_log_time(t, r, now - 5000, 2000, "STALE")
    r = ts_claim(c, "old1-" + oc.rand_hex(4), [B], now - 1500, "1s")
    t.check(r.is_outcome("STALE"), "ts 1.5 s old, window 1s -> STALE",
            r.describe())
    now = oc.now_ms()
    r = ts_claim(c, "fut-" + oc.rand_hex(4), [B], now + 3000, "1s")
    t.check(r.is_outcome("FUTURE"), "ts 3 s ahead (max skew 500ms) -> FUTURE",
            r.describe())
    check_log_time(t, r, now + 3000, 1000, "FUTURE")
    r = ts_claim(c, "big-" + oc.rand_hex(4), [C], oc.now_ms(), "3s")
    t.check(r.rc == oc.RC_USAGE and (r.error == "INVALID_ARGUMENT" or
                                     r.outcome == "INVALID_ARGUMENT"),
            "window 3s over max_window 2s -> INVALID_ARGUMENT, exit 2",
            r.describe())

    key = "n-" + oc.rand_hex(6)
    ts = oc.now_ms()
    r = ts_claim(c, key, [A], ts, "1s")
    t.require(r.is_outcome("ACCEPTED"), "ts now, window 1s -> ACCEPTED",
              r.describe())
    check_log_time(t, r, ts, 1000, "ACCEPTED")
    first = r.get("request_id")
    exp = r.get("expires_ms")
    if isinstance(exp, int):
        t.check(exp >= ts + MAX_WINDOW_MS + MAX_SKEW_MS,
                "record kept at least until ts + max_window + max_skew "
                "(expires_ms %d, ts %d)" % (exp, ts))
    for n, w in ((B, "1s"), (C, "2s")):
        r = ts_claim(c, key, [n], ts, w)
        t.check(r.is_outcome("REPLAYED")
                and r.get("first_request_id") == first,
                "replay on %s, window %s, while the record lives -> REPLAYED"
                % (n.name, w), r.describe())

    # Wait until the retention (ts + 2.5 s) has passed, with a margin for
    # the leader's log time, which follows real time within the skew.
    wait_until = ts + MAX_WINDOW_MS + MAX_SKEW_MS + 1000
    time.sleep(max(0, wait_until - oc.now_ms()) / 1000.0)
    for n, w in ((B, "1s"), (C, "2s"), (A, "2s")):
        r = ts_claim(c, key, [n], ts, w)
        t.check(r.is_outcome("STALE"),
                "after retention: replay on %s with window %s -> STALE"
                % (n.name, w), r.describe())
        lt = r.get("log_time_ms")
        t.check(isinstance(lt, int) and
                lt >= ts + MAX_WINDOW_MS + MAX_SKEW_MS,
                "the replay was decided after the retention (log_time_ms %s)"
                % lt, r.describe())
    r = c.ctl(["lookup", SCOPE, key], via=nodes)
    t.check(r.is_outcome("NOT_FOUND"), "after retention the record is gone "
            "(lookup NOT_FOUND)", r.describe())
    r = ts_claim(c, key, [B], ts, "2s")
    t.check(r.is_outcome("STALE"), "and a later replay is still STALE",
            r.describe())

    # A ttl-only nonce is unaffected by windows.
    r = c.claim(SCOPE, "ttl-" + oc.rand_hex(4), [C], "--ttl", "10s")
    t.check(r.is_outcome("ACCEPTED"), "a ttl-only claim -> ACCEPTED",
            r.describe())


if __name__ == "__main__":
    oc.main("once-window", scenario)
