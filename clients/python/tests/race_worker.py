"""One of the processes racing on one key (test_cluster.py's helper race).

    race_worker.py SCOPE KEY WORKLOG START_AT [NODE-ORDER-SHIFT]

Waits until the wall clock reaches START_AT (so the racers claim at the
same moment), runs the decorated work through the idempotent helper and
prints its return value as JSON on stdout. The work appends this process's
pid to WORKLOG: the test counts the lines (exactly one process ran it).
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clusterenv as ce  # noqa: E402
import once_client as oc  # noqa: E402


def main():
    scope, key, worklog, start_at = sys.argv[1:5]
    shift = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    nodes = ce.URLS[shift:] + ce.URLS[:shift]
    c = ce.client(nodes)

    @oc.idempotent(c, scope, key=key, lease=30, wait=30)
    def work():
        with open(worklog, "a") as f:
            f.write("%d\n" % os.getpid())
        time.sleep(1.0)  # long enough for the other to see IN_PROGRESS
        return {"by": os.getpid()}

    delay = float(start_at) - time.time()
    if delay > 0:
        time.sleep(delay)
    print(json.dumps(work()), flush=True)


if __name__ == "__main__":
    main()
