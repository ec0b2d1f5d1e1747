"""jepsen/local/check: read a history, apply R1-R10 (+ LIN), print, exit.

Exit 0: valid; 1: at least one anomaly; 2: the history (or an option) is
unreadable, with a message naming the line.
"""

import argparse
import math
import sys

from . import claims, events as ev, linear, timerules
from .edn import dumps, Keyword
from .history import HistoryError, read_file, pair, CLIENT_FS

RULES = {
    "R1": "at most one accept (per owner token)",
    "R2": "single winner, single Complete",
    "R3": "the winner actually ran",
    "R4": "real-time order",
    "R5": ":info maybe, :fail never",
    "R6": "first-result integrity",
    "R7": "final probes exist",
    "R8": "liveness after heal",
    "R9": "replica agreement",
    "R10": "Raft invariants",
    "LIN": "brute-force linearizability",
}
RULES.update(timerules.RULES)     # R20-R25: the time rules (timerules.py)


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


def check_history(calls, events, log_files=(), lin_limit=12, safety_only=False):
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
    lin_checked = lin_skipped = lin_invalid = 0
    for key, cs in bykey.items():
        wl = linear.workload(cs)
        nwl[wl] += 1
        if wl == "nonce":
            found = claims.check_nonce(key, cs, rid_keys)
        else:
            found = claims.check_idempotent(key, cs, rid_keys)
        found += claims.check_first_result(key, cs)
        res.anomalies += found
        if lin_limit > 0:
            r = linear.check(cs, limit=lin_limit)
            if r is None:
                lin_skipped += 1
            else:
                lin_checked += 1
                lin_invalid += not r.valid
                if not r.valid and not any(a.fatal for a in found):
                    res.anomalies.append(claims.Anomaly(
                        "LIN", "not-linearizable", key,
                        "no linearization of the key's %d calls (rules found nothing: "
                        "see the longest prefix below)" % r.total, r.reached or cs[:4]))
    if lin_limit <= 0:
        res.skip("LIN", "disabled")
    elif lin_skipped:
        res.skip("LIN", "%d keys with more than %d calls not searched" % (lin_skipped, lin_limit))
    res.anomalies += ev.check_r7(calls, events, res)
    res.anomalies += ev.check_r8(calls, events, res, log_files)
    res.anomalies += ev.check_r9(events, res)
    res.anomalies += ev.check_r10(events, res)
    if safety_only:
        for a in res.anomalies:
            if a.rule in ("R7", "R8"):
                a.fatal = False
    res.stats = dict(calls=len(calls), keys=len(bykey), nonce_keys=nwl["nonce"],
                     idempotent_keys=nwl["idempotent"],
                     info=sum(1 for c in calls if c.type == "info"),
                     fail=sum(1 for c in calls if c.type == "fail"),
                     ok=sum(1 for c in calls if c.type == "ok"),
                     events=len(events), lin_checked=lin_checked,
                     lin_invalid=lin_invalid)
    res.anomalies += timerules.check(calls, events, res)
    return res


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
        if rule == "R5":
            line = "applied (%d :info maybe applied, %d :fail never applied)" % (
                s["info"], s["fail"])
        elif rule == "LIN" and s["lin_invalid"]:
            line = "FAIL (%d of %d keys searched not linearizable; %d found by LIN alone)" % (
                s["lin_invalid"], s["lin_checked"], len(bad))
        elif bad:
            line = "FAIL (%d anomalies)" % len(bad)
        elif rule in res.skipped:
            line = "skipped: " + res.skipped[rule]
        else:
            line = "ok"
            if rule == "LIN":
                line += " (%d keys searched)" % s["lin_checked"]
        if warn:
            line += ", %d warnings" % len(warn)
        print("%-4s %-38s %s" % (rule, RULES[rule], line), file=out)
    print("\n%s" % ("VALID" if res.valid else "INVALID"), file=out)


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
        prog="check", description="Check a once Jepsen history (EDN) against R1-R10.")
    p.add_argument("history", help="history.edn: one op map per line, or a vector of op maps")
    p.add_argument("--samples", action="append", default=[],
                   help="more EDN files of events (status samples, dumps); repeatable")
    p.add_argument("--logs", action="append", default=[],
                   help="node log file to scan for crashes (R8); repeatable")
    p.add_argument("--results", help="also write results.edn here")
    p.add_argument("--linear-limit", type=int, default=12,
                   help="brute-force (LIN) keys with at most this many calls; 0 disables")
    p.add_argument("--safety-only", action="store_true",
                   help="report R7/R8 but do not fail on them")
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
    res = check_history(calls, events, args.logs, args.linear_limit, args.safety_only)
    render(res, args.max_ops)
    if args.results:
        with open(args.results, "w", encoding="utf-8") as fh:
            fh.write(results_edn(res))
    return 0 if res.valid else 1
