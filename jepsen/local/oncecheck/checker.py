"""jepsen/local/check: read a history, apply R1-R10 (+ LIN), print, exit.

Exit 0: valid; 1: at least one anomaly; 2: the history (or an option) is
unreadable, with a message naming the line.
"""

import argparse
import math
import sys
import time

from . import claims, events as ev, linear, timerules
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
    "LIN": "brute-force linearizability",
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
    "LIN": ("not-linearizable", "search-skipped"),
}
ANOMALIES.update(timerules.ANOMALIES)
WARNINGS = {"R1": ("request-id-on-two-keys",), "R10": ("multi-voter-change",)}

# --safety-only keeps these in the report without failing on them: the
# final probes' and the cluster's liveness after the heal. A lost
# acknowledgement (R7 lost-ack) is a safety violation and always fails.
LIVENESS = {"missing-final-probe", "final-probe-not-definite", "crash-in-log",
            "core-dump", "no-leader", "member-not-voter"}

# LIN: a run fails when more than this share of its keys was not searched
# (more than --linear-limit calls, or over the step budget). NONCE keys are
# covered exactly by R1-R5 (the cross-check), but IDEMPOTENT keys only by
# necessary conditions: a key LIN skips escapes the only complete check. At
# the default limit a 60 s run skips none of its keys; above 1 % the
# workload has outgrown the search and LIN would pass by not looking.
LIN_MAX_SKIPPED = 0.01


class Results:
    def __init__(self):
        self.anomalies = []
        self.skipped = {}
        self.stats = {}
        self.lin_note = ""

    def skip(self, rule, why):
        self.skipped.setdefault(rule, why)

    @property
    def valid(self):
        return not any(a.fatal for a in self.anomalies)


def check_history(calls, events, log_files=(), lin_limit=linear.LIMIT, safety_only=False,
                  lin_max_skipped=LIN_MAX_SKIPPED):
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
    lin = {"checked": 0, "invalid": 0, "calls": [], "budget": [], "seconds": 0.0}
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
            _search(res, lin, key, cs, lin_limit, any(a.fatal for a in found))
    if lin_limit <= 0:
        res.skip("LIN", "disabled")
    else:
        res.lin_note = _lin_skipped(res, lin, len(bykey), lin_limit, lin_max_skipped)
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
                     events=len(events), lin_checked=lin["checked"],
                     lin_invalid=lin["invalid"], lin_skipped=len(lin["calls"]) + len(lin["budget"]),
                     lin_skipped_calls=len(lin["calls"]), lin_skipped_budget=len(lin["budget"]),
                     lin_seconds=round(lin["seconds"], 3))
    res.anomalies += timerules.check(calls, events, res)
    return res


def _search(res, lin, key, cs, limit, rules_found):
    """LIN on one key: counted as searched, invalid or skipped (and why);
    reported only when the rules found nothing on the key."""
    t0 = time.monotonic()
    r = linear.check(cs, limit=limit)
    lin["seconds"] += time.monotonic() - t0
    if r.valid is None:
        lin[r.skipped].append((key, r.total))
        return
    lin["checked"] += 1
    lin["invalid"] += not r.valid
    if not r.valid and not rules_found:
        res.anomalies.append(claims.Anomaly(
            "LIN", "not-linearizable", key,
            "no linearization of the key's %d calls (rules found nothing: "
            "see the longest prefix below)" % r.total, r.reached or cs[:4]))


def _lin_skipped(res, lin, nkeys, limit, max_share):
    """Keys LIN did not search: a counted outcome (returned for the summary
    line), an anomaly above the threshold (LIN_MAX_SKIPPED)."""
    n = len(lin["calls"]) + len(lin["budget"])
    if not n:
        return ""
    why = "%d of %d keys not searched (%d with more than %d calls, %d over the step " \
          "budget)" % (n, nkeys, len(lin["calls"]), limit, len(lin["budget"]))
    if n > max_share * nkeys:
        first = (lin["calls"] + lin["budget"])[0]
        res.anomalies.append(claims.Anomaly(
            "LIN", "search-skipped", first[0],
            "%s: more than %g %% of the keys, so LIN would pass by not looking; "
            "first: %d calls" % (why, 100 * max_share, first[1])))
    return why


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
        elif rule in res.skipped:
            line = "skipped: " + res.skipped[rule]
        else:
            line = "ok"
            if rule == "LIN":
                line += " (%d keys searched in %.2f s" % (s["lin_checked"], s["lin_seconds"])
                if s["lin_invalid"]:
                    line += "; %d not linearizable, each reported by R1-R6" % s["lin_invalid"]
                if res.lin_note:
                    line += "; " + res.lin_note
                line += ")"
            if rule == "R5":
                line += " (%d :info maybe applied, %d :fail never applied)" % (
                    s["info"], s["fail"])
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
    p.add_argument("--linear-limit", type=int, default=linear.LIMIT,
                   help="brute-force (LIN) keys with at most this many calls (default "
                   "%d); 0 disables" % linear.LIMIT)
    p.add_argument("--linear-max-skipped", type=float, default=100 * LIN_MAX_SKIPPED,
                   metavar="PCT",
                   help="fail (LIN search-skipped) when more than PCT %% of the keys were "
                   "not searched (default %g)" % (100 * LIN_MAX_SKIPPED))
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
    if not 0 <= args.linear_max_skipped <= 100:
        print("check: --linear-max-skipped must be in [0, 100]", file=sys.stderr)
        return 2
    res = check_history(calls, events, args.logs, args.linear_limit, args.safety_only,
                        args.linear_max_skipped / 100.0)
    render(res, args.max_ops)
    if args.results:
        with open(args.results, "w", encoding="utf-8") as fh:
            fh.write(results_edn(res))
    return 0 if res.valid else 1
