"""jepsen/local/mutate: the checker tested by mutation.

    jepsen/local/mutate HISTORY... [--seed S] [--max N] [--max-seconds T]
                        [--ref-limit 8] [--ref-steps N] [--write DIR] [--checked]
                        [--audit]

Takes histories the checker calls VALID and makes mutants of them, each one
small change (the kinds below). A mutant is KEPT when it breaks the
contract, and then the checker (checker.check_history) must call it
INVALID: the mutation score is caught / kept.

Whether a mutant breaks the contract is not asked of the checker: the
reference judge (reference.py: brute force over every subset of the
:info calls and every real-time-consistent order, folding the model's
step) decides it on the mutated key, for keys of at most --ref-limit calls
that take part. A mutant the reference finds linearizable is LEGAL
(discarded: the change happened to describe another correct execution); a
mutant on a key too large for the reference is UNJUDGED (counted, not
scored). Keys larger than ref-limit calls are not mutated at all.

Mutant kinds (each on one client call of one key, except where said):
  field:NAME        one field of one :ok answer changed: outcome (to every
                    other outcome of that operation), retry (flipped),
                    first-request-id (another request id of the key, or a
                    fresh one), first-index, owner-attempt (+-1),
                    owner-token (another token of the key, or a forged one),
                    result-b64, stored-error (another of the key, or a
                    forged one), first-time-ms, lease-expires-ms,
                    expires-ms, retry-after-ms (+-1, +-1000 ms),
                    log-time-ms (+-1 ms: the edge cases)
  shift-log-time    an answer's log-time-ms shifted by +-1000 ms
  arg:NAME          one argument of one call changed (what was sent, so the
                    answer may no longer fit it): a claim's ts, window-ms,
                    lease-ms (+-1, +-1000 ms); a complete's or release's
                    owner-token (another of the key, or forged); a
                    complete's result-b64; a release's terminal (flipped)
  swap              the answers of two :ok calls of the same operation on a
                    key exchanged (each keeps its own request id)
  info-ok           an :info call turned into an :ok whose answer is that of
                    another call of the key (or, for a claim, a fresh
                    ACCEPTED naming itself first)
  ok-fail           an :ok call turned into a :fail (applied "false")
  drop-call         one call (invocation and completion) removed; not a
                    final probe (see drop-final-probe)
  reorder           an :ok call moved, invocation and answer, to just before
                    the invocation of an earlier call of the key (on a
                    process of its own): its answer now precedes its cause
  request-id        a call's request id changed to another of the key (it
                    becomes a retry of that op) or a fresh one
  drop-final-probe  OUTSIDE the per-key model, so not judged by the
                    reference; the rule: after a :final-phase event listing
                    member M, every key with a non-final :ok or :info call
                    has a definite (:ok) final probe through M (R7,
                    jepsen/README.md). The mutant removes every final probe
                    of one such key through one listed member that had an
                    :ok one: it breaks that rule, so it is always kept
  cross-key-log-time  OUTSIDE the per-key model too; the rule: log time is
                    one clock per raft group (docs/state-machine.md, "Time":
                    fsm_now never goes back), so an answer acknowledged
                    before a call was invoked has a log time <= that call's
                    answer's, across keys. The group is known from the
                    owner token an answer shows (group:index:slot). The
                    mutant sets such an answer's log-time-ms 1 ms below the
                    largest of another key's answers of its group
                    acknowledged before its invocation: always kept

Output: one line per survivor (a kept mutant the checker called VALID:
its kind, key and changed lines), then
  mutation score: caught/kept (P %), N generated, N legal (discarded),
  N unjudged, by kind: KIND caught/kept ...
Exit 0 when every kept mutant was caught (and at least one was kept), 1
otherwise, 2 when a history cannot be read.

--audit also checks every LEGAL mutant: the checker should call it VALID
but for rules outside the per-key model (R7's final probes, R25's log time
across keys, the threshold rules). Any other anomaly on a legal mutant is
a disagreement between a rule and the model (a false alarm of the rule, or
a hole in the model): each is reported with an example, and exits 1. An input key the reference
does not find linearizable although the checker called the history VALID
is reported as a survivor of kind `input` (the checker missed it already).

Ownership: the input histories' ops are read once and never modified; each
mutant shares the unchanged Op objects and owns its changed copies.
"""

import argparse
import os
import random
import sys
import time

from . import checker, model, reference
from .edn import Keyword, FrozenMap, dumps
from .history import HistoryError, Op, read_file, pair, kname, CLIENT_FS

# A request id no history uses: 16 bytes of hex like oncectl's.
FRESH_RID = "feedfacefeedfacefeedfacefeedface"
FORGED_TOKEN = "1:999999:7"
FORGED_RESULT = "bXV0YW50"            # base64 of "mutant"
FORGED_ERROR = "mutant error"

