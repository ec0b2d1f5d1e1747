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
