"""Linearizability of one key's calls against model.py (the checker's verdict).

Wing & Gong with Lowe's memoization, as Porcupine does it: depth first over
"which call takes effect next", among the calls invoked before the earliest
completion of a 'must' call not yet placed (real-time order); memoized on
(model state, set of calls placed). 'may' calls (:info, hidden retries) are
free to be placed at any point after their invocation or never: the search
succeeds when every 'must' call is placed.

  check_key(calls, budget=BUDGET) -> KeyResult
      calls: one key's calls (model.key_ops). KeyResult fields:
        ok       True when a linearization exists (False also when the
                 budget ran out: an unjudged key is never a pass)
        judged   False when the step budget ran out
        steps    search steps taken (states expanded)
        seconds  wall time
        prefix   the longest linearizable prefix found (calls, in order)
        stuck    the calls that could not be placed after it (the 'must'
                 calls still open there), [] when ok
        ncalls   calls taking part (roles 'must' and 'may')
"""

BUDGET = 200_000


class KeyResult:
    __slots__ = ("ok", "judged", "steps", "seconds", "prefix", "stuck", "ncalls")

    def __init__(self, ok, judged, steps, seconds, prefix, stuck, ncalls):
        self.ok, self.judged, self.steps, self.seconds = ok, judged, steps, seconds
        self.prefix, self.stuck, self.ncalls = prefix, stuck, ncalls

    def explain(self):
        raise NotImplementedError


def check_key(calls, budget=BUDGET):
    raise NotImplementedError