OUTCOMES = {
    "claim": ("ACCEPTED", "REPLAYED", "IN_PROGRESS", "DUPLICATE", "FAILED",
              "STALE", "FUTURE", "CONFLICT"),
    "complete": ("COMPLETED", "NOT_OWNER", "NOT_FOUND", "CONFLICT"),
    "release": ("RELEASED", "FAILED", "NOT_OWNER", "NOT_FOUND", "CONFLICT"),
    "lookup": ("FOUND", "NOT_FOUND"),
}
# The operations mutated and judged per key: the client calls the R-rules
# take, and lookups (reads served by any node, judged by the model alone:
# a lookup that misses an acknowledged claim is not linearizable).
MUTATED_FS = CLIENT_FS + ("lookup",)
# Answer fields mutated one at a time, and how (see _alternatives).
TIME_FIELDS = ("first-time-ms", "lease-expires-ms", "expires-ms", "retry-after-ms")
ANSWER_FIELDS = ("outcome", "retry", "first-request-id", "first-index", "owner-attempt",
                 "owner-token", "result-b64", "stored-error", "log-time-ms") + TIME_FIELDS
# Fields of a completion that belong to the call, not to the answer: kept
# when answers are swapped or copied. For a complete or release the owner
# token is an argument.
IDENTITY = ("scope", "key", "request-id", "node", "kind", "final", "ts", "window-ms",
            "window", "lease-ms", "lease", "payload-hash", "terminal", "idempotent")
ERROR_FIELDS = ("error", "applied", "message")
# Arguments of a call (its invocation) mutated one at a time: arg:NAME.
ARG_FIELDS = {"claim": ("ts", "window-ms", "lease-ms"),
              "complete": ("owner-token", "result-b64"),
              "release": ("owner-token", "terminal")}

OUTSIDE_MODEL = ("drop-final-probe", "cross-key-log-time")
DELETE = object()


# --- op editing ------------------------------------------------------------

def _clone(op, raw=None, pos=None):
    """A copy of OP (a new raw map and/or position), sharing nothing mutable
    with it but the unchanged values."""
    o = Op.__new__(Op)
    for s in Op.__slots__:
        setattr(o, s, getattr(op, s))
    if raw is not None:
        o.raw = raw
        m = {kname(k): x for k, x in raw.items() if kname(k) is not None}
        o.type = kname(m.get("type"))
        p = m.get("process")
        o.process = p if isinstance(p, int) and not isinstance(p, bool) else kname(p)
        o.value = m.get("value")
    if pos is not None:
        o.pos = pos
    return o


def _rawkey(d, name):
    """The key of map D whose name (with '_' read as '-') is NAME, or None."""
    for k in d:
        n = kname(k)
        if n is not None and n.replace("_", "-") == name:
            return k
    return None


def _value_map(raw):
    """(map, wrap): the op's :value as a new dict, and a function putting
    an edited dict back in the op's form ([k v] of jepsen.independent)."""
    vk = _rawkey(raw, "value")
    v = raw.get(vk) if vk is not None else None
    if isinstance(v, (list, tuple)) and len(v) == 2 and not isinstance(v, FrozenMap):
        ik = v[0]
        inner = v[1]
        return (dict(inner) if inner is not None else {}), (lambda d: [ik, d])
    if v is None:
        return {}, (lambda d: d)
    return dict(v), (lambda d: d)


def _get(raw, name):
    d, _ = _value_map(raw)
    k = _rawkey(d, name)
    return d.get(k) if k is not None else None


def _has(raw, name):
    d, _ = _value_map(raw)
    return _rawkey(d, name) is not None


def edit(raw, fields=None, **top):
    """A new raw op: :value fields set (DELETE removes one), top-level
    fields (type, process) set. Field names are written in the '-' form
    unless the map already has them."""
    new = dict(raw)
    for name, x in top.items():
        k = _rawkey(new, name) or Keyword(name)
        new[k] = x
    if fields:
        d, wrap = _value_map(raw)
        for name, x in fields.items():
            k = _rawkey(d, name)
            if x is DELETE:
                if k is not None:
                    del d[k]
                continue
            d[k if k is not None else Keyword(name)] = x
        vk = _rawkey(new, "value") or Keyword("value")
        new[vk] = wrap(d)
    return new


def _like(old, new):
    """NEW in the type of OLD (keyword outcomes stay keywords, numeric
    strings stay strings)."""
    if isinstance(old, Keyword) and isinstance(new, str):
        return Keyword(new.lower().replace("_", "-")) if old.name.islower() else Keyword(new)
    if isinstance(old, str) and isinstance(new, int) and not isinstance(new, bool):
        return str(new)
    return new


