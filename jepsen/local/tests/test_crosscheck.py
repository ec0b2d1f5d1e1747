"""Brute-force cross-check: the rules (claims.py) against the model search.

The verdict is LIN, the search (search.py) through the model of the
contract (model.py); R1-R6 are its fast explanations. On random small
histories without log time:

NONCE keys: R1-R5 agree exactly with the search. STALE answers are left
out of that comparison: the rules give them no effect (jepsen/README.md,
"Limits"), the model decides them (a STALE needs an absent record); on a
key with STALE answers the rules must never flag what the search finds
linearizable, and must agree exactly with it on the key without them.
IDEMPOTENT keys: the rules are necessary conditions: they must never flag
a linearizable key (soundness); the share of non-linearizable keys they
catch is printed (LIN catches the rest in jepsen/local/check).

The generators write answers in docs/state-machine.md's shapes: only
ACCEPTED, COMPLETED, RELEASED and FAILED (a release's) say retry=true, and a
STALE answers a claim that sent ts and window. The perturbed histories
break the contract where the NONCE rules can see it (an outcome, a first
request id, an ACCEPTED's retry flag, a :fail), so that they stay exact.
"""
import os
import random
import unittest

from tests.util import INF, history_text, calls_of, by_key, rules_valid
from oncecheck import model, search

N = int(os.environ.get("ONCECHECK_CROSS_N", "3000"))
SEED = int(os.environ.get("ONCECHECK_SEED", "0"))
KEYS = ["k0", "k1"]


def _spec(i, key, rid, inv, ret, typ, res, kind="NONCE", f="claim", extra=None):
    args = {"scope": "s", "key": key, "request-id": rid, "node": "127.0.1.%d:7101" % (i % 3 + 1),
            "kind": kind if f == "claim" else None}
    if extra:
        args.update(extra)
    return {"p": i, "f": f, "inv": inv, "ret": INF if typ == "info" and random.random() < 0.5 else ret,
            "type": typ, "args": args, "res": res}


def nonce_random(rng):
    specs, rids = [], {k: [] for k in KEYS}
    for i in range(rng.randint(1, 8)):
        key = rng.choice(KEYS)
        if rids[key] and rng.random() < 0.3:
            rid = rng.choice(rids[key])
        else:
            rid = "r%d" % i
            rids[key].append(rid)
        inv = rng.uniform(0, 20)
        ret = inv + rng.uniform(0.5, 8)
        typ = rng.choices(["ok", "fail", "info"], [60, 15, 25])[0]
        res, extra = {}, None
        if typ == "ok":
            x = rng.random()
            if x < 0.4:
                res = {"outcome": "ACCEPTED", "retry": rng.random() < 0.3,
                       "first-request-id": rid if rng.random() < 0.9 else rng.choice(rids[key] + ["zz"])}
            elif x < 0.95:
                # a denial may name no first request id (R3 denial-without-winner)
                res = {"outcome": "REPLAYED", "retry": False,
                       "first-request-id": rng.choice(rids[key] + ["zz", rid, None])}
            else:
                # a claim that sent a ts and window, answered STALE (the
                # state machine's only source of it): then its record was
                # absent; the others send none, so their records live on
                res = {"outcome": "STALE", "retry": False}
                extra = {"ts": 100000, "window-ms": 1000}
        elif typ == "fail":
            res = {"error": "UNAVAILABLE", "applied": "false"}
        else:
            res = {"error": "DEADLINE_EXCEEDED", "applied": "unknown"}
        specs.append(_spec(i, key, rid, inv, ret, typ, res, extra=extra))
    return specs


