"""The time rules R20-R25 (jepsen/README.md, "Checker rules": time rules).

R1-R6 know no time: they order calls by invocation and completion only. Every
answer of once carries `log_time_ms`, the log time at which the state machine
decided it (docs/state-machine.md, "Time"), so these rules re-evaluate the
state machine's time decisions from the answers themselves:

  R20 window      a claim with `ts` and `window` answered ACCEPTED (retry
                  false) satisfies  lt - w <= ts <= lt + K  at its log time lt
                  (K = max_skew); STALE means lt > w and ts < lt - w; FUTURE
                  means ts > lt + K (docs/state-machine.md, "Claim", step 1).
  R21 retention   a NONCE record accepted with ts lives exactly until
                  E = ts + max_window + K in log time: its answers report
                  expires_ms >= E; at lt >= E no answer shows it (no REPLAYED
                  naming it, no ACCEPTED retry); before E, once an answer at a
                  smaller log time showed it, no claim is answered STALE or
                  FUTURE. With R20, a replay after pruning is STALE, never
                  ACCEPTED. ts is that of the call that made the record,
                  which may be any :info or ACCEPTED call of its request id
                  (a retry may send another ts): each bound is taken with
                  the ts that is safe for it (_winner_ts).
  R22 accept-once an ACCEPTED retry=false of a NONCE key at lt while an
                  answer at a smaller log time showed a record that still
                  lives at lt (lt < its expiry): two acceptances within one
                  retention, the record was lost. Log time orders calls that
                  overlap in real time, where R1/R4 cannot.
  R23 lease       a takeover (ACCEPTED retry=false, owner_attempt n+1) at
                  lt >= the lease expiry of attempt n, unless attempt n's
                  token could have been released first; ACCEPTED retry=false
                  reports lease_expires_ms = lt + lease; IN_PROGRESS only while
                  the lease lives (lt < lease_expires_ms, retry_after_ms =
                  lease_expires_ms - lt).
  R24 token order a complete or release with the token of attempt n is never
                  COMPLETED / RELEASED / FAILED at a log time after a takeover
                  with a larger owner_attempt was decided (the token was
                  fenced: NOT_OWNER); acceptances of a key in log-time order
                  have increasing owner_attempts.
  R25 log time    log time never goes backwards along a raft group's log:
                  answers' (log index, log time) pairs (first_index /
                  first_time_ms, the owner token's index with the accepting
                  answer's time) of one group are ordered alike (the group:
                  the token's, else the key's, _key_groups); an answer is
                  not decided before the record it shows was created; a
                  fresh ACCEPTED reports first_time_ms = its log time; with
                  a :time-settings event, every :ok answer carries
                  log_time_ms.

Inputs. Claims carry `:ts` and `:window-ms` (ms) on the invocation when they
have them, `:lease-ms` for IDEMPOTENT claims with a lease; answers carry
oncectl's fields (`:log-time-ms`, `:expires-ms`, `:lease-expires-ms`,
`:retry-after-ms`, `:owner-attempt`, `:owner-token`). The cluster's
settings come from one event
  {:type :info :process :nemesis :f :time-settings
   :value {:max-window-ms 4000 :max-skew-ms 1000 :exercise ["R20" "R21"]}}
written by the runner for the time workloads (their nodes bootstrap with
these settings, which no command changes during a run). `:exercise` names
rules that must have judged at least one case, so that a time run that
never reached a window edge or a retention fails (not-exercised) instead of
passing vacuously. Without the event R20 and R21 cannot be evaluated: a
history with ts claims and no settings is an anomaly (time-settings-missing),
one without ts claims skips them.

Every rule is a necessary condition of the state machine's rules with fixed
settings and no Forget (never a false alarm on a correct cluster): equal log
times may belong to two batches (fsm_now does not go back, but may stand
still), so an order by log time is only taken when the times differ.
"""

from .claims import Anomaly
from .history import _int, norm_value

RULES = {
    "R20": "ACCEPTED only inside the window",
    "R21": "retention in log time",
    "R22": "one ACCEPTED per retention",
    "R23": "lease takeovers after expiry",
    "R24": "fenced tokens by log time",
    "R25": "log time along the log",
}

