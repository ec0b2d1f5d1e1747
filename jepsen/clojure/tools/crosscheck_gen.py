"""Writes random histories (jepsen/local/tests/test_crosscheck.py's
generators: arbitrary NONCE ones, a simulated correct cluster's NONCE and
IDEMPOTENT ones, half of them perturbed) and what jepsen/local/check's
rules find in each, for jepsen/clojure/crosscheck-python.

    python3 crosscheck_gen.py LOCAL_DIR OUT_DIR N SEED

OUT_DIR/h-I.edn: the histories; OUT_DIR/expected.edn: {path ["R1 name" ...]}
(LIN, the model search, is left out: the Clojure side has Knossos instead).
"""
import os
import random
import sys

local, out, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, local)
from tests import test_crosscheck as tc  # noqa: E402
from tests.util import history_text  # noqa: E402
from oncecheck.history import read_ops, pair  # noqa: E402
from oncecheck import checker  # noqa: E402
from oncecheck.edn import dumps  # noqa: E402

rng = random.Random(seed)
random.seed(seed)       # the generators also draw from the module RNG
exp = {}
for i in range(n):
    k = i % 4
    specs = (tc.nonce_random(rng) if k == 0 else tc.nonce_system(rng, k == 2) if k in (1, 2)
             else tc.idem_system(rng, rng.random() < 0.5))
    text = history_text(specs)
    path = os.path.join(out, "h-%d.edn" % i)
    with open(path, "w") as fh:
        fh.write(text)
    calls, events = pair(read_ops(text))
    res = checker.check_history(calls, events)
    exp[path] = sorted({"%s %s%s" % (a.rule, a.name, "" if a.fatal else " (warning)")
                        for a in res.anomalies if a.rule != "LIN"})
with open(os.path.join(out, "expected.edn"), "w") as fh:
    fh.write(dumps(exp) + "\n")
print("crosscheck: %d histories, %d with anomalies (seed %d)"
      % (n, sum(1 for v in exp.values() if v), seed))
