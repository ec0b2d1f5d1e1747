"""The time workloads (jepsen/README.md "Workloads"), judged by R20-R25.

windowed  keys w-0, w-1, ...: NONCE claims with a signed timestamp `ts` and a
          window, placed around the window's edges as the cluster's log time
          is estimated (inside; just outside and just inside the past edge
          now - window; just outside and just inside the future edge
          now + max_skew; well outside both), concurrent first claims of one
          signed request through several nodes, replays with fresh request
          ids while the record lives and after its retention
          ts + max_window + max_skew (when it has been pruned: STALE, never
          ACCEPTED), client retries with the same request id.
lease     keys l-0, l-1, ...: IDEMPOTENT claims with a 3 s lease. Owners
          complete, release, release terminally, or abandon the key: then
          1-2 other claims are aimed at the lease's log-time expiry (some just
          before: IN_PROGRESS, some after: a takeover) and the old owner
          tries its token near the same instant (COMPLETED while nobody took
          over, NOT_OWNER after).
time      both at once: even workers windowed, odd workers lease (what the CI
          clock run uses).

The nodes bootstrap with --max-window 4s --max-skew 1s, so a record's
retention (5 s) passes many times in a run, and the runner writes these
settings into the history as a :time-settings event for the checker. The
workers aim at the log time they have seen: the largest `log_time_ms` any
answer reported plus the monotonic time since (the wall clock before the
first answer). The aim only decides which cases occur; the checker judges
each answer by its own log_time_ms.
"""

import base64
import heapq
import os
import queue
import threading
import time

from .common import K, rid
from .workload import Keys

MAX_WINDOW_MS = 4000
MAX_SKEW_MS = 1000
RETENTION_MS = MAX_WINDOW_MS + MAX_SKEW_MS
WINDOWS_MS = (1000, 2000, 4000)
LEASE_MS = 3000
NODE_ARGS = ["--max-window", "%dms" % MAX_WINDOW_MS, "--max-skew", "%dms" % MAX_SKEW_MS]

# where a new windowed key's ts goes, relative to the estimated log time
PLACES = (("inside", 0.28), ("past-edge", 0.2), ("future-edge", 0.2),
          ("stale", 0.16), ("future", 0.16))


