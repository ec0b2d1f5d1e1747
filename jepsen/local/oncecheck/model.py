"""An executable model of the claim contract (docs/state-machine.md), one key.

The checker's verdict (search.py) asks one question of this module: "if this
call took effect now, in this state, what states may follow, given what its
answer says?". The model is written from docs/state-machine.md, not from
src/fsm/; it covers one (scope, key) from an absent record on.

Interface (the reference judge and the search code against exactly this):

  key_ops(calls, events=()) -> {(scope, key): [call, ...]}
      history.pair()'s calls per key, in invocation order, with what the
      model needs attached to each call (c.m, an Args), including the
      cluster's settings from the :time-settings event. Calls whose :f the
      model does not know (not claim, complete, release, lookup, forget)
      are left out. An :ok answer with retry=true of a claim, complete or
      release also brings a hidden companion call (a Hidden, just before its
      partner in the list): libonce's own first application, whose reply
      was lost; role 'may', and it can only take effect before its
      partner (companion.before is the partner; None on every other call).
  initial(key, calls) -> state
      the absent record at an unknown log time >= 0 (hashable, immutable).
  step(state, call) -> [state, ...]
      the successor states if CALL takes effect now: consistent with every
      field of its answer when it is :ok, every legal outcome that changes
      the state when it is 'may' (an :info call that took effect without
      changing the state is, to every later answer, the same as one that
      never did: attempts are not modeled, below); [] if it cannot take
      effect now.
  role(call) -> 'must' | 'may' | 'never'
      :ok with an outcome the model knows: 'must' (takes effect once inside
      [invoke, complete]); :info and hidden companions: 'may' (once, at any
      point after the invocation, or never); :fail: 'never'. An :ok answer
      the model does not know (RESOURCE_EXHAUSTED, FAILED_PRECONDITION of a
      restore fence, INVALID_ARGUMENT, NOT_BOOTSTRAPPED ...): 'never', and
      unmodeled(call) is True: the checker counts and prints them, so a
      workload that starts producing them is seen.
  silent(calls) -> {id(call), ...}
      the 'may' calls no linearization needs (below): the search leaves
      them out; the verdict is the same with or without them.

State: a tuple (rec, hw, dbm).
  rec   None (absent, or expired and freed: the contract makes them the
        same), or a Rec: kind, status (SEEN, PENDING, RELEASED, COMPLETED,
        FAILED), first request id, first index (None until an answer shows
        it), owner request id, owner token (a literal "g:i:s", or a
        placeholder ('?', rid, attempt, tokens it is not) for an acceptance
        whose answer was lost, pinned by the first answer that shows it or
        matches it; NOT_OWNER answers add to what it is not), owner attempt,
        stored result, stored error (None: not known yet), payload hash.
  hw    the largest (index, slot) of an acceptance so far: owner tokens are
        (group, index, slot) of the accepting entry, and the log only grows.
  dbm   log time, symbolically: a closed difference-bound matrix over Z
        (the constant 0), N (the log time of the last call placed), F
        (first_time_ms), L (lease_expires_ms) and E (expires_ms). A known
        time is a pair of bounds against Z; a call's own time T is a fresh
        variable with T >= N (log time never goes back along the
        linearization, and real-time order is the search's), pinned by the
        answer's log_time_ms when it has one; after the call N := T. An
        :info call's time stays a variable that later answers bound or pin
        (first_time_ms, lease_expires_ms, expires_ms, retry_after_ms, the
        next log time). Decisions are constraints: a live record is T < E,
        a live lease T < L, a window edge a bound on T; a branch whose
        constraints contradict (a negative cycle) has no successor.

What the model takes from the history, and never guesses: a claim's :kind
(else the key's workload), :payload-hash (absent = none), :ts and
:window-ms (or :window "5s"), :ttl-ms (or :ttl), :lease-ms (or :lease);
the settings max_window and max_skew (:time-settings). Absent, the
quantity is a free variable bounded only by the answers: without :ttl-ms a
record's expiry is what its answers say (expires_ms), at least its lease
and now + 1; without max_skew a FUTURE needs only ts > log time; and so
on. One rule stands in for a missing quantity: a record made by a claim
with neither :ttl-ms nor :ts does not expire within the history unless an
answer shows its expires_ms (Rec.bounded False): the runner's documented
limit, a TTL longer than the run (jepsen/README.md, "Limits"); oncectl
sends its 24 h default then, which the history does not record.

Not modeled (jepsen/README.md, "The model", says so plainly): attempts and
attempts_total (their storage depends on max_bytes, which histories do not
carry), quotas and RESOURCE_EXHAUSTED (not in histories: answers are :fail),
the restore fence, SetSettings and a settling max_window raise, schema
versions, execution ids, the payload hash's bytes beyond equality.
"""

