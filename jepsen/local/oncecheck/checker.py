"""jepsen/local/check: read a history, apply R1-R10 (+ LIN), print, exit.

LIN is the verdict: every key's calls against the executable model of the
contract (model.py, search.py). The rules R1-R10 and R20-R25 are fast
explanations of why a history failed (and R7-R10 judge what the model does
not see: probes, liveness, replicas, raft).

Exit 0: valid; 1: at least one anomaly; 2: the history (or an option) is
unreadable, with a message naming the line.
"""

import argparse
import math
import sys
import time

from . import claims, events as ev, model, search, timerules
from .edn import dumps, Keyword
from .history import HistoryError, read_file, pair, CLIENT_FS

RULES = {
    "R1": "at most one accept (per owner token)",
    "R2": "single winner, single Complete",
    "R3": "the winner actually ran",
    "R4": "real-time order",
    "R5": ":fail never took effect",
    "R6": "first-result integrity",
    "R7": "acknowledged keys answered after heal",
    "R8": "liveness after heal",
    "R9": "replica agreement",
    "R10": "Raft invariants",
    "LIN": "linearizable against the model",
}
RULES.update(timerules.RULES)     # R20-R25: the time rules (timerules.py)

# Every anomaly the checker can report, by rule: each has a must-fail
# history in tests/histories that reports it and nothing of another rule
# (tests/test_histories.py test_every_rule_covered). Warnings never fail a
# run and are listed apart.
ANOMALIES = {
    "R1": ("double-accept", "re-accepted", "claim-after-complete"),
    "R2": ("conflicting-winner", "double-complete", "re-completed", "conflicting-first"),
    "R3": ("self-deny", "phantom-winner", "deny-op-named-winner", "denial-without-winner",
           "phantom-token", "phantom-completion", "in-progress-without-owner",
           "not-owner-without-record", "takeover-without-owner", "phantom-failure"),
    "R4": ("real-time", "complete-before-accept", "fenced-token-completed",
           "duplicate-before-complete", "fenced-without-takeover", "not-found-after-accept"),
    "R5": ("failed-op-took-effect",),
    "R6": ("duplicate-result", "first-result"),
    "R7": ("missing-final-probe", "final-probe-not-definite", "lost-ack"),
    "R8": ("crash-in-log", "core-dump", "no-leader", "member-not-voter"),
    "R9": ("replica-divergence", "state-divergence"),
    "R10": ("two-leaders", "config-disagreement"),
    "LIN": ("not-linearizable", "unjudged", "log-time-real-time"),
}
ANOMALIES.update(timerules.ANOMALIES)
WARNINGS = {"R1": ("request-id-on-two-keys",), "R10": ("multi-voter-change",),
            "LIN": ("outside-model",)}

# --safety-only keeps these in the report without failing on them: the
# final probes' and the cluster's liveness after the heal. A lost
# acknowledgement (R7 lost-ack) is a safety violation and always fails.
LIVENESS = {"missing-final-probe", "final-probe-not-definite", "crash-in-log",
            "core-dump", "no-leader", "member-not-voter"}

class Results:
    def __init__(self):
        self.anomalies = []
        self.skipped = {}
        self.stats = {}

    def skip(self, rule, why):
        self.skipped.setdefault(rule, why)

    @property
    def valid(self):
        return not any(a.fatal for a in self.anomalies)