def _answer(raw, f):
    """The answer fields of a completion (name -> value)."""
    d, _ = _value_map(raw)
    ident = IDENTITY + (("owner-token",) if f in ("complete", "release") else ())
    out = {}
    for k, x in d.items():
        n = kname(k)
        if n is None:
            continue
        n = n.replace("_", "-")
        if n not in ident and n not in ERROR_FIELDS:
            out[n] = x
    return out


# --- mutants ---------------------------------------------------------------

class Mutant:
    """One change to a history: ops replaced (pos -> raw), ops dropped
    (positions), or a move (positions moved to just before another)."""

    __slots__ = ("kind", "kkey", "what", "replace", "drop", "move", "fresh_process")

    def __init__(self, kind, kkey, what, replace=None, drop=(), move=None, fresh_process=None):
        self.kind, self.kkey, self.what = kind, kkey, what
        self.replace = replace or {}
        self.drop = frozenset(drop)
        self.move = move                 # (positions, before position)
        self.fresh_process = fresh_process

    def ops(self, src, only=None):
        """The mutant history's ops in real-time order. ONLY: the positions
        to keep (a projection: one key's ops and the events), else all.
        Positions are renumbered when anything was left out or moved."""
        ops = src.ops
        if only is None and not self.drop and not self.move:
            out = list(ops)
            for p, raw in self.replace.items():
                out[p] = _clone(ops[p], raw=raw)
            return out
        order = [p for p in (range(len(ops)) if only is None else sorted(only))
                 if p not in self.drop]
        moved = ()
        if self.move:
            moved, before = self.move
            ms = set(moved)
            order = [p for p in order if p not in ms]
            i = order.index(before)
            order[i:i] = list(moved)
        out = []
        for newpos, p in enumerate(order):
            raw = self.replace.get(p)
            if p in moved:
                raw = edit(raw if raw is not None else ops[p].raw, process=self.fresh_process)
            out.append(_clone(ops[p], raw=raw, pos=newpos))
        return out

    def changed_lines(self, src):
        """What changed, for the report: the new lines (and dropped ones)."""
        out = []
        for p, raw in sorted(self.replace.items()):
            out.append("line %d: %s" % (src.ops[p].line, dumps(raw)))
        if self.move:
            moved, before = self.move
            out.append("moved before line %d: %s" % (
                src.ops[before].line, "; ".join("line %d" % src.ops[p].line for p in moved)))
        for p in sorted(self.drop):
            out.append("dropped line %d: %s" % (src.ops[p].line, dumps(src.ops[p].raw)))
        return out

    def text(self, src):
        """The mutant as an EDN history (one op a line, :index renumbered)."""
        lines = []
        for i, o in enumerate(self.ops(src)):
            raw = dict(o.raw)
            if src.has_index:
                raw[_rawkey(raw, "index") or Keyword("index")] = i
            lines.append(dumps(raw))
        return "\n".join(lines) + "\n"


class Source:
    """One input history, read once."""

    def __init__(self, path):
        self.path = path
        self.ops = read_file(path)
        self.has_index = any(o.index is not None for o in self.ops)
        self.calls, self.events = pair(self.ops)
        self.pos = {id(o): i for i, o in enumerate(self.ops)}
        self.bykey = {}
        for c in self.calls:
            if c.f in MUTATED_FS:
                self.bykey.setdefault(c.kkey, []).append(c)
        procs = [o.process for o in self.ops if isinstance(o.process, int)]
        self.fresh_process = (max(procs) + 1) if procs else 1
        self.event_pos = [i for i, o in enumerate(self.ops) if not o.is_client]
        self.key_pos = {}
        for kkey, cs in self.bykey.items():
            ps = self.key_pos.setdefault(kkey, [])
            for c in cs:
                ps.append(self.pos[id(c.inv_op)])
                if c.ret_op is not None:
                    ps.append(self.pos[id(c.ret_op)])
        self.sizes = {}              # kkey -> calls taking part (model roles)
        for g in model.key_ops(self.calls, self.events).values():
            if g:
                must, may = reference.participants(g)
                self.sizes[g[0].kkey] = len(must) + len(may)

    def projection(self, kkey):
        """The positions of one key's ops and of every event."""
        return set(self.key_pos.get(kkey, ())) | set(self.event_pos)

    def p(self, op):
        return self.pos[id(op)]


