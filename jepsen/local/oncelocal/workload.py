"""The workloads (jepsen/README.md "Workloads") and their workers.

nonce       keys n-0, n-1, ... of a fresh scope, NONCE claims: bursts of
            concurrent first claims through different nodes, replays with
            fresh request ids, client retries with the same request id.
idempotent  keys i-0, i-1, ...: IDEMPOTENT claims with a short lease, then
            complete (most), release, terminal release, or abandon; later
            claims of old keys (DUPLICATE, or a takeover after the lease
            expired), completes with an abandoned (fenced) owner token.
batch       keys b-0, b-1, ...: NONCE claims in batch calls ("claim batch",
            once_claim_batch) of 1..8 items: new keys (bursts claimed by
            other workers' batches too), old keys (REPLAYED), a key twice
            in one batch (ACCEPTED then REPLAYED, in order), and after an
            :info item a client retry of the whole batch with the same
            request ids. Each item is its own op in the history, under a
            process of its own, judged by the checker as a claim.
nonce and idempotent also look old keys up (LOOKUP_P of the steps)
through the worker's own node: reads served by followers, judged as
reads by the checker.

Every call is an :invoke and one completion in the history: :ok when the
answer has an outcome, :fail when `applied` is "false", :info otherwise
(also when the session gave no answer in time or died; it is then killed
and a new one started, under a new :process, Jepsen's rule).
"""

import base64
import os
import queue
import random
import threading
import time

from .cluster import Session, SessionLost
from .common import K, edn_value, rid

LEASE = "2s"
LEASE_S = 2.0
# Share of steps that read an old key instead of claiming: through the
# worker's own node, so most reads are served by followers (docs/design.md
# §5, "Reads on any node"); the checker judges them as reads.
LOOKUP_P = 0.15


class Client:
    """A worker's client: a session bound to one member (re-bound when that
    node is no longer a member), a Jepsen process number that changes after
    every :info."""

    def __init__(self, run, addr=None, sticky=False):
        self.run = run
        self.process = run.next_process()
        self.addr = addr
        self.sticky = sticky       # stays on @addr even when it is no member
        self.session = None
        self.batch_procs = []      # claim_batch: one process per item slot

    def _bind(self, hint):
        cl = self.run.cluster
        if self.sticky:
            return
        with cl.lock:
            addrs = [n.client_addr for n in cl.members]
        if not addrs:
            return
        if self.addr not in addrs:
            new = addrs[hint % len(addrs)]
            if self.session is not None:
                self.session.close()
                self.session = None
            self.addr = new

    def call(self, f, inv, req, hint=0):
        """One call, recorded (invoke + completion). Returns (type, obj)."""
        run = self.run
        self._bind(hint)
        if self.session is None:
            self.session = Session(run.cluster, self.addr, run.call_timeout)
        inv = dict(inv)
        inv[K("node")] = self.addr
        run.hist.op("invoke", self.process, f, inv)
        try:
            obj = self.session.call(req, run.harness_timeout)
        except SessionLost as e:
            run.hist.op("info", self.process, f,
                        {K("error"): "HARNESS", K("applied"): "unknown",
                         K("message"): str(e)})
            self._lost()
            run.count("info", "HARNESS")
            return "info", {}
        v = edn_value(obj)
        if obj.get("outcome") and not obj.get("error"):
            typ = "ok"
        elif obj.get("applied") == "false":
            typ = "fail"
        else:
            typ = "info"
        run.hist.op(typ, self.process, f, v)
        if typ == "info":
            self.process = run.next_process()
        run.count(typ, "%s %s" % (f, obj.get("outcome") or obj.get("error")))
        return typ, obj

    def claim(self, scope, key, request_id, final=False, idempotent=False,
              hint=0):
        inv = {K("scope"): scope, K("key"): key, K("request-id"): request_id,
               K("kind"): "IDEMPOTENT" if idempotent else "NONCE"}
        req = {"cmd": "claim", "scope": scope, "key": key,
               "request_id": request_id, "timeout": self.run.call_timeout}
        if idempotent:
            inv[K("lease")] = LEASE
            req["idempotent"] = True
            req["lease"] = LEASE
        if final:
            inv[K("final")] = True
        return self.call("claim", inv, req, hint)

    def complete(self, scope, key, token, result_b64, request_id, hint=0):
        inv = {K("scope"): scope, K("key"): key, K("request-id"): request_id,
               K("owner-token"): token, K("result-b64"): result_b64}
        req = {"cmd": "complete", "scope": scope, "key": key,
               "owner_token": token, "result_b64": result_b64,
               "request_id": request_id, "timeout": self.run.call_timeout}
        return self.call("complete", inv, req, hint)

    def release(self, scope, key, token, request_id, terminal=False, hint=0):
        inv = {K("scope"): scope, K("key"): key, K("request-id"): request_id,
               K("owner-token"): token, K("terminal"): terminal}
        req = {"cmd": "release", "scope": scope, "key": key,
               "owner_token": token, "request_id": request_id,
               "timeout": self.run.call_timeout}
        if terminal:
            inv[K("error")] = "declined"
            req["terminal"] = True
            req["error"] = "declined"
        return self.call("release", inv, req, hint)

    def lookup(self, scope, key, hint=0):
        """A linearizable read of @key, served by the node this client is
        bound to (a follower reads after a read barrier)."""
        inv = {K("scope"): scope, K("key"): key}
        req = {"cmd": "lookup", "scope": scope, "key": key,
               "timeout": self.run.call_timeout}
        return self.call("lookup", inv, req, hint)

    def claim_batch(self, scope, items, hint=0):
        """One "claim batch" call of @items [(key, request_id)], NONCE. Each
        item is its own op: invoked under a process of its own (the batch's
        slot i), completed from its own answer by call()'s rule; the
        invocations all precede the call and the completions follow it (the
        items are concurrent ops). A line refused whole, or no answer, is
        each item's completion. Returns [(type, obj)] in item order."""
        run = self.run
        self._bind(hint)
        if self.session is None:
            self.session = Session(run.cluster, self.addr, run.call_timeout)
        while len(self.batch_procs) < len(items):
            self.batch_procs.append(run.next_process())
        for i, (key, request_id) in enumerate(items):
            run.hist.op("invoke", self.batch_procs[i], "claim",
                        {K("scope"): scope, K("key"): key,
                         K("request-id"): request_id, K("kind"): "NONCE",
                         K("node"): self.addr})
        req = {"cmd": "claim batch", "timeout": run.call_timeout,
               "items": [{"scope": scope, "key": k, "request_id": r}
                         for k, r in items]}
        try:
            obj = self.session.call(req, run.harness_timeout)
        except SessionLost as e:
            for i in range(len(items)):
                run.hist.op("info", self.batch_procs[i], "claim",
                            {K("error"): "HARNESS", K("applied"): "unknown",
                             K("message"): str(e)})
                self.batch_procs[i] = run.next_process()
                run.count("info", "HARNESS")
            self._lost()
            return [("info", {})] * len(items)
        answers = obj.get("items")
        if not isinstance(answers, list) or len(answers) != len(items):
            answers = [obj] * len(items)
        out = []
        for i, a in enumerate(answers):
            if a.get("outcome") and not a.get("error"):
                typ = "ok"
            elif a.get("applied") == "false":
                typ = "fail"
            else:
                typ = "info"
            run.hist.op(typ, self.batch_procs[i], "claim", edn_value(a))
            if typ == "info":
                self.batch_procs[i] = run.next_process()
            run.count(typ, "batch claim %s" % (a.get("outcome") or
                                               a.get("error")))
            out.append((typ, a))
        return out

    def _lost(self):
        self.process = self.run.next_process()
        s, self.session = self.session, None
        if s is not None:
            s.kill()

    def close(self):
        if self.session is not None:
            self.session.close()
            self.session = None