import math
from collections import namedtuple

from .history import _int, _s, _bool, norm_value

INF = math.inf

MUST, MAY, NEVER = "must", "may", "never"

FS = ("claim", "complete", "release", "lookup", "forget")

# outcomes the model decides, per call kind (anything else :ok is 'never')
OUTCOMES = {
    "claim": {"ACCEPTED", "REPLAYED", "IN_PROGRESS", "DUPLICATE", "FAILED", "CONFLICT",
              "STALE", "FUTURE"},
    "complete": {"COMPLETED", "NOT_OWNER", "NOT_FOUND", "CONFLICT"},
    "release": {"RELEASED", "FAILED", "NOT_OWNER", "NOT_FOUND", "CONFLICT"},
    "lookup": {"FOUND", "NOT_FOUND"},
    "forget": {"FORGOTTEN", "NOT_FOUND"},
}

# outcomes that show no owner token: a denied claimant never sees it
NO_TOKEN = {"REPLAYED", "IN_PROGRESS", "DUPLICATE", "CONFLICT", "NOT_OWNER", "STALE",
            "FUTURE"}

Rec = namedtuple("Rec", "kind status first first_index owner token attempt result error phash "
                 "bounded")

# DBM slots: Z constant 0, N now, F first time, L lease expiry, E expiry;
# T (the call's own time) and X (a scratch) exist only inside step().
Z, N, F, L, E, T, X = range(7)
KEEP = 5                       # slots kept in the state
NSLOT = 7


# --------------------------------------------------------------- arguments

def _dur(v):
    """Milliseconds from an int or a duration string ("2s", "500ms", "5m")."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        for suf, mul in (("ms", 1), ("s", 1000), ("m", 60000), ("h", 3600000),
                         ("d", 86400000)):
            if s.endswith(suf):
                try:
                    return int(float(s[:-len(suf)]) * mul)
                except ValueError:
                    return None
        return _int(s)
    return None


def _vals(op):
    if op is None:
        return {}
    v = op.value
    if isinstance(v, (list, tuple)) and len(v) == 2:
        v = v[1]
    return norm_value(v) or {}


def _tok_pos(tok):
    """(index, slot) of a literal owner token "group:index:slot", or None."""
    if not isinstance(tok, str):
        return None
    p = tok.split(":")
    if len(p) != 3:
        return None
    try:
        return int(p[1]), int(p[2])
    except ValueError:
        return None


class Settings:
    """The cluster's settings from the :time-settings event (None: unknown)."""

    def __init__(self, events=()):
        ev = [e for e in events if getattr(e, "f", None) == "time-settings"]
        v = _vals(ev[-1]) if ev else {}
        self.window = _int(v.get("max-window-ms"))
        self.skew = _int(v.get("max-skew-ms"))


class Args:
    """What the model reads of one call: arguments (the invocation only) and
    the answer's fields (the completion only; None where it has none)."""

    def __init__(self, c, settings, key_kind):
        iv, rv = _vals(c.inv_op), _vals(c.ret_op if c.type == "ok" else None)
        self.f = c.f
        self.rid = _s(iv.get("request-id"))
        kind = _s(iv.get("kind"))
        if kind is None and _bool(iv.get("idempotent")):
            kind = "IDEMPOTENT"
        self.kind = kind.upper() if kind else key_kind
        self.phash = _s(iv.get("payload-hash"))
        self.ts = _int(iv.get("ts"))
        w = iv.get("window-ms")
        self.window = _dur(w) if w is not None else _dur(iv.get("window"))
        t = iv.get("ttl-ms")
        self.ttl = _dur(t) if t is not None else _dur(iv.get("ttl"))
        ls = iv.get("lease-ms")
        self.lease = _dur(ls) if ls is not None else _dur(iv.get("lease"))
        self.token = _s(iv.get("owner-token"))
        self.result = _s(iv.get("result-b64"))
        if self.result is None and c.f == "complete":
            self.result = ""                 # the default: an empty result
        self.terminal = bool(_bool(iv.get("terminal")))
        self.error = _s(iv.get("error")) if self.terminal else None
        self.settings = settings
        # the answer
        self.type = c.type
        out = _s(rv.get("outcome"))
        self.outcome = out.upper() if out else None
        self.retry = bool(_bool(rv.get("retry")))
        self.a = {}
        for name in ("log-time-ms", "first-index", "first-time-ms", "owner-attempt",
                     "lease-expires-ms", "expires-ms", "retry-after-ms"):
            if rv.get(name) is not None:
                self.a[name] = _int(rv.get(name))
        for name in ("first-request-id", "owner-token", "result-b64", "stored-error",
                     "request-id", "kind", "state"):
            if rv.get(name) is not None:
                self.a[name] = _s(rv.get(name))


