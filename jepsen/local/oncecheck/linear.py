"""Brute-force linearizability of one key's calls against the R-rules' model.

Not the checker's verdict any more: that is model.py and search.py (the
whole contract, log time included). This older model, without log time,
payload hashes or windows, for one record that lives the whole history, is
kept as the reference of what R1-R6 claim (tests/test_crosscheck.py: the
NONCE rules are exactly it, the IDEMPOTENT rules never contradict it) and
of the Clojure port (jepsen/clojure model.clj); workload() is shared by the
rules. Where the two models differ, model.py is the contract: it rejects a
STALE answer to a claim without ts and retry=true on answers the state
machine never marks (REPLAYED, IN_PROGRESS, ...), which this one accepts.

The sequential model is the state machine's own rulebook
(docs/state-machine.md), for one record that lives for the whole history:

NONCE (state: the accepted request id, or none)
  claim r: none -> ACCEPTED retry=false, state r; state r -> ACCEPTED
  retry=true; state w != r -> REPLAYED first_request_id w.
IDEMPOTENT (state: status, owner request id, owner token, owner attempt,
  stored result, stored error, first request id)
  claim r: none -> ACCEPTED (attempt 1); PENDING owner r -> ACCEPTED retry
  (same token); PENDING owner != r -> IN_PROGRESS, or ACCEPTED takeover
  (attempt + 1, a new token: the lease may have expired; log time is not in the history so
  both are allowed); RELEASED -> ACCEPTED takeover; COMPLETED -> DUPLICATE
  with the stored result; FAILED -> FAILED with the stored error.
  complete t x: none -> NOT_FOUND; token != t -> NOT_OWNER; PENDING -> COMPLETED
  (stores x); COMPLETED with t -> COMPLETED retry (returns the stored result).
  release t: none -> NOT_FOUND; token != t -> NOT_OWNER; PENDING -> RELEASED,
  or FAILED if terminal; RELEASED -> RELEASED retry, or FAILED if terminal.

An answer with retry=true may also be the op's own first application followed
by libonce's internal retry (both inside its interval). :ok calls must take
effect once inside [invoke, complete]; :info calls may take effect once at any
point after their invocation, or never; :fail calls never. Answers outside the
model (STALE, FUTURE, CONFLICT, RESOURCE_EXHAUSTED, INVALID_ARGUMENT, ...) are
treated as having no effect and constrain nothing (the checker does not know
log time or payload hashes).

The search is WGL-style: depth first over "which call takes effect next",
memoized on (set of calls done, model state). Exponential in the worst case,
so it is bounded twice: keys of more than LIMIT calls are not searched, and a
search that takes more than BUDGET steps (about a second) is given up; both
are counted (jepsen/local/check fails a run that skips too many keys). In
practice a key's calls are mostly sequential and a 60 s run's keys of 6-14
calls take well under a millisecond each.
"""

MODELED = {
    ("claim", "NONCE"): {"ACCEPTED", "REPLAYED"},
    ("claim", "IDEMPOTENT"): {"ACCEPTED", "IN_PROGRESS", "DUPLICATE", "FAILED"},
    ("complete", "IDEMPOTENT"): {"COMPLETED", "NOT_OWNER", "NOT_FOUND"},
    ("release", "IDEMPOTENT"): {"RELEASED", "FAILED", "NOT_OWNER", "NOT_FOUND"},
}

# idempotent state: (status, owner, token, attempt, result, error, first, used tokens)
ABSENT = (None, None, None, 0, None, None, None, frozenset())


def workload(calls):
    """'idempotent' if any call is an IDEMPOTENT claim, a complete or a
    release; else 'nonce'."""
    for c in calls:
        if c.f in ("complete", "release") or c.kind == "IDEMPOTENT":
            return "idempotent"
    return "nonce"


def role(c, wl):
    """'req' (must take effect), 'opt' (may) or None (constrains nothing)."""
    if c.type == "fail":
        return None
    if c.type == "info":
        return "opt" if c.f in ("claim", "complete", "release") else None
    kind = "NONCE" if wl == "nonce" else "IDEMPOTENT"
    if c.outcome in MODELED.get((c.f, kind), ()):
        return "req"
    return None


def _eq(reported, actual):
    return reported is None or reported == actual


def nonce_step(s, c, req):
    r = c.rid
    if not req:                      # :info claim that takes effect
        return [r] if s is None else []
    if c.outcome == "ACCEPTED":
        if not _eq(c.first_rid, r):
            return []
        if not c.retry:
            return [r] if s is None else []
        return [r] if s is None or s == r else []
    if c.outcome == "REPLAYED":
        if s is not None and s != r and _eq(c.first_rid, s):
            return [s]
        return []
    return []


def _new_owner(s, r, token):
    """States after claim r is accepted as a first claim or a takeover.
    TOKEN is the literal the answer reported, or None (an :info claim):
    then a placeholder ("?", r, attempt) that matches any token an
    ACCEPTED answer of r reported (tok_match). Every acceptance makes a new
    token (GROUP:INDEX:SLOT of its log entry): a literal token is never
    given twice (used, the last field of the state)."""
    st, owner, tok, att, res, err, first, used = s
    if token is None:
        token = ("?", r, att + 1)
    elif token in used:
        return []
    else:
        used = used | {token}
    if st is None:
        return [("PENDING", r, token, 1, None, None, r, used)]
    if (st == "PENDING" and owner != r) or st == "RELEASED":
        return [("PENDING", r, token, att + 1, None, None, first, used)]
    return []


