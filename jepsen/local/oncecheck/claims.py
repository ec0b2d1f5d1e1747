"""The claim rules R1-R6 (per key) of jepsen/README.md, "Checker rules" as corrected.

Per key = (scope, key). Calls sharing a request id are one logical op (a
client retry); a replay is a new call with a fresh request id. Positions
(inv, ret) are real-time order in the history (ret = INF for :info).

NONCE keys (exactly linearizability of the model, model.py, on histories
without log time, STALE and FUTURE given no effect; verified by
tests/test_crosscheck.py):
  A0 = :ok ACCEPTED retry=false, A1 = :ok ACCEPTED retry=true, A = A0 + A1,
  D  = :ok REPLAYED. :info calls: maybe applied (R5); :fail: never (R5).
  R1 double-accept  A holds more than one request id.
  R1 re-accepted    A0 holds more than one call: a request id was accepted
                    from an absent record twice (the record was lost).
  R2 conflicting-winner  the request ids in A, the first_request_id of every
                    call in A and D: more than one.  Call it w.
  R3 self-deny      a REPLAYED names its own request id (a retry of the
                    accepted id must be ACCEPTED retry=true, a fresh call
                    cannot have been first and denied).
  R3 deny-op-named-winner / phantom-winner
                    no call of w could have been the first application
                    (candidates: A0 if any, else A1 and :info calls of w):
                    w's calls were only denied / none on this key.
  R3 denial-without-winner  no ACCEPTED, the denials name no first request
                    id, and no :info claim of another request id was invoked
                    before the first denial was answered.
  R5 failed-op-took-effect  w's calls all :fail (applied false): a call that
                    never took effect is named as the first.
  R4 real-time      some candidate c has inv(c) < min ret(D + A): nothing
                    that needs w's record was acknowledged before w could
                    have been invoked ("no ACCEPT after a completed DENY";
                    with R1, "no second ACCEPT after a completed ACCEPT").
IDEMPOTENT keys (claim, complete, release): necessary conditions of
the model's linearizability (never a false alarm, verified by
tests/test_crosscheck.py); the model search (LIN) catches the rest.
  R1 double-accept  one owner_attempt or one owner token given to two
                    request ids (or with two tokens / two attempts); or a
                    claim invoked after another
                    request id's ACCEPTED was acknowledged is ACCEPTED with an
                    owner_attempt that is not larger (a takeover must fence).
  R1 re-accepted    two ACCEPTED retry=false answers with one owner_attempt
                    (one request id may legitimately be accepted twice: it
                    may take over again after a release or a lease expiry).
  R1 claim-after-complete  a claim invoked after a COMPLETED/DUPLICATE (or a
                    terminal FAILED) was acknowledged answered ACCEPTED or
                    IN_PROGRESS.
  R2 double-complete / re-completed  COMPLETED with two owner tokens, or two
                    COMPLETED retry=false: at most one successful Complete.
  R2 conflicting-first  first_request_id differs between answers (the first
                    accepted id never changes), or an owner_attempt 1 ACCEPT
                    is not the first request id.
  R3 phantom-token  COMPLETED with a token no ACCEPTED claim of this key gave.
  R3 phantom-completion  DUPLICATE while no complete could have applied.
  R5 failed-op-took-effect  DUPLICATE while every complete :fail-ed.
  R4 fenced-token-completed  COMPLETED with token t invoked after a takeover
                    with a larger owner_attempt was acknowledged (NOT_OWNER
                    expected).
  R4 complete-before-accept  COMPLETED acknowledged before any claim that
                    could have issued its token was invoked.
  R4 duplicate-before-complete  a DUPLICATE acknowledged before any complete
                    that could have stored the result was invoked.
  R4 fenced-without-takeover  NOT_OWNER for an issued token while no other
                    claim could have taken over; or NOT_OWNER for the token
                    whose COMPLETED was already acknowledged.
  R3 in-progress-without-owner / not-owner-without-record / takeover-without-owner
                    / phantom-failure: IN_PROGRESS, NOT_OWNER, an owner_attempt
                    n > 1 or a FAILED claim while too few claims (or no terminal
                    release) could have been applied before.
  R4 not-found-after-accept  NOT_FOUND after an ACCEPTED was acknowledged.
Both kinds:
  R6 first-result   first_index / first_time_ms differ between answers;
                    a DUPLICATE (or COMPLETED) returns a result other than
                    the one successful Complete stored.
"""