class Hidden:
    """libonce's own first application of an :ok retry=true call whose
    reply was lost: a 'may' call that can only take effect before .before."""

    type = "info"
    hidden = True

    def __init__(self, partner):
        self.before = partner
        self.f = partner.f
        self.inv = partner.inv
        self.ret = INF
        self.process = partner.process
        self.inv_op, self.ret_op = partner.inv_op, None
        self.kkey = partner.kkey
        self.id = None
        m = Args.__new__(Args)
        m.__dict__.update(partner.m.__dict__)
        m.type, m.outcome, m.retry, m.a = "info", None, False, {}
        self.m = m

    def label(self):
        return "hidden first application of " + self.before.label()

    def show(self, indent="    "):
        return indent + "(libonce's own first application of the call below, reply lost)\n" \
            + self.before.show(indent)


def key_ops(calls, events=()):
    """{(scope, key): [call, ...]} in invocation order; see the module doc."""
    st = Settings(events)
    by = {}
    for c in calls:
        if c.f in FS:
            by.setdefault(c.kkey, []).append(c)
    out = {}
    for k, cs in by.items():
        idem = any(c.f in ("complete", "release") or (c.kind == "IDEMPOTENT") for c in cs)
        kk = "IDEMPOTENT" if idem else "NONCE"
        lst = []
        for c in cs:
            c.m = Args(c, st, kk)
            c.before = getattr(c, "before", None)
            c.hidden = False
            if (c.type == "ok" and c.m.retry and c.f in ("claim", "complete", "release")
                    and c.m.outcome in ("ACCEPTED", "COMPLETED", "RELEASED", "FAILED")):
                lst.append(Hidden(c))
            lst.append(c)
        owner_of = {}
        for c in lst:
            # only an ACCEPTED claim gives its caller the token (a claim's
            # answer of another outcome that shows one is outside the model)
            if c.f == "claim" and c.type == "ok" and c.m.outcome == "ACCEPTED" and \
                    c.m.a.get("owner-token"):
                owner_of.setdefault(c.m.a["owner-token"], set()).add(c.m.rid)
        for c in lst:
            c.m.owner_of = owner_of          # token -> the request ids whose ACCEPTED showed it
        out[k] = lst
    return out


def role(call):
    if getattr(call, "hidden", False) or call.type == "info":
        return MAY
    if call.type == "fail":
        return NEVER
    m = call.m
    return MUST if m.outcome in OUTCOMES.get(m.f, ()) else NEVER


def silent(calls):
    """The 'may' calls of one key (model.key_ops) that no linearization
    needs: leaving them out never changes the verdict, so the search does
    not place them (each one placed multiplies the configurations of every
    gap in which the record may be absent). The reference judge (reference.py)
    does not use this; tests/test_mutate.py checks the two agree.

    A call c is silent when the key has only claims of kind NONCE taking
    part, no CONFLICT answer, every REPLAYED answer names its first request
    id, and c is an :info claim (not a hidden companion) with a request id
    that no 'must' call carries and no answer names. Why: c's only possible
    effect is an acceptance that makes the record c's (a NONCE claim that
    finds a live record changes nothing); while that record lives, no call
    can take effect (an :info claim finds it live; an ACCEPTED needs the
    record absent, or retry=true with c's request id; a REPLAYED names
    another first request id; STALE and FUTURE need it absent), so the call
    d after c finds it expired, i.e. absent, as it would have found the
    record before c (absent, or expired: c needed that too, at a time
    <= d's). Without c, d sees the same record with weaker time bounds (c's
    T and expiry gone), and every step of the model is monotone in those
    bounds (constraints only; the one test of a bound, an unbounded
    record's unknown expiry, reads an expiry that only constants pin), so
    the rest of the order still succeeds."""
    part = [c for c in calls if role(c) != NEVER]
    if any(c.f != "claim" or c.m.kind != "NONCE" for c in part):
        return set()
    named, must_rids = set(), set()
    for c in part:
        if role(c) != MUST:
            continue
        if c.m.outcome == "CONFLICT":
            return set()
        first = c.m.a.get("first-request-id")
        if c.m.outcome == "REPLAYED" and first is None:
            return set()
        named.add(first)
        must_rids.add(c.m.rid)
    return {id(c) for c in part
            if role(c) == MAY and not getattr(c, "hidden", False) and c.m.rid is not None
            and c.m.rid not in must_rids and c.m.rid not in named}