# Every anomaly the time rules can report (checker.ANOMALIES takes them;
# not-exercised is made per rule from the :time-settings event's list).
ANOMALIES = {
    "R20": ("accepted-outside-window", "stale-inside-window", "future-inside-window",
            "time-settings-missing", "not-exercised"),
    "R21": ("retention-short", "live-after-retention", "absent-while-live", "not-exercised"),
    "R22": ("accepted-while-live",),
    "R23": ("takeover-before-expiry", "in-progress-after-expiry", "lease-mismatch",
            "not-exercised"),
    "R24": ("fenced-token-used", "attempt-order"),
    "R25": ("log-time-backwards", "answer-before-record", "first-time-mismatch",
            "missing-log-time"),
}

SHOWS = ("ACCEPTED", "REPLAYED")      # NONCE answers that show the record


def _lt(c):
    return _int(c.v.get("log-time-ms")) if c.type == "ok" else None


def _fld(c, name):
    return _int(c.v.get(name))


def _inv_fld(c, name):
    """A field of the invocation only (what was sent), never the answer's."""
    v = c.inv_op.value
    if isinstance(v, (list, tuple)) and len(v) == 2:
        v = v[1]
    return _int((norm_value(v) or {}).get(name))


def _inv_raw(c, name):
    """A field of the invocation as sent (any type), or None."""
    v = c.inv_op.value
    if isinstance(v, (list, tuple)) and len(v) == 2:
        v = v[1]
    return (norm_value(v) or {}).get(name)


def _token_index(tok):
    try:
        return int(tok.split(":")[1])
    except (AttributeError, IndexError, ValueError):
        return None


class Settings:
    def __init__(self, events):
        ev = [e for e in events if e.f == "time-settings"]
        self.present = bool(ev)
        v = (norm_value(ev[-1].value) or {}) if ev else {}
        self.window = _int(v.get("max-window-ms"))
        self.skew = _int(v.get("max-skew-ms"))
        ex = v.get("exercise") or []
        self.exercise = set(str(getattr(x, "name", x)) for x in ex) \
            if isinstance(ex, (list, tuple)) else set()
        self.event = ev[-1] if ev else None
        self.ok = self.present and self.window is not None and self.skew is not None


def check(calls, events, res):
    """All of R20-R25 over the client calls; returns the anomalies and
    fills res.stats['time'] with what was judged."""
    st = Settings(events)
    stats = dict(window_judged=0, stale=0, future=0, accepted_ts=0,
                 retention_judged=0, after_retention=0, accept_once_judged=0,
                 leases_judged=0, leases_unjudged=0, in_progress_judged=0,
                 fenced_judged=0, points=0)
    out = []
    bykey = {}
    for c in calls:
        if c.f in ("claim", "complete", "release"):
            bykey.setdefault(c.kkey, []).append(c)
    # claims the window rules could judge: ts, window and an answer's log time
    timed = [c for c in calls if c.f == "claim" and _lt(c) is not None and
             _inv_fld(c, "ts") is not None and _inv_fld(c, "window-ms") is not None]
    has_ts = bool(timed)
    if has_ts and not st.ok:
        out.append(Anomaly("R20", "time-settings-missing", None,
                           "%d answered claims carry ts, window and log_time_ms but the "
                           "history has no :time-settings event with :max-window-ms and "
                           ":max-skew-ms: the window rules cannot be evaluated" % len(timed),
                           timed[:2]))
    for key, cs in bykey.items():
        idem = any(c.f in ("complete", "release") or c.kind == "IDEMPOTENT" for c in cs)
        if st.ok:
            out += _r20(key, cs, st, stats)
        if idem:
            out += _r23(key, cs, stats)
            out += _r24(key, cs, stats)
        else:
            if st.ok:
                out += _r21(key, cs, st, stats)
            out += _r22(key, cs, st, stats)
    out += _r25(calls, st, stats)
    for rule, n in (("R20", stats["window_judged"]), ("R21", stats["after_retention"]),
                    ("R23", stats["leases_judged"])):
        if rule in st.exercise and n == 0:
            out.append(Anomaly(rule, "not-exercised", None,
                               "the run asked for %s (:exercise) but no case of it was "
                               "judged" % rule, [], [st.event]))
    if not st.ok and not has_ts:
        why = "no :time-settings event" if not st.present else \
            ":time-settings lacks :max-window-ms or :max-skew-ms"
        res.skip("R20", why + " and no answered claim carries ts and window")
        res.skip("R21", why + " and no answered claim carries ts and window")
    for rule, n, why in (
            ("R20", stats["window_judged"], "no claim with ts answered ACCEPTED, STALE or FUTURE"),
            ("R21", stats["retention_judged"], "no NONCE record with ts was shown"),
            ("R22", stats["accept_once_judged"], "no later acceptance to order by log time"),
            ("R23", stats["leases_judged"] + stats["in_progress_judged"],
             "no takeover or IN_PROGRESS with a known lease"),
            ("R24", stats["fenced_judged"], "no complete or release of a known token"),
            ("R25", stats["points"], "no answer carries log_time_ms")):
        if n == 0:
            res.skip(rule, why)
    res.stats["time"] = stats
    return out