import math

from .edn import dumps

INF = math.inf


class Anomaly:
    def __init__(self, rule, name, key, msg, calls=(), events=(), fatal=True):
        self.rule, self.name, self.key, self.msg = rule, name, key, msg
        self.calls = list(calls)
        self.events = list(events)
        self.fatal = fatal

    def __repr__(self):
        return "<%s %s %r>" % (self.rule, self.name, self.key)


def workload(calls):
    """'idempotent' if any call is an IDEMPOTENT claim, a complete or a
    release; else 'nonce' (jepsen/README.md, "Checker rules": how a key is
    checked)."""
    for c in calls:
        if c.f in ("complete", "release") or c.kind == "IDEMPOTENT":
            return "idempotent"
    return "nonce"


def _first_by_rid(calls):
    seen = {}
    for c in calls:
        seen.setdefault(c.rid, c)
    return list(seen.values())


def check_nonce(key, calls, rid_keys=None):
    out = []
    claims = [c for c in calls if c.f == "claim"]
    ok = [c for c in claims if c.type == "ok"]
    A = [c for c in ok if c.outcome == "ACCEPTED"]
    A0 = [c for c in A if not c.retry]
    A1 = [c for c in A if c.retry]
    D = [c for c in ok if c.outcome == "REPLAYED"]
    rids = {c.rid for c in A}
    double = len(rids) > 1
    if double:
        out.append(Anomaly("R1", "double-accept", key,
                           "%d request ids were ACCEPTED" % len(rids), _first_by_rid(A)))
    elif len(A0) > 1:
        out.append(Anomaly("R1", "re-accepted", key,
                           "request id %s was ACCEPTED retry=false %d times: the record "
                           "was lost and accepted again" % (A0[0].rid, len(A0)), A0))
    labels = {}
    for c in A:
        labels.setdefault(c.rid, c)
        if c.first_rid is not None:
            labels.setdefault(c.first_rid, c)
    for c in D:
        if c.first_rid is not None:
            labels.setdefault(c.first_rid, c)
    if len(labels) > 1 and not double:
        out.append(Anomaly("R2", "conflicting-winner", key,
                           "answers name %d different first request ids: %s" %
                           (len(labels), ", ".join(sorted(labels))), list(labels.values())))
    self_deny = [c for c in D if c.first_rid is not None and c.first_rid == c.rid]
    for c in self_deny:
        out.append(Anomaly("R3", "self-deny", key,
                           "REPLAYED names its own request id %s as the first use" % c.rid, [c]))
    if not labels:
        out += _denial_without_winner(key, claims, D)
        return out
    if len(labels) != 1:
        return out
    w = next(iter(labels))
    # a REPLAYED that names no first request id, answered to w itself: w's
    # record cannot deny w (a retry of the winner is ACCEPTED retry=true)
    for c in D:
        if c.first_rid is None and c.rid == w:
            out.append(Anomaly("R3", "self-deny", key,
                               "REPLAYED answered to %s, the only request id that can "
                               "have been first" % w, [c]))
    if A0:
        cands = A0
    else:
        cands = [c for c in claims if c.rid == w and (c in A1 or c.type == "info")]
    if not cands:
        named = [c for c in claims if c.rid == w]
        deniers = [c for c in D if c.first_rid == w]
        if self_deny:
            return out
        if not named:
            where = ""
            if rid_keys and w in rid_keys:
                where = " (that request id belongs to key %s: cross-key bleed)" % (
                    dumps(list(sorted(rid_keys[w])[0])),)
            out.append(Anomaly("R3", "phantom-winner", key,
                               "answers name first request id %s, which no call on this "
                               "key carried%s" % (w, where), deniers))
        elif all(c.type == "fail" for c in named):
            out.append(Anomaly("R5", "failed-op-took-effect", key,
                               "the first request id %s only ever failed (applied false)"
                               % w, named + deniers))
        else:
            out.append(Anomaly("R3", "deny-op-named-winner", key,
                               "the first request id %s was never ACCEPTED and never "
                               "unknown: its calls were denied" % w, named + deniers))
        return out
    needers = D + A
    bound = min(needers, key=lambda c: c.ret)
    if not any(c.inv < bound.ret for c in cands):
        what = "a REPLAYED" if bound in D else "an ACCEPTED retry=true"
        if bound in A0:
            what = "an ACCEPTED"
        out.append(Anomaly("R4", "real-time", key,
                           "%s naming %s was acknowledged before any call that could "
                           "have accepted %s was invoked" % (what, w, w),
                           [bound] + cands))
    return out


