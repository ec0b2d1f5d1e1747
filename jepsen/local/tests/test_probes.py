"""The final probes (oncelocal/probes.py) against scripted members, judged by
the checker: a key is probed until it has a definite answer through every
member, a deadline bounds that and then fails the run (R7), and a definite
answer that does not show an acknowledged record fails it too (lost-ack).
"""
import contextlib
import io
import itertools
import os
import tempfile
import unittest

from tests import util  # noqa: F401  (puts jepsen/local on sys.path)
from oncecheck import checker
from oncelocal import probes
from oncelocal.common import K, History

SCOPE = "s"
A, B = "127.0.1.1:7101", "127.0.1.2:7101"


class Member:
    """A client bound to one member whose answers are scripted per key: a
    list of "info", "fail" or an outcome; the last one repeats."""

    def __init__(self, hist, addr, script, procs, winners):
        self.hist, self.addr, self.script, self.procs = hist, addr, script, procs
        self.winners = winners      # key -> the first request id (shared)
        self.calls = []

    def claim(self, scope, key, req_id, final=False, idempotent=False):
        self.calls.append((key, req_id))
        p = next(self.procs)
        self.hist.op("invoke", p, "claim",
                     {K("scope"): scope, K("key"): key, K("request-id"): req_id,
                      K("kind"): "NONCE", K("node"): self.addr, K("final"): final})
        answers = self.script[key]
        ans = answers.pop(0) if len(answers) > 1 else answers[0]
        if ans == "info":
            self.hist.op("info", p, "claim", {K("error"): "DEADLINE_EXCEEDED",
                                              K("applied"): "unknown"})
            return "info", {}
        if ans == "fail":
            self.hist.op("fail", p, "claim", {K("error"): "UNAVAILABLE",
                                              K("applied"): "false"})
            return "fail", {}
        if ans == "ACCEPTED":
            self.winners[key] = req_id
        v = {K("outcome"): ans, K("retry"): False,
             K("first-request-id"): self.winners.get(key, "b0")}
        self.hist.op("ok", p, "claim", v)
        return "ok", {"outcome": ans}


class Clock:
    """A clock that moves 1 s per probe (sleep moves it too)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1.0
        return self.t

    def sleep(self, s):
        self.t += s


class Probes(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "history.edn")
        self.hist = History(self.path)
        self.procs = itertools.count()
        # the workload: n-0 ACCEPTED and acknowledged, n-1 only :info
        for key, typ, v in (("n-0", "ok", {K("outcome"): "ACCEPTED", K("retry"): False,
                                           K("first-request-id"): "a0"}),
                            ("n-1", "info", {K("error"): "DEADLINE_EXCEEDED",
                                             K("applied"): "unknown"})):
            p = next(self.procs)
            self.hist.op("invoke", p, "claim", {K("scope"): SCOPE, K("key"): key,
                                                K("request-id"): "a0" if key == "n-0" else "b0",
                                                K("kind"): "NONCE", K("node"): A})
            self.hist.op(typ, p, "claim", v)
        self.hist.op("info", "nemesis", "final-phase", {K("members"): [A, B]})

    def tearDown(self):
        self.dir.cleanup()

    def probe(self, scripts, deadline=1000.0):
        left = {}
        members = {}
        winners = {"n-0": "a0"}       # n-1's first is b0 unless a probe is ACCEPTED
        for addr, script in scripts.items():
            m = Member(self.hist, addr, script, self.procs, winners)
            members[addr] = m
            clock = Clock()           # the probers run side by side: one clock each
            left[addr] = probes.probe_member(m, SCOPE, ["n-0", "n-1"], False, deadline,
                                             clock=clock, sleep=clock.sleep)
        self.hist.close()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = checker.main([self.path])
        return left, members, rc, out.getvalue()

    def test_probes_until_every_key_is_definite(self):
        # through A, n-0 times out six times (more than any fixed retry
        # count) and is REPLAYED on the seventh; n-1 fails once, then A
        # accepts it (its :info claim never applied)
        left, members, rc, out = self.probe({
            A: {"n-0": ["info"] * 6 + ["REPLAYED"], "n-1": ["fail", "ACCEPTED"]},
            B: {"n-0": ["REPLAYED"], "n-1": ["REPLAYED"]}})
        self.assertEqual(left, {A: [], B: []})
        tries = [r for k, r in members[A].calls if k == "n-0"]
        self.assertEqual(len(tries), 7)
        self.assertEqual(len(set(tries)), 1, "a probe's retries keep its request id")
        self.assertEqual(rc, 0, out)

    def test_deadline_bounds_the_probes_and_fails_the_run(self):
        left, members, rc, out = self.probe({
            A: {"n-0": ["info"], "n-1": ["REPLAYED"]},
            B: {"n-0": ["REPLAYED"], "n-1": ["REPLAYED"]}}, deadline=30.0)
        self.assertEqual(left[A], ["n-0"])
        self.assertEqual(left[B], [])
        self.assertLess(len(members[A].calls), 30)
        self.assertEqual(rc, 1, out)
        self.assertIn("R7 final-probe-not-definite", out)

    def test_definite_answer_without_the_record_fails(self):
        # n-0 was acknowledged ACCEPTED; B answers STALE (outside the claim
        # model: only R7 sees it)
        left, _, rc, out = self.probe({
            A: {"n-0": ["REPLAYED"], "n-1": ["ACCEPTED"]},
            B: {"n-0": ["info", "STALE"], "n-1": ["REPLAYED"]}})
        self.assertEqual(left, {A: [], B: []})
        self.assertEqual(rc, 1, out)
        self.assertIn("R7 lost-ack", out)

    def test_deadline_scales_with_keys(self):
        self.assertEqual(probes.deadline_s(0), probes.DEADLINE_BASE_S)
        self.assertGreater(probes.deadline_s(2000), probes.deadline_s(100))
