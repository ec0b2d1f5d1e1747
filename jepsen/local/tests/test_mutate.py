"""The checker tested by mutation, and the search checked against the reference.

* the corpus (tests/corpus/: legal but tricky histories) stays VALID;
* the mutation tool on the corpus scores 100 % (the score line is printed:
  scripts/test shows it), with every mutant kind kept at least once;
* the tool fails when the checker is weakened (a survivor is found and
  reported): it is not a test that cannot fail;
* the reference judge (brute force) and the search (search.check_key)
  agree on thousands of random small keys (the generators of
  test_crosscheck.py) and on every mutant of the corpus (keys with log
  times, leases and windows).
"""
import contextlib
import glob
import io
import os
import random
import re
import shutil
import sys
import tempfile
import unittest

from tests.util import HERE, history_text, calls_of
from tests import test_crosscheck as gen
from oncecheck import checker, model, mutate, reference, search
from oncecheck.history import read_ops, pair

CORPUS = sorted(glob.glob(os.path.join(HERE, "corpus", "*.edn")))
# random histories per generator: a third of the cross-check's (each gives
# about 1.7 judged keys): about 5,000 random keys in all by default
N = max(1, int(os.environ.get("ONCECHECK_CROSS_N", "3000")) // 3)
SEED = int(os.environ.get("ONCECHECK_SEED", "0"))

# every kind the corpus must exercise (kept at least once): a kind that
# never breaks the contract on the corpus tests nothing
KINDS = ("field:outcome", "field:retry", "field:first-request-id", "field:first-index",
         "field:owner-attempt", "field:owner-token", "field:result-b64", "field:stored-error",
         "field:first-time-ms", "field:lease-expires-ms", "field:expires-ms",
         "field:retry-after-ms", "field:log-time-ms", "shift-log-time", "swap", "info-ok",
         "ok-fail", "drop-call", "reorder", "request-id", "drop-final-probe", "arg:ts",
         "arg:window-ms", "arg:lease-ms", "arg:owner-token", "arg:result-b64", "arg:terminal",
         "cross-key-log-time")

# Rules that call legal corpus mutants INVALID although the model (and the
# reference) finds them linearizable, each with why it is known. None: the
# last one (R21 retention-short, which took a record's ts from the first
# call of its request id even when that was an :info that need not have
# taken effect) is fixed (timerules._winner_ts; its case is
# tests/histories/time-pass-R21-retry-other-ts.edn).
KNOWN_DISAGREEMENTS = set()


def _run(paths, **kw):
    return mutate.run(paths, **kw)


class Corpus(unittest.TestCase):
    def test_corpus_valid(self):
        self.assertGreaterEqual(len(CORPUS), 6)
        for path in CORPUS:
            with self.subTest(history=os.path.basename(path)):
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    rc = checker.main([path])
                self.assertEqual(rc, 0, out.getvalue())

    def test_corpus_score(self):
        score = _run(CORPUS)
        buf = io.StringIO()
        mutate.report(score, out=buf)
        # scripts/test prints this line from the checker tests' log
        print("\n" + score.line(), file=sys.stderr)
        self.assertTrue(score.ok, buf.getvalue())
        self.assertEqual(score.caught, score.kept, buf.getvalue())
        self.assertEqual(score.unjudged, 0, buf.getvalue())
        for k in KINDS:
            self.assertGreater(score.by_kind.get(k, (0, 0))[1], 0, "kind %s never kept" % k)

    def test_corpus_audit(self):
        """Legal mutants of the corpus: the checker calls them VALID but for
        rules outside the per-key model and the KNOWN_DISAGREEMENTS."""
        score = mutate.run(CORPUS, audit=True)
        self.assertTrue(score.ok)
        found = mutate.disagreements(score)
        new = {k: v for k, v in found.items() if k not in KNOWN_DISAGREEMENTS}
        self.assertEqual(new, {}, "a rule and the model disagree on legal mutants (the "
                         "reference finds them linearizable, the rule calls them INVALID): "
                         "either the rule false-alarms (fix the rule) or the model is too "
                         "permissive (fix the model); if it is meant, add it to "
                         "KNOWN_DISAGREEMENTS with the reason")
        self.assertEqual(set(found), set(KNOWN_DISAGREEMENTS),
                         "a known disagreement is gone: remove it from KNOWN_DISAGREEMENTS")

    def test_command(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = mutate.main(CORPUS[:1] + ["--max", "20", "--seed", "5"])
        self.assertEqual(rc, 0, out.getvalue())
        self.assertRegex(out.getvalue(), r"(?m)^mutation score: (\d+)/\1 \(100\.0 %\), \d+ "
                         r"generated, \d+ legal \(discarded\), \d+ unjudged, by kind: ")


class ToolCanFail(unittest.TestCase):
    """A weakened checker leaves survivors, reported with their lines, and
    the command exits 1."""

    def _weakened(self, fake):
        real = checker.check_history
        checker.check_history = fake
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                score = _run(CORPUS)
                mutate.report(score)
            return score, out.getvalue()
        finally:
            checker.check_history = real

    def test_no_model_search(self):
        """Without the model search (the rules alone) mutants survive."""
        real = search.check_key

        def lenient(calls, budget=search.BUDGET):
            r = real(calls, budget)
            r.ok, r.judged = True, True
            return r
        search.check_key = lenient
        try:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                score = _run(CORPUS)
                mutate.report(score)
        finally:
            search.check_key = real
        text = out.getvalue()
        self.assertFalse(score.ok)
        self.assertGreater(len(score.survivors), 0)
        self.assertIn("survivor: ", text)
        self.assertRegex(text, r"(?m)^    line \d+: \{")

    def test_blind_checker(self):
        real = checker.check_history

        def blind(calls, events, *a, **kw):
            res = real(calls, events, *a, **kw)
            res.anomalies = []
            return res
        # the inputs must still be VALID: the first check is the real one
        first = [True]

        def fake(calls, events, *a, **kw):
            if first[0]:
                first[0] = False
                return real(calls, events, *a, **kw)
            return blind(calls, events, *a, **kw)
        score, text = self._weakened(fake)
        self.assertEqual(score.caught, 0)
        self.assertEqual(len(score.survivors), score.kept)
        self.assertFalse(score.ok)

    def test_invalid_input_refused(self):
        bad = os.path.join(HERE, "histories", "fail-R1-double-accept.edn")
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = mutate.main([bad])
        self.assertEqual(rc, 2)
        self.assertIn("INVALID", err.getvalue())


class CiHook(unittest.TestCase):
    """jepsen/local/ci's mutation test of a passed run's own history."""

    def setUp(self):
        from tests.test_faults import load_ci
        self.ci = load_ci()
        self.tmp = tempfile.mkdtemp(prefix="oncecheck-mutate-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def _run_dir(self, source):
        shutil.copy(source, os.path.join(self.tmp, "history.edn"))
        return "run: PASS: every check passed; seed 1; %s\n" % self.tmp

    def test_passed_run(self):
        score, why = self.ci.mutation_test(self._run_dir(CORPUS[0]), 1)
        self.assertEqual(why, [])
        self.assertRegex(score, r"^mutation score: (\d+)/\1 \(100\.0 %\)")

    def test_no_history(self):
        score, why = self.ci.mutation_test("run: PASS; seed 1; %s\n" % self.tmp, 1)
        self.assertIsNone(score)
        self.assertEqual(len(why), 1)
        self.assertIn("no history.edn", why[0])

    def test_nothing_kept_fails(self):
        # a history whose only call is a :fail: no mutant breaks the contract
        with open(os.path.join(self.tmp, "history.edn"), "w") as fh:
            fh.write('{:type :invoke, :f :claim, :process 0, :value {:scope "s" :key "k" '
                     ':request-id "a" :kind "NONCE"}}\n'
                     '{:type :fail, :f :claim, :process 0, :value {:error "UNAVAILABLE" '
                     ':applied "false"}}\n')
        score, why = self.ci.mutation_test("run: PASS; seed 1; %s\n" % self.tmp, 1)
        self.assertTrue(why)
        self.assertIn("0/0", score)


    def _ci_main(self, mutate_out=None):
        """ci's main over fake runs (each passing, with this directory's
        history), the mutation tests real unless MUTATE_OUT fakes them."""
        import types
        shutil.copy(CORPUS[0], os.path.join(self.tmp, "history.edn"))
        real = self.ci.subprocess.run
        ci = self.ci

        def fake(cmd, **kw):
            if str(cmd[1]).endswith("/mutate"):
                if mutate_out is None:
                    return real(cmd, **kw)
                return types.SimpleNamespace(stdout=mutate_out, stderr="", returncode=1)
            nem = cmd[cmd.index("--nemesis") + 1].split(",") if "--nemesis" in cmd else []
            if str(cmd[1]).endswith("/region-drill"):
                nem = ["kill", "partition"]     # its region crashes and cuts
            noop = ci.faults.NOOP_ENV in (kw.get("env") or {})
            with open(os.path.join(self.tmp, "faults.edn"), "w") as fh:
                fh.write("{:asked [%s], :effective {%s}, :not-effective {%s}, :heal-failed {}, "
                         ":nemesis-errors 0}" % (
                             " ".join(":" + n for n in nem),
                             "" if noop else ", ".join(":%s 1" % n for n in nem),
                             ":partition 1" if noop else ""))
            return types.SimpleNamespace(stdout="x: PASS; seed 1; %s\n" % self.tmp, stderr="",
                                         returncode=1 if noop else 0)
        self.ci.subprocess.run = fake
        argv = sys.argv
        sys.argv = ["ci", "--seed", "3", "--seconds", "5"]
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                try:
                    self.ci.main()
                    rc = 0
                except SystemExit as e:
                    rc = e.code
        finally:
            sys.argv = argv
            self.ci.subprocess.run = real
        return rc, out.getvalue()

    def test_ci_prints_scores(self):
        rc, out = self._ci_main()
        self.assertEqual(rc, 0, out)
        # 4 acceptance + 4 randomized runs + the region drill; not the
        # negative control
        self.assertEqual(len(re.findall(r"(?m)^    mutation score: (\d+)/\1 \(100\.0 %\)", out)),
                         9, out)
        self.assertRegex(out, r"mutation tests of their histories: \d+ s")

    def test_ci_fails_a_run_below_100(self):
        rc, out = self._ci_main("survivor: swap key=[\"c\" \"k\"] (h): answers swapped\n"
                                "    line 3: {}\nmutation score: 8/9 (88.9 %), 9 generated, "
                                "0 legal (discarded), 0 unjudged, by kind: swap 0/1\n")
        self.assertEqual(rc, 1)
        self.assertRegex(out, r"(?m)^FAILED acceptance base .*\n    mutation score: 8/9")
        self.assertIn("mutation test (rc 1): survivor: swap", out)
        self.assertRegex(out, r"(?m)^1 passed, 9 failed$")


class Mechanics(unittest.TestCase):
    def test_mutant_text_round_trip(self):
        """Every mutant written out reads back as the history judged."""
        for path in CORPUS:
            src = mutate.Source(path)
            for kkey in src.bykey:
                for m in mutate.key_mutants(src, kkey):
                    ops = m.ops(src)
                    calls, _ = pair(ops)
                    calls2, _ = pair(read_ops(m.text(src)))
                    self.assertEqual([(c.f, c.rid, c.type, c.outcome) for c in calls],
                                     [(c.f, c.rid, c.type, c.outcome) for c in calls2],
                                     "%s %s" % (m.kind, m.what))

    def test_projection_equals_whole_on_the_key(self):
        src = mutate.Source(CORPUS[0])
        for kkey in src.bykey:
            for m in mutate.key_mutants(src, kkey)[:30]:
                a = [(c.f, c.rid, c.type, c.outcome) for c in pair(m.ops(src))[0]
                     if c.kkey == kkey]
                b = [(c.f, c.rid, c.type, c.outcome)
                     for c in pair(m.ops(src, only=src.projection(kkey)))[0]]
                self.assertEqual(a, b)


def _spec(p, key, rid, inv, ret, typ, res, f="claim", kind="NONCE", extra=None):
    args = {"scope": "s", "key": key, "request-id": rid, "kind": kind if f == "claim" else None}
    args.update(extra or {})
    return {"p": p, "f": f, "inv": inv, "ret": ret, "type": typ, "args": args, "res": res}


class Reference(unittest.TestCase):
    def _verdicts(self, specs):
        calls, events = calls_of(history_text(specs))
        return {k[1]: reference.check_key(k, g) for k, g in model.key_ops(calls, events).items()}

    def test_info_may_take_effect(self):
        v = self._verdicts([
            _spec(0, "k", "a", 0, gen.INF, "info", {"error": "x", "applied": "unknown"}),
            _spec(1, "k", "b", 2, 3, "ok", {"outcome": "REPLAYED", "first-request-id": "a"})])
        self.assertIs(v["k"].ok, True)

    def test_real_time(self):
        # b's REPLAYED names a, but a was invoked after b's answer
        v = self._verdicts([
            _spec(1, "k", "b", 0, 1, "ok", {"outcome": "REPLAYED", "first-request-id": "a"}),
            _spec(0, "k", "a", 2, 3, "ok", {"outcome": "ACCEPTED", "retry": False,
                                            "first-request-id": "a"})])
        self.assertIs(v["k"].ok, False)

    def test_fail_never_takes_effect(self):
        v = self._verdicts([
            _spec(0, "k", "a", 0, 1, "fail", {"error": "UNAVAILABLE", "applied": "false"}),
            _spec(1, "k", "b", 2, 3, "ok", {"outcome": "REPLAYED", "first-request-id": "a"})])
        self.assertIs(v["k"].ok, False)

    def test_limit(self):
        specs = [_spec(i, "k", "r%d" % i, 2 * i, 2 * i + 1, "ok",
                       {"outcome": "ACCEPTED" if i == 0 else "REPLAYED", "retry": False,
                        "first-request-id": "r0"}) for i in range(reference.LIMIT + 1)]
        v = self._verdicts(specs)
        self.assertIsNone(v["k"].ok)
        self.assertIn("limit", v["k"].why)


class SearchAgainstReference(unittest.TestCase):
    """The search (the checker's verdict) and the brute force agree."""

    silent_keys = 0

    def _agree(self, k, g, what):
        r = reference.check_key(k, g)
        if r.ok is not None and model.silent(g):
            SearchAgainstReference.silent_keys += 1
        if r.ok is None:
            return None
        s = search.check_key(g)
        if not s.judged:
            return None
        self.assertEqual(s.ok, r.ok, "%s: search %s, reference %s\n%s" % (
            what, s.ok, r.ok, "\n".join(c.show() for c in g if c.ret_op is not None
                                        or not getattr(c, "hidden", False))))
        return r.ok

    def _random(self, make, seed):
        rng = random.Random(seed)
        random.seed(seed)
        n = bad = 0
        for j in range(N):
            calls, events = calls_of(history_text(make(rng, j)))
            for k, g in model.key_ops(calls, events).items():
                ok = self._agree(k, g, "random key")
                if ok is not None:
                    n += 1
                    bad += not ok
        self.assertGreater(n, N)          # at least one judged key per history on average
        return n, bad

    def test_nonce_random(self):
        n, bad = self._random(lambda rng, j: gen.nonce_random(rng), SEED + 105)
        print("\n  search = reference: nonce random %d keys (%d not linearizable)" % (n, bad),
              file=sys.stderr)

    def test_nonce_system(self):
        n, bad = self._random(lambda rng, j: gen.nonce_system(rng, j % 2 == 1), SEED + 111)
        print("\n  search = reference: nonce system %d keys (%d not linearizable)" % (n, bad),
              file=sys.stderr)

    def test_idempotent_system(self):
        n, bad = self._random(lambda rng, j: gen.idem_system(rng, j % 2 == 1), SEED + 123)
        self.assertGreater(bad, 0)
        print("\n  search = reference: idempotent %d keys (%d not linearizable)" % (n, bad),
              file=sys.stderr)

    def test_nonce_expiring(self):
        """A hot NONCE key as tests/sim makes it: ttls of 1-100 ms, log
        times, answers with every record field, :info claims (applied or
        not) and retries; half of them with one answer changed. The search
        leaves out the :info claims no answer can observe (model.silent):
        the brute force, which places every subset of them, must agree."""
        SearchAgainstReference.silent_keys = 0
        n, bad = self._random(lambda rng, j: nonce_expiring(rng, j % 2 == 1), SEED + 131)
        self.assertGreater(bad, 0)
        self.assertGreater(n - bad, 0)
        print("\n  search = reference: nonce expiring %d keys (%d not linearizable, "
              "%d with silent calls)" % (n, bad, self.silent_keys), file=sys.stderr)
        self.assertGreater(self.silent_keys, n // 10)

    def test_corpus_mutants(self):
        """Every mutant of every corpus key, time fields included: both
        verdicts, legal and contract-breaking, must agree."""
        n = bad = 0
        for path in CORPUS:
            src = mutate.Source(path)
            for kkey in src.bykey:
                for m in mutate.key_mutants(src, kkey):
                    calls, events = pair(m.ops(src, only=src.projection(kkey)))
                    for k, g in model.key_ops(calls, events).items():
                        ok = self._agree(k, g, "%s %s" % (m.kind, m.what))
                        if ok is not None:
                            n += 1
                            bad += not ok
        self.assertGreater(n, 1000)
        print("\n  search = reference: corpus mutants %d keys (%d not linearizable)" % (n, bad),
              file=sys.stderr)


def nonce_expiring(rng, perturb):
    """Two NONCE keys, each claimed by up to 7 calls, answered by a concrete
    state machine (docs/state-machine.md) at increasing log times with
    short ttls, so the record expires and is claimed again; then maybe one
    answer changed (see SearchAgainstReference.test_nonce_expiring)."""
    return _expiring_key(rng, perturb, "k0", 0) + _expiring_key(rng, perturb, "k1", 100)


def _expiring_key(rng, perturb, key, p0):
    calls, rids = [], []
    for i in range(p0, p0 + rng.randint(2, 7)):
        if rids and rng.random() < 0.25:
            rid = rng.choice(rids)
        else:
            rid = "r%d" % i
            rids.append(rid)
        inv = rng.uniform(0, 20)
        ret = inv + rng.uniform(0.5, 8)
        calls.append(dict(i=i, rid=rid, inv=inv, ret=ret, p=rng.uniform(inv, ret),
                          ttl=rng.choice([1, 5, 20, 100])))
    now, idx, rec = 1000, 10, None
    for c in sorted(calls, key=lambda c: c["p"]):
        c["typ"] = rng.choices(["ok", "fail", "info"], [60, 10, 30])[0]
        if c["typ"] == "fail":
            c["res"] = {"error": "UNAVAILABLE", "applied": "false"}
            continue
        if c["typ"] == "info":
            c["res"] = {"error": "DEADLINE_EXCEEDED", "applied": "unknown"}
            if rng.random() < 0.5:
                continue                      # never applied
        now += rng.choice([0, 1, 3, 10, 30])
        idx += 1
        if rec is not None and rec["E"] <= now:
            rec = None
        if rec is None:
            rec = {"first": c["rid"], "F": now, "E": now + c["ttl"], "idx": idx}
            out, retry = "ACCEPTED", False
        elif rec["first"] == c["rid"]:
            out, retry = "ACCEPTED", True
        else:
            out, retry = "REPLAYED", False
        if c["typ"] == "ok":
            c["res"] = {"outcome": out, "retry": retry, "log-time-ms": now,
                        "first-request-id": rec["first"], "first-index": rec["idx"],
                        "first-time-ms": rec["F"], "expires-ms": rec["E"]}
    oks = [c for c in calls if c["typ"] == "ok"]
    if perturb and oks:
        r = rng.choice(oks)["res"]
        m = rng.randrange(4)
        if m == 0:
            r["log-time-ms"] += rng.choice([-30, -1, 1, 30])
        elif m == 1:
            r["expires-ms"] += rng.choice([-1, 1])
        elif m == 2:
            r["first-request-id"] = rng.choice(rids + ["zz"])
        else:
            r["outcome"] = "REPLAYED" if r["outcome"] == "ACCEPTED" else "ACCEPTED"
            r["retry"] = False
    specs = []
    for c in calls:
        args = {"scope": "s", "key": key, "request-id": c["rid"], "kind": "NONCE",
                "ttl-ms": c["ttl"]}
        ret = gen.INF if c["typ"] == "info" and rng.random() < 0.5 else c["ret"]
        specs.append({"p": c["i"], "f": "claim", "inv": c["inv"], "ret": ret,
                      "type": c["typ"], "args": args, "res": c["res"]})
    return specs


if __name__ == "__main__":
    unittest.main()