def tok_match(state_tok, t, rid_tokens):
    if state_tok == t:
        return True
    return isinstance(state_tok, tuple) and t in rid_tokens.get(state_tok[1], ())


def idem_step(s, c, req, tokens):
    st, owner, tok, att, res, err, first, used = s
    r = c.rid
    out = []
    if c.f == "claim":
        if not req:
            return _new_owner(s, r, None)
        o = c.outcome
        if o == "ACCEPTED":
            cands = _new_owner(s, r, c.token)
            if c.retry and st == "PENDING" and owner == r:
                if c.token is not None and isinstance(tok, tuple) and tok_match(tok, c.token, tokens):
                    cands.append((st, owner, c.token, att, res, err, first, used))
                else:
                    cands.append(s)
            for n in cands:
                if _eq(c.token, n[2]) and _eq(c.attempt, n[3]) and _eq(c.first_rid, n[6]):
                    out.append(n)
        elif o == "IN_PROGRESS":
            if st == "PENDING" and owner != r and _eq(c.first_rid, first):
                out.append(s)
        elif o == "DUPLICATE":
            if st == "COMPLETED" and _eq(c.res_result, res) and _eq(c.first_rid, first):
                out.append(s)
        elif o == "FAILED":
            if st == "FAILED" and _eq(c.first_rid, first):
                out.append(s)
        return out
    t = c.token
    if c.f == "complete":
        x = c.arg_result
        done = ("COMPLETED", owner, tok, att, x, err, first, used)
        if not req:
            return [done] if st == "PENDING" and tok_match(tok, t, tokens) else []
        o = c.outcome
        if o == "COMPLETED":
            if st == "PENDING" and tok_match(tok, t, tokens) and _eq(c.res_result, x):
                out.append(done)          # first completion (or hidden + retry)
            if c.retry and st == "COMPLETED" and tok_match(tok, t, tokens) and _eq(c.res_result, res):
                out.append(s)
            if not c.retry:
                out = [n for n in out if st == "PENDING"]
        elif o == "NOT_OWNER":
            if st is not None and not tok_match(tok, t, tokens):
                out.append(s)
        elif o == "NOT_FOUND":
            if st is None:
                out.append(s)
        return out
    if c.f == "release":
        term = c.terminal
        if term:
            n = ("FAILED", owner, tok, att, res, None, first, used)
        else:
            n = ("RELEASED", owner, tok, att, res, err, first, used)
        if not req:
            if tok_match(tok, t, tokens) and (st == "PENDING" or (st == "RELEASED" and term)):
                return [n]
            return []
        o = c.outcome
        if o in ("RELEASED", "FAILED"):
            if (o == "FAILED") != term:
                return []
            if tok_match(tok, t, tokens) and (st == "PENDING" or (st == "RELEASED" and term)):
                out.append(n)
            if tok_match(tok, t, tokens) and st == o:      # retry of the same release
                out.append(s)
        elif o == "NOT_OWNER":
            if st is not None and not tok_match(tok, t, tokens):
                out.append(s)
        elif o == "NOT_FOUND":
            if st is None:
                out.append(s)
        return out
    return []


class Result:
    """valid: True, False, or None when the key was not searched; then
    skipped says why: "calls" (more than LIMIT calls take part) or "budget"
    (the search took more than BUDGET steps)."""

    def __init__(self, valid, explored, reached=None, total=0, skipped=None):
        self.valid, self.explored, self.reached, self.total = valid, explored, reached, total
        self.skipped = skipped


LIMIT = 100
BUDGET = 200_000


def check(calls, limit=LIMIT, budget=BUDGET):
    """A Result: valid True/False, or None (not searched: skipped "calls"
    when more than LIMIT calls take part, "budget" when the search exceeds
    BUDGET steps)."""
    wl = workload(calls)
    ops = []
    for c in calls:
        r = role(c, wl)
        if r is not None:
            ops.append((c, r == "req"))
    if len(ops) > limit:
        return Result(None, 0, total=len(ops), skipped="calls")
    n = len(ops)
    tokens = {}          # request id -> the tokens its ACCEPTED answers reported
    for c in calls:
        if c.f == "claim" and c.type == "ok" and c.outcome == "ACCEPTED" and c.token:
            tokens.setdefault(c.rid, set()).add(c.token)
    step = (lambda s, c, req: nonce_step(s, c, req)) if wl == "nonce" else \
           (lambda s, c, req: idem_step(s, c, req, tokens))
    init = None if wl == "nonce" else ABSENT
    req_mask = 0
    for i, (c, req) in enumerate(ops):
        if req:
            req_mask |= 1 << i
    seen = set()
    best = [0, []]
    steps = [0]
    path = []

    def dfs(done, s):
        if done & req_mask == req_mask:
            return True
        key = (done, s)
        if key in seen:
            return False
        seen.add(key)
        steps[0] += 1
        if steps[0] > budget:
            raise OverflowError
        min_ret = min(ops[i][0].ret for i in range(n)
                      if (req_mask >> i) & 1 and not (done >> i) & 1)
        for i in range(n):
            if (done >> i) & 1:
                continue
            c, req = ops[i]
            if c.inv >= min_ret:
                continue
            for ns in step(s, c, req):
                path.append(c)
                if len(path) > best[0]:
                    best[0], best[1] = len(path), list(path)
                if dfs(done | (1 << i), ns):
                    return True
                path.pop()
        return False

    try:
        ok = dfs(0, init)
    except OverflowError:
        return Result(None, steps[0], total=n, skipped="budget")
    return Result(ok, steps[0], best[1], n)