def unmodeled(call):
    return call.type == "ok" and role(call) == NEVER


def initial(key, calls):
    d = [[INF] * KEEP for _ in range(KEEP)]
    for i in range(KEEP):
        d[i][i] = 0
    d[Z][N] = 0                      # N >= 0
    return (None, (-1, -1), tuple(tuple(r) for r in d))


# ------------------------------------------------------------- time (DBM)

class Dbm:
    """A working copy of the state's matrix with the scratch slots; d[i][j]
    bounds v_i - v_j. Kept closed (all shortest paths) after every add."""

    __slots__ = ("d", "ok")

    def __init__(self, d=None, ok=True):
        self.d, self.ok = d, ok

    @classmethod
    def of(cls, t):
        d = [list(r) + [INF] * (NSLOT - KEEP) for r in t]
        for i in range(KEEP, NSLOT):
            d.append([INF] * NSLOT)
            d[i][i] = 0
        return cls(d)

    def copy(self):
        return Dbm([r[:] for r in self.d], self.ok)

    def add(self, x, y, c):
        """v_x - v_y <= c."""
        if not self.ok:
            return self
        d = self.d
        if c >= d[x][y]:
            return self
        if d[y][x] + c < 0:
            self.ok = False
            return self
        # closed before: a path through the new edge x -> y can only improve
        # the rows i where d[i][x] + c < d[i][y] and the columns j where
        # c + d[y][j] < d[x][j]
        ry = d[y]
        rxr = d[x]
        cols = [(j, c + ry[j]) for j in range(NSLOT) if c + ry[j] < rxr[j]]
        rows = [(d[i], d[i][x]) for i in range(NSLOT) if d[i][x] + c < d[i][y]]
        for row, a in rows:
            for j, b in cols:
                v = a + b
                if v < row[j]:
                    row[j] = v
        return self

    def eq(self, x, v):
        return self.add(x, Z, v).add(Z, x, -v)

    def ge(self, x, y, c=0):
        """v_x >= v_y + c."""
        return self.add(y, x, -c)

    def lt(self, x, y, c=0):
        """v_x < v_y + c (integer milliseconds)."""
        return self.add(x, y, c - 1)

    def free(self, x):
        d = self.d
        for i in range(NSLOT):
            d[i][x] = INF
            d[x][i] = INF
        d[x][x] = 0
        return self

    def move(self, dst, src):
        """dst := src; src freed."""
        d = self.d
        self.free(dst)
        for i in range(NSLOT):
            d[i][dst] = d[i][src]
            d[dst][i] = d[src][i]
        d[dst][dst] = 0
        d[dst][src] = d[src][dst] = 0
        return self.free(src)

    def lo(self, x):
        return -self.d[Z][x]

    def hi(self, x):
        return self.d[x][Z]

    def exact(self, x):
        return self.lo(x) == self.hi(x)

    def set_max(self, dst, terms):
        """dst := max over terms (slot, constant) of v_slot + constant, with
        None in terms for a quantity the history does not carry (then only
        a lower bound). Exact when every term is known; else dst >= every
        term and <= the largest upper bound."""
        self.free(dst)
        known = [t for t in terms if t is not None]
        if not known:
            return self
        if len(known) == len(terms) and all(self.exact(s) for s, _ in known):
            return self.eq(dst, max(self.lo(s) + c for s, c in known))
        for s, c in known:
            self.ge(dst, s, c)
        if len(known) == len(terms):
            self.add(dst, Z, max(self.hi(s) + c for s, c in known))
        return self

    def state(self):
        return tuple(tuple(self.d[i][:KEEP]) for i in range(KEEP))


