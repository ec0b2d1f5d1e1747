#!/usr/bin/env python3
"""The Python client's whole suite (clients/python/test runs this).

Two runs under clients/testing/with_cluster.py: a plain cluster (every
test: test_unit.py and test_cluster.py) and a --tls cluster
(test_cluster.py again, as the tenant, with the TLS tests). Each run's
unittest output passes through; the last line is the sum, counted from
unittest's own "Ran N tests" / "FAILED (...)" / "OK (...)" lines:

    N passed, N failed

A skipped test is not a pass: under the clusters every test must run, so
a skip counts as a failure (the runs name their tests so that none is
bound to the other run's cluster).

Exit 0 only when everything passed; 77 when Python is older than 3.9.
A run whose cluster failed (with_cluster.py's exit code, e.g. a node that
did not stop cleanly, or no unittest summary at all) counts one failure.
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
WITH_CLUSTER = os.path.join(ROOT, "clients", "testing", "with_cluster.py")


def run(tls, targets):
    cmd = [sys.executable, WITH_CLUSTER] + (["--tls"] if tls else []) + [
        "--", sys.executable, "-m", "unittest", "-v"] + targets
    print("=== %s" % " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONWARNINGS="ignore::ResourceWarning")
    # The runs' working directory is the package: paths the caller gave
    # relative to its own stay right.
    for k in ("top_builddir", "top_srcdir", "ONCED", "ONCECTL"):
        if env.get(k):
            env[k] = os.path.abspath(env[k])
    p = subprocess.Popen(cmd, cwd=PKG, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    ran = failed = skipped = None
    for raw in p.stdout:
        line = raw.decode("utf-8", "replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        m = re.match(r"^Ran (\d+) tests? in ", line)
        if m:
            ran = int(m.group(1))
        m = re.match(r"^(OK|FAILED)\b(?: \((.*)\))?\s*$", line)
        if m and ran is not None:
            counts = dict((k, int(v)) for k, v in re.findall(
                r"(\w+)=(\d+)", m.group(2) or ""))
            failed = counts.get("failures", 0) + counts.get("errors", 0) \
                + counts.get("unexpected_successes", 0)
            skipped = counts.get("skipped", 0) + \
                counts.get("expected_failures", 0)
    rc = p.wait()
    if ran is None or failed is None:
        print("=== no unittest summary (exit %d): 1 failure" % rc)
        return 0, 1
    passed = ran - failed - skipped
    if skipped:
        print("=== %d skipped: counted as failed" % skipped)
        failed += skipped
    if rc != 0 and failed == 0:
        print("=== with_cluster.py exited %d although the tests passed: "
              "1 failure" % rc)
        failed = 1
    return passed, failed


def main():
    if sys.version_info < (3, 9):
        print("Python %d.%d < 3.9: skip" % sys.version_info[:2])
        return 77
    passed = failed = 0
    plain = ["tests.test_unit"] + ["tests.test_cluster." + c for c in (
        "TestOutcomes", "TestNewFeatures", "TestFailover", "TestHelper",
        "TestZRecreatedCluster")]
    for tls, targets in ((False, plain), (True, ["tests.test_cluster"])):
        p, f = run(tls, targets)
        passed += p
        failed += f
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