# -- R20 -----------------------------------------------------------------------

def _r20(key, cs, st, stats):
    out = []
    K = st.skew
    for c in cs:
        if c.f != "claim" or c.type != "ok":
            continue
        ts, w, lt = _inv_fld(c, "ts"), _inv_fld(c, "window-ms"), _lt(c)
        if ts is None or w is None or lt is None:
            continue
        o = c.outcome
        if o == "ACCEPTED" and not c.retry:
            stats["window_judged"] += 1
            stats["accepted_ts"] += 1
            if not (lt - w <= ts <= lt + K):
                out.append(Anomaly("R20", "accepted-outside-window", key,
                                   "ACCEPTED at log time %d with ts %d, window %d ms, max_skew "
                                   "%d ms: needs %d <= ts <= %d" % (lt, ts, w, K, lt - w, lt + K),
                                   [c]))
        elif o == "STALE":
            stats["window_judged"] += 1
            stats["stale"] += 1
            if not (lt > w and ts < lt - w):
                out.append(Anomaly("R20", "stale-inside-window", key,
                                   "STALE at log time %d with ts %d, window %d ms: STALE needs "
                                   "ts < %d" % (lt, ts, w, lt - w), [c]))
        elif o == "FUTURE":
            stats["window_judged"] += 1
            stats["future"] += 1
            if not ts > lt + K:
                out.append(Anomaly("R20", "future-inside-window", key,
                                   "FUTURE at log time %d with ts %d, max_skew %d ms: FUTURE "
                                   "needs ts > %d" % (lt, ts, K, lt + K), [c]))
    return out


# -- R21, R22 ------------------------------------------------------------------

def _winner_ts(cs):
    """{request id: (lo, hi, ttl)}: the ts the record a request id's
    acceptance made can carry, lo <= ts <= hi, and whether a ttl was sent
    too. The record lives at least until lo + span; without a ttl, not
    after hi + span.

    The record was made by whichever of the request id's calls took effect
    first: an :ok ACCEPTED (either retry flag: a retry=true answer stands
    for libonce's own first application, which sent the same ts) or an
    :info call (it may have taken effect, or not). Their ts may differ (a
    claim of the accepted request id is ACCEPTED retry=true whatever it
    sends, docs/state-machine.md, "Claim"), so lo is the smallest and hi
    the largest of them. A ttl sent with a ts may lengthen the retention
    (expires_ms is the latest of now + ttl and ts + span).
    A request id of which one such call carries no ts is left out (its
    record may have no ts at all, only a ttl)."""
    cand = {}
    for c in cs:
        if c.f != "claim" or c.rid is None:
            continue
        if c.type == "info" or (c.type == "ok" and c.outcome == "ACCEPTED"):
            cand.setdefault(c.rid, []).append(c)
    out = {}
    for rid, calls in cand.items():
        ts = [_inv_fld(c, "ts") for c in calls]
        if None in ts:
            continue
        ttl = any(_inv_raw(c, "ttl-ms") is not None or _inv_raw(c, "ttl") is not None
                  for c in calls)
        out[rid] = (min(ts), max(ts), ttl)
    return out


def _ts_text(lo, hi):
    """The ts of a record, or the range its request id's calls sent."""
    return "%d" % lo if hi == lo else "%d..%d" % (lo, hi)


