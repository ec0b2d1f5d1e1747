"""The soak's choice of parts (oncelocal/soak.py, next_part): the full
rotation until a target is met, then only the parts that feed the other
target, and each history counted by the rules the soak states."""
import os
import tempfile
import unittest

from tests import util  # noqa: F401  (puts jepsen/local on sys.path)
from oncelocal import soak


def st(membership, faults, parts):
    return {"membership": membership, "faults": faults, "parts": parts}


class NextPart(unittest.TestCase):
    def test_full_rotation_until_a_target(self):
        seen = [soak.next_part(st(10 * i, 10 * i, i))
                for i in range(len(soak.ROTATION))]
        self.assertEqual(seen, list(soak.ROTATION))
        self.assertEqual(soak.next_part(st(499, 999, len(soak.ROTATION))),
                         soak.ROTATION[0])

    def test_faults_only_after_the_membership_target(self):
        for i in range(6):
            nem, _, prefill = soak.next_part(st(soak.MEMBERSHIP_TARGET, 10, 20 + i))
            self.assertNotIn("membership", nem)
            self.assertTrue({"partition", "kill"} <= set(nem.split(",")))
            self.assertEqual(prefill, 0)

    def test_membership_only_after_the_fault_target(self):
        for i in range(4):
            nem, _, _ = soak.next_part(st(10, soak.FAULT_TARGET, 20 + i))
            self.assertEqual(nem, "membership")


class CountHistory(unittest.TestCase):
    def test_counts(self):
        lines = [
            '{:process :nemesis, :f :membership-done, :op "grow", :result "True"}',
            '{:process :nemesis, :f :membership-done, :op "transfer", :result "True"}',
            '{:process :nemesis, :f :membership-done, :op "shrink", :result "False"}',
            '{:process :nemesis, :f :fault-effective, :kind "partition"}',
            '{:process :nemesis, :f :fault-effective, :kind "loss"}',
            '{:process :nemesis, :f :fault-effective, :kind "pause"}',
            '{:process :nemesis, :f :kill, :value "n1"}',
            '{:process 3, :f :kill}',
        ]
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "history.edn")
            with open(p, "w") as f:
                f.write("\n".join(lines) + "\n")
            self.assertEqual(soak.count_history(p), (1, 3))


if __name__ == "__main__":
    unittest.main()
