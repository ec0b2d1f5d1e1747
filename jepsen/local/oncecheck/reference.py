"""The reference judge: brute-force linearizability of one small key.

This is what the checker's search (search.py) is checked against, and what
the mutation tool (mutate.py) asks whether a mutant breaks the contract. It
shares the executable contract with the search -- the model (model.py:
`role`, `initial`, `step`) -- but none of the search's machinery: no
memoization, no pruning by minimal return, no partial-order reduction.

The definition it implements, literally:

  a key's calls are linearizable iff there is a subset S of its `may` calls
  (model.role: an :info call, which may have taken effect at any time after
  its invocation, or never) and an order of  must + S  in which a call a
  comes before a call b whenever a completed before b was invoked (real-time
  order; an :info call never completed; a hidden companion of a call
  answered retry=true, which model.key_ops adds, before its partner), such
  that folding model.step from
  model.initial over that order succeeds (step returns the successor
  states of a call taking effect now with its observed answer; [] when it
  cannot; a nondeterministic step is followed along every successor).

So it enumerates every subset of the `may` calls and, for each, every
real-time-consistent order (a depth-first walk over the permutations that
places a call only once every call that completed before its invocation is
placed). That is factorial: it is meant for keys of at most LIMIT (8)
calls that take part (`never` calls constrain nothing and are left out),
and gives up, returning None ("unjudged"), past MAX_STEPS fold steps.

Ownership: pure functions over history.Call objects; nothing is kept
between calls, and the calls and states are never modified (step returns
new states).
"""

import itertools

from . import model

LIMIT = 8
MAX_STEPS = 2_000_000


class Verdict:
    """ok: True (linearizable), False (no order of any subset works) or
    None (not judged: more than `limit` calls take part, or the walk took
    more than `max_steps` fold steps; `why` says which). steps: model.step
    calls made. order: a witness order (the calls) when ok is True."""

    __slots__ = ("ok", "why", "n", "steps", "order")

    def __init__(self, ok, n, steps, why=None, order=None):
        self.ok, self.n, self.steps, self.why, self.order = ok, n, steps, why, order

    def __repr__(self):
        return "Verdict(ok=%r, n=%d, steps=%d%s)" % (
            self.ok, self.n, self.steps, ", why=%s" % self.why if self.why else "")


class _OutOfSteps(Exception):
    pass


def participants(calls):
    """(must, may): the calls that must take effect and those that may,
    in history order; `never` calls are left out."""
    must, may = [], []
    for c in calls:
        r = model.role(c)
        if r == "must":
            must.append(c)
        elif r == "may":
            may.append(c)
        elif r != "never":
            raise ValueError("model.role returned %r for %s" % (r, c.label()))
    return must, may


def check_key(key, calls, limit=LIMIT, max_steps=MAX_STEPS):
    """The Verdict of one key's calls (all of them: roles are taken here)."""
    must, may = participants(calls)
    n = len(must) + len(may)
    if n > limit:
        return Verdict(None, n, 0, why="%d calls take part (limit %d)" % (n, limit))
    init = model.initial(key, calls)
    steps = [0]
    try:
        for k in range(len(may) + 1):
            for sub in itertools.combinations(may, k):
                order = _some_order(must + list(sub), init, steps, max_steps)
                if order is not None:
                    return Verdict(True, n, steps[0], order=order)
    except _OutOfSteps:
        return Verdict(None, n, steps[0], why="more than %d steps" % max_steps)
    return Verdict(False, n, steps[0])


def _some_order(chosen, init, steps, max_steps):
    """A real-time-consistent order of every call of `chosen` along which
    model.step succeeds from `init`, or None."""
    m = len(chosen)
    # before[i]: the chosen calls that completed before chosen[i] was invoked
    before = [[j for j in range(m) if j != i and chosen[j].ret < chosen[i].inv]
              for i in range(m)]
    # a hidden companion (libonce's own first application of a call answered
    # retry=true, model.key_ops) can only take effect before its partner
    # (model.Hidden: hidden is True, .before is the partner)
    at = {id(c): i for i, c in enumerate(chosen)}
    for i, c in enumerate(chosen):
        if getattr(c, "hidden", False) is True:
            p = at.get(id(c.before))
            if p is not None:
                before[p].append(i)
    placed = [False] * m
    order = []

    def walk(state):
        if len(order) == m:
            return True
        for i in range(m):
            if placed[i] or not all(placed[j] for j in before[i]):
                continue
            steps[0] += 1
            if steps[0] > max_steps:
                raise _OutOfSteps
            nexts = model.step(state, chosen[i])
            if not nexts:
                continue
            placed[i] = True
            order.append(chosen[i])
            for ns in nexts:
                if walk(ns):
                    return True
            order.pop()
            placed[i] = False
        return False

    return list(order) if walk(init) else None


def check_calls(calls, events=(), limit=LIMIT, max_steps=MAX_STEPS):
    """{key: Verdict} for every key of a history's calls (model.key_ops,
    which takes the cluster's settings from the events)."""
    return {k: check_key(k, cs, limit, max_steps)
            for k, cs in model.key_ops(calls, events).items()}