def _alternatives(name, old, f, key_facts):
    """(label, new value) alternatives of answer field NAME."""
    rids, tokens, results, errors = key_facts
    if name == "outcome":
        cur = (kname(old) or "").upper().replace("-", "_")
        return [(o, _like(old, o)) for o in OUTCOMES.get(f, ()) if o != cur]
    if name == "retry":
        b = old if isinstance(old, bool) else str(old).lower() == "true"
        return [("flipped", _like(old, not b) if not isinstance(old, str) else str(not b).lower())]
    if name == "first-request-id":
        return [(r, r) for r in sorted(rids) if r != old] + [("fresh", FRESH_RID)]
    if name in ("first-index", "owner-attempt"):
        try:
            n = int(old)
        except (TypeError, ValueError):
            return []
        return [("%+d" % d, _like(old, n + d)) for d in (-1, 1) if n + d >= 0]
    if name == "owner-token":
        return [(t, t) for t in sorted(tokens) if t != old] + [("forged", FORGED_TOKEN)]
    if name == "result-b64":
        return [(r, r) for r in sorted(results) if r != old] + [("forged", FORGED_RESULT)]
    if name == "stored-error":
        return [(e, e) for e in sorted(errors) if e != old] + [("forged", FORGED_ERROR)]
    if name in TIME_FIELDS or name == "log-time-ms":
        try:
            n = int(old)
        except (TypeError, ValueError):
            return []
        deltas = (-1, 1) if name == "log-time-ms" else (-1, 1, -1000, 1000)
        return [("%+d" % d, _like(old, n + d)) for d in deltas if n + d >= 0]
    return []


def _arg_alternatives(name, old, key_facts):
    """(label, new value) alternatives of argument NAME of a call."""
    rids, tokens, results, errors = key_facts
    if name in ("ts", "window-ms", "lease-ms"):
        try:
            n = int(old)
        except (TypeError, ValueError):
            return []
        low = 0 if name == "ts" else 1
        return [("%+d" % d, _like(old, n + d)) for d in (-1, 1, -1000, 1000) if n + d >= low]
    if name == "owner-token":
        return [(t, t) for t in sorted(tokens) if t != old] + [("forged", FORGED_TOKEN)]
    if name == "result-b64":
        return [(r, r) for r in sorted(results) if r != old] + [("forged", FORGED_RESULT)]
    if name == "terminal":
        b = old if isinstance(old, bool) else str(old).lower() == "true"
        return [("flipped", not b)]
    return []


def _facts(cs):
    rids, tokens, results, errors = set(), set(), set(), set()
    for c in cs:
        if c.rid:
            rids.add(c.rid)
        if c.token:
            tokens.add(c.token)
        for r in (c.arg_result, c.res_result):
            if r:
                results.add(r)
        if c.stored_error:
            errors.add(c.stored_error)
    return rids, tokens, results, errors


def key_mutants(src, kkey):
    """Every mutant of one key of SRC (the ones outside the model included)."""
    return _key_mutants(src, kkey, src.bykey[kkey]) + _drop_final_probes(src, kkey) + \
        _cross_key_log_time(src, kkey)


def _group_lt(c):
    """(raft group, log time) of an :ok answer that shows an owner token
    ("group:index:slot") and a log time, else None."""
    if c.type != "ok" or c.ret_op is None:
        return None
    tok, lt = _get(c.ret_op.raw, "owner-token"), _get(c.ret_op.raw, "log-time-ms")
    try:
        lt = int(lt)
    except (TypeError, ValueError):
        return None
    if not isinstance(tok, str) or tok.count(":") != 2:
        return None
    return tok.split(":")[0], lt


def _cross_key_log_time(src, kkey):
    """cross-key-log-time mutants of one key (the rule is stated in the
    module doc): an answer's log time set 1 ms below that of an answer of
    another key of its group acknowledged before it was invoked."""
    out = []
    others = [(c.ret, g) for c in src.calls if c.kkey != kkey and c.f in CLIENT_FS
              for g in [_group_lt(c)] if g is not None]
    for b in src.bykey[kkey]:
        gb = _group_lt(b)
        if gb is None:
            continue
        before = [lt for ret, (g, lt) in others if g == gb[0] and ret < b.inv]
        if not before:
            continue
        m = max(before) - 1
        if m >= gb[1] or m < 0:
            continue                 # already below (not a valid input), or no room
        old = _get(b.ret_op.raw, "log-time-ms")
        out.append(Mutant("cross-key-log-time", kkey, "%s %s log-time-ms %d -> %d (an answer "
                          "of another key acknowledged before it has %d)" % (
                              b.f, b.rid, gb[1], m, m + 1),
                          replace={src.p(b.ret_op): edit(b.ret_op.raw,
                                                         {"log-time-ms": _like(old, m)})}))
    return out