# ------------------------------------------------------------------ step

def _lives(dbm, alive):
    """The branch where the record is live at T (alive) or expired."""
    b = dbm.copy()
    return b.lt(T, E) if alive else b.ge(T, E)


def _begin(state, m):
    """The DBM with the call's time T >= N, pinned by its answer."""
    dbm = Dbm.of(state[2])
    dbm.ge(T, N)
    lt = m.a.get("log-time-ms")
    if lt is not None:
        dbm.eq(T, lt)
    return dbm


def _end(rec, hw, dbm):
    """The state after the call: N := T, scratch and unused slots freed."""
    if not dbm.ok:
        return None
    dbm.move(N, T)
    dbm.free(X)
    if rec is None:
        for s in (F, L, E):
            dbm.free(s)
    elif rec.kind != "IDEMPOTENT":
        dbm.free(L)
    if not dbm.ok:
        return None
    return (rec, hw, dbm.state())


def _branches(state, m):
    """[(rec or None, dbm)]: the record as the call sees it at its time T:
    live, or (if it could have expired by T) absent."""
    rec = state[0]
    dbm = _begin(state, m)
    if not dbm.ok:
        return []
    if rec is None:
        return [(None, dbm)]
    out = []
    b = _lives(dbm, True)
    if b.ok:
        out.append((rec, b))
    if not rec.bounded and dbm.hi(E) == INF:
        return out                    # it outlives the history (the runner's limit)
    b = _lives(dbm, False)
    if b.ok:
        b.free(F).free(L).free(E)
        out.append((None, b))
    return out


def _tok_eq(rec, t, m, shown=False):
    """Can the record's owner token be the literal t? A placeholder (an
    acceptance whose answer was lost) can be a token that an ACCEPTED
    answer of its own request id showed (a client presents only tokens it
    learned from those: the runner's limit, jepsen/README.md), unless a
    NOT_OWNER ruled it out; _pin_tok adds that it is newer than every
    earlier token. A token @shown by the node (a Lookup's answer shows the
    owner's, whoever got it) can be any such token: the acceptance that
    made it may have had no answer at all."""
    if t is None:
        return False
    if isinstance(rec.token, tuple):
        return t not in rec.token[3] and (shown or rec.token[1] in m.owner_of.get(t, ()))
    return rec.token == t


def _tok_ne(rec, t, m):
    """Can the record's owner token differ from t? (a placeholder can
    always: its value is unknown)."""
    return isinstance(rec.token, tuple) or rec.token != t


def _not_owner(rec, t):
    """The record after a NOT_OWNER for t: a placeholder token learns it is
    not t."""
    if isinstance(rec.token, tuple) and t is not None:
        k, rid, att, excl = rec.token
        return rec._replace(token=(k, rid, att, excl | {t}))
    return rec


def _pin_tok(rec, hw, t):
    """(rec, hw) with a placeholder owner token pinned to the literal t: it
    was made by the last acceptance, so it is the largest token so far.
    None when t cannot be it."""
    if isinstance(rec.token, tuple) and t is not None:
        pos = _tok_pos(t)
        if pos is not None:
            if pos <= hw:
                return None
            hw = pos
        return rec._replace(token=t), hw
    return rec, hw


