"""Linearizability of one key's calls against model.py (the checker's verdict).

Wing & Gong with Lowe's memoization, as Porcupine does it: depth first over
"which call takes effect next", among the calls invoked before the earliest
completion of a 'must' call not yet placed (real-time order). 'may' calls
(:info, hidden retries) are free to be placed at any point after their
invocation or never (a hidden companion only before its partner,
model.Hidden): the search succeeds when every 'must' call is placed.
'never' calls take no part. Three reductions keep a hot key (hundreds of
calls, records that expire and are claimed again, :info calls that stay
free to take effect in every later gap) cheap; none changes a verdict:

  * the memo of failed configurations, with dominance: a configuration is
    (the calls placed, the model state). One with the same 'must' calls
    placed, the same state and a superset of the 'may' calls placed of one
    that failed fails too (every order open to it is open to the other:
    which calls may come next depends on the 'must' calls placed only), so
    it is not expanded. The 'must' calls are tried before the 'may' ones,
    so that the configuration without an optional call is judged first.
  * the clock: every 'must' answer that shows log_time_ms takes effect at
    exactly that time, and the model's clock N never goes back (T >= N). A
    state whose N is already past the log time of a 'must' call not yet
    placed cannot place it, whatever follows: it is dropped unexpanded
    (e.g. an :info claim placed after the record's expiry, ahead of
    answers still to come at an earlier log time).
  * silent calls (model.silent): the :info claims of a NONCE key that no
    answer can observe are left out; model.py states why no verdict
    depends on them.

Measured on the simulator's hot key n0 (tests/sim; 400-700 calls, seeds
1-200 of scripts/sim): every key judged, the largest in 700 steps (about
one per call), where the search without these reductions left 15 of the
200 histories with a key unjudged at 50,000 steps (jepsen/README.md,
"The history checker").

  check_key(calls, budget=BUDGET) -> KeyResult
      calls: one key's calls (model.key_ops). KeyResult fields:
        ok       True when a linearization exists (False also when the
                 budget ran out: an unjudged key is never a pass)
        judged   False when the step budget ran out
        steps    search steps taken (states expanded)
        seconds  wall time
        prefix   the longest linearizable prefix found (calls, in order)
        stuck    the 'must' call that could not be placed after it (the
                 open one that completed first), None when ok or unjudged
        ncalls   calls taking part (roles 'must' and 'may', silent ones
                 included)
      explain() says it in words.

  check_realtime_log_time(calls) -> [(a, b), ...]
      per-key search cannot see it: an answer acknowledged before another
      call was invoked has a log time <= that call's, on any two keys (log
      time is one clock for the whole log). Each pair is a call b whose
      answer's log time is smaller than that of an answer a completed
      before b was invoked (a: the largest such).

The budget is a count of expanded states, never time, so a verdict does not
depend on the machine's load. The search is exponential in the worst case
(many overlapping :info calls of one key that answers observe, an IDEMPOTENT
key's lost acceptances); per-key partitioning, the memo and the reductions
above keep the CI's keys (5-30 calls) at well under a millisecond each.
"""

import sys
import time

from . import model
from .history import _int

BUDGET = 200_000


class KeyResult:
    __slots__ = ("ok", "judged", "steps", "seconds", "prefix", "stuck", "ncalls")

    def __init__(self, ok, judged, steps, seconds, prefix, stuck, ncalls):
        self.ok, self.judged, self.steps, self.seconds = ok, judged, steps, seconds
        self.prefix, self.stuck, self.ncalls = prefix, stuck, ncalls

    def explain(self):
        if self.ok:
            return "linearizable (%d calls, %d steps)" % (self.ncalls, self.steps)
        if not self.judged:
            return ("not judged: the search ran out of its budget (%d steps expanded; "
                    "%d calls take part)" % (self.steps - 1, self.ncalls))
        s = "no linearization of the key's %d calls: the longest linearizable prefix " \
            "has %d calls" % (self.ncalls, len(self.prefix))
        if self.stuck is not None:
            s += "; after it, %s (history line %d) cannot take effect with its answer" % (
                self.stuck.label(), self.stuck.inv_op.line)
        return s


class _Budget(Exception):
    pass