def _key_mutants(src, kkey, cs):
    out = []
    facts = _facts(cs)
    oks = [c for c in cs if c.type == "ok" and c.ret_op is not None]
    for c in oks:
        rp = src.p(c.ret_op)
        for name in ANSWER_FIELDS:
            if not _has(c.ret_op.raw, name):
                continue
            if name == "owner-token" and c.f != "claim":
                continue             # an argument of complete/release: request-id-like
            old = _get(c.ret_op.raw, name)
            alts = _alternatives(name, old, c.f, facts)
            if name == "log-time-ms":
                try:
                    n = int(old)
                except (TypeError, ValueError):
                    n = None
                for d in ((-1000, 1000) if n is not None else ()):
                    if n + d >= 0:
                        out.append(Mutant("shift-log-time", kkey, "%s %s log-time-ms %+d" % (
                            c.f, c.rid, d), replace={rp: edit(c.ret_op.raw,
                                                              {name: _like(old, n + d)})}))
            for label, x in alts:
                out.append(Mutant("field:" + name, kkey, "%s %s %s -> %s" % (c.f, c.rid, name, label),
                                  replace={rp: edit(c.ret_op.raw, {name: x})}))
        out.append(Mutant("ok-fail", kkey, "%s %s :ok -> :fail" % (c.f, c.rid), replace={
            rp: edit(c.ret_op.raw, dict({n: DELETE for n in _answer(c.ret_op.raw, c.f)},
                                        error="UNAVAILABLE", applied="false"),
                     type=Keyword("fail"))}))
    # swap two answers of one operation
    for i, a in enumerate(oks):
        for b in oks[i + 1:]:
            if a.f != b.f:
                continue
            aa, ab = _answer(a.ret_op.raw, a.f), _answer(b.ret_op.raw, b.f)
            if aa == ab:
                continue
            ra = edit(a.ret_op.raw, dict({n: DELETE for n in aa}, **ab))
            rb = edit(b.ret_op.raw, dict({n: DELETE for n in ab}, **aa))
            out.append(Mutant("swap", kkey, "answers of %s %s and %s %s swapped" % (
                a.f, a.rid, b.f, b.rid), replace={src.p(a.ret_op): ra, src.p(b.ret_op): rb}))
    # an :info made a contradicting :ok
    for c in cs:
        if c.type != "info" or c.ret_op is None:
            continue
        rp = src.p(c.ret_op)
        seen = []
        for b in oks:
            if b.f != c.f:
                continue
            ans = _answer(b.ret_op.raw, b.f)
            if ans in seen:
                continue
            seen.append(ans)
            out.append(Mutant("info-ok", kkey, "%s %s :info -> :ok with the answer of %s" % (
                c.f, c.rid, b.rid), replace={rp: edit(
                    c.ret_op.raw, dict({n: DELETE for n in ERROR_FIELDS}, **ans),
                    type=Keyword("ok"))}))
            if c.f == "claim" and kname(ans.get("outcome", "")).upper() == "ACCEPTED" \
                    and c.rid and ans.get("first-request-id") not in (None, c.rid):
                first = dict(ans, **{"first-request-id": c.rid, "retry": False})
                out.append(Mutant("info-ok", kkey, "%s %s :info -> :ok ACCEPTED naming "
                                  "itself first" % (c.f, c.rid), replace={rp: edit(
                                      c.ret_op.raw, dict({n: DELETE for n in ERROR_FIELDS},
                                                         **first), type=Keyword("ok"))}))
    for c in cs:
        ip = src.p(c.inv_op)
        rp = src.p(c.ret_op) if c.ret_op is not None else None
        if not c.final:
            out.append(Mutant("drop-call", kkey, "%s %s (:%s) dropped" % (c.f, c.rid, c.type),
                              drop=[ip] + ([rp] if rp is not None else [])))
        # the request id
        if c.rid:
            for r in sorted(facts[0] - {c.rid})[:2] + [FRESH_RID]:
                rep = {ip: edit(c.inv_op.raw, {"request-id": r})}
                if rp is not None and _has(c.ret_op.raw, "request-id"):
                    rep[rp] = edit(c.ret_op.raw, {"request-id": r})
                out.append(Mutant("request-id", kkey, "%s %s request id -> %s" % (
                    c.f, c.rid, "fresh" if r == FRESH_RID else r), replace=rep))
        # an argument of the call (what was sent): the answer may no longer fit it
        for name in ARG_FIELDS.get(c.f, ()):
            if not _has(c.inv_op.raw, name):
                continue
            old = _get(c.inv_op.raw, name)
            for label, x in _arg_alternatives(name, old, facts):
                rep = {ip: edit(c.inv_op.raw, {name: x})}
                # a completion repeating an argument overrides it (history.Call);
                # a complete's result-b64 on the completion is the answer
                if rp is not None and _has(c.ret_op.raw, name) and \
                        not (c.f == "complete" and name == "result-b64"):
                    rep[rp] = edit(c.ret_op.raw, {name: x})
                out.append(Mutant("arg:" + name, kkey, "%s %s sent %s -> %s" % (
                    c.f, c.rid, name, label), replace=rep))
    # an answer moved before its cause: before the invocation of an earlier call
    for b in oks:
        for a in cs:
            if a is b or a.inv >= b.inv:
                continue
            out.append(Mutant("reorder", kkey, "%s %s moved before the invocation of %s %s" % (
                b.f, b.rid, a.f, a.rid), move=((src.p(b.inv_op), src.p(b.ret_op)),
                                               src.p(a.inv_op)),
                fresh_process=src.fresh_process))
    return out