class LogClock:
    """The cluster's log time as the workers have seen it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lt = None
        self.at = None

    def _now(self, mono):
        if self.lt is None:
            return int(time.time() * 1000)
        return self.lt + int((mono - self.at) * 1000)

    def observe(self, obj):
        lt = obj.get("log_time_ms") if isinstance(obj, dict) else None
        if not isinstance(lt, int) or isinstance(lt, bool):
            return
        with self.lock:
            mono = time.monotonic()
            if self.lt is None or lt > self._now(mono):
                self.lt, self.at = lt, mono

    def now(self):
        with self.lock:
            return self._now(time.monotonic())

    def mono_at(self, log_ms):
        """The monotonic instant at which log time should reach @log_ms."""
        with self.lock:
            mono = time.monotonic()
            return mono + (log_ms - self._now(mono)) / 1000.0


class TimeKeys(Keys):
    """Keys with their claim parameters, bursts only to workers of the same
    sub-workload."""

    def __init__(self, run, rng):
        super().__init__(run, "t", rng)
        self.meta = {}             # key -> dict(kind=..., ts=..., window=...)
        self.counters = {}

    def new_key(self, worker, prefix, meta, eligible, burst=True):
        with self.lock:
            n = self.counters.get(prefix, 0)
            self.counters[prefix] = n + 1
            k = "%s-%d" % (prefix, n)
            self.next_key += 1
            self.keys.append(k)
            self.meta[k] = meta
            if burst:
                nodes = max(1, len(self.run.cluster.members))
                others = [w for w in range(self.run.n_workers)
                          if w != worker and eligible(w)]
                self.rng.shuffle(others)
                others.sort(key=lambda w: w % nodes == worker % nodes)
                for w in others[:self.rng.randint(1, 2)]:
                    self.bursts.setdefault(w, queue.Queue()).put(k)
                    self.wake[w].set()
            return k

    def old_of(self, prefix, pred=None):
        with self.lock:
            ks = [k for k in self.keys if k.startswith(prefix + "-") and
                  (pred is None or pred(self.meta[k]))]
            return self.rng.choice(ks) if ks else None


def claim_call(cl, run, key, request_id, meta, hint=0, final=False):
    """One claim with @meta's parameters (ts and window, or a lease),
    recorded with them on the invocation."""
    inv = {K("scope"): run.scope, K("key"): key, K("request-id"): request_id}
    req = {"cmd": "claim", "scope": run.scope, "key": key,
           "request_id": request_id, "timeout": run.call_timeout}
    if meta["kind"] == "windowed":
        w = meta.get("probe_window", meta["window"]) if final else meta["window"]
        inv[K("kind")] = "NONCE"
        inv[K("ts")] = meta["ts"]
        inv[K("window-ms")] = w
        req["ts"] = meta["ts"]
        req["window"] = "%dms" % w
    else:
        inv[K("kind")] = "IDEMPOTENT"
        inv[K("lease-ms")] = LEASE_MS
        req["idempotent"] = True
        req["lease"] = "%dms" % LEASE_MS
    if final:
        inv[K("final")] = True
    return cl.call("claim", inv, req, hint)


class Windowed:
    """Windowed nonces (the module's docstring)."""

    def __init__(self, run, keys, clock, eligible):
        self.run, self.keys, self.clock, self.eligible = run, keys, clock, eligible

    def worker_state(self, w):
        return {"retry": None}

    def _new(self, w, rng):
        est = self.clock.now()
        win = rng.choice(WINDOWS_MS)
        r, place = rng.random(), PLACES[-1][0]
        for name, p in PLACES:
            if r < p:
                place = name
                break
            r -= p
        if place == "inside":
            ts = est - win + 200 + rng.randint(0, win + MAX_SKEW_MS - 400)
        elif place == "past-edge":
            ts = est - win + rng.randint(-300, 300)
        elif place == "future-edge":
            ts = est + MAX_SKEW_MS + rng.randint(-300, 300)
        elif place == "stale":
            ts = est - win - rng.randint(300, 3000)
        else:
            ts = est + MAX_SKEW_MS + rng.randint(300, 3000)
        meta = {"kind": "windowed", "ts": ts, "window": win,
                "probe_window": MAX_WINDOW_MS, "place": place}
        burst = place in ("inside", "past-edge", "future-edge")
        return self.keys.new_key(w, "w", meta, self.eligible, burst=burst), meta

    def step(self, w, cl, rng, st):
        if st["retry"] is not None:
            key, req_id, meta = st["retry"]
            st["retry"] = None
        else:
            req_id = rid()
            key = self.keys.pending(w)
            if key is not None:
                meta = self.keys.meta[key]
            elif rng.random() < 0.4:
                est = self.clock.now()
                if rng.random() < 0.5:      # after its retention: pruned
                    key = self.keys.old_of(
                        "w", lambda m: m["ts"] + RETENTION_MS < est - 200)
                else:
                    key = self.keys.old_of("w")
                if key is None:
                    key, meta = self._new(w, rng)
                else:                        # a replay may ask for any window
                    meta = dict(self.keys.meta[key], window=rng.choice(WINDOWS_MS))
            else:
                key, meta = self._new(w, rng)
        typ, obj = claim_call(cl, self.run, key, req_id, meta, hint=w)
        self.clock.observe(obj)
        if typ == "info" and rng.random() < 0.7:
            st["retry"] = (key, req_id, meta)    # a client retry: same request id


class Lease:
    """IDEMPOTENT claims with a lease, takeovers aimed at its expiry."""

    def __init__(self, run, keys, clock, eligible):
        self.run, self.keys, self.clock, self.eligible = run, keys, clock, eligible
        self.lock = threading.Lock()
        self.due = []              # heap of (mono, seq, call)
        self.seq = 0

    def worker_state(self, w):
        return {"retry": None, "owned": None}

    def _later(self, mono, call):
        with self.lock:
            self.seq += 1
            heapq.heappush(self.due, (mono, self.seq, call))

    def _pop_due(self):
        with self.lock:
            if self.due and self.due[0][0] <= time.monotonic():
                return heapq.heappop(self.due)[2]
        return None

    def _result(self, rng):
        return base64.b64encode(os.urandom(rng.randint(1, 24))).decode()

    def _owner_step(self, rng, key, token, lease_end):
        """What the owner of @key does next: a call now, or None (abandoned:
        takeovers, and maybe a late complete, are scheduled)."""
        r = rng.random()
        if r < 0.40:
            return ("complete", key, token, self._result(rng), rid())
        if r < 0.50:
            return ("release", key, token, rid(), False)
        if r < 0.55:
            return ("release", key, token, rid(), True)
        at = self.clock.mono_at(lease_end) if lease_end else time.monotonic() + LEASE_MS / 1000
        for _ in range(rng.randint(1, 2)):
            self._later(at + rng.uniform(-0.5, 0.5), ("claim", key, rid()))
        if r < 0.80:            # the old owner comes back near the expiry
            self._later(at + rng.uniform(-0.4, 0.8),
                        ("complete", key, token, self._result(rng), rid()))
        return None

    def step(self, w, cl, rng, st):
        call = None
        if st["retry"] is not None:
            call, st["retry"] = st["retry"], None
        elif st["owned"] is not None:
            (key, token, lease_end), st["owned"] = st["owned"], None
            call = self._owner_step(rng, key, token, lease_end)
            if call is None:
                return
        else:
            call = self._pop_due()
        if call is None:
            key = self.keys.pending(w)
            if key is None and rng.random() < 0.3:
                key = self.keys.old_of("l")
            if key is None:
                key = self.keys.new_key(w, "l", {"kind": "lease"}, self.eligible)
            call = ("claim", key, rid())
        typ, obj = self._do(cl, call, w)
        self.clock.observe(obj)
        if typ == "info" and rng.random() < 0.7:
            st["retry"] = call                 # a client retry: same request id
        elif (typ == "ok" and call[0] == "claim" and obj.get("outcome") == "ACCEPTED"
              and obj.get("owner_token") and not obj.get("retry")):
            st["owned"] = (call[1], obj["owner_token"], obj.get("lease_expires_ms"))

    def _do(self, cl, call, w):
        if call[0] == "claim":
            return claim_call(cl, self.run, call[1], call[2], {"kind": "lease"}, hint=w)
        if call[0] == "complete":
            return cl.complete(self.run.scope, call[1], call[2], call[3], call[4], hint=w)
        return cl.release(self.run.scope, call[1], call[2], call[3], terminal=call[4], hint=w)


class TimeWorkload:
    """windowed, lease, or both (even workers windowed, odd lease)."""

    idempotent = False
    PARTS = {"windowed": ("windowed",), "lease": ("lease",), "time": ("windowed", "lease")}
    EXERCISE = {"windowed": ["R20", "R21"], "lease": ["R23"]}

    def __init__(self, run, rng):
        self.run = run
        self.keys = TimeKeys(run, rng)
        self.clock = LogClock()
        parts = self.PARTS[self.name]
        made = {}
        for i, p in enumerate(parts):
            elig = (lambda w, i=i, n=len(parts): w % n == i)
            made[p] = (Windowed if p == "windowed" else Lease)(run, self.keys, self.clock, elig)
        self.by_worker = [made[parts[w % len(parts)]] for w in range(run.n_workers)]

    @classmethod
    def prepare(cls, run):
        """Before the cluster forms: the nodes' settings, and the
        :time-settings event that tells the checker what they are."""
        run.cluster.extra_node_args += NODE_ARGS
        ex = []
        for p in cls.PARTS[cls.name]:
            ex += cls.EXERCISE[p]
        run.hist.op("info", "nemesis", "time-settings",
                    {K("max-window-ms"): MAX_WINDOW_MS, K("max-skew-ms"): MAX_SKEW_MS,
                     K("lease-ms"): LEASE_MS, K("workload"): cls.name,
                     K("exercise"): ex})

    def worker_state(self, w):
        return self.by_worker[w].worker_state(w)

    def step(self, w, cl, rng, st):
        self.by_worker[w].step(w, cl, rng, st)

    def probe(self, cl, key, request_id):
        """A final probe: the key's own claim again (its ts, the largest
        window; or its lease) with a fresh request id."""
        return claim_call(cl, self.run, key, request_id, self.keys.meta[key], final=True)


class WindowedWorkload(TimeWorkload):
    name = "windowed"


class LeaseWorkload(TimeWorkload):
    name = "lease"
    idempotent = True


class BothWorkload(TimeWorkload):
    name = "time"


TIME_WORKLOADS = {"windowed": WindowedWorkload, "lease": LeaseWorkload, "time": BothWorkload}
