"""search.check_key: real-time order, :info freedom, the budget, the
explanation, and memoization keeping wide keys cheap."""
import unittest

from tests.util import INF, history_text
from oncecheck import model, search
from oncecheck.history import read_ops, pair


def key_calls(specs):
    calls, events = pair(read_ops(history_text(specs)))
    keys = model.key_ops(calls, events)
    assert len(keys) == 1
    return list(keys.values())[0]


def c(p, rid, inv, ret, typ="ok", f="claim", **res):
    args = {"scope": "s", "key": "k", "request-id": rid}
    return dict(p=p, f=f, inv=inv, ret=ret, type=typ, args=args,
                res={k.replace("_", "-"): v for k, v in res.items()})


class Search(unittest.TestCase):
    def test_real_time_order(self):
        # REPLAYED naming a, answered before a was invoked: impossible
        late = [c(0, "b", 1, 2, outcome="REPLAYED", first_request_id="a"),
                c(1, "a", 3, 4, outcome="ACCEPTED", retry=False)]
        r = search.check_key(key_calls(late))
        self.assertTrue(r.judged)
        self.assertFalse(r.ok)
        # overlapping: a may take effect first
        both = [c(0, "b", 1, 4, outcome="REPLAYED", first_request_id="a"),
                c(1, "a", 2, 3, outcome="ACCEPTED", retry=False)]
        self.assertTrue(search.check_key(key_calls(both)).ok)

    def test_info_after_its_invocation_or_never(self):
        ok = [c(0, "a", 1, INF, typ="info"),
              c(1, "b", 2, 3, outcome="REPLAYED", first_request_id="a")]
        self.assertTrue(search.check_key(key_calls(ok)).ok)
        bad = [c(1, "b", 1, 2, outcome="REPLAYED", first_request_id="a"),
               c(0, "a", 3, INF, typ="info")]
        self.assertFalse(search.check_key(key_calls(bad)).ok)
        never = [c(0, "a", 1, INF, typ="info"),
                 c(1, "b", 2, 3, outcome="ACCEPTED", retry=False)]
        self.assertTrue(search.check_key(key_calls(never)).ok)

    def test_fail_takes_no_part(self):
        calls = [c(0, "a", 1, 2, typ="fail", applied="false"),
                 c(1, "b", 3, 4, outcome="REPLAYED", first_request_id="a")]
        r = search.check_key(key_calls(calls))
        self.assertFalse(r.ok)
        self.assertEqual(r.ncalls, 1)

    def test_hidden_application_only_before_its_partner(self):
        # a's answer ACCEPTED retry=true: its hidden first application came
        # first; b, overlapping, may be REPLAYED naming a
        calls = [c(0, "a", 1, 4, outcome="ACCEPTED", retry=True, first_request_id="a"),
                 c(1, "b", 2, 3, outcome="REPLAYED", first_request_id="a")]
        self.assertTrue(search.check_key(key_calls(calls)).ok)
        # b invoked after a's answer cannot be ACCEPTED (the hidden
        # application is not free to take effect after it)
        calls = [c(0, "a", 1, 2, outcome="ACCEPTED", retry=True, first_request_id="a"),
                 c(1, "b", 3, 4, outcome="ACCEPTED", retry=False, first_request_id="b")]
        self.assertFalse(search.check_key(key_calls(calls)).ok)

    def test_budget_and_explanation(self):
        calls = key_calls([c(0, "a", 1, 2, outcome="ACCEPTED", retry=False),
                           c(1, "b", 3, 4, outcome="REPLAYED", first_request_id="a"),
                           c(2, "c", 5, 6, outcome="ACCEPTED", retry=False)])
        r = search.check_key(calls, budget=1)
        self.assertFalse(r.judged)
        self.assertFalse(r.ok)
        self.assertIn("not judged", r.explain())
        r = search.check_key(calls)
        self.assertTrue(r.judged)
        self.assertFalse(r.ok)
        self.assertEqual([x.m.rid for x in r.prefix], ["a", "b"])
        self.assertEqual(r.stuck.m.rid, "c")
        self.assertIn("longest linearizable prefix has 2 calls", r.explain())
        self.assertIn("claim c", r.explain())
        self.assertGreater(r.steps, 0)
        self.assertGreaterEqual(r.seconds, 0)

    def test_many_overlapping_info_calls_stay_cheap(self):
        # 14 concurrent :info claims and one REPLAYED naming the 7th: the
        # memo on (state, placed) keeps it far from 2^14 orders
        specs = [c(i, "r%d" % i, 1 + i, INF, typ="info") for i in range(14)]
        specs.append(c(99, "x", 20, 21, outcome="REPLAYED", first_request_id="r7"))
        r = search.check_key(key_calls(specs))
        self.assertTrue(r.ok)
        self.assertLess(r.steps, 200)
        specs[-1] = c(99, "x", 20, 21, outcome="REPLAYED", first_request_id="zz")
        r = search.check_key(key_calls(specs))
        self.assertTrue(r.judged)
        self.assertFalse(r.ok)

    def test_log_time_real_time_across_keys(self):
        def h(lt2, tok2):
            specs = [dict(p=0, f="claim", inv=1, ret=2, type="ok",
                          args={"scope": "s", "key": "k1", "request-id": "a",
                                "kind": "IDEMPOTENT"},
                          res={"outcome": "ACCEPTED", "log-time-ms": 5000,
                               "owner-token": "1:10:0"}),
                     dict(p=1, f="claim", inv=3, ret=4, type="ok",
                          args={"scope": "s", "key": "k2", "request-id": "b",
                                "kind": "IDEMPOTENT"},
                          res={"outcome": "ACCEPTED", "log-time-ms": lt2,
                               "owner-token": tok2})]
            calls, _ = pair(read_ops(history_text(specs)))
            return search.check_realtime_log_time(calls)
        self.assertEqual(h(5000, "1:11:0"), [])
        self.assertEqual(len(h(4999, "1:11:0")), 1)
        self.assertEqual(h(4999, "2:11:0"), [])     # another group: its own clock


