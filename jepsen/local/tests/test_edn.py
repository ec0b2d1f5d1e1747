"""EDN reader/writer edge cases and unreadable histories (exit 2)."""
import math
import os
import subprocess
import sys
import tempfile
import unittest

from tests.util import LOCAL
from oncecheck.edn import loads_all, dumps, Keyword as K, Tagged, EDNError
from oncecheck.history import read_ops, pair


def one(text):
    forms = loads_all(text)
    assert len(forms) == 1, forms
    return forms[0][0]


class Reader(unittest.TestCase):
    def test_scalars(self):
        self.assertEqual(one("nil"), None)
        self.assertEqual(one("true"), True)
        self.assertEqual(one("false"), False)
        self.assertEqual(one("-12"), -12)
        self.assertEqual(one("+7"), 7)
        self.assertEqual(one("12N"), 12)
        self.assertEqual(one("1.5M"), 1.5)
        self.assertEqual(one("-2.5e3"), -2500.0)
        self.assertEqual(one("1/4"), 0.25)
        self.assertTrue(math.isinf(one("##Inf")))
        self.assertTrue(math.isnan(one("##NaN")))
        self.assertEqual(one(":ok"), K("ok"))
        self.assertEqual(one(":jepsen.history/op"), K("jepsen.history/op"))
        self.assertNotEqual(one(":ok"), "ok")
        self.assertEqual(one("\\a"), "a")
        self.assertEqual(one("\\newline"), "\n")
        self.assertEqual(one("\\u0041"), "A")

    def test_strings(self):
        self.assertEqual(one(r'"a\"b\\c\nd\te\u00e9"'), 'a"b\\c\nd\te\u00e9')
        self.assertEqual(one('"multi\nline"'), "multi\nline")
        self.assertEqual(one('"héllo ✓"'), "héllo ✓")

    def test_collections(self):
        v = one('{:a [1 2 (3 4)], :b #{1 2}, "s" {:n nil}, [1 2] :vec-key}')
        self.assertEqual(v[K("a")], [1, 2, (3, 4)])
        self.assertEqual(v[K("b")], frozenset({1, 2}))
        self.assertEqual(v["s"], {K("n"): None})
        self.assertEqual(v[(1, 2)], K("vec-key"))
        self.assertEqual(one("#{[1 2] {:a 1}}").__len__(), 2)
        self.assertEqual(one("[]"), [])
        self.assertEqual(one("{}"), {})

    def test_comments_discard_commas_tags(self):
        v = one("; a comment\n{:a 1,,, #_ :skipped :b #_ [1 2] 2} ; trailing")
        self.assertEqual(v, {K("a"): 1, K("b"): 2})
        t = one('#inst "2026-12-01T00:00:00Z"')
        self.assertIsInstance(t, Tagged)
        self.assertEqual(t.tag, "inst")
        self.assertEqual(one("#jepsen.history.Op{:index 3}"), {K("index"): 3})
        self.assertEqual(one('#uuid "0000"').value, "0000")

    def test_round_trip(self):
        v = {K("a"): [1, -2.5, "x\n\"y\"", None, True, K("k")], K("s"): frozenset({1}),
             K("l"): (1, 2)}
        self.assertEqual(one(dumps(v)), v)

    def test_errors_name_the_line(self):
        for text, line in (("{:a 1}\n{:b", 2), ("[1 2\n3", 1), ('\n\n"abc', 3),
                           ("{:a 1 :b}", 1), ("\n)", 2), ("[1 2}", 1), ("#foo", 1),
                           ('"bad \\q escape"', 1), ("1.2.3", 1)):
            with self.subTest(text=text):
                with self.assertRaises(EDNError) as cm:
                    loads_all(text)
                self.assertEqual(cm.exception.line, line, str(cm.exception))


class Unreadable(unittest.TestCase):
    """jepsen/local/check exits 2 with a message naming the line."""

    def run_check(self, text, binary=False):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.edn")
            with open(p, "wb") as fh:
                fh.write(text if binary else text.encode())
            r = subprocess.run([sys.executable, os.path.join(LOCAL, "check"), p],
                               capture_output=True, text=True)
            return r.returncode, r.stderr

    def test_exit_2(self):
        inv = '{:type :invoke :f :claim :process 0 :value {:scope "s" :key "k" :request-id "a"}}\n'
        cases = [
            ('{:type :invoke :f :claim\n', "line 1"),
            (inv + '{:type :ok :f :claim :process 0 :value {:outcome "ACCEPTED"}\n', "line 2"),
            (inv + "[1 2 3]\n", "line 2"),
            (inv + '{:type :bogus :process 0}\n', "line 2"),
            (inv + '{:type :ok :f :claim :process 1 :value {:outcome "ACCEPTED"}}\n', "line 2"),
            (inv + inv, "line 2"),
            ('{:type :invoke :f :claim :process 0 :value {:scope "s"}}\n', "line 1"),
            ('{:index 0 :type :invoke :f :claim :process 0 :value {:key "k"}}\n'
             '{:index 0 :type :ok :f :claim :process 0 :value {:key "k"}}\n', "line 2"),
        ]
        for text, where in cases:
            with self.subTest(text=text):
                rc, err = self.run_check(text)
                self.assertEqual(rc, 2, err)
                self.assertIn(where, err)
        rc, err = self.run_check(b"\xff\xfe{", binary=True)
        self.assertEqual(rc, 2)
        self.assertIn("UTF-8", err)
        r = subprocess.run([sys.executable, os.path.join(LOCAL, "check"), "/nonexistent/h.edn"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("cannot read", r.stderr)

    def test_empty_history_is_valid(self):
        rc, err = self.run_check("; nothing yet\n")
        self.assertEqual(rc, 0, err)


class Pairing(unittest.TestCase):
    def test_open_invocation_is_info(self):
        calls, _ = pair(read_ops('{:type :invoke :f :claim :process 0 :value {:key "k" :request-id "a"}}'))
        self.assertEqual(calls[0].type, "info")
        self.assertEqual(calls[0].ret, float("inf"))

    def test_index_order_wins_over_file_order(self):
        ops = read_ops('{:index 1 :type :ok :f :claim :process 0 :value {:outcome "ACCEPTED"}}\n'
                       '{:index 0 :type :invoke :f :claim :process 0 :value {:key "k" :request-id "a"}}\n')
        calls, _ = pair(ops)
        self.assertEqual(calls[0].outcome, "ACCEPTED")
        self.assertEqual(calls[0].key, "k")

    def test_events_are_not_paired(self):
        calls, events = pair(read_ops('{:type :info :process :nemesis :f :kill :value ["n1"]}\n'
                                      '{:type :invoke :process :nemesis :f :kill}'))
        self.assertEqual((len(calls), len(events)), (0, 2))