class Keys:
    """The keys of one workload and the burst queues between workers."""

    def __init__(self, run, prefix, rng):
        self.run = run
        self.prefix = prefix
        self.rng = rng
        self.lock = threading.Lock()
        self.keys = []
        self.next_key = 0
        self.bursts = {}
        self.wake = [threading.Event() for _ in range(run.n_workers)]

    def new_burst(self, worker):
        """A new key; 1-2 other workers (bound to other nodes first) are told
        to claim it at once: concurrent first claims through several nodes."""
        with self.lock:
            k = "%s-%d" % (self.prefix, self.next_key)
            self.next_key += 1
            self.keys.append(k)
            n = max(1, len(self.run.cluster.members))
            others = [w for w in range(self.run.n_workers) if w != worker]
            self.rng.shuffle(others)
            others.sort(key=lambda w: w % n == worker % n)
            for w in others[:self.rng.randint(1, 2)]:
                self.bursts.setdefault(w, queue.Queue()).put(k)
                self.wake[w].set()
            return k

    def pending(self, worker):
        with self.lock:
            q = self.bursts.get(worker)
        if q is None:
            return None
        try:
            return q.get_nowait()
        except queue.Empty:
            return None

    def has_pending(self, worker):
        with self.lock:
            q = self.bursts.get(worker)
        return q is not None and not q.empty()

    def old_key(self):
        with self.lock:
            return self.rng.choice(self.keys) if self.keys else None


class NonceWorkload:
    name = "nonce"
    idempotent = False

    def __init__(self, run, rng):
        self.run = run
        self.keys = Keys(run, "n", rng)

    def worker_state(self, w):
        return {"retry": None}

    def step(self, w, cl, rng, st):
        if st["retry"] is None and rng.random() < LOOKUP_P:
            old = self.keys.old_key()
            if old is not None:
                cl.lookup(self.run.scope, old, hint=w)
                return
        if st["retry"] is not None:
            key, req_id = st["retry"]
            st["retry"] = None
        else:
            key = self.keys.pending(w)
            if key is None:
                old = self.keys.old_key() if rng.random() < 0.45 else None
                key = old if old is not None else self.keys.new_burst(w)
            req_id = rid()
        typ, _ = cl.claim(self.run.scope, key, req_id, hint=w)
        if typ == "info" and rng.random() < 0.7:
            st["retry"] = (key, req_id)     # a client retry: same request id