def nonce_system(rng, perturb):
    """A correct system's history (then maybe one answer changed)."""
    specs, owner, rids = [], {}, {k: [] for k in KEYS}
    calls = []
    for i in range(rng.randint(1, 8)):
        key = rng.choice(KEYS)
        if rids[key] and rng.random() < 0.3:
            rid = rng.choice(rids[key])
        else:
            rid = "r%d" % i
            rids[key].append(rid)
        inv = rng.uniform(0, 20)
        ret = inv + rng.uniform(0.5, 8)
        calls.append(dict(i=i, key=key, rid=rid, inv=inv, ret=ret, p=rng.uniform(inv, ret)))
    for c in sorted(calls, key=lambda c: c["p"]):
        typ = rng.choices(["ok", "fail", "info"], [70, 10, 20])[0]
        applied = typ == "ok" or (typ == "info" and rng.random() < 0.5)
        res = {}
        if applied:
            w = owner.get(c["key"])
            if w is None:
                owner[c["key"]] = c["rid"]
                res = {"outcome": "ACCEPTED", "retry": False, "first-request-id": c["rid"]}
            elif w == c["rid"]:
                res = {"outcome": "ACCEPTED", "retry": True, "first-request-id": w}
            else:
                res = {"outcome": "REPLAYED", "retry": False, "first-request-id": w}
        if typ == "fail":
            res = {"error": "UNAVAILABLE", "applied": "false"}
        elif typ == "info":
            res = {"error": "DEADLINE_EXCEEDED", "applied": "unknown"}
        c["typ"], c["res"] = typ, res
    if perturb:
        oks = [c for c in calls if c["typ"] == "ok"]
        if oks:
            c = rng.choice(oks)
            r = c["res"]
            m = rng.randrange(4)
            if m == 2 and r["outcome"] != "ACCEPTED":
                m = 0                 # a REPLAYED never says retry=true
            if m == 0:
                # the other outcome, in its own shape (retry=false)
                r["outcome"] = "REPLAYED" if r["outcome"] == "ACCEPTED" else "ACCEPTED"
                r["retry"] = False
            elif m == 1:
                r["first-request-id"] = rng.choice(rids[c["key"]] + ["zz", None])
            elif m == 2:
                r["retry"] = not r["retry"]
            else:
                c["typ"] = "fail"
                c["res"] = {"error": "UNAVAILABLE", "applied": "false"}
    return [_spec(c["i"], c["key"], c["rid"], c["inv"], c["ret"], c["typ"], c["res"]) for c in calls]