if __name__ == "__main__":
    unittest.main()


class Simulated(unittest.TestCase):
    """Histories of a concrete single-key state machine (numbers, not
    bounds: docs/state-machine.md applied at increasing log times) with
    overlapping calls, lost replies (:info, applied or not) and refusals
    (:fail): the symbolic search must find every one linearizable (no
    false alarm of the bounds: the mutation tests judge the other way).
    Answers carry every field oncectl prints, as src/fsm fills them."""

    W, K = 4000, 1000

    def sim(self, rng, idem):
        W, K = self.W, self.K
        st = {"rec": None, "now": 20000, "idx": 10}   # ts stay >= 0
        lines = ['{:type :info, :process :nemesis, :f :time-settings, '
                 ':value {:max-window-ms %d :max-skew-ms %d}}' % (W, K)]
        tokens = []
        known = []
        free = list(range(4))
        open_ = []           # [process, args, answer or None, applied]
        ncalls = 0

        def apply(a):
            st["now"] += rng.choice([0, 1, 400, 1500, 2999, 3000])
            st["idx"] += 1
            now, rec = st["now"], st["rec"]
            if rec is not None and rec["E"] <= now:
                rec = st["rec"] = None
            r = {"log-time-ms": now}

            def show(own):
                r.update({"first-request-id": rec["first"], "first-time-ms": rec["F"],
                          "first-index": rec["fi"], "expires-ms": rec["E"],
                          "kind": rec["kind"], "state": rec["st"]})
                if rec["kind"] == "IDEMPOTENT":
                    r.update({"owner-attempt": rec["att"], "lease-expires-ms": rec["L"]})
                    if own:
                        r["owner-token"] = rec["tok"]
                if rec["st"] == "COMPLETED":
                    r["result-b64"] = rec["res"]
                if rec["st"] == "FAILED":
                    r["stored-error"] = rec["err"]

            def accept(take):
                tok = "1:%d:0" % st["idx"]
                tokens.append(tok)
                if take:
                    rec.update(st="PENDING", owner=a["rid"], tok=tok, att=rec["att"] + 1,
                               L=now + a["lease"])
                    rec["E"] = max(rec["E"], now + 1, rec["L"])
                else:
                    E = max(now + 1, (a["ts"] + W + K) if "ts" in a else now + 86400000)
                    n = {"kind": a["kind"], "first": a["rid"], "F": now, "fi": st["idx"],
                         "E": E, "st": "SEEN"}
                    if a["kind"] == "IDEMPOTENT":
                        n.update(st="PENDING", owner=a["rid"], tok=tok, att=1,
                                 L=now + a["lease"])
                        n["E"] = max(n["E"], n["L"])
                    st["rec"] = n
                return "ACCEPTED"

            def window():
                if "ts" not in a:
                    return None
                if a["ts"] > now + K:
                    return "FUTURE"
                if now > a["w"] and a["ts"] < now - a["w"]:
                    return "STALE"
                return None

            f = a["f"]
            if f == "claim":
                if rec is None:
                    o = window() or accept(False)
                    rec = st["rec"]
                    if o == "ACCEPTED":
                        show(True)
                    r.update(outcome=o, retry=False)
                    return r
                if rec["kind"] != a["kind"]:
                    show(False)
                    r.update(outcome="CONFLICT", retry=False)
                    return r
                if rec["kind"] == "NONCE":
                    own = rec["first"] == a["rid"]
                    show(own)
                    r.update(outcome="ACCEPTED" if own else "REPLAYED", retry=own)
                    return r
                if rec["st"] == "PENDING" and rec["owner"] == a["rid"]:
                    show(True)
                    r.update(outcome="ACCEPTED", retry=True)
                    return r
                if rec["st"] == "PENDING" and rec["L"] > now:
                    show(False)
                    r.update(outcome="IN_PROGRESS", retry=False, **{"retry-after-ms":
                                                                     rec["L"] - now})
                    return r
                if rec["st"] in ("PENDING", "RELEASED"):
                    o = window()
                    if o:
                        show(False)
                        r.update(outcome=o, retry=False)
                        return r
                    accept(True)
                    show(True)
                    r.update(outcome="ACCEPTED", retry=False)
                    return r
                show(False)
                r.update(outcome="DUPLICATE" if rec["st"] == "COMPLETED" else "FAILED",
                         retry=False)
                return r
            if rec is None:
                r.update(outcome="NOT_FOUND", retry=False)
                return r
            if rec["kind"] == "NONCE":
                show(False)
                r.update(outcome="CONFLICT", retry=False)
                return r
            if rec["tok"] != a["tok"]:
                show(False)
                r.update(outcome="NOT_OWNER", retry=False)
                return r
            s0 = rec["st"]
            if f == "complete":
                if s0 == "PENDING":
                    rec.update(st="COMPLETED", res=a["res"])
                    o, rt = "COMPLETED", False
                elif s0 == "COMPLETED":
                    o, rt = "COMPLETED", True
                else:
                    o, rt = "CONFLICT", False
            else:
                if s0 in ("PENDING", "RELEASED") and a["term"]:
                    rec.update(st="FAILED", err="declined")
                    o, rt = "FAILED", False
                elif s0 in ("PENDING", "RELEASED"):
                    rec["st"] = "RELEASED"
                    o, rt = "RELEASED", s0 == "RELEASED"
                elif s0 == "FAILED":
                    o, rt = "FAILED", True
                else:
                    o, rt = "CONFLICT", False
            show(o != "CONFLICT")
            r.update(outcome=o, retry=rt)
            return r

        def edn(d):
            return "{" + " ".join(":%s %s" % (k, '"%s"' % v if isinstance(v, str) else
                                               ("true" if v is True else "false")
                                               if isinstance(v, bool) else v)
                                  for k, v in d.items()) + "}"

        for _ in range(60):
            x = rng.random()
            if free and ncalls < 9 and x < 0.35:
                p = free.pop(rng.randrange(len(free)))
                ncalls += 1
                f = "claim" if not idem or not known or rng.random() < 0.5 else \
                    rng.choice(["complete", "release"])
                a = {"f": f, "rid": "r%d" % rng.randrange(5)}
                inv = {"scope": "s", "key": "k", "request-id": a["rid"]}
                if f == "claim":
                    a["kind"] = "IDEMPOTENT" if idem else "NONCE"
                    inv["kind"] = a["kind"]
                    if idem:
                        a["lease"] = 3000
                        inv["lease-ms"] = 3000
                    elif rng.random() < 0.7:
                        a["ts"] = st["now"] + rng.choice([-5000, -2000, 0, 1000, 2500])
                        a["w"] = rng.choice([1000, 4000])
                        inv.update({"ts": a["ts"], "window-ms": a["w"]})
                else:
                    # a client knows only the tokens ACCEPTED answers gave it
                    # (the runner's limit), or forges one
                    a["tok"] = rng.choice(known) if rng.random() < 0.9 else "1:9999:0"
                    inv["owner-token"] = a["tok"]
                    if f == "complete":
                        a["res"] = rng.choice(["eA==", "eQ=="])
                        inv["result-b64"] = a["res"]
                    else:
                        a["term"] = rng.random() < 0.4
                        inv["terminal"] = a["term"]
                        if a["term"]:
                            inv["error"] = "declined"
                lines.append("{:type :invoke, :f :%s, :process %d, :value %s}" %
                             (f, p, edn(inv)))
                open_.append([p, a, None])
            elif open_ and x < 0.7:
                o = rng.choice(open_)
                if o[2] is None:
                    o[2] = apply(o[1])
            elif open_:
                o = open_.pop(rng.randrange(len(open_)))
                p, a, ans = o
                y = rng.random()
                if ans is not None and y < 0.85:
                    lines.append("{:type :ok, :f :%s, :process %d, :value %s}" %
                                 (a["f"], p, edn(ans)))
                    if idem and a["f"] == "claim" and ans["outcome"] == "ACCEPTED":
                        known.append(ans["owner-token"])
                elif ans is None and y < 0.3:
                    lines.append('{:type :fail, :f :%s, :process %d, :value {:applied "false"}}'
                                 % (a["f"], p))
                else:
                    lines.append('{:type :info, :f :%s, :process %d, :value {:applied '
                                 '"unknown"}}' % (a["f"], p))
                    p = st.setdefault("nextp", 100)   # Jepsen's rule: a new process
                    st["nextp"] += 1                  # after an :info
                free.append(p)
        return "\n".join(lines) + "\n"

    def test_simulated_histories_are_linearizable(self):
        import random
        rng = random.Random(5)
        n = 0
        for i in range(400):
            text = self.sim(rng, idem=i % 2 == 0)
            calls, events = pair(read_ops(text))
            for key, cs in model.key_ops(calls, events).items():
                r = search.check_key(cs)
                n += 1
                self.assertTrue(r.ok, r.explain() + "\n" + text)
        self.assertGreater(n, 350)