def _shows(rec, hw, dbm, m, outcome, own_token, shown=False):
    """Check (and pin) the record facts an answer shows. Returns (rec, hw)
    or None when a field contradicts the model. @shown: the answer is a
    Lookup's, which shows the owner token whoever got it (_tok_eq)."""
    a = m.a
    if a.get("request-id") is not None and m.rid is not None and a["request-id"] != m.rid:
        return None
    if rec is None:
        # an absent record: an answer that shows record facts contradicts
        for k in ("first-request-id", "first-index", "first-time-ms", "owner-attempt",
                  "lease-expires-ms", "expires-ms", "owner-token", "stored-error", "state"):
            if k in a:
                return None
        return rec, hw
    if "first-request-id" in a and a["first-request-id"] != rec.first:
        return None
    if "first-index" in a:
        if rec.first_index is None:
            rec = rec._replace(first_index=a["first-index"])
        elif rec.first_index != a["first-index"]:
            return None
    if "kind" in a and a["kind"].upper() != rec.kind:
        return None
    if "state" in a and a["state"].upper() != rec.status:
        return None
    if "first-time-ms" in a:
        dbm.eq(F, a["first-time-ms"])
    if "expires-ms" in a:
        dbm.eq(E, a["expires-ms"])
    if rec.kind == "IDEMPOTENT":
        if "lease-expires-ms" in a:
            dbm.eq(L, a["lease-expires-ms"])
        if "owner-attempt" in a and a["owner-attempt"] != rec.attempt:
            return None
        t = a.get("owner-token")
        if t is not None:
            if not own_token or not _tok_eq(rec, t, m, shown):
                return None
            r = _pin_tok(rec, hw, t)
            if r is None:
                return None
            rec, hw = r
        if "result-b64" in a and rec.status == "COMPLETED" and a["result-b64"] != rec.result:
            return None
        if "stored-error" in a and rec.status == "FAILED":
            if rec.error is None:
                rec = rec._replace(error=a["stored-error"])
            elif rec.error != a["stored-error"]:
                return None
    else:
        for k in ("owner-token", "owner-attempt", "lease-expires-ms"):
            if k in a:
                return None
    if outcome in NO_TOKEN and "owner-token" in a:
        return None
    if not dbm.ok:
        return None
    return rec, hw


def _new_acceptance(rec, hw, dbm, m, is_info):
    """An acceptance at T, fresh (rec None) or a takeover; returns
    (rec, hw) with dbm updated (F, L, E), or None."""
    s = m.settings
    tok = m.a.get("owner-token") if not is_info else None
    pos = _tok_pos(tok)
    if m.kind == "IDEMPOTENT":
        if pos is not None:             # a token not of the form g:i:s is not ordered
            if pos <= hw:
                return None
            hw = pos
        attempt = 1 if rec is None else rec.attempt + 1
        token = tok if tok is not None else ("?", m.rid, attempt, frozenset())
    else:
        attempt, token = 0, None
    fi = m.a.get("first-index") if not is_info else None
    # the history carries the retention (a ttl or a ts); else the runner's
    # limit holds: the TTL is longer than the run (jepsen/README.md)
    bounded = m.ttl is not None or m.ts is not None
    if rec is None:
        if fi is not None:
            if (fi, -1) < (hw[0], -1) or (pos is not None and pos[0] != fi):
                return None
            hw = max(hw, (fi, -1))
        elif pos is not None:
            fi = pos[0]
        status = "PENDING" if m.kind == "IDEMPOTENT" else "SEEN"
        nrec = Rec(m.kind, status, m.rid, fi, m.rid if m.kind == "IDEMPOTENT" else None,
                   token, attempt, None, None, m.phash, bounded)
        dbm.free(F).free(E).free(L)
        dbm.ge(F, T).add(F, T, 0)                   # F = T
    else:
        nrec = rec._replace(status="PENDING", owner=m.rid, token=token, attempt=attempt,
                            result=None, error=None, bounded=rec.bounded and bounded)
    # the lease, then the retention: the latest of now + ttl, ts + max_window
    # + max_skew, (IDEMPOTENT) the lease expiry and now + 1
    # (docs/state-machine.md, "Claim"); a takeover never shortens it
    if m.kind == "IDEMPOTENT":
        dbm.free(L)
        if m.lease:
            dbm.ge(L, T, m.lease).add(L, T, m.lease)
        else:
            dbm.ge(L, T, 1)          # 0 / absent: min(30 s, max_lease), unknown here
    terms = []
    if m.ttl:
        terms.append((T, m.ttl))
    if m.ts is not None:
        if s.window is not None and s.skew is not None:
            terms.append((Z, m.ts + s.window + s.skew))
        else:
            terms.append(None)
    if m.kind == "IDEMPOTENT":
        terms.append((L, 0))
    if m.ttl is None and m.ts is None:
        terms.append(None)           # no ttl in the history: its expiry is unknown
    if rec is not None:
        dbm.move(X, E)
        terms.append((X, 0))
    # and now + 1: an accepted record is live at its own log time (without
    # it, ts + max_window + max_skew = now with max_skew 0 would make a
    # record that is dead when accepted)
    terms.append((T, 1))
    dbm.set_max(E, terms)
    if not dbm.ok:
        return None
    return nrec, hw