def _final_members(src):
    members = []
    for e in src.events:
        if e.f == "final-phase":
            v = e.value
            d = dict(v) if isinstance(v, (dict, FrozenMap)) else {}
            k = _rawkey(d, "members")
            ms = d.get(k) if k is not None else None
            members = [str(m) for m in ms] if isinstance(ms, (list, tuple)) else []
    return members


def _drop_final_probes(src, kkey):
    """drop-final-probe mutants of one key (the rule is stated in the
    module doc)."""
    members = _final_members(src)
    if not members:
        return []
    out = []
    cs = src.bykey[kkey]
    if any(c.type in ("ok", "info") and not c.final for c in cs):
        for m in members:
            probes = [c for c in cs if c.final and c.node == m]
            if not any(c.type == "ok" for c in probes):
                continue
            drop = []
            for c in probes:
                drop.append(src.p(c.inv_op))
                if c.ret_op is not None:
                    drop.append(src.p(c.ret_op))
            out.append(Mutant("drop-final-probe", kkey, "the final probes through %s dropped" % m,
                              drop=drop))
    return out


# --- judging ---------------------------------------------------------------

class Score:
    def __init__(self):
        self.generated = self.legal = self.unjudged = self.kept = self.caught = 0
        self.by_kind = {}
        self.survivors = []          # (kind, kkey, what, changed lines, source, mutant)
        self.input_rejected = []     # (source path, kkey, verdict)
        self.too_large = 0
        self.candidates = 0
        self.seconds = {"reference": 0.0, "checker": 0.0}
        self.stopped = None
        # --audit: the anomalies the checker reports on legal mutants
        # ("RULE name" -> (count, first example))
        self.audit = None

    def line(self):
        pct = "%.1f %%" % (100.0 * self.caught / self.kept) if self.kept else "n/a"
        kinds = ", ".join("%s %d/%d" % (k, c, n) for k, (c, n) in sorted(self.by_kind.items()))
        return ("mutation score: %d/%d (%s), %d generated, %d legal (discarded), %d unjudged, "
                "by kind: %s" % (self.caught, self.kept, pct, self.generated, self.legal,
                                 self.unjudged, kinds or "none"))

    @property
    def ok(self):
        return self.kept > 0 and self.caught == self.kept and not self.input_rejected


def _key_calls(calls, events, kkey):
    """The mutated key's calls, as the model groups them (with the
    settings of the events)."""
    cs = [c for c in calls if c.f in MUTATED_FS and c.kkey == kkey]
    if not cs:
        return None, []
    groups = model.key_ops(cs, events)
    for k, g in groups.items():
        if g:
            return k, g
    return None, []


# A history of more ops than this is judged on projections first (below).
PROJECT_ABOVE = 300
# Anomalies whose verdict depends on the whole history (a share of the keys
# not searched, a rule that judged no case at all): on a projection they
# say nothing about the whole, so they never count as a catch there.
GLOBAL = {"search-skipped", "not-exercised"}
# With --max, the mutants taken per key (of as many kinds), so that a
# bounded run spreads over many keys and kinds.
PER_KEY = 3


class InputError(ValueError):
    """An input history the tool cannot start from."""


def _caught(src, mut, score):
    """Does the checker call the mutant INVALID? A large history is first
    checked as a projection (the mutated key's ops and every event): every
    rule but those in GLOBAL finds on a subset of the calls only anomalies
    it also finds on the whole (they are per key, or over pairs of calls),
    so a projection's fatal anomaly outside GLOBAL is a catch of the whole
    history. Otherwise (and for small histories always) the whole mutant
    history is checked: a survivor is always a verdict on the whole."""
    t0 = time.monotonic()
    try:
        if len(src.ops) > PROJECT_ABOVE:
            calls, events = pair(mut.ops(src, only=src.projection(mut.kkey)))
            res = checker.check_history(calls, events)
            if any(a.fatal and a.name not in GLOBAL for a in res.anomalies):
                return True
        calls, events = pair(mut.ops(src))
        return not checker.check_history(calls, events).valid
    finally:
        score.seconds["checker"] += time.monotonic() - t0