def check_key(calls, budget=BUDGET):
    t0 = time.monotonic()
    quiet = model.silent(calls)
    ops = [c for c in calls if model.role(c) != model.NEVER and id(c) not in quiet]
    n = len(ops)
    must = [model.role(c) == model.MUST for c in ops]
    pos = {id(c): i for i, c in enumerate(ops)}
    before = [pos.get(id(getattr(c, "before", None) or 0), -1) for c in ops]
    req = 0
    for i in range(n):
        if must[i]:
            req |= 1 << i
    invs = [c.inv for c in ops]
    rets = [c.ret for c in ops]
    # the 'must' calls by completion, to find the earliest open one fast
    by_ret = sorted((i for i in range(n) if must[i]), key=lambda i: rets[i])
    # the 'must' calls whose answer pins their log time, by that time: a
    # state whose clock N is already past the earliest one not placed is
    # dead (the model's T >= N), whatever follows
    by_lt = sorted((lt, i) for i, lt in ((i, _pinned(ops[i])) for i in range(n) if must[i])
                   if lt is not None)
    nlt = len(by_lt)
    # candidates: the 'must' calls first, so that a configuration without
    # an optional call is judged before those with it (the dominance below)
    order = [i for i in range(n) if must[i]] + [i for i in range(n) if not must[i]]
    key = ops[0].kkey if ops else None
    init = model.initial(key, calls)
    failed = {}              # (must calls placed, state) -> [may calls placed], failed
    steps = [0]
    path = []
    best = [[]]

    def first_open(done, k=0):
        while k < len(by_ret) and (done >> by_ret[k]) & 1:
            k += 1
        return k

    def dfs(done, s, ko, kl):
        if done & req == req:
            return True
        ko = first_open(done, ko)
        while kl < nlt and (done >> by_lt[kl][1]) & 1:
            kl += 1
        if kl < nlt and -s[2][model.Z][model.N] > by_lt[kl][0]:
            return False                         # the clock passed an answer's log time
        mk = (done & req, s)
        md = done & ~req
        tried = failed.get(mk)
        if tried is not None:
            for f in tried:
                if f & ~md == 0:
                    return False                 # dominated by a failed configuration
        steps[0] += 1
        if steps[0] > budget:
            raise _Budget
        limit = rets[by_ret[ko]]
        for i in order:
            if (done >> i) & 1 or invs[i] >= limit:
                continue
            b = before[i]
            if b >= 0 and (done >> b) & 1:
                continue
            for ns in model.step(s, ops[i]):
                path.append(ops[i])
                if len(path) > len(best[0]):
                    best[0] = list(path)
                if dfs(done | (1 << i), ns, ko, kl):
                    return True
                path.pop()
        if tried is None:
            failed[mk] = [md]
        else:                                    # keep the least placed sets only
            tried[:] = [f for f in tried if md & ~f != 0] + [md]
        return False

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * n + 1000))
    try:
        ok = dfs(0, init, 0, 0)
        judged = True
    except _Budget:
        ok, judged = False, False
    finally:
        sys.setrecursionlimit(old)
    stuck = None
    if judged and not ok:
        done = 0
        for c in best[0]:
            done |= 1 << pos[id(c)]
        fo = first_open(done)
        stuck = ops[by_ret[fo]] if fo < len(by_ret) else None
    return KeyResult(ok, judged, steps[0], time.monotonic() - t0,
                     [] if ok else best[0], stuck, n + len(quiet))


def _pinned(c):
    """The log time a 'must' call's answer pins (model._begin), or None."""
    return c.m.a.get("log-time-ms")


def log_time(c):
    """The log time an :ok answer reports, or None."""
    if c.type != "ok" or c.ret_op is None:
        return None
    v = model._vals(c.ret_op)
    return _int(v.get("log-time-ms"))


def _group(c):
    """The raft group of an :ok answer's record, from the owner token it
    shows ("group:index:slot"), or None."""
    v = model._vals(c.ret_op) if c.ret_op is not None else {}
    tok = v.get("owner-token")
    if isinstance(tok, str) and tok.count(":") == 2:
        return tok.split(":")[0]
    return None


def check_realtime_log_time(calls):
    by = {}
    lts = {}
    for c in calls:
        if c.type != "ok" or c.ret_op is None:
            continue
        v = model._vals(c.ret_op)
        lt = _int(v.get("log-time-ms"))
        tok = v.get("owner-token")
        if lt is None or not (isinstance(tok, str) and tok.count(":") == 2):
            continue
        lts[id(c)] = lt
        by.setdefault(tok.split(":")[0], []).append(c)
    out = []
    for g, cs in sorted(by.items()):
        ev = []
        for c in cs:
            ev.append((c.inv, 1, c))
            ev.append((c.ret, 0, c))
        ev.sort(key=lambda e: (e[0], e[1]))
        top = None            # the completed answer with the largest log time
        at_inv = {}
        for _, kind, c in ev:
            if kind == 1:
                at_inv[id(c)] = top
                continue
            a = at_inv.get(id(c))
            if a is not None and a.kkey != c.kkey and lts[id(c)] < lts[id(a)]:
                out.append((a, c))
            if top is None or lts[id(c)] > lts[id(top)]:
                top = c
    return out
