"""Every hand-written history in tests/histories/ against its '; expect:' lines.

'; expect: valid' -> exit 0 and VALID; '; expect: RULE NAME' lines -> exit 1
and exactly those fatal anomalies reported (no more, no fewer); '; warning:
RULE NAME' lines: exactly those warnings. '; args:' gives checker options. test_every_rule_covered: every anomaly the checker can
report (checker.ANOMALIES, which must list every Anomaly in oncecheck/) has
a must-fail history that reports it and nothing of any other rule, so every
rule R1-R10 and LIN can fail on its own.
"""
import contextlib
import io
import os
import re
import unittest

from tests.util import HERE, LOCAL
from oncecheck import checker

HDIR = os.path.join(HERE, "histories")
ANOMALY_LINE = re.compile(r"(?m)^(R\d+|LIN) ([a-z][a-z-]*)(?: key=.*?)?( \(warning\))?: ")


def expectations(path):
    with open(path, encoding="utf-8") as fh:
        return [m.group(1).strip() for m in re.finditer(r"^; expect: (.*)$", fh.read(), re.M)]


def warnings(path):
    with open(path, encoding="utf-8") as fh:
        return [m.group(1).strip() for m in re.finditer(r"^; warning: (.*)$", fh.read(), re.M)]


def history_args(path):
    with open(path, encoding="utf-8") as fh:
        return [a for m in re.finditer(r"^; args: (.*)$", fh.read(), re.M)
                for a in m.group(1).split()]


def run_check(*argv):
    out = io.StringIO()
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = checker.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def reported(out):
    """The fatal anomalies ("RULE name") and the warnings in a report."""
    fatal, warn = set(), set()
    for m in ANOMALY_LINE.finditer(out):
        (warn if m.group(3) else fatal).add("%s %s" % (m.group(1), m.group(2)))
    return fatal, warn


def histories():
    """(file, expectations, fatal anomalies reported, rc, output, expected
    warnings, warnings reported) of each."""
    out = []
    for f in sorted(f for f in os.listdir(HDIR) if f.endswith(".edn")):
        path = os.path.join(HDIR, f)
        rc, text, err = run_check(*history_args(path), path)
        fatal, warn = reported(text)
        out.append((f, expectations(path), fatal, rc, text + err, warnings(path), warn))
    return out