class IdempotentWorkload:
    """Owners complete, release or abandon; others see IN_PROGRESS, then
    DUPLICATE, or take over after the lease; abandoned tokens are tried
    again after a takeover could have happened (NOT_OWNER expected then)."""

    name = "idempotent"
    idempotent = True

    def __init__(self, run, rng):
        self.run = run
        self.keys = Keys(run, "i", rng)
        self.lock = threading.Lock()
        self.takeovers = []        # (due, key): abandoned keys to take over

    def worker_state(self, w):
        return {"retry": None, "owned": None, "abandoned": []}

    def _takeover_due(self, pop=False):
        with self.lock:
            if self.takeovers and self.takeovers[0][0] <= time.monotonic():
                return self.takeovers.pop(0)[1] if pop else self.takeovers[0][1]
        return None

    def _result(self, rng):
        return base64.b64encode(os.urandom(rng.randint(1, 24))).decode()

    def step(self, w, cl, rng, st):
        if st["retry"] is not None:
            call = st["retry"]
            st["retry"] = None
        elif st["owned"] is not None:
            key, token = st["owned"]
            st["owned"] = None
            r = rng.random()
            if r < 0.75:
                call = ("complete", key, token, self._result(rng), rid())
            elif r < 0.85:
                call = ("release", key, token, rid(), False)
            elif r < 0.90:
                call = ("release", key, token, rid(), True)
            else:
                # abandon: the lease runs out, another worker takes the key
                # over, then this owner tries its (fenced) token again
                now = time.monotonic()
                with self.lock:
                    self.takeovers.append((now + LEASE_S * 1.3, key))
                st["abandoned"].append((now + LEASE_S * 2.5, key, token))
                return
        elif self._takeover_due() is not None:
            call = ("claim", self._takeover_due(pop=True), rid())
        elif rng.random() < LOOKUP_P and self.keys.old_key() is not None:
            cl.lookup(self.run.scope, self.keys.old_key(), hint=w)
            return
        elif st["abandoned"] and st["abandoned"][0][0] <= time.monotonic():
            _, key, token = st["abandoned"].pop(0)
            call = ("complete", key, token, self._result(rng), rid())
        else:
            key = self.keys.pending(w)
            if key is None:
                old = self.keys.old_key() if rng.random() < 0.35 else None
                key = old if old is not None else self.keys.new_burst(w)
            call = ("claim", key, rid())
        typ, obj = self._do(cl, call, w)
        if typ == "info" and rng.random() < 0.7:
            st["retry"] = call             # a client retry: same request id
        elif (typ == "ok" and call[0] == "claim" and
              obj.get("outcome") == "ACCEPTED" and obj.get("owner_token")):
            st["owned"] = (call[1], obj["owner_token"])

    def _do(self, cl, call, w):
        scope = self.run.scope
        if call[0] == "claim":
            return cl.claim(scope, call[1], call[2], idempotent=True, hint=w)
        if call[0] == "complete":
            return cl.complete(scope, call[1], call[2], call[3], call[4], hint=w)
        return cl.release(scope, call[1], call[2], call[3], terminal=call[4],
                          hint=w)


class BatchWorkload(NonceWorkload):
    """NONCE claims in batch calls of 1..8 items (the module's docstring)."""

    name = "batch"
    BATCH_MAX = 8

    def __init__(self, run, rng):
        self.run = run
        self.keys = Keys(run, "b", rng)

    def step(self, w, cl, rng, st):
        if st["retry"] is not None:
            items = st["retry"]
            st["retry"] = None
        else:
            items = []
            opened = False
            for _ in range(rng.randint(1, self.BATCH_MAX - 1)):
                key = self.keys.pending(w)
                if key is None:
                    # at most one new key (burst) per batch, as nonce opens
                    # one per call: more would feed the other workers' queues
                    # faster than they drain them, and the rate would run away
                    old = (self.keys.old_key()
                           if opened or rng.random() < 0.35 else None)
                    if old is None and opened:
                        break
                    if old is None:
                        opened = True
                    key = old if old is not None else self.keys.new_burst(w)
                items.append((key, rid()))
            if rng.random() < 0.2:
                # a key twice in one batch: ACCEPTED (or REPLAYED), then
                # REPLAYED, in order
                items.append((items[0][0], rid()))
        res = cl.claim_batch(self.run.scope, items, hint=w)
        if any(t == "info" for t, _ in res) and rng.random() < 0.7:
            st["retry"] = items            # a client retry: same request ids


WORKLOADS = {"nonce": NonceWorkload, "idempotent": IdempotentWorkload,
             "batch": BatchWorkload}


def worker(run, w, wl, stop):
    rng = random.Random(run.seed * 1000 + w)
    cl = Client(run)
    run.clients.append(cl)
    period = run.n_workers / float(run.rate)
    st = wl.worker_state(w)
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            wl.step(w, cl, rng, st)
            left = period - (time.monotonic() - t0)
            if left > 0 and not wl.keys.has_pending(w):
                wl.keys.wake[w].wait(rng.uniform(0, 2 * left))
            wl.keys.wake[w].clear()
    finally:
        cl.close()