def check_history(calls, events, log_files=(), budget=search.BUDGET, safety_only=False):
    res = Results()
    bykey = {}
    rid_keys = {}
    for c in calls:
        if c.f not in CLIENT_FS:
            continue
        bykey.setdefault(c.kkey, []).append(c)
        if c.rid:
            rid_keys.setdefault(c.rid, set()).add(c.kkey)
    for rid, ks in rid_keys.items():
        if len(ks) > 1:
            cs = [c for c in calls if c.rid == rid][:4]
            res.anomalies.append(claims.Anomaly(
                "R1", "request-id-on-two-keys", None,
                "request id %s is used on %d keys (a harness bug: ids are per call)" %
                (rid, len(ks)), cs, fatal=False))
    nwl = {"nonce": 0, "idempotent": 0}
    for key, cs in bykey.items():
        wl = claims.workload(cs)
        nwl[wl] += 1
        if wl == "nonce":
            found = claims.check_nonce(key, cs, rid_keys)
        else:
            found = claims.check_idempotent(key, cs, rid_keys)
        found += claims.check_first_result(key, cs)
        res.anomalies += found
    lin = _verdict(res, calls, events, budget)
    res.anomalies += ev.check_r7(calls, events, res)
    res.anomalies += ev.check_r8(calls, events, res, log_files)
    res.anomalies += ev.check_r9(events, res)
    res.anomalies += ev.check_r10(events, res)
    if safety_only:
        for a in res.anomalies:
            if a.name in LIVENESS:
                a.fatal = False
    res.stats = dict(calls=len(calls), keys=len(bykey), nonce_keys=nwl["nonce"],
                     idempotent_keys=nwl["idempotent"],
                     info=sum(1 for c in calls if c.type == "info"),
                     fail=sum(1 for c in calls if c.type == "fail"),
                     ok=sum(1 for c in calls if c.type == "ok"),
                     events=len(events), **lin)
    res.anomalies += timerules.check(calls, events, res)
    return res


def _verdict(res, calls, events, budget):
    """LIN: the model search on every key (search.check_key), the log time
    of answers across keys (search.check_realtime_log_time); returns the cost
    figures for the stats. A key the search could not finish within its
    budget is an anomaly of its own (unjudged): never a pass."""
    t0 = time.monotonic()
    keys = model.key_ops(calls, events)
    st = dict(lin_keys=len(keys), lin_calls=0, lin_steps=0, lin_invalid=0,
              lin_unjudged=0, lin_largest_calls=0, lin_largest_steps=0,
              lin_outside_model=0)
    outside = []
    for key, cs in keys.items():
        r = search.check_key(cs, budget)
        st["lin_calls"] += r.ncalls
        st["lin_steps"] += r.steps
        if r.ncalls > st["lin_largest_calls"]:
            st["lin_largest_calls"] = r.ncalls
        st["lin_largest_steps"] = max(st["lin_largest_steps"], r.steps)
        outside += [c for c in cs if model.unmodeled(c)]
        if not r.judged:
            st["lin_unjudged"] += 1
            res.anomalies.append(claims.Anomaly(
                "LIN", "unjudged", key, r.explain() + " (--search-budget)", cs[:4]))
        elif not r.ok:
            st["lin_invalid"] += 1
            shown = r.prefix[-3:] + ([r.stuck] if r.stuck is not None else [])
            res.anomalies.append(claims.Anomaly(
                "LIN", "not-linearizable", key, r.explain(),
                [c for c in shown if hasattr(c, "inv_op")]))
    st["lin_outside_model"] = len(outside)
    if outside:
        kinds = sorted({"%s %s" % (c.f, c.m.outcome) for c in outside})
        res.anomalies.append(claims.Anomaly(
            "LIN", "outside-model", None,
            "%d :ok answers the model does not decide (%s): taken as no effect" %
            (len(outside), ", ".join(kinds)), outside[:4], fatal=False))
    for a, b in search.check_realtime_log_time(calls):
        res.anomalies.append(claims.Anomaly(
            "LIN", "log-time-real-time", None,
            "raft group %s: an answer at log time %s was acknowledged before a call "
            "(another key) was invoked that was answered at log time %s (log time went back)" %
            (search._group(a), search.log_time(a), search.log_time(b)), [a, b]))
    st["lin_seconds"] = round(time.monotonic() - t0, 3)
    return st