def judge(src, mut, score, ref_limit, ref_cache, ref_steps=reference.MAX_STEPS):
    """Judge one mutant, adding it to SCORE."""
    try:
        calls, events = pair(mut.ops(src, only=src.projection(mut.kkey)))
    except HistoryError:
        return                       # not a history: not a mutant at all
    score.generated += 1
    if mut.kind not in OUTSIDE_MODEL:
        t0 = time.monotonic()
        orig = ref_cache.get(mut.kkey)
        if orig is None:
            k, g = _key_calls(src.calls, src.events, mut.kkey)
            orig = reference.check_key(k, g, limit=ref_limit, max_steps=ref_steps)
            ref_cache[mut.kkey] = orig
            if orig.ok is False:
                score.input_rejected.append((src.path, mut.kkey, orig))
        if orig.ok is not True:
            score.seconds["reference"] += time.monotonic() - t0
            score.unjudged += 1
            return
        k, g = _key_calls(calls, events, mut.kkey)
        v = reference.check_key(k, g, limit=ref_limit, max_steps=ref_steps) if g else \
            reference.Verdict(True, 0, 0)
        score.seconds["reference"] += time.monotonic() - t0
        if v.ok is None:
            score.unjudged += 1
            return
        if v.ok:
            score.legal += 1
            if score.audit is not None:
                _audit(src, mut, score)
            return
    score.kept += 1
    caught = _caught(src, mut, score)
    c, n = score.by_kind.get(mut.kind, (0, 0))
    score.by_kind[mut.kind] = (c + caught, n + 1)
    if caught:
        score.caught += 1
    else:
        score.survivors.append((mut.kind, mut.kkey, mut.what, mut.changed_lines(src), src, mut))


# Anomalies a legal mutant may still get, because their rules are outside
# the per-key model: R7 (final probes), R25's log time across keys,
# LIN's log-time-real-time (log time across keys), and the GLOBAL ones. Any
# other on a legal mutant is a disagreement between a rule and the model: a
# false alarm of the rule, or a hole in the model.
OUTSIDE_RULES = {"final-probe-not-definite", "missing-final-probe", "log-time-backwards",
                 "log-time-real-time"}


def _audit(src, mut, score):
    """--audit: what the checker says of a legal mutant (on its projection;
    a legal mutant's anomalies are about its key)."""
    t0 = time.monotonic()
    calls, events = pair(mut.ops(src, only=src.projection(mut.kkey)))
    res = checker.check_history(calls, events)
    score.seconds["checker"] += time.monotonic() - t0
    for a in res.anomalies:
        if a.fatal and a.name not in GLOBAL:
            k = "%s %s" % (a.rule, a.name)
            n, ex = score.audit.get(k, (0, None))
            score.audit[k] = (n + 1, ex or (mut.kind, mut.kkey, mut.what, a.msg))


def disagreements(score):
    """The audit's anomalies that are not OUTSIDE_RULES: {"RULE name": (n, example)}."""
    return {k: v for k, v in (score.audit or {}).items()
            if k.split(" ", 1)[1] not in OUTSIDE_RULES}


def _spread(muts, n):
    """At most N of MUTS (already shuffled), each of another kind."""
    out, kinds = [], set()
    for m in muts:
        if m.kind not in kinds:
            kinds.add(m.kind)
            out.append(m)
            if len(out) == n:
                break
    return out


def run(paths, seed=0, max_mutants=0, max_seconds=0.0, ref_limit=reference.LIMIT,
        checked=False, ref_steps=reference.MAX_STEPS, audit=False):
    """Mutate and judge; returns the Score. Keys are taken in a seeded
    random order; without MAX_MUTANTS every mutant of every key small
    enough for the reference is judged, with it at most MAX_MUTANTS in all,
    PER_KEY per key, each of another kind; within MAX_SECONDS (0: no
    bound). Raises InputError when an input is not VALID (not checked
    again when CHECKED: the caller's checker already called it VALID)."""
    score = Score()
    if audit:
        score.audit = {}
    srcs = []
    for path in paths:
        try:
            src = Source(path)
        except HistoryError as e:
            raise HistoryError("%s: %s" % (path, e)) from None
        res = None if checked else checker.check_history(src.calls, src.events)
        if res is not None and not res.valid:
            raise InputError("%s: the checker calls it INVALID (%s): its mutants would test "
                             "nothing" % (path, ", ".join(sorted({a.name for a in res.anomalies
                                                                  if a.fatal}))))
        srcs.append(src)
    keys = []
    for src in srcs:
        for kkey in src.bykey:
            if src.sizes.get(kkey, 0) > ref_limit:
                score.too_large += 1
            else:
                keys.append((src, kkey))
    rng = random.Random(seed)
    rng.shuffle(keys)
    caches = {id(src): {} for src in srcs}
    t0 = time.monotonic()
    for src, kkey in keys:
        muts = key_mutants(src, kkey)
        score.candidates += len(muts)
        rng.shuffle(muts)
        if max_mutants:
            muts = _spread(muts, PER_KEY)
        for m in muts:
            if max_mutants and score.generated >= max_mutants:
                score.stopped = "--max %d" % max_mutants
                return score
            if max_seconds and time.monotonic() - t0 > max_seconds:
                score.stopped = "--max-seconds %g" % max_seconds
                return score
            judge(src, m, score, ref_limit, caches[id(src)], ref_steps)
    return score


