"""Every hand-written history in tests/histories/ against its '; expect:' lines.

'; expect: valid' -> exit 0 and VALID; '; expect: RULE NAME' -> exit 1 and an
anomaly line starting 'RULE NAME'. Every rule R1-R10 has at least one
must-pass and one must-fail history (test_every_rule_covered).
"""
import contextlib
import io
import os
import re
import unittest

from tests.util import HERE
from oncecheck import checker

HDIR = os.path.join(HERE, "histories")


def expectations(path):
    with open(path, encoding="utf-8") as fh:
        return [m.group(1).strip() for m in re.finditer(r"^; expect: (.*)$", fh.read(), re.M)]


def run_check(*argv):
    out = io.StringIO()
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = checker.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


class Histories(unittest.TestCase):
    def test_each_history(self):
        files = sorted(f for f in os.listdir(HDIR) if f.endswith(".edn"))
        self.assertGreater(len(files), 20)
        for f in files:
            with self.subTest(history=f):
                exp = expectations(os.path.join(HDIR, f))
                self.assertTrue(exp, "no '; expect:' line")
                rc, out, err = run_check(os.path.join(HDIR, f))
                if exp == ["valid"]:
                    self.assertEqual(rc, 0, out + err)
                    self.assertIn("\nVALID", out)
                else:
                    self.assertEqual(rc, 1, out + err)
                    for e in exp:
                        self.assertRegex(out, r"(?m)^%s[ :]" % re.escape(e), out)

    def test_every_rule_covered(self):
        files = os.listdir(HDIR)
        for r in range(1, 11):
            rule = "R%d" % r
            fails = [f for f in files if f.startswith("fail-%s-" % rule)]
            self.assertTrue(fails, "no must-fail history for " + rule)
        # must-pass: every pass history passes every rule; these exercise the rules'
        # inputs: claims (R1-R6), info/fail (R5), events (R7-R10)
        for f in ("pass-nonce-basic.edn", "pass-nonce-info-winner.edn", "pass-idem-takeover.edn",
                  "pass-events.edn"):
            self.assertIn(f, files)
        rc, out, _ = run_check(os.path.join(HDIR, "pass-events.edn"))
        for r in range(1, 11):
            self.assertRegex(out, r"(?m)^R%d +.*(ok|applied)" % r)

    def test_results_edn(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.edn")
            rc, out, _ = run_check(os.path.join(HDIR, "fail-R1-double-accept.edn"), "--results", p)
            self.assertEqual(rc, 1)
            text = open(p).read()
            self.assertIn(":valid? false", text)
            self.assertIn(":name :double-accept", text)

    def test_safety_only(self):
        rc, out, _ = run_check(os.path.join(HDIR, "fail-R7-missing-final-probe.edn"),
                               "--safety-only")
        self.assertEqual(rc, 0, out)

    def test_linear_catches_what_rules_miss(self):
        # A takeover (owner_attempt 2) that names itself as the first request
        # id: the first owner can only have been r1 (the :info claim). No
        # R1-R6 rule covers it; the brute force does.
        import tempfile
        h = (
            '{:type :invoke :f :claim :process 1 :value {:scope "p" :key "o" :request-id "r1" :kind "IDEMPOTENT"}}\n'
            '{:type :invoke :f :claim :process 2 :value {:scope "p" :key "o" :request-id "r2" :kind "IDEMPOTENT"}}\n'
            '{:type :info :f :claim :process 1 :value {:applied "unknown"}}\n'
            '{:type :ok :f :claim :process 2 :value {:outcome "ACCEPTED" :retry false :owner-token "1:11:0" '
            ':owner-attempt 2 :first-request-id "r2"}}\n')
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.edn")
            open(p, "w").write(h)
            rc, out, _ = run_check(p)
            self.assertEqual(rc, 1, out)
            self.assertIn("LIN not-linearizable", out)
            rc, out, _ = run_check(p, "--linear-limit", "0")
            self.assertEqual(rc, 0, out)


class Logs(unittest.TestCase):
    def test_crash_in_log_fails_r8(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "n1.log")
            with open(log, "w") as fh:
                fh.write('ts=1 level=info msg="started"\n'
                         "==7==ERROR: AddressSanitizer: heap-use-after-free\n")
            rc, out, _ = run_check(os.path.join(HDIR, "pass-nonce-basic.edn"), "--logs", log)
            self.assertEqual(rc, 1, out)
            self.assertIn("R8 crash-in-log", out)
            with open(log, "w") as fh:
                fh.write('ts=1 level=info msg="started"\n')
            rc, out, _ = run_check(os.path.join(HDIR, "pass-nonce-basic.edn"), "--logs", log)
            self.assertEqual(rc, 0, out)