def render(res, max_ops=8, out=None):
    out = out or sys.stdout
    s = res.stats
    print("history: %d calls (%d ok, %d fail, %d info) on %d keys (%d nonce, %d idempotent), "
          "%d events" % (s["calls"], s["ok"], s["fail"], s["info"], s["keys"],
                         s["nonce_keys"], s["idempotent_keys"], s["events"]), file=out)
    for a in res.anomalies:
        key = "" if a.key is None else " key=%s" % dumps(list(a.key))
        print("\n%s %s%s%s: %s" % (a.rule, a.name, key, "" if a.fatal else " (warning)",
                                   a.msg), file=out)
        shown = 0
        for c in a.calls:
            if shown >= max_ops:
                print("    ... (%d more calls)" % (len(a.calls) - shown), file=out)
                break
            print(c.show(), file=out)
            shown += 1
        for e in a.events[:max_ops]:
            print("    " + e.show(), file=out)
    print("", file=out)
    for rule in ["R%d" % i for i in range(1, 11)] + list(timerules.RULES) + ["LIN"]:
        bad = [a for a in res.anomalies if a.rule == rule and a.fatal]
        warn = [a for a in res.anomalies if a.rule == rule and not a.fatal]
        if bad:
            line = "FAIL (%d anomalies)" % len(bad)
            if rule == "LIN":
                line += " (%s)" % lin_cost(s)
        elif rule in res.skipped:
            line = "skipped: " + res.skipped[rule]
        else:
            line = "ok"
            if rule == "LIN":
                line += " (%s)" % lin_cost(s)
            if rule == "R5":
                line += " (%d :info maybe applied, %d :fail never applied)" % (
                    s["info"], s["fail"])
        if warn:
            line += ", %d warnings" % len(warn)
        print("%-4s %-38s %s" % (rule, RULES[rule], line), file=out)
    print("\n%s" % ("VALID" if res.valid else "INVALID"), file=out)


def lin_cost(s):
    """The search's cost, for the LIN line of the report."""
    return ("%d keys, %d calls, %d steps in %.2f s; largest key %d calls, most steps "
            "on a key %d; %d unjudged" % (
                s["lin_keys"], s["lin_calls"], s["lin_steps"], s["lin_seconds"],
                s["lin_largest_calls"], s["lin_largest_steps"], s["lin_unjudged"]))


def results_edn(res):
    K = Keyword
    anomalies = []
    for a in res.anomalies:
        anomalies.append({K("rule"): a.rule, K("name"): K(a.name),
                          K("key"): None if a.key is None else list(a.key),
                          K("fatal?"): a.fatal, K("message"): a.msg,
                          K("lines"): [c.inv_op.line for c in a.calls] +
                                      [e.line for e in a.events]})
    return dumps({K("valid?"): res.valid, K("stats"): {K(k): v for k, v in res.stats.items()},
                  K("skipped"): dict(res.skipped), K("anomalies"): anomalies}) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="check", description="Check a once Jepsen history (EDN) against the model of the "
        "contract (LIN, the verdict), R1-R10 and R20-R25.")
    p.add_argument("history", help="history.edn: one op map per line, or a vector of op maps")
    p.add_argument("--samples", action="append", default=[],
                   help="more EDN files of events (status samples, dumps); repeatable")
    p.add_argument("--logs", action="append", default=[],
                   help="node log file to scan for crashes (R8); repeatable")
    p.add_argument("--results", help="also write results.edn here")
    p.add_argument("--search-budget", type=int, default=search.BUDGET, metavar="STEPS",
                   help="the model search's budget per key, in expanded states (default "
                   "%d); a key that needs more is unjudged, and the history not VALID"
                   % search.BUDGET)
    p.add_argument("--safety-only", action="store_true",
                   help="report the final probes' and the cluster's liveness (R7 but "
                   "lost-ack, R8) but do not fail on them")
    p.add_argument("--max-ops", type=int, default=8, help="calls shown per anomaly")

    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        ops = read_file(args.history)
        calls, events = pair(ops)
        for path in args.samples:
            try:
                extra = read_file(path)
            except HistoryError as e:
                raise HistoryError("%s: %s" % (path, e)) from None
            for o in extra:
                o.pos = math.inf if o.is_client else o.pos + 10**12
                if o.is_client:
                    raise HistoryError("%s: line %d: client op in a samples file" % (path, o.line))
            events += extra
    except HistoryError as e:
        print("check: %s: %s" % (args.history, e), file=sys.stderr)
        return 2
    if args.search_budget < 0:
        print("check: --search-budget must be >= 0", file=sys.stderr)
        return 2
    res = check_history(calls, events, args.logs, args.search_budget, args.safety_only)
    render(res, args.max_ops)
    if args.results:
        with open(args.results, "w", encoding="utf-8") as fh:
            fh.write(results_edn(res))
    return 0 if res.valid else 1