def idem_system(rng, perturb):
    """Claims, completes and releases on two keys, answered by a simulated
    correct state machine in linearization order; then maybe perturbed."""
    calls, rids, issued = [], {k: [] for k in KEYS}, {k: [] for k in KEYS}
    state = {k: dict(st=None, owner=None, tok=None, att=0, res=None, first=None) for k in KEYS}
    counter = [10]
    for i in range(rng.randint(1, 8)):
        key = rng.choice(KEYS)
        f = rng.choices(["claim", "complete", "release"], [55, 35, 10])[0]
        inv = rng.uniform(0, 20)
        ret = inv + rng.uniform(0.5, 8)
        calls.append(dict(i=i, key=key, f=f, inv=inv, ret=ret, p=rng.uniform(inv, ret)))
    for c in sorted(calls, key=lambda c: c["p"]):
        key, s = c["key"], state[c["key"]]
        typ = rng.choices(["ok", "fail", "info"], [75, 10, 15])[0]
        applied = typ == "ok" or (typ == "info" and rng.random() < 0.5)
        res, extra = {}, {}
        if c["f"] == "claim":
            if rids[key] and rng.random() < 0.2:
                rid = rng.choice(rids[key])
            else:
                rid = "r%d" % c["i"]
                rids[key].append(rid)
            c["rid"] = rid

            def accept(takeover):
                counter[0] += 1
                tok = "1:%d:0" % counter[0]
                s.update(st="PENDING", owner=rid, tok=tok, att=s["att"] + 1, res=None)
                if s["first"] is None:
                    s["first"] = rid
                if typ == "ok":       # the client only learns tokens it was given
                    issued[key].append(tok)
                return {"outcome": "ACCEPTED", "retry": False, "owner-token": tok,
                        "owner-attempt": s["att"], "first-request-id": s["first"]}
            if applied:
                if s["st"] is None or s["st"] == "RELEASED":
                    res = accept(False)
                elif s["st"] == "PENDING" and s["owner"] == rid:
                    res = {"outcome": "ACCEPTED", "retry": True, "owner-token": s["tok"],
                           "owner-attempt": s["att"], "first-request-id": s["first"]}
                elif s["st"] == "PENDING":
                    if rng.random() < 0.3:
                        res = accept(True)
                    else:
                        res = {"outcome": "IN_PROGRESS", "first-request-id": s["first"]}
                elif s["st"] == "COMPLETED":
                    res = {"outcome": "DUPLICATE", "result-b64": s["res"], "first-request-id": s["first"]}
                else:
                    res = {"outcome": "FAILED", "first-request-id": s["first"]}
        else:
            c["rid"] = "q%d" % c["i"]
            tok = rng.choice(issued[key]) if issued[key] and rng.random() < 0.85 else "1:99:0"
            extra["owner-token"] = tok
            if c["f"] == "complete":
                x = rng.choice(["eA==", "eQ==", "ejE="])
                extra["result-b64"] = x
                if applied:
                    if s["st"] is None:
                        res = {"outcome": "NOT_FOUND"}
                    elif s["tok"] != tok:
                        res = {"outcome": "NOT_OWNER"}
                    elif s["st"] == "PENDING":
                        s.update(st="COMPLETED", res=x)
                        res = {"outcome": "COMPLETED", "retry": False, "result-b64": x}
                    elif s["st"] == "COMPLETED":
                        res = {"outcome": "COMPLETED", "retry": True, "result-b64": s["res"]}
                    else:
                        res = {"outcome": "CONFLICT"}
            else:
                term = rng.random() < 0.3
                extra["terminal"] = term
                if applied:
                    if s["st"] is None:
                        res = {"outcome": "NOT_FOUND"}
                    elif s["tok"] != tok:
                        res = {"outcome": "NOT_OWNER"}
                    elif s["st"] == "PENDING" or (s["st"] == "RELEASED" and term):
                        s["st"] = "FAILED" if term else "RELEASED"
                        res = {"outcome": s["st"], "retry": False}
                    elif s["st"] == "FAILED" or (s["st"] == "RELEASED" and not term):
                        # FAILED + the same token: FAILED retry, terminal or not
                        res = {"outcome": s["st"], "retry": True}
                    else:
                        res = {"outcome": "CONFLICT"}
        if typ == "fail":
            res = {"error": "UNAVAILABLE", "applied": "false"}
        elif typ == "info":
            res = {"error": "DEADLINE_EXCEEDED", "applied": "unknown"}
        c["typ"], c["res"], c["extra"] = typ, res, extra
    if perturb:
        oks = [c for c in calls if c["typ"] == "ok"]
        if oks:
            c = rng.choice(oks)
            r = c["res"]
            m = rng.randrange(6)
            if m == 0:
                r["outcome"] = rng.choice(["ACCEPTED", "IN_PROGRESS", "DUPLICATE", "COMPLETED",
                                           "NOT_OWNER"] if c["f"] != "release" else ["RELEASED", "NOT_OWNER"])
            elif m == 1 and "owner-token" in r:
                r["owner-token"] = rng.choice(issued[c["key"]] + ["1:98:0"])
            elif m == 2 and "result-b64" in r:
                r["result-b64"] = "Ync="
            elif m == 3:
                r["retry"] = not r.get("retry", False)
            elif m == 4 and "owner-attempt" in r:
                r["owner-attempt"] = max(1, r["owner-attempt"] + rng.choice([-1, 1]))
            else:
                c["typ"] = "fail"
                c["res"] = {"error": "UNAVAILABLE", "applied": "false"}
    return [_spec(c["i"], c["key"], c["rid"], c["inv"], c["ret"], c["typ"], c["res"],
                  kind="IDEMPOTENT", f=c["f"], extra=c["extra"]) for c in calls]


