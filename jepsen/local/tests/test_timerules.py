"""The time rules R20-R25 (oncecheck/timerules.py) on their hand-written
histories (tests/histories/time-*.edn).

Each time-fail history must produce exactly the anomalies of its '; expect:'
lines and no other fatal anomaly of any rule (R1-R10, R20-R25) but LIN
not-linearizable, the model's verdict, which accompanies every break of
the contract: it is caught by that rule alone. The time-pass histories must pass with every
time rule judging something (not skipped). A forged log time in a passing
history must fail.
"""
import os
import re
import unittest

from tests.util import HERE
from tests.test_histories import expectations, run_check
from oncecheck import checker
from oncecheck.history import read_file, pair

HDIR = os.path.join(HERE, "histories")
TIME_RULES = ["R20", "R21", "R22", "R23", "R24", "R25"]


def judge(path):
    calls, events = pair(read_file(path))
    return checker.check_history(calls, events)


def forged(src, line_re, old, new):
    """The text of history @src with @old replaced by @new on the first line
    matching @line_re."""
    out = []
    done = False
    with open(os.path.join(HDIR, src), encoding="utf-8") as fh:
        for line in fh:
            if not done and re.search(line_re, line):
                assert old in line, line
                line = line.replace(old, new)
                done = True
            out.append(line)
    assert done, line_re
    return "".join(out)


class TimeRules(unittest.TestCase):
    def files(self, prefix):
        fs = sorted(f for f in os.listdir(HDIR) if f.startswith(prefix) and f.endswith(".edn"))
        self.assertTrue(fs, prefix)
        return fs

    def test_each_fail_history_caught_by_its_rule_alone(self):
        for f in self.files("time-fail-"):
            with self.subTest(history=f):
                exp = sorted(expectations(os.path.join(HDIR, f)))
                self.assertTrue(exp and exp != ["valid"], f)
                rule = f.split("-")[2]
                # LIN, the verdict, also reports every break these rules
                # explain; no rule of another number may
                self.assertTrue(any(e.startswith(rule + " ") for e in exp), (f, exp))
                self.assertTrue(all(e.startswith(rule + " ") or e == "LIN not-linearizable"
                                    for e in exp), (f, exp))
                res = judge(os.path.join(HDIR, f))
                got = sorted({"%s %s" % (a.rule, a.name) for a in res.anomalies if a.fatal})
                self.assertEqual(got, exp)

    def test_every_time_rule_has_a_fail_history(self):
        fs = self.files("time-fail-")
        for r in TIME_RULES:
            self.assertTrue([f for f in fs if f.startswith("time-fail-%s-" % r)],
                            "no failing history for " + r)

    def test_pass_histories_judge_every_time_rule(self):
        judged = set()
        for f in self.files("time-pass-"):
            rc, out, err = run_check(os.path.join(HDIR, f))
            self.assertEqual(rc, 0, out + err)
            for r in TIME_RULES:
                if re.search(r"(?m)^%s +.* ok$" % r, out):
                    judged.add(r)
        self.assertEqual(sorted(judged), TIME_RULES)

    def test_stats_count_what_was_judged(self):
        st = judge(os.path.join(HDIR, "time-pass-windowed.edn")).stats["time"]
        self.assertEqual(st["accepted_ts"], 2)
        self.assertEqual(st["stale"], 2)
        self.assertEqual(st["future"], 1)
        self.assertGreater(st["after_retention"], 0)
        st = judge(os.path.join(HDIR, "time-pass-lease.edn")).stats["time"]
        self.assertEqual(st["leases_judged"], 2)
        self.assertEqual(st["in_progress_judged"], 1)

    def check_text(self, text, *argv):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "h.edn")
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(text)
            return run_check(p, *argv)

    def test_forged_log_time_fails(self):
        # the past-edge acceptance, 1 ms later: ts is then outside its window
        rc, out, _ = self.check_text(forged(
            "time-pass-windowed.edn", r':outcome "ACCEPTED" :retry false :log-time-ms 102000 '
            r':first-request-id "a1"', ":log-time-ms 102000", ":log-time-ms 102001"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R20 accepted-outside-window", out)
        # the takeover, 1 ms earlier: before the first owner's lease ended
        rc, out, _ = self.check_text(forged(
            "time-pass-lease.edn", r':owner-attempt 2 :lease-expires-ms 206000',
            ":log-time-ms 203000", ":log-time-ms 202999"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R23 takeover-before-expiry", out)
        # the STALE replay at the retention's end, 1 ms earlier: still live
        rc, out, _ = self.check_text(forged(
            "time-pass-windowed.edn", r':outcome "STALE" :retry false :log-time-ms 105000',
            ":log-time-ms 105000", ":log-time-ms 104999"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R21 absent-while-live", out)

    def test_retry_with_other_ts_bounds(self):
        # a request id's calls sent ts 100000 and 100001: the record lives at
        # least until 100000 + 5 s, and not after 100001 + 5 s
        rc, out, _ = self.check_text(forged(
            "time-pass-R21-retry-other-ts.edn", r':first-request-id "a1" :first-index 10 '
            r':first-time-ms 100500 :expires-ms 105000', ":expires-ms 105000",
            ":expires-ms 104999"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R21 retention-short", out)
        rc, out, _ = self.check_text(forged(
            "time-pass-R21-retry-other-ts.edn", r':outcome "REPLAYED" :retry false '
            r':log-time-ms 105000', ":log-time-ms 105000", ":log-time-ms 105001"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R21 live-after-retention", out)

    def test_log_time_per_group(self):
        # one group's log going back still fails: group 1's index 12 at a
        # log time before its index 10's ...
        rc, out, _ = self.check_text(forged(
            "time-pass-R25-two-groups.edn", r':owner-token "1:12:0"',
            ":log-time-ms 6000 :first-request-id \"a2\" :first-index 12 :first-time-ms 6000",
            ":log-time-ms 4999 :first-request-id \"a2\" :first-index 12 :first-time-ms 4999"))
        self.assertEqual(rc, 1, out)
        self.assertIn("R25 log-time-backwards", out)
        self.assertIn("of raft group 1", out)
        # ... and so does group 2's index 11 moved into group 1's log
        rc, out, _ = self.check_text(forged(
            "time-pass-R25-two-groups.edn", r':owner-token "2:11:0"', '"2:11:0"', '"1:11:0"'))
        self.assertEqual(rc, 1, out)
        self.assertIn("R25 log-time-backwards", out)

    def test_settings_from_the_event(self):
        # the same history judged with a larger max_skew: the FUTURE at the
        # skew's edge + 1 ms is then inside the window
        text = forged("time-pass-windowed.edn", r":f :time-settings",
                      ":max-skew-ms 1000", ":max-skew-ms 1001")
        rc, out, _ = self.check_text(text)
        self.assertEqual(rc, 1, out)
        self.assertIn("R20 future-inside-window", out)