def _denial_without_winner(key, claims, D):
    """R3 for a NONCE key with no ACCEPTED answer and denials that name no
    first request id: one :info claim with a request id none of the
    denials carries must have been invoked before the first denial was
    answered (a single winner applied before every denial)."""
    if not D:
        return []
    bound = min(D, key=lambda c: c.ret)
    denied = {c.rid for c in D}
    if any(c.type == "info" and c.rid not in denied and c.inv < bound.ret for c in claims):
        return []
    return [Anomaly("R3", "denial-without-winner", key,
                    "REPLAYED while no ACCEPTED exists and no other claim (an :info one "
                    "invoked before the denial was answered) could have been first",
                    [bound])]


def check_idempotent(key, calls, rid_keys=None):
    out = []
    claims = [c for c in calls if c.f == "claim"]
    completes = [c for c in calls if c.f == "complete"]
    releases = [c for c in calls if c.f == "release"]
    has_release = any(c.type != "fail" for c in releases)
    ok_claims = [c for c in claims if c.type == "ok"]
    AC = [c for c in ok_claims if c.outcome == "ACCEPTED"]
    # -- R1: one acceptance = one (owner_attempt, owner token, request id)
    by_att, by_tok = {}, {}
    for c in AC:
        if c.attempt is not None:
            prev = by_att.setdefault(c.attempt, c)
            if prev is not c and (prev.rid != c.rid or (c.token and prev.token
                                                         and prev.token != c.token)):
                out.append(Anomaly("R1", "double-accept", key,
                                   "owner_attempt %d was given to %s (token %s) and %s "
                                   "(token %s)" % (c.attempt, prev.rid, prev.token, c.rid,
                                                    c.token), [prev, c]))
            elif prev is not c and not prev.retry and not c.retry:
                out.append(Anomaly("R1", "re-accepted", key,
                                   "request id %s was ACCEPTED retry=false twice with "
                                   "owner_attempt %d" % (c.rid, c.attempt), [prev, c]))
        if c.token is not None:
            prev = by_tok.setdefault(c.token, c)
            if prev is not c and (prev.rid != c.rid or (
                    c.attempt is not None and prev.attempt is not None
                    and prev.attempt != c.attempt)):
                out.append(Anomaly("R1", "double-accept", key,
                                   "owner token %s was given to %s (attempt %s) and %s "
                                   "(attempt %s)" % (c.token, prev.rid, prev.attempt, c.rid,
                                                      c.attempt), [prev, c]))
    for a in AC:
        for b in AC:
            if (a.rid != b.rid and a.ret < b.inv and a.attempt is not None
                    and b.attempt is not None and b.attempt <= a.attempt):
                out.append(Anomaly("R1", "double-accept", key,
                                   "%s was ACCEPTED (owner_attempt %d) after %s's ACCEPTED "
                                   "(owner_attempt %d) was acknowledged: not a fencing takeover"
                                   % (b.rid, b.attempt, a.rid, a.attempt), [a, b]))
    terminal = [c for c in completes if c.type == "ok" and c.outcome == "COMPLETED"]
    terminal += [c for c in ok_claims if c.outcome in ("DUPLICATE", "FAILED")]
    terminal += [c for c in releases if c.type == "ok" and c.outcome == "FAILED"]
    if terminal:
        t0 = min(terminal, key=lambda c: c.ret)
        for c in ok_claims:
            if c.outcome in ("ACCEPTED", "IN_PROGRESS") and c.inv > t0.ret:
                out.append(Anomaly("R1", "claim-after-complete", key,
                                   "a claim invoked after the record was %s answered %s" %
                                   ("completed" if t0.outcome != "FAILED" else "failed",
                                    c.outcome), [t0, c]))
    # -- R2
    CM = [c for c in completes if c.type == "ok" and c.outcome == "COMPLETED"]
    CM0 = [c for c in CM if not c.retry]
    ctoks = {}
    for c in CM:
        ctoks.setdefault(c.token, c)
    if len(ctoks) > 1:
        out.append(Anomaly("R2", "double-complete", key,
                           "COMPLETED with %d owner tokens: %s" %
                           (len(ctoks), ", ".join(sorted(map(str, ctoks)))), list(ctoks.values())))
    elif len(CM0) > 1:
        out.append(Anomaly("R2", "re-completed", key,
                           "%d COMPLETED retry=false answers: at most one successful "
                           "Complete" % len(CM0), CM0))
    firsts = {}
    for c in ok_claims:
        if c.first_rid is not None:
            firsts.setdefault(c.first_rid, c)
        if c.outcome == "ACCEPTED" and c.attempt == 1:
            firsts.setdefault(c.rid, c)
    if len(firsts) > 1:
        out.append(Anomaly("R2", "conflicting-first", key,
                           "answers name %d first request ids: %s" %
                           (len(firsts), ", ".join(sorted(firsts))), list(firsts.values())))
    # -- R3 / R4 on completions
    issued = {}
    for c in AC:
        if c.token is not None:
            issued.setdefault(c.token, []).append(c)
    RL = [c for c in releases if c.type == "ok" and c.outcome in ("RELEASED", "FAILED")]
    for c in CM + RL:
        if c.token not in issued:
            out.append(Anomaly("R3", "phantom-token", key,
                               "%s with owner token %s, which no ACCEPTED claim of this "
                               "key returned" % (c.outcome, c.token), [c]))
            continue
        issuers = issued[c.token]
        irids = {i.rid for i in issuers}
        cands = issuers + [x for x in claims if x.type == "info" and x.rid in irids]
        if not any(x.inv < c.ret for x in cands):
            out.append(Anomaly("R4", "complete-before-accept", key,
                               "%s with token %s was acknowledged before the claim "
                               "that issued it was invoked" % (c.outcome, c.token),
                               [c] + issuers))
        if c.f != "complete":
            continue
        att = min((i.attempt for i in issuers if i.attempt is not None), default=None)
        if att is None:
            continue
        for b in AC:
            if (b.token is not None and b.token != c.token and b.attempt is not None
                    and b.attempt > att and b.ret < c.inv):
                out.append(Anomaly("R4", "fenced-token-completed", key,
                                   "token %s (owner_attempt %d) COMPLETED after a takeover "
                                   "(owner_attempt %d) was acknowledged: NOT_OWNER expected"
                                   % (c.token, att, b.attempt), [b, c]))
                break
    DU = [c for c in ok_claims if c.outcome == "DUPLICATE"]
    info_cm = [c for c in completes if c.type == "info"]
    if DU:
        cands = CM0 if CM0 else CM + info_cm
        if not cands:
            failed = [c for c in completes if c.type == "fail"]
            if failed:
                out.append(Anomaly("R5", "failed-op-took-effect", key,
                                   "DUPLICATE, but every complete failed (applied false)",
                                   DU[:1] + failed))
            else:
                out.append(Anomaly("R3", "phantom-completion", key,
                                   "DUPLICATE, but no complete of this key could have applied",
                                   DU[:3]))
        else:
            bound = min(DU + CM, key=lambda c: c.ret)
            if not any(c.inv < bound.ret for c in cands):
                out.append(Anomaly("R4", "duplicate-before-complete", key,
                                   "%s was acknowledged before any complete that could have "
                                   "stored the result was invoked" % bound.outcome,
                                   [bound] + cands))
            # R6: one stored result
            allowed = {c.arg_result for c in cands}
            returned = {}
            for c in DU + CM:
                if c.res_result is not None:
                    returned.setdefault(c.res_result, c)
            bad = [c for r, c in returned.items() if r not in allowed]
            if len(returned) > 1 or bad:
                out.append(Anomaly("R6", "duplicate-result", key,
                                   "answers return %d stored results (%s); the successful "
                                   "Complete stored %s" % (
                                       len(returned), ", ".join(repr(r) for r in returned),
                                       " or ".join(repr(a) for a in sorted(allowed, key=str))),
                                   list(returned.values()) + cands[:2]))
    # NOT_OWNER
    done_tok = {}
    for c in CM:
        done_tok.setdefault(c.token, c)
    for n in completes + releases:
        if n.type != "ok" or n.outcome != "NOT_OWNER":
            continue
        if n.token in done_tok and done_tok[n.token].ret < n.inv and n.f == "complete":
            out.append(Anomaly("R4", "fenced-without-takeover", key,
                               "NOT_OWNER for token %s after its COMPLETED was acknowledged "
                               "(COMPLETED retry=true expected)" % n.token,
                               [done_tok[n.token], n]))
            continue
        if n.token not in issued:
            continue
        irids = {i.rid for i in issued[n.token]}
        others = [c for c in claims if c.type in ("ok", "info")
                  and not (c.type == "ok" and c.outcome == "ACCEPTED" and c.token == n.token)
                  and (c.type == "ok" and c.outcome == "ACCEPTED" or c.type == "info")
                  and (has_release or c.rid not in irids)]
        if not any(c.inv < n.ret for c in others):
            out.append(Anomaly("R4", "fenced-without-takeover", key,
                               "NOT_OWNER for token %s, but no other claim could have taken "
                               "the record over" % n.token, issued[n.token][:1] + [n]))
    # answers that need a record, or an owner other than the caller
    maybe = [c for c in claims if c.type == "info" or (c.type == "ok" and c.outcome == "ACCEPTED")]
    for n in ok_claims + [c for c in completes + releases if c.type == "ok"]:
        if n.outcome == "IN_PROGRESS" and n.f == "claim":
            if not any(c.inv < n.ret and c.rid != n.rid for c in maybe):
                out.append(Anomaly("R3", "in-progress-without-owner", key,
                                   "IN_PROGRESS, but no other claim could own the record", [n]))
        elif n.outcome == "NOT_OWNER" and n.f in ("complete", "release"):
            if not any(c.inv < n.ret for c in maybe):
                out.append(Anomaly("R3", "not-owner-without-record", key,
                                   "NOT_OWNER, but no claim could have created the record", [n]))
        elif n.outcome == "NOT_FOUND":
            acked = [c for c in AC if c.ret < n.inv]
            if acked:
                out.append(Anomaly("R4", "not-found-after-accept", key,
                                   "NOT_FOUND after an ACCEPTED claim of the key was "
                                   "acknowledged: the record was lost", [acked[0], n]))
        elif n.outcome == "ACCEPTED" and n.attempt is not None and n.attempt > 1:
            prior = {c.token for c in AC if c.token != n.token and c.inv < n.ret}
            prior_n = len(prior) + sum(1 for c in claims if c.type == "info" and c.inv < n.ret)
            if prior_n < n.attempt - 1:
                out.append(Anomaly("R3", "takeover-without-owner", key,
                                   "ACCEPTED with owner_attempt %d, but at most %d earlier "
                                   "acceptances could have happened" % (n.attempt, prior_n), [n]))
        elif n.outcome == "FAILED" and n.f == "claim":
            if not any(r.terminal and r.type in ("ok", "info") and r.inv < n.ret for r in releases):
                out.append(Anomaly("R3", "phantom-failure", key,
                                   "claim answered FAILED, but no terminal release could have "
                                   "applied", [n]))
    # R6: a COMPLETED retry=false returns the result it stored
    for c in CM0:
        if c.res_result is not None and c.res_result != c.arg_result:
            out.append(Anomaly("R6", "duplicate-result", key,
                               "COMPLETED returns %r, but stored %r" % (c.res_result, c.arg_result),
                               [c]))
    return out


def check_first_result(key, calls):
    """R6: first_index and first_time_ms agree across all answers of a key."""
    out = []
    for field, name in (("first_index", "first_index"), ("first_time", "first_time_ms")):
        vals = {}
        for c in calls:
            if c.f == "claim" and c.type == "ok":
                v = getattr(c, field)
                if v is not None:
                    vals.setdefault(v, c)
        if len(vals) > 1:
            out.append(Anomaly("R6", "first-result", key,
                               "answers report %d different %s: %s" %
                               (len(vals), name, ", ".join(map(str, sorted(vals)))),
                               list(vals.values())))
    return out