class Histories(unittest.TestCase):
    def test_each_history(self):
        hs = histories()
        self.assertGreater(len(hs), 40)
        for f, exp, found, rc, out, wexp, wfound in hs:
            with self.subTest(history=f):
                self.assertEqual(wfound, set(wexp), out)
                self.assertTrue(exp, "no '; expect:' line")
                if exp == ["valid"]:
                    self.assertEqual(rc, 0, out)
                    self.assertIn("\nVALID", out)
                    self.assertEqual(found, set(), out)
                else:
                    self.assertEqual(rc, 1, out)
                    self.assertIn("\nINVALID", out)
                    self.assertEqual(found, set(exp), out)

    def test_every_rule_covered(self):
        alone = {}        # anomaly -> histories where it is the only rule reported
        warned = set()
        for f, exp, found, rc, out, _, wfound in histories():
            # LIN is the verdict: it accompanies every break of the contract
            # the rules explain, so a rule's history may report LIN besides
            # (its '; expect:' lines say so); LIN's own must be alone
            rules = {a.split()[0] for a in found}
            if len(rules) > 1:
                rules.discard("LIN")
            if rc == 1 and len(rules) == 1:
                for a in found:
                    alone.setdefault(a, []).append(f)
            warned |= wfound
        self.assertEqual(set(checker.ANOMALIES), set(checker.RULES))
        for rule, names in checker.ANOMALIES.items():
            self.assertTrue(names, "rule %s has no anomaly: it cannot fail" % rule)
            for name in names:
                a = "%s %s" % (rule, name)
                self.assertTrue(a in alone, "no must-fail history reports %s and no other rule" % a)
        # every warning is shown by a history (as a warning: it never fails)
        for rule, names in checker.WARNINGS.items():
            for name in names:
                self.assertIn("%s %s" % (rule, name), warned)
        # every anomaly the rules can produce is in the registry
        registered = {(r, n) for r, ns in list(checker.ANOMALIES.items()) +
                      list(checker.WARNINGS.items()) for n in ns}
        made = set()
        src = os.path.join(LOCAL, "oncecheck")
        for f in os.listdir(src):
            if f.endswith(".py"):
                with open(os.path.join(src, f), encoding="utf-8") as fh:
                    text = fh.read()
                    made |= set(re.findall(r'Anomaly\(\s*"(R\d+|LIN)", "([a-z-]+)"', text))
                    # not-exercised is made per rule, from the rule named in the
                    # :time-settings event's :exercise (timerules.py)
                    if 'Anomaly(rule, "not-exercised"' in text:
                        made |= {(r, "not-exercised") for r, ns in checker.ANOMALIES.items()
                                 if "not-exercised" in ns}
        self.assertGreater(len(made), 30)
        self.assertEqual(made, registered)
        # must-pass: every pass history passes every rule; these exercise the rules'
        # inputs: claims (R1-R6), info/fail (R5), events (R7-R10)
        files = os.listdir(HDIR)
        for f in ("pass-nonce-basic.edn", "pass-nonce-info-winner.edn", "pass-idem-takeover.edn",
                  "pass-events.edn"):
            self.assertIn(f, files)
        rc, out, _ = run_check(os.path.join(HDIR, "pass-events.edn"))
        for r in range(1, 11):
            self.assertRegex(out, r"(?m)^R%d +.* ok" % r)

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

    def test_budget_zero_judges_nothing_and_fails(self):
        # fail-LIN-not-linearizable.edn: no rule covers it, only the model;
        # with no budget its key is unjudged, which fails too (never a pass)
        p = os.path.join(HDIR, "fail-LIN-not-linearizable.edn")
        rc, out, _ = run_check(p, "--search-budget", "0")
        self.assertEqual(rc, 1, out)
        self.assertIn("LIN unjudged", out)
        self.assertNotIn("LIN not-linearizable", out)
        rc, out, _ = run_check(os.path.join(HDIR, "pass-nonce-basic.edn"), "--search-budget", "0")
        self.assertEqual(rc, 1, out)
        self.assertIn("LIN unjudged", out)

    def test_every_unjudged_key_counts(self):
        # 150 valid keys, two of which need more steps than the budget:
        # each is reported and counted (no share of keys may go unjudged)
        import tempfile
        lines = []
        for k in range(150):
            n = 3 if k < 2 else 1
            for i in range(n):
                out = "ACCEPTED" if i == 0 else "REPLAYED"
                lines.append('{:type :invoke, :f :claim, :process %d, :value {:scope "s" :key '
                             '"k%d" :request-id "r%d-%d"}}' % (i, k, k, i))
                lines.append('{:type :ok, :f :claim, :process %d, :value {:outcome "%s" '
                             ':first-request-id "r%d-0"}}' % (i, out, k))
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.edn")
            open(p, "w").write("\n".join(lines) + "\n")
            rc, out, _ = run_check(p, "--search-budget", "2")
            self.assertEqual(rc, 1, out)
            self.assertEqual(out.count("LIN unjudged"), 2, out)
            self.assertIn("; 2 unjudged)", out)
            rc, out, _ = run_check(p)
            self.assertEqual(rc, 0, out)
            self.assertRegex(out, r"LIN .* ok \(150 keys, 154 calls, \d+ steps in [\d.]+ s; "
                             r"largest key 3 calls")

    def test_safety_only_keeps_lost_ack_fatal(self):
        rc, out, _ = run_check(os.path.join(HDIR, "fail-R7-final-probe-not-definite.edn"),
                               "--safety-only")
        self.assertEqual(rc, 0, out)
        rc, out, _ = run_check(os.path.join(HDIR, "fail-R7-lost-ack.edn"), "--safety-only")
        self.assertEqual(rc, 1, out)


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