def report(score, out=None, elapsed=None):
    out = out or sys.stdout
    for path, kkey, v in score.input_rejected:
        print("survivor: input key=%s of %s: the checker called the history VALID but the "
              "reference finds no linearization (%d calls)" % (dumps(list(kkey)), path, v.n),
              file=out)
    for kind, kkey, what, lines, src, _ in score.survivors:
        print("survivor: %s key=%s (%s): %s" % (kind, dumps(list(kkey)), src.path, what),
              file=out)
        for ln in lines:
            print("    " + ln, file=out)
    print("mutate: %d candidates on the keys taken%s; %d keys too large for the reference "
          "not mutated; reference %.2f s, checker %.2f s%s" % (
              score.candidates, " (stopped at %s)" % score.stopped if score.stopped else "",
              score.too_large, score.seconds["reference"],
              score.seconds["checker"],
              ", %.1f s in all" % elapsed if elapsed is not None else ""), file=out)
    if score.audit is not None:
        dis = disagreements(score)
        print("audit: %d legal mutants; the checker calls INVALID: %s; disagreements with the "
              "model: %d" % (score.legal, ", ".join(
                  "%s %d" % (k, n) for k, (n, _) in sorted(score.audit.items())) or "none",
                  sum(n for n, _ in dis.values())), file=out)
        for k, (n, (kind, kkey, what, msg)) in sorted(dis.items()):
            print("disagreement: %s on %d legal mutants, e.g. %s key=%s: %s: %s" % (
                k, n, kind, dumps(list(kkey)), what, msg), file=out)
    print(score.line(), file=out)
    if score.kept == 0:
        print("mutate: no mutant broke the contract: nothing was tested", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="mutate", description="Test the checker by mutation: mutants of VALID "
        "histories that the reference judge finds contract-breaking must be INVALID.")
    p.add_argument("history", nargs="+", help="VALID history.edn files")
    p.add_argument("--seed", type=int, default=0, help="order in which mutants are taken")
    p.add_argument("--max", type=int, default=0, metavar="N",
                   help="judge at most N mutants (default 0: all)")
    p.add_argument("--max-seconds", type=float, default=0.0, metavar="T",
                   help="stop taking mutants after T seconds (default 0: no bound)")
    p.add_argument("--ref-limit", type=int, default=reference.LIMIT,
                   help="the reference judges keys of at most this many calls (default %d)"
                   % reference.LIMIT)
    p.add_argument("--ref-steps", type=int, default=reference.MAX_STEPS, metavar="N",
                   help="the reference gives up on a key (unjudged) after N fold steps "
                   "(default %d)" % reference.MAX_STEPS)
    p.add_argument("--write", metavar="DIR", help="write each survivor as an EDN history here")
    p.add_argument("--audit", action="store_true",
                   help="also check every legal mutant and report the anomalies the checker "
                   "finds on them; one outside R7, R25's cross-key order and the threshold "
                   "rules is a disagreement between a rule and the model (exit 1)")
    p.add_argument("--checked", action="store_true",
                   help="the histories were already called VALID by the checker (a run's own "
                   "verdict): do not check them again first")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    t0 = time.monotonic()
    try:
        score = run(a.history, a.seed, a.max, a.max_seconds, a.ref_limit, a.checked,
                    a.ref_steps, a.audit)
    except (HistoryError, InputError) as e:
        print("mutate: %s" % e, file=sys.stderr)
        return 2
    report(score, elapsed=time.monotonic() - t0)
    if a.write and score.survivors:
        os.makedirs(a.write, exist_ok=True)
        for i, (kind, kkey, what, lines, src, mut) in enumerate(score.survivors):
            path = os.path.join(a.write, "survivor-%03d-%s.edn" % (i, kind.replace(":", "-")))
            with open(path, "w", encoding="utf-8") as fh:
                fh.write("; mutant of %s: %s %s\n" % (src.path, kind, what))
                fh.write(mut.text(src))
        print("mutate: %d survivors written to %s" % (len(score.survivors), a.write))
    return 0 if score.ok and not disagreements(score) else 1
