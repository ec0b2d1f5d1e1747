"""The fault verification's pure parts (oncelocal/faults.py) and the CI's
requirement on a run's faults (jepsen/local/ci): every asked kind took
effect, none failed to, no nemesis error."""
import importlib.machinery
import importlib.util
import os
import random
import unittest

from tests.util import LOCAL
from oncelocal import faults


def load_ci():
    """jepsen/local/ci as a module (it is a script without .py)."""
    path = os.path.join(LOCAL, "ci")
    loader = importlib.machinery.SourceFileLoader("jepsen_local_ci", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def summary(eff=None, bad=None, heal=None, errors=0):
    return {"effective": dict(eff or {}), "not-effective": dict(bad or {}),
            "heal-failed": dict(heal or {}), "nemesis-errors": errors}


class TallyAndRequirement(unittest.TestCase):
    def test_tally_counts_by_kind(self):
        t = faults.Tally()
        for k in ("partition", "kill", "partition", "membership"):
            t.took_effect(k)
        t.did_not("pause")
        t.heal_did_not("partition")
        t.error()
        s = t.summary()
        self.assertEqual(s["effective"], {"partition": 2, "kill": 1,
                                          "membership": 1})
        self.assertEqual(s["not-effective"], {"pause": 1})
        self.assertEqual(s["heal-failed"], {"partition": 1})
        self.assertEqual(s["nemesis-errors"], 1)

    def test_missing_kind_fails(self):
        s = summary({"partition": 3})
        self.assertEqual(faults.missing(["partition", "kill"], s), ["kill"])
        self.assertEqual(faults.problems(["partition", "kill"], s),
                         ["no effective kill fault"])

    def test_all_kinds_effective_passes(self):
        s = summary({"partition": 3, "kill": 1, "membership": 2})
        self.assertEqual(faults.problems(["partition", "kill"], s), [])
        self.assertEqual(faults.problems([], summary()), [])

    def test_ineffective_heal_and_error_fail_even_when_counts_are_met(self):
        s = summary({"partition": 3, "kill": 1}, bad={"kill": 1})
        self.assertEqual(faults.problems(["partition", "kill"], s),
                         ["1 kill fault(s) did not take effect"])
        s = summary({"partition": 3}, heal={"partition": 2})
        self.assertEqual(faults.problems(["partition"], s),
                         ["2 partition heal(s) did not take effect"])
        s = summary({"partition": 3}, errors=1)
        self.assertEqual(faults.problems(["partition"], s),
                         ["1 nemesis error(s)"])

    def test_zero_count_is_missing(self):
        s = summary({"kill": 0})
        self.assertEqual(faults.missing(["kill"], s), ["kill"])

    def test_edn_round_trip(self):
        from oncelocal.common import dumps
        s = summary({"partition": 3, "loss": 1}, bad={"disk": 1}, errors=2)
        text = dumps(faults.to_edn(s, ["partition", "disk"]))
        asked, back = faults.from_edn(text)
        self.assertEqual(asked, ["partition", "disk"])
        self.assertEqual(back, s)
        self.assertEqual(faults.problems(asked, back),
                         ["no effective disk fault",
                          "1 disk fault(s) did not take effect",
                          "2 nemesis error(s)"])

    def test_unreadable_faults_edn(self):
        for text in ("", "{:effective", "[1 2]", "{:effective 3}"):
            with self.assertRaises(ValueError, msg=text):
                faults.from_edn(text)

    def test_summary_line(self):
        s = summary({"partition": 3}, bad={"kill": 1})
        line = faults.summary_line(s, ["partition", "kill"])
        self.assertEqual(line, "faults effective: partition=3 kill=0; "
                         "not-effective kill=1")


class CiRequirement(unittest.TestCase):
    """jepsen/local/ci's verdict on a run, from its output and faults.edn."""

    def setUp(self):
        import tempfile
        self.ci = load_ci()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def run_dir(self, s, asked):
        from oncelocal.common import dumps
        with open(os.path.join(self.tmp.name, "faults.edn"), "w") as f:
            f.write(dumps(faults.to_edn(s, asked)) + "\n")
        return "run: PASS: every check passed; seed 7; %s\n" % self.tmp.name

    def test_run_without_an_asked_kind_fails(self):
        out = self.run_dir(summary({"partition": 4}), ["partition", "kill"])
        self.assertEqual(self.ci.fault_problems(out, ["partition", "kill"]),
                         ["no effective kill fault"])

    def test_run_with_every_kind_passes(self):
        out = self.run_dir(summary({"partition": 4, "kill": 2}), ["partition", "kill"])
        self.assertEqual(self.ci.fault_problems(out, ["partition", "kill"]), [])

    def test_run_without_faults_edn_fails(self):
        out = "run: ERROR: the runner failed (rc 3; see run.log); seed 7; %s\n" % \
            os.path.join(self.tmp.name, "nothing")
        self.assertEqual(len(self.ci.fault_problems(out, ["kill"])), 1)
        self.assertEqual(len(self.ci.fault_problems("", ["kill"])), 1)

    def test_negative_control(self):
        out = self.run_dir(summary(bad={"partition": 1}), ["partition"])
        self.assertEqual(self.ci.noop_control(out, 1), [])
        self.assertNotEqual(self.ci.noop_control(out, 0), [])
        out = self.run_dir(summary({"partition": 2}), ["partition"])
        self.assertNotEqual(self.ci.noop_control(out, 1), [])

    def test_rotation_runs_every_kind(self):
        for seed in range(50):
            runs = self.ci.rotation(random.Random(seed))
            self.assertEqual(len(runs), 4)
            kinds = [k for nem, _ in runs for k in nem.split(",")]
            for k in faults.KINDS:
                self.assertIn(k, kinds, "seed %d: %s" % (seed, runs))
            for k in self.ci.EXTRA:
                self.assertEqual(kinds.count(k), 1)


class Evidence(unittest.TestCase):
    def test_cut_probe_must_time_out(self):
        res = {("127.0.1.1", "127.0.1.2"): "timeout",
               ("127.0.1.2", "127.0.1.1"): "refused",
               ("127.0.1.1", "127.0.1.3"): "open"}
        self.assertEqual([p for p, _ in faults.cut_failures(res)],
                         [("127.0.1.1", "127.0.1.3"), ("127.0.1.2", "127.0.1.1")])
        self.assertEqual(faults.cut_failures({("a", "b"): "timeout"}), [])

    def test_healed_probe_must_get_an_answer(self):
        res = {("a", "b"): "open", ("b", "a"): "refused", ("a", "c"): "timeout",
               ("c", "a"): "error: bind"}
        self.assertEqual([p for p, _ in faults.open_failures(res)],
                         [("a", "c"), ("c", "a")])

    def test_counters(self):
        text = """Chain INPUT (policy ACCEPT 120 packets, 9000 bytes)
    pkts      bytes target     prot opt in     out     source               destination
      12      720 DROP       all  --  *      *       127.0.1.1            127.0.1.2
       0        0 DROP       all  --  *      *       127.0.1.2            127.0.1.1            statistic mode random probability 0.20000000000
       5      300 DROP       all  --  *      *       127.0.1.3            127.0.1.1            statistic mode random probability 0.20000000000
"""
        self.assertEqual(faults.parse_counters(text),
                         [(12, "127.0.1.1", "127.0.1.2", False),
                          (0, "127.0.1.2", "127.0.1.1", True),
                          (5, "127.0.1.3", "127.0.1.1", True)])

    def test_stat_state(self):
        self.assertEqual(faults.stat_state("1234 (onced) T 1 2 3"), "T")
        self.assertEqual(faults.stat_state("1234 (a) b) S 1 2"), "S")
        self.assertIsNone(faults.stat_state("garbage"))
        self.assertTrue(faults.stopped("T"))
        self.assertTrue(faults.stopped("t"))
        self.assertFalse(faults.stopped("S"))
        self.assertFalse(faults.stopped(None))

    def test_log_time(self):
        line = 'ts=2026-12-01T23:22:00.250Z level=info msg="storage" backend=uring'
        self.assertAlmostEqual(faults.parse_ts(line), 1796167320.25)
        self.assertIsNone(faults.parse_ts("=== 23:22:00 start #1: onced"))
        lines = ["=== header", "no time here", line]
        self.assertAlmostEqual(faults.skew_of(lines, 1796167020.25), 300.0)
        self.assertIsNone(faults.skew_of(["x"], 0))

    def test_offsets(self):
        self.assertEqual(faults.offset_seconds("+5m"), 300)
        self.assertEqual(faults.offset_seconds("-5m"), -300)
        self.assertEqual(faults.offset_seconds("+299s"), 299)
        self.assertEqual(faults.offset_seconds("-301s"), -301)
        self.assertEqual(faults.offset_seconds("+1h"), 3600)
        with self.assertRaises(ValueError):
            faults.offset_seconds("@2020-01-01 00:00:00")

    def test_skew_judgement(self):
        self.assertTrue(faults.skew_ok(302.5, 300))
        self.assertTrue(faults.skew_ok(-299.0, -301))
        self.assertFalse(faults.skew_ok(1.0, 300))      # faketime not in effect
        self.assertFalse(faults.skew_ok(-300.0, 300))   # the wrong way
        self.assertFalse(faults.skew_ok(None, 300))     # nothing logged
        self.assertTrue(faults.skew_ok(2.0, 0))
        self.assertFalse(faults.skew_ok(300.0, 0))      # still skewed

    def test_enospc_lines(self):
        self.assertEqual(faults.logged_enospc([
            'msg="append failed" err="No space left on device"', "ok",
            "write: ENOSPC"]), 2)

    def test_noop_switch(self):
        old = os.environ.get(faults.NOOP_ENV)
        try:
            os.environ[faults.NOOP_ENV] = "partition, kill"
            self.assertTrue(faults.noop("partition"))
            self.assertTrue(faults.noop("kill"))
            self.assertFalse(faults.noop("pause"))
            del os.environ[faults.NOOP_ENV]
            self.assertFalse(faults.noop("partition"))
        finally:
            if old is not None:
                os.environ[faults.NOOP_ENV] = old


class Schedules(unittest.TestCase):
    def test_rounds_cover_every_kind(self):
        kinds = ["partition", "kill", "membership", "clock"]
        for seed in range(20):
            it = faults.rounds(random.Random(seed), kinds)
            first = [next(it) for _ in range(len(kinds))]
            self.assertEqual(sorted(first), sorted(kinds))
            second = [next(it) for _ in range(len(kinds))]
            self.assertEqual(sorted(second), sorted(kinds))

    def test_rounds_put_kinds_without_effect_first(self):
        kinds = ["partition", "kill", "membership", "clock"]
        have = set()
        it = faults.rounds(random.Random(5), kinds, lambda: have)
        first = [next(it) for _ in range(4)]
        self.assertEqual(sorted(first), sorted(kinds))
        have.update(k for k in kinds if k != "membership")
        second = [next(it) for _ in range(4)]
        self.assertEqual(second[0], "membership")
        self.assertEqual(sorted(second), sorted(kinds))

    def test_rounds_are_seeded(self):
        a = faults.rounds(random.Random(3), faults.KINDS)
        b = faults.rounds(random.Random(3), faults.KINDS)
        self.assertEqual([next(a) for _ in range(20)], [next(b) for _ in range(20)])

    def test_majorities_ring_cuts_and_leaves_each_node_a_majority(self):
        n = 5
        drops = set(faults.ring_drops(n))
        self.assertTrue(drops, "a ring with no cut link is no partition")
        for a, b in drops:
            self.assertIn((b, a), drops, "cuts are symmetric")
        seen = []
        for i in range(n):
            hears = {i} | {j for j in range(n) if (j, i) not in drops}
            self.assertEqual(len(hears), 3, "node %d hears %s" % (i, hears))
            seen.append(frozenset(hears))
        self.assertEqual(len(set(seen)), n, "no two nodes share a majority")


if __name__ == "__main__":
    unittest.main()


class RestartOfRemovedNode(unittest.TestCase):
    """cluster.restart_verified on a node removed while it was down (a
    removal answered DEADLINE_EXCEEDED that took effect later; seed 653263):
    not restarted, retired, no failed heal; a tombstone on a node the
    directory still lists is an anomaly."""

    class Node:
        name, id = "n2g1", "3aa620d77a54fbca"

        def __init__(self, tomb):
            self.tomb, self.retired, self.started = tomb, False, 0

        def tombstoned(self):
            return self.tomb

        def read_id(self):
            return self.id

        def start(self, faketime=None):
            self.started += 1

        def wait_exit(self, secs):
            return None

    class Cl:
        TOMBSTONE_WAIT_S = 0

        def __init__(self, directory):
            import threading
            self.lock = threading.Lock()
            self.members, self.dir, self.fails = [], directory, []

        def directory(self, via=None):
            return self.dir

        def fail(self, what, msg):
            self.fails.append(what)

        def heal_failed(self, kind, why):
            raise AssertionError("heal_failed: " + why)

        def retire(self, n):
            from oncelocal import cluster
            cluster.Cluster.retire(self, n)

    def restart(self, cl, n):
        from oncelocal import cluster
        return cluster.Cluster.restart_verified(cl, n, "clock")

    def test_removed_node_is_retired_not_restarted(self):
        n = self.Node(tomb=True)
        cl = self.Cl({"d8b4d4c9ecc96187": "voter"})
        cl.members.append(n)
        self.assertFalse(self.restart(cl, n))
        self.assertTrue(n.retired)
        self.assertEqual((n.started, cl.members, cl.fails), (0, [], []))

    def test_tombstone_of_a_listed_member_fails(self):
        n = self.Node(tomb=True)
        cl = self.Cl({n.id: "voter"})
        self.restart(cl, n)
        self.assertEqual(cl.fails, ["tombstone-of-member"])

    def test_live_member_is_restarted(self):
        n = self.Node(tomb=False)
        self.assertTrue(self.restart(self.Cl({n.id: "voter"}), n))
        self.assertEqual(n.started, 1)