def _lin(cs):
    """The search's verdict on one key's calls (model.key_ops' list)."""
    r = search.check_key(cs)
    assert r.judged, "a small random key ran out of the search's budget"
    return r.ok


def _stale(c):
    return c.type == "ok" and c.outcome == "STALE"


def judge(specs):
    """(key, calls, rules valid, search valid, search valid without the
    key's STALE answers, anomalies) per key."""
    calls, events = calls_of(history_text(specs))
    out = []
    for key, cs in by_key(calls).items():
        rv, found = rules_valid(cs)
        lv = _lin(model.key_ops(cs, events)[key])
        rest = [c for c in cs if not _stale(c)]
        lv_rest = lv if len(rest) == len(cs) else \
            (_lin(model.key_ops(rest, events)[key]) if rest else True)
        out.append((key, cs, rv, lv, lv_rest, found))
    return out


class CrossCheck(unittest.TestCase):
    def _mismatch(self, cs, rv, lv, found):
        return "rules %s, search %s, anomalies %r\n%s" % (
            rv, lv, found, "\n".join(c.show() for c in cs))

    def test_nonce_random_exact(self):
        rng = random.Random(SEED + 5)
        random.seed(SEED + 5)
        n = bad = stale = stale_invalid = 0
        for _ in range(N):
            for key, cs, rv, lv, lv_rest, found in judge(nonce_random(rng)):
                n += 1
                bad += rv != lv_rest
                self.assertEqual(rv, lv_rest, self._mismatch(cs, rv, lv_rest, found))
                if lv_rest is not lv:
                    # only a STALE the model cannot place (the record was
                    # live) makes the difference: the rules see none
                    stale_invalid += 1
                    self.assertFalse(lv, self._mismatch(cs, rv, lv, found))
                stale += len(cs) != sum(1 for c in cs if not _stale(c))
        self.assertGreater(stale_invalid, 0)
        print("\n  nonce random: %d keys, %d mismatches; %d keys with STALE answers, %d "
              "of them not linearizable only by a STALE" % (n, bad, stale, stale_invalid))

    def test_nonce_system_exact(self):
        rng = random.Random(SEED + 11)
        random.seed(SEED + 11)
        n = invalid = 0
        for j in range(N):
            for key, cs, rv, lv, _, found in judge(nonce_system(rng, perturb=j % 2 == 1)):
                n += 1
                invalid += not lv
                self.assertEqual(rv, lv, self._mismatch(cs, rv, lv, found))
                if j % 2 == 0:
                    self.assertTrue(lv, self._mismatch(cs, rv, lv, found))
        self.assertGreater(invalid, 0)
        print("\n  nonce system-generated: %d keys, %d invalid, 0 mismatches" % (n, invalid))

    def test_idempotent_sound(self):
        rng = random.Random(SEED + 23)
        random.seed(SEED + 23)
        n = invalid = caught = 0
        for j in range(N):
            for key, cs, rv, lv, _, found in judge(idem_system(rng, perturb=j % 2 == 1)):
                n += 1
                if j % 2 == 0:
                    self.assertTrue(lv, "simulated correct history not linearizable:\n" +
                                    self._mismatch(cs, rv, lv, found))
                if lv:
                    self.assertTrue(rv, "false alarm:\n" + self._mismatch(cs, rv, lv, found))
                else:
                    invalid += 1
                    caught += not rv
        self.assertGreater(invalid, 0)
        print("\n  idempotent: %d keys, %d not linearizable, rules catch %d (%.0f%%), "
              "0 false alarms" % (n, invalid, caught, 100.0 * caught / max(invalid, 1)))


if __name__ == "__main__":
    unittest.main()
