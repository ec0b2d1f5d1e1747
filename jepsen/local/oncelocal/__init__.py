"""oncelocal: the local chaos harness of once (jepsen/README.md).

  common.py    logging, ids, the history and status-sample writers (EDN)
  sandbox.py   the private namespace (unshare) every run executes in
  cluster.py   nodes (one onced incarnation each), oncectl calls and
               sessions, the network faults (iptables), membership steps
  workload.py  the nonce and idempotent workloads and their workers
  faults.py    proof that each fault and heal took effect; the tally
  nemesis.py   the fault schedule: partitions, loss, kills, pauses,
               membership, clock skew, disk full, log corruption
  probes.py    the final probes: every key through every member until
               each has a definite answer, or the deadline (R7 fails then)
  runner.py    one randomized run (jepsen/local/run)
  acceptance.py the seed's scripted sequence and its variants
  soak.py      the long profile, resumable

Python 3 standard library only.
"""