def _shown(c):
    """The request id of the record an :ok NONCE answer shows, or None."""
    if c.f != "claim" or c.type != "ok" or c.outcome not in SHOWS:
        return None
    return c.first_rid or (c.rid if c.outcome == "ACCEPTED" else None)


def _r21(key, cs, st, stats):
    out = []
    tsof = _winner_ts(cs)
    span = st.window + st.skew
    first_seen = {}                    # winner -> the earliest answer showing it
    for c in cs:
        w = _shown(c)
        lt = _lt(c)
        if w is None or lt is None or w not in tsof:
            continue
        lo, hi, ttl = tsof[w]
        e = lo + span
        stats["retention_judged"] += 1
        exp = _fld(c, "expires-ms")
        if exp is not None and exp < e:
            out.append(Anomaly("R21", "retention-short", key,
                               "the record of %s (ts %s) reports expires_ms %d, below ts + "
                               "max_window + max_skew = %d" % (w, _ts_text(lo, hi), exp, e),
                               [c]))
        if not ttl and lt >= hi + span and (c.outcome == "REPLAYED" or c.retry):
            out.append(Anomaly("R21", "live-after-retention", key,
                               "%s %sat log time %d shows the record of %s, whose retention "
                               "ended at %d (ts %s + %d): it must be gone (STALE)" %
                               (c.outcome, "retry=true " if c.retry else "", lt, w, hi + span,
                                _ts_text(lo, hi), span), [c]))
        if w not in first_seen or lt < _lt(first_seen[w]):
            first_seen[w] = c
    for c in cs:
        lt = _lt(c)
        if c.f != "claim" or lt is None:
            continue
        ts = _inv_fld(c, "ts")
        if ts is not None and lt >= ts + span:
            stats["after_retention"] += 1
        if c.outcome not in ("STALE", "FUTURE"):
            continue
        for w, s in first_seen.items():
            e = tsof[w][0] + span
            if _lt(s) < lt < e:
                out.append(Anomaly("R21", "absent-while-live", key,
                                   "%s at log time %d, but the record of %s was shown at log "
                                   "time %d and lives until %d: it was pruned early" %
                                   (c.outcome, lt, w, _lt(s), e), [s, c]))
                break
    return out


def _r22(key, cs, st, stats):
    """Two acceptances within one retention, ordered by log time."""
    tsof = _winner_ts(cs)
    span = (st.window + st.skew) if st.ok else None
    shown = []
    for c in cs:
        w = _shown(c)
        lt = _lt(c)
        if w is None or lt is None:
            continue
        if span is not None and w in tsof:
            e = tsof[w][0] + span
        else:
            e = _fld(c, "expires-ms")
        if e is not None:
            shown.append((lt, e, w, c))
    out = []
    for c in cs:
        lt = _lt(c)
        if c.f != "claim" or lt is None or c.outcome != "ACCEPTED" or c.retry:
            continue
        stats["accept_once_judged"] += sum(1 for x in shown if x[3] is not c)
        for lt1, e, w, s in shown:
            if s is not c and lt1 < lt < e:
                out.append(Anomaly("R22", "accepted-while-live", key,
                                   "ACCEPTED retry=false at log time %d, but an answer at log "
                                   "time %d showed the record of %s, which lives until %d: "
                                   "a second acceptance within its retention" %
                                   (lt, lt1, w, e), [s, c]))
                break
    return out


# -- R23, R24 ------------------------------------------------------------------

def _owners(cs):
    """{owner_attempt: (token, lease_expires_ms, [ACCEPTED calls])}."""
    own = {}
    for c in cs:
        if c.f == "claim" and c.type == "ok" and c.outcome == "ACCEPTED" and c.attempt:
            t, l, lst = own.get(c.attempt, (None, None, []))
            own[c.attempt] = (t or c.token, l if l is not None else _fld(c, "lease-expires-ms"),
                              lst + [c])
    return own