def _window(dbm, m, outcome):
    """The window check of a new acceptance at T (has_ts only): the branch
    for OUTCOME ('ACCEPTED', 'STALE' or 'FUTURE'), or None when it cannot be."""
    b = dbm.copy()
    if m.ts is None:
        return b if outcome == "ACCEPTED" else None
    k = m.settings.skew
    if outcome == "STALE":
        if m.window is None:
            return b                  # the window sent is unknown: any T
        return b.ge(T, Z, m.ts + m.window + 1)
    if outcome == "FUTURE":
        return b.lt(T, Z, m.ts - k) if k is not None else b.lt(T, Z, m.ts)
    if m.window is not None:
        b.add(T, Z, m.ts + m.window)
    if k is not None:
        b.ge(T, Z, m.ts - k)
    return b


def _claim(rec, hw, dbm, m, info, out):
    """Append the successors of a claim (rec: the record live at T, or None)."""
    o = m.outcome
    if rec is None or (rec.kind == "IDEMPOTENT" and (
            rec.status == "RELEASED" or (rec.status == "PENDING" and rec.owner != m.rid))):
        takeover = rec is not None
        if takeover:
            if m.kind != rec.kind or m.phash != rec.phash:
                if not info and o == "CONFLICT":
                    _finish(rec, hw, dbm, m, o, out)
                return
            if rec.status == "PENDING":
                live = dbm.copy().lt(T, L)
                if live.ok and not info and o == "IN_PROGRESS":
                    r = _shows(rec, hw, live, m, o, False)
                    ra = m.a.get("retry-after-ms")
                    if ra is not None and r is not None:
                        live.add(L, T, ra).ge(L, T, ra)
                    if r is not None:
                        _end_to(out, r[0], r[1], live)
                dbm = dbm.copy().ge(T, L)   # the lease expired: a takeover
                if not dbm.ok:
                    return
        if info:
            b = _window(dbm, m, "ACCEPTED")
            if b is not None and b.ok:
                r = _new_acceptance(rec, hw, b, m, True)
                if r is not None:
                    _end_to(out, r[0], r[1], b)
            return
        if o in ("STALE", "FUTURE"):
            b = _window(dbm, m, o)
            if b is not None and b.ok and not m.retry:
                r = _shows(rec, hw, b, m, o, False)
                if r is not None:
                    _end_to(out, r[0], r[1], b)
            return
        if o != "ACCEPTED" or m.retry:
            return
        b = _window(dbm, m, "ACCEPTED")
        if b is None or not b.ok:
            return
        r = _new_acceptance(rec, hw, b, m, False)
        if r is None:
            return
        r = _shows(r[0], r[1], b, m, o, True)
        if r is not None:
            _end_to(out, r[0], r[1], b)
        return
    # a live record, no new acceptance possible
    if info:
        return                        # a denial or a retry: nothing changes
    if m.kind != rec.kind or (rec.kind == "IDEMPOTENT" and m.phash != rec.phash):
        if o == "CONFLICT":
            _finish(rec, hw, dbm, m, o, out)
        return
    if rec.kind == "NONCE":
        if rec.first == m.rid:
            if o == "ACCEPTED" and m.retry:
                _finish(rec, hw, dbm, m, o, out, own=True)
        elif o == "REPLAYED" and not m.retry:
            _finish(rec, hw, dbm, m, o, out)
        return
    st = rec.status
    if st == "PENDING":               # the owner's own retry
        if o == "ACCEPTED" and m.retry:
            _finish(rec, hw, dbm, m, o, out, own=True)
    elif st == "COMPLETED":
        if o == "DUPLICATE" and m.a.get("result-b64", rec.result) == rec.result:
            _finish(rec, hw, dbm, m, o, out)
    elif st == "FAILED":
        if o == "FAILED":
            _finish(rec, hw, dbm, m, o, out)


def _finish(rec, hw, dbm, m, o, out, own=False, shown=False):
    b = dbm.copy()
    r = _shows(rec, hw, b, m, o, own, shown)
    if r is not None:
        _end_to(out, r[0], r[1], b)


def _end_to(out, rec, hw, dbm):
    s = _end(rec, hw, dbm)
    if s is not None:
        out.append(s)


