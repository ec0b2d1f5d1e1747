"""An executable model of the claim contract (docs/state-machine.md), one key.

The checker's verdict (search.py) asks one question of this module: "if this
call took effect now, in this state, what states may follow, given what its
answer says?". The model is written from docs/state-machine.md, not from
src/fsm/; it covers one (scope, key) from an absent record on.

Interface (the reference judge and the search code against exactly this):

  key_ops(calls, events=()) -> {(scope, key): [call, ...]}
      history.pair()'s calls per key, in invocation order, with what the
      model needs attached to each call (c.m: the parsed arguments and
      answer fields, see Args); events give the cluster's settings (the
      :time-settings event), attached as c.m.settings. Calls whose :f the
      model does not know are left out. An :ok answer with retry=true
      gets a synthetic companion call (c.hidden): libonce's own first
      application whose reply was lost; it may take effect before its
      partner only (role 'may', see below).
  initial(key, calls) -> state
      the absent record at an unknown log time >= 0 (hashable, immutable).
  step(state, call) -> [state, ...]
      the successor states if CALL takes effect now: consistent with every
      field of its answer when it is :ok, any legal outcome that changes
      the state when it is :info (an :info call that took effect without
      changing anything is the same as one that never did, as far as any
      later answer can tell); [] if it cannot take effect now.
  role(call) -> 'must' | 'may' | 'never'
      :ok with an outcome the model knows: 'must' (takes effect once inside
      [invoke, complete]); :info (and a hidden companion): 'may' (once, at
      any point after its invocation, or never); :fail: 'never'. An :ok
      answer the model does not know (RESOURCE_EXHAUSTED, FAILED_PRECONDITION
      of a restore fence, INVALID_ARGUMENT, ...): 'never', and counted by
      the checker as outside the model (unmodeled(call) says so).

State. A tuple (rec, tok_hw, dbm):
  rec     None (absent, or expired and pruned: the model never distinguishes
          them), or a Rec tuple: kind, status (SEEN, PENDING, RELEASED,
          COMPLETED, FAILED), first request id, first index (or None: not
          seen yet), owner request id, owner token (a literal, or a
          placeholder ('?', rid, attempt) for an acceptance whose answer was
          lost), owner attempt, result, stored error, payload hash.
  tok_hw  the largest (index, slot) of an owner token given so far (tokens
          are (group, index, slot) of the accepting entry: they only grow).
  dbm     log time, symbolically: a closed difference-bound matrix over
          the variables Z (constant 0), N (log time of the last call in the
          linearization), F (first_time_ms), L (lease_expires_ms), E
          (expires_ms). A known value is a pair of bounds against Z; an
          :info call's log time is a fresh variable >= N that answers later
          pin or bound (first_time_ms, lease_expires_ms, expires_ms,
          retry_after_ms, the next known log time). Log time never goes
          back: every call's time T >= N, and N := T after it.

Time rules need the history to carry them: a claim's :ts and :window-ms,
its :lease-ms (or :lease "2s"), its :ttl-ms, the settings' max_window and
max_skew (the :time-settings event). What a history does not carry, the
model does not guess: the quantity stays a free variable bounded only by
the answers (see jepsen/README.md, "The model").
"""

import math

INF = math.inf

MUST, MAY, NEVER = "must", "may", "never"


def key_ops(calls, events=()):
    raise NotImplementedError


def initial(key, calls):
    raise NotImplementedError


def step(state, call):
    raise NotImplementedError


def role(call):
    raise NotImplementedError


def unmodeled(call):
    """True when CALL is an :ok answer outside the model (role 'never' for
    a reason other than :fail)."""
    raise NotImplementedError