def _r23(key, cs, stats):
    out = []
    own = _owners(cs)
    for c in cs:
        lt = _lt(c)
        if c.f != "claim" or lt is None:
            continue
        le = _fld(c, "lease-expires-ms")
        if c.outcome == "ACCEPTED" and not c.retry:
            lease = _inv_fld(c, "lease-ms")
            if lease and le is not None and le != lt + lease:
                out.append(Anomaly("R23", "lease-mismatch", key,
                                   "ACCEPTED at log time %d with a %d ms lease reports "
                                   "lease_expires_ms %d (want %d)" % (lt, lease, le, lt + lease),
                                   [c]))
            n = c.attempt
            if n is None or n < 2:
                continue
            prev = own.get(n - 1)
            if prev is None or prev[1] is None:
                stats["leases_unjudged"] += 1
                continue
            stats["leases_judged"] += 1
            tok, pl, _ = prev
            if lt >= pl or _released_before(cs, tok, c):
                continue
            out.append(Anomaly("R23", "takeover-before-expiry", key,
                               "takeover (owner_attempt %d) at log time %d, but attempt %d's "
                               "lease runs until %d and its token %s was not released" %
                               (n, lt, n - 1, pl, tok), prev[2][:1] + [c]))
        elif c.outcome == "IN_PROGRESS" and le is not None:
            stats["in_progress_judged"] += 1
            ra = _fld(c, "retry-after-ms")
            if lt >= le or (ra is not None and ra != le - lt):
                out.append(Anomaly("R23", "in-progress-after-expiry", key,
                                   "IN_PROGRESS at log time %d with lease_expires_ms %d and "
                                   "retry_after_ms %s: the lease had %s" %
                                   (lt, le, ra, "expired" if lt >= le else
                                    "another length (want %d)" % (le - lt)), [c]))
            n = c.attempt
            if n in own and own[n][1] is not None and own[n][1] != le:
                out.append(Anomaly("R23", "lease-mismatch", key,
                                   "IN_PROGRESS names owner_attempt %d with lease_expires_ms %d, "
                                   "its acceptance reported %d" % (n, le, own[n][1]),
                                   own[n][2][:1] + [c]))
    return out


def _released_before(cs, tok, c):
    """Could a non-terminal release of @tok have applied before claim @c was
    decided? An :ok RELEASED at a log time <= c's, or an :info release
    invoked before c's answer."""
    lt = _lt(c)
    for r in cs:
        if r.f != "release" or r.token != tok or r.terminal:
            continue
        if r.type == "ok" and r.outcome == "RELEASED":
            rlt = _lt(r)
            if rlt is None or rlt <= lt:
                return True
        elif r.type == "info" and r.inv < c.ret:
            return True
    return False


def _r24(key, cs, stats):
    out = []
    own = _owners(cs)
    tok_attempt = {v[0]: n for n, v in own.items() if v[0]}
    acc = sorted(((_lt(c), c.attempt, c) for c in cs
                  if c.f == "claim" and c.type == "ok" and c.outcome == "ACCEPTED"
                  and not c.retry and c.attempt and _lt(c) is not None),
                 key=lambda x: x[0])
    for i in range(len(acc)):
        for j in range(i + 1, len(acc)):
            if acc[i][0] < acc[j][0] and acc[i][1] >= acc[j][1]:
                out.append(Anomaly("R24", "attempt-order", key,
                                   "owner_attempt %d accepted at log time %d, then attempt %d "
                                   "at log time %d: takeovers must fence with a larger attempt"
                                   % (acc[i][1], acc[i][0], acc[j][1], acc[j][0]),
                                   [acc[i][2], acc[j][2]]))
                return out
    for c in cs:
        lt = _lt(c)
        if c.f not in ("complete", "release") or lt is None or \
                c.outcome not in ("COMPLETED", "RELEASED", "FAILED"):
            continue
        n = tok_attempt.get(c.token)
        if n is None:
            continue
        stats["fenced_judged"] += 1
        later = [a for (alt, m, a) in acc if m > n and alt < lt]
        if later:
            out.append(Anomaly("R24", "fenced-token-used", key,
                               "%s %s with the token of owner_attempt %d at log time %d, after "
                               "the takeover with owner_attempt %d was decided at log time %d "
                               "(NOT_OWNER expected)" %
                               (c.f, c.outcome, n, lt, later[0].attempt, _lt(later[0])),
                               [later[0], c]))
    return out


# -- R25 -----------------------------------------------------------------------