def _complete(rec, hw, dbm, m, info, out):
    o, t = m.outcome, m.token
    if rec is None:
        if not info and o == "NOT_FOUND":
            _finish(None, hw, dbm, m, o, out)
        return
    if rec.kind != "IDEMPOTENT":
        if not info and o == "CONFLICT":
            _finish(rec, hw, dbm, m, o, out)
        return
    if not info and o == "NOT_OWNER" and _tok_ne(rec, t, m):
        _finish(_not_owner(rec, t), hw, dbm, m, o, out)
    if not _tok_eq(rec, t, m):
        return
    r = _pin_tok(rec, hw, t)
    if r is None:
        return
    own, hw = r
    if rec.status == "PENDING":
        done = own._replace(status="COMPLETED", result=m.result)
        if info:
            _end_to(out, done, hw, dbm.copy())
        elif o == "COMPLETED" and not m.retry and m.a.get("result-b64", m.result) == m.result:
            _finish(done, hw, dbm, m, o, out, own=True)
    elif rec.status == "COMPLETED":
        if not info and o == "COMPLETED" and m.retry:
            _finish(own, hw, dbm, m, o, out, own=True)
    elif not info and o == "CONFLICT":
        _finish(own, hw, dbm, m, o, out)


def _release(rec, hw, dbm, m, info, out):
    o, t = m.outcome, m.token
    if rec is None:
        if not info and o == "NOT_FOUND":
            _finish(None, hw, dbm, m, o, out)
        return
    if rec.kind != "IDEMPOTENT":
        if not info and o == "CONFLICT":
            _finish(rec, hw, dbm, m, o, out)
        return
    if not info and o == "NOT_OWNER" and _tok_ne(rec, t, m):
        _finish(_not_owner(rec, t), hw, dbm, m, o, out)
    if not _tok_eq(rec, t, m):
        return
    r = _pin_tok(rec, hw, t)
    if r is None:
        return
    own, hw = r
    st = rec.status
    nxt, retry = None, False
    if st == "PENDING":
        nxt = own._replace(status="FAILED", error=m.error) if m.terminal else \
            own._replace(status="RELEASED")
    elif st == "RELEASED":
        if m.terminal:
            nxt = own._replace(status="FAILED", error=m.error)
        else:
            nxt, retry = own, True
    elif st == "FAILED":
        nxt, retry = own, True
    elif st == "COMPLETED":
        if not info and o == "CONFLICT":
            _finish(own, hw, dbm, m, o, out)
        return
    if info:
        if nxt is not own:
            _end_to(out, nxt, hw, dbm.copy())
        return
    if o == nxt.status and m.retry == retry:
        _finish(nxt, hw, dbm, m, o, out, own=True)


def _lookup(rec, hw, dbm, m, info, out):
    if info:
        return
    if rec is None:
        if m.outcome == "NOT_FOUND":
            _finish(None, hw, dbm, m, "NOT_FOUND", out)
    elif m.outcome == "FOUND":
        _finish(rec, hw, dbm, m, "FOUND", out, own=True, shown=True)


def _forget(rec, hw, dbm, m, info, out):
    if rec is None:
        if not info and m.outcome == "NOT_FOUND":
            _finish(None, hw, dbm, m, "NOT_FOUND", out)
        return
    if info or m.outcome == "FORGOTTEN":
        b = dbm.copy()
        if not info:
            r = _shows(rec, hw, b, m, "FORGOTTEN", False)
            if r is None:
                return
        _end_to(out, None, hw, b)


STEPS = {"claim": _claim, "complete": _complete, "release": _release,
         "lookup": _lookup, "forget": _forget}


# the answers that may say retry=true (docs/state-machine.md marks them
# `retry`); every other answer says retry=false
RETRY_OK = {("claim", "ACCEPTED"), ("complete", "COMPLETED"), ("release", "RELEASED"),
            ("release", "FAILED")}


def step(state, call):
    """The successor states if CALL takes effect now (see the module doc)."""
    m = call.m
    info = role(call) == MAY
    if not info and role(call) != MUST:
        return []
    if not info and m.retry and (m.f, m.outcome) not in RETRY_OK:
        return []
    fn = STEPS[m.f]
    out = []
    hw = state[1]
    for rec, dbm in _branches(state, m):
        fn(rec, hw, dbm, m, info, out)
    # equal successors from two branches are one
    return list(dict.fromkeys(out))