class HotKey(unittest.TestCase):
    """A hot NONCE key as the simulator makes it (tests/sim): short ttls,
    so the record expires and is claimed again round after round, every
    answer pinning its log time, and :info claims free to take effect in
    any later gap. Three things keep it cheap without changing a verdict
    (search.py's doc): a state whose clock has passed the log time of an
    answer not yet placed is dead; a configuration with more optional calls
    placed than one that failed (same required calls, same state) fails
    too; and an :info claim no answer can observe is left out
    (model.silent)."""

    ROUNDS, INFOS = 24, 16

    def history(self, named_round=None, first_time=None, infos=None, lookup=False):
        """ROUNDS rounds: an ACCEPTED (ttl 10 ms) then 3 overlapping
        REPLAYED naming it, 1 s of log time apart; INFOS :info claims
        (ttl 5 ms: harmless in any gap) invoked before the first round.
        named_round: that round has no ACCEPTED, its REPLAYEDs name the
        :info claim 'x' (invoked first), which took effect at first_time.
        lookup: a NOT_FOUND lookup first (model.silent then leaves no
        call out: the key is not claims only)."""
        infos = self.INFOS if infos is None else infos
        nonce = {"scope": "s", "key": "k", "kind": "NONCE"}
        specs = [dict(p=900, f="claim", inv=0.5, ret=INF, type="info",
                      args=dict(nonce, **{"request-id": "x", "ttl-ms": 10}))]
        if lookup:
            specs.append(dict(p=901, f="lookup", inv=0.1, ret=0.2, type="ok",
                              args={"scope": "s", "key": "k"},
                              res={"outcome": "NOT_FOUND", "log-time-ms": 9000}))
        for j in range(infos):
            specs.append(dict(p=1000 + j, f="claim", inv=0.6 + j / 100, ret=INF, type="info",
                              args=dict(nonce, **{"request-id": "i%d" % j, "ttl-ms": 5})))
        for r in range(self.ROUNDS):
            lt = 10_000 + 1000 * r
            rid, ft = "a%d" % r, lt
            if r == named_round:
                rid, ft = "x", first_time
            rec = {"first-request-id": rid, "first-index": 100 + r, "first-time-ms": ft,
                   "expires-ms": ft + 10}
            t = 10 + 10 * r
            if r != named_round:
                specs.append(dict(p=4 * r, f="claim", inv=t, ret=t + 2, type="ok",
                                  args=dict(nonce, **{"request-id": rid, "ttl-ms": 10}),
                                  res=dict(rec, outcome="ACCEPTED", retry=False,
                                           **{"log-time-ms": lt})))
            for q in range(3):
                specs.append(dict(p=4 * r + 1 + q, f="claim", inv=t + 3 + q, ret=t + 7 + q,
                                  type="ok",
                                  args=dict(nonce, **{"request-id": "r%d.%d" % (r, q),
                                                      "ttl-ms": 10}),
                                  res=dict(rec, outcome="REPLAYED", retry=False,
                                           **{"log-time-ms": ft + 5})))
        return key_calls(specs)

    def test_rounds_with_free_info_claims(self):
        cs = self.history()
        self.assertEqual(len(model.silent(cs)), self.INFOS + 1)
        r = search.check_key(cs)
        self.assertTrue(r.ok, r.explain())
        self.assertEqual(r.ncalls, len(cs))
        # no backtracking: one state per call placed
        self.assertLessEqual(r.steps, r.ncalls + 1)

    def test_info_claim_taking_effect_many_rounds_later(self):
        # x, invoked before the first round, took effect in the gap before
        # round 20 (log time 29,996: after round 19's record expired at
        # 29,010): named by an answer, it is not silent, and the search
        # must carry it across 19 rounds
        cs = self.history(named_round=20, first_time=29_996)
        self.assertEqual(len(model.silent(cs)), self.INFOS)
        r = search.check_key(cs)
        self.assertTrue(r.ok, r.explain())
        self.assertLess(r.steps, 200)

    def test_violation_across_the_rounds_is_found(self):
        # the same, but x's record would have to begin at log time 29,004,
        # while round 19's record (accepted at 29,000) lived until 29,010:
        # every gap before it must be refuted for x
        r = search.check_key(self.history(named_round=20, first_time=29_004))
        self.assertTrue(r.judged, r.explain())
        self.assertFalse(r.ok)
        self.assertLess(r.steps, 500)
        self.assertEqual(r.stuck.m.rid, "r20.0")

    def test_dominance_without_silent_calls(self):
        # a lookup makes every :info claim count (model.silent leaves none
        # out): 4 of them free in each of 19 gaps. A configuration with a
        # claim placed whose state another one reached without it (after
        # the next ACCEPTED pins the record) is dominated. Measured: 1,761
        # states; 48,081 for the search before the dominance and the clock
        # bound (2026-12-07)
        cs = self.history(named_round=20, first_time=29_004, infos=4, lookup=True)
        self.assertEqual(model.silent(cs), set())
        r = search.check_key(cs)
        self.assertTrue(r.judged, r.explain())
        self.assertFalse(r.ok)
        self.assertLess(r.steps, 5000)
        ok = search.check_key(self.history(named_round=20, first_time=29_996, infos=4,
                                           lookup=True))
        self.assertTrue(ok.ok, ok.explain())

    def test_clock_past_an_answer_is_dead(self):
        # round 5's answers name x at first_time: 15,000 fits the gap after
        # round 4's record expired (14,010); 14,007 does not, and a state
        # that places x after the clock reached 14,010 cannot place round
        # 4's REPLAYEDs (log time 14,005) any more: dropped unexpanded
        r = search.check_key(self.history(named_round=5, first_time=15_000))
        self.assertTrue(r.ok, r.explain())
        bad = search.check_key(self.history(named_round=5, first_time=14_007))
        self.assertTrue(bad.judged)
        self.assertFalse(bad.ok)
        self.assertEqual(bad.stuck.m.rid, "r5.0")