def _token_group(tok):
    """The raft group of a literal owner token "GROUP:INDEX:SLOT", or None."""
    if isinstance(tok, str) and tok.count(":") == 2:
        return tok.split(":")[0]
    return None


def _key_groups(calls):
    """{key: group} for the points of R25 that carry no token of their own
    (first_index / first_time_ms). Log indexes are per raft group: two
    groups' logs number their entries independently (docs/design.md, §7,
    which is why owner tokens carry the group). A key's group is that of
    the owner tokens its claims' answers show; an answer without one (every
    NONCE answer) names no group. When the history's tokens name at most
    one group (every run of the runner today: one group), such a key is
    taken to be in it; when they name several, a key whose group is not
    known from one token group is compared only with itself."""
    toks = {}
    for c in calls:
        if c.f == "claim" and c.type == "ok":
            g = _token_group(c.token)
            if g is not None:
                toks.setdefault(c.kkey, set()).add(g)
    groups = set().union(*toks.values()) if toks else set()
    one = next(iter(groups)) if len(groups) == 1 else None
    out = {}
    for c in calls:
        k = c.kkey
        if k in out:
            continue
        g = toks.get(k, set())
        if len(g) == 1:
            out[k] = next(iter(g))
        elif not g and len(groups) <= 1:
            out[k] = one
        else:
            out[k] = ("key", k)
    return out


def _r25(calls, st, stats):
    out = []
    kgroup = _key_groups(calls)
    times = {}                  # group -> log index -> {log time: a call reporting it}
    for c in calls:
        if c.f not in ("claim", "complete", "release") or c.type != "ok":
            continue
        lt = _lt(c)
        if lt is None:
            if st.present:
                out.append(Anomaly("R25", "missing-log-time", c.kkey,
                                   "an :ok %s answer without log_time_ms in a time run" % c.f,
                                   [c]))
            continue
        stats["points"] += 1
        if c.first_time is not None and c.first_time > lt:
            out.append(Anomaly("R25", "answer-before-record", c.kkey,
                               "decided at log time %d, before its record was created "
                               "(first_time_ms %d)" % (lt, c.first_time), [c]))
        g = kgroup[c.kkey]
        if c.first_index is not None and c.first_time is not None:
            times.setdefault(g, {}).setdefault(c.first_index, {}).setdefault(c.first_time, c)
        if c.f == "claim" and c.outcome == "ACCEPTED" and not c.retry:
            if c.attempt in (None, 1) and c.first_time is not None and c.first_time != lt:
                out.append(Anomaly("R25", "first-time-mismatch", c.kkey,
                                   "a first ACCEPTED at log time %d reports first_time_ms %d "
                                   "(the record is created at the answer's log time)" %
                                   (lt, c.first_time), [c]))
            idx = _token_index(c.token) if c.token else None
            tg = g
            if idx is not None:
                tg = _token_group(c.token) or g
            elif c.attempt in (None, 1):
                idx = c.first_index
            if idx is not None:
                times.setdefault(tg, {}).setdefault(idx, {}).setdefault(lt, c)
    for g in sorted(times, key=str):
        a = _r25_group(g, times[g])
        if a is not None:
            out.append(a)
            break
    return out


def _group_text(g):
    if isinstance(g, tuple):
        return " (key %s, its raft group unknown)" % "/".join(str(x) for x in g[1])
    return "" if g is None else " of raft group %s" % g


def _r25_group(g, times):
    """The first place where log time goes back along one group's log."""
    hi = None                          # (index, time, call) with the largest time so far
    for idx in sorted(times):
        ts = times[idx]
        if len(ts) > 1:
            a, b = sorted(ts)[:2]
            return Anomaly("R25", "log-time-backwards", None,
                           "log index %d%s is reported with log times %d and %d" %
                           (idx, _group_text(g), a, b), [ts[a], ts[b]])
        t = next(iter(ts))
        if hi is not None and t < hi[1]:
            return Anomaly("R25", "log-time-backwards", None,
                           "log index %d%s has log time %d, but the earlier index %d had %d: "
                           "log time went backwards" % (idx, _group_text(g), t, hi[0], hi[1]),
                           [hi[2], ts[t]])
        if hi is None or t >= hi[1]:
            hi = (idx, t, ts[t])
    return None
