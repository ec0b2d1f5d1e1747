"""Linearizability of one key's calls against model.py (the checker's verdict).

Wing & Gong with Lowe's memoization, as Porcupine does it: depth first over
"which call takes effect next", among the calls invoked before the earliest
completion of a 'must' call not yet placed (real-time order); memoized on
(model state, set of calls placed). 'may' calls (:info, hidden retries) are
free to be placed at any point after their invocation or never (a hidden
companion only before its partner, model.Hidden): the search succeeds when
every 'must' call is placed. 'never' calls take no part.

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
        ncalls   calls taking part (roles 'must' and 'may')
      explain() says it in words.

  check_realtime_log_time(calls) -> [(a, b), ...]
      per-key search cannot see it: an answer acknowledged before another
      call was invoked has a log time <= that call's, on any two keys (log
      time is one clock for the whole log). Each pair is a call b whose
      answer's log time is smaller than that of an answer a completed
      before b was invoked (a: the largest such).

The budget is a count of expanded states, never time, so a verdict does not
depend on the machine's load. The search is exponential in the worst case
(many overlapping :info calls of one key); per-key partitioning and the
memo keep the CI's keys (5-30 calls) at well under a millisecond each.
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
    ops = [c for c in calls if model.role(c) != model.NEVER]
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
    key = ops[0].kkey if ops else None
    init = model.initial(key, calls)
    seen = set()
    steps = [0]
    path = []
    best = [[]]

    def first_open(done):
        for i in by_ret:
            if not (done >> i) & 1:
                return i
        return -1

    def dfs(done, s):
        if done & req == req:
            return True
        k = (done, s)
        if k in seen:
            return False
        seen.add(k)
        steps[0] += 1
        if steps[0] > budget:
            raise _Budget
        fo = first_open(done)
        limit = rets[fo]
        for i in range(n):
            if (done >> i) & 1 or invs[i] >= limit:
                continue
            b = before[i]
            if b >= 0 and (done >> b) & 1:
                continue
            for ns in model.step(s, ops[i]):
                path.append(ops[i])
                if len(path) > len(best[0]):
                    best[0] = list(path)
                if dfs(done | (1 << i), ns):
                    return True
                path.pop()
        return False

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * n + 1000))
    try:
        ok = dfs(0, init)
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
        stuck = ops[fo] if fo >= 0 else None
    return KeyResult(ok, judged, steps[0], time.monotonic() - t0,
                     [] if ok else best[0], stuck, n)


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
