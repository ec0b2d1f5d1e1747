"""One randomized run: cluster, workload, nemesis, final phase, checker."""

import argparse
import os
import random
import subprocess
import sys
import threading
import time

from . import faults, probes, sandbox
from .cluster import Cluster, ELECTION, HEARTBEAT
from .common import HERE, K, History, Samples, dumps, log, rid
from .nemesis import DISK_MB, KINDS, Nemesis
from .workload import WORKLOADS, Client, worker
from .timeload import TIME_WORKLOADS

WORKLOADS = dict(WORKLOADS, **TIME_WORKLOADS)   # windowed, lease, time


class Run:
    """What one run holds: options, history, cluster, counters."""

    def __init__(self, a):
        self.a = a
        self.dir = a.inner
        self.seed = a.seed
        self.rate = a.rate
        self.n_workers = a.workers
        self.call_timeout = "2s"
        self.harness_timeout = 6.0
        self.scope = "jepsen-%s-%s" % (os.path.basename(self.dir), rid()[:8])
        self.clients = []
        self.counts = {}
        self.lock = threading.Lock()
        self.process = -1
        self.hist = History(os.path.join(self.dir, "history.edn"))
        self.samples = Samples(os.path.join(self.dir, "status.edn"), self.hist)
        self.cluster = Cluster(self.dir, a.build_dir, a.shim, self.hist,
                               self.samples, a.node_args,
                               tls=getattr(a, "tls", False))
        sandbox.CLEANUPS.append(self.cluster.stop_all)
        if "disk" in getattr(a, "nemesis", ()):
            self.cluster.tmpfs_mb = DISK_MB
            # snapshots every ~3 s: a full disk then fails a write soon
            # (raft_uv's preallocated segments alone last for minutes)
            self.cluster.extra_node_args += ["--snapshot-threshold", "128",
                                             "--snapshot-trailing", "64"]
        self.wl = None

    def next_process(self):
        with self.lock:
            self.process += 1
            return self.process

    def count(self, typ, what):
        with self.lock:
            k = "%s %s" % (typ, what)
            self.counts[k] = self.counts.get(k, 0) + 1

    def write_options(self, extra):
        a = self.a
        m = {K("seed"): a.seed, K("nodes"): a.nodes, K("rate"): a.rate,
             K("workers"): a.workers, K("scope"): self.scope,
             K("build-dir"): a.build_dir, K("election-timeout"): ELECTION,
             K("heartbeat"): HEARTBEAT, K("node-args"): list(a.node_args)}
        m.update(extra)
        with open(os.path.join(self.dir, "run.edn"), "w") as f:
            f.write(dumps(m) + "\n")

    # -- the final phase ------------------------------------------------------

    def settle(self, timeout=60):
        """After healing: a leader, the members reconciled from its directory,
        every member running. Returns the members."""
        cl = self.cluster
        t0 = time.monotonic()
        try:
            ld = cl.wait(lambda: cl.leader(), 30, "a leader")
            log("leader %s after %.1fs" % (ld.name, time.monotonic() - t0))
        except TimeoutError as e:
            log(str(e))
        # joiners still trying: give them time, then stop those not voters
        pending = [n for n in cl.running() if n not in cl.members and
                   not n.retired]
        if pending:
            log("final: waiting for joiners %s" % pending)
            try:
                cl.wait(lambda: all(n.read_id() in (cl.voters() or set())
                                    for n in pending), 30, "joiners", step=0.5)
            except TimeoutError as e:
                log(str(e))
        if not cl.reconcile(timeout=timeout):
            log("final: no member directory could be read")
        for n in cl.running():
            if n not in cl.members:
                rc = n.stop(timeout=10)
                log("final: stopped non-member %s (exit %s)" % (n.name, rc))
        for n in cl.members:
            if not n.alive():
                log("final: restarting member %s" % n.name)
                n.start()
        try:
            cl.wait(lambda: cl.leader(), 30, "a leader of the final members")
        except TimeoutError as e:
            log(str(e))
        return list(cl.members)

    def probe_all(self, keys, members, idempotent):
        """The final probes (probes.py): every key through every member
        until each has a definite answer, or the deadline (then R7 fails
        the run); the workload's own probe claim where it has one."""
        return probes.probe_all(
            self, keys, members, idempotent,
            lambda addr: Client(self, addr, sticky=True),
            probe=getattr(self.wl, "probe", None))

    def finish(self):
        """Last status of every running node, stop everything by PID."""
        cl = self.cluster
        time.sleep(1.5)       # status samples after the probes
        for n in cl.running():
            # the state digest hashes the whole table: seconds at millions
            st = cl.status(n, "20s", digest=True, wall=25)
            if st:
                cl.record_status(n, st)
                log("status %s: %s term %s applied_index %s applied_digest %s "
                    "state_digest %s" % (n.name, st.get("role"), st.get("term"),
                                         st.get("applied_index"),
                                         st.get("applied_digest"),
                                         st.get("state_digest")))
        for n, rc in cl.stop_all():
            self.hist.op("info", "nemesis", "stop", {K("node"): n.client_addr,
                                                     K("exit"): rc})
            log("stopped %s: exit %s" % (n.name, rc))
        self.hist.close()
        self.samples.close()
        for k in sorted(self.counts):
            log("  %6d %s" % (self.counts[k], k))

    def write_faults(self):
        """faults.edn: the faults that took effect, by kind (jepsen/local/ci
        reads it), and the summary line in the log."""
        asked = list(getattr(self.a, "nemesis", []) or [])
        summary = self.cluster.tally.summary()
        with open(os.path.join(self.dir, "faults.edn"), "w") as f:
            f.write(dumps(faults.to_edn(summary, asked)) + "\n")
        log(faults.summary_line(summary, asked))
        gone = faults.missing(asked, summary)
        if gone:
            log("faults: no effective fault of %s in this run (jepsen/local/ci "
                "fails such a run)" % ", ".join(gone))

    def check(self):
        self.write_faults()
        cmd = [sys.executable, os.path.join(HERE, "check"),
               os.path.join(self.dir, "history.edn"),
               "--samples", os.path.join(self.dir, "status.edn"),
               "--results", os.path.join(self.dir, "results.edn")]
        for n in self.cluster.nodes:
            cmd += ["--logs", n.log]
        log("checking: %s" % " ".join(cmd[:6]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        with open(os.path.join(self.dir, "check.out"), "w") as f:
            f.write(p.stdout + p.stderr)
        for line in p.stdout.strip().splitlines()[-40:]:
            log("check: " + line)
        if p.stderr.strip():
            log("check stderr: " + p.stderr.strip()[-2000:])
        rc = p.returncode
        if self.cluster.asserts:
            for what, msg in self.cluster.asserts:
                log("harness assertion failed: %s: %s" % (what, msg))
            rc = rc if rc not in (0,) else 1
        return rc

    # -- the table at size ---------------------------------------------------

    def prefill(self, n):
        """Claim @n unique keys (scope "prefill-...", outside the checked
        workload's) through once-bench before the workload starts, so that
        the run's snapshots, installs and replacements move a large table.
        Raises if the fill does not finish."""
        bench = os.path.join(self.a.build_dir, "once-bench")
        cmd = [bench, "--cluster", ",".join(self.cluster.addrs()),
               "--connections", "4", "--pipeline", "256", "--keys", "unique",
               "--count", str(n), "--ttl", "72h", "--timeout", "30s",
               "--scope", "prefill-" + self.scope[-8:]]
        log("prefill: %d records: %s" % (n, " ".join(cmd[1:])))
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.monotonic() - t0
        for line in (p.stdout + p.stderr).strip().splitlines()[-6:]:
            log("prefill: " + line)
        self.hist.op("info", "nemesis", "prefill",
                     {K("records"): n, K("seconds"): round(dt, 1),
                      K("exit"): p.returncode})
        if p.returncode != 0:
            raise RuntimeError("prefill of %d records failed (exit %d)"
                               % (n, p.returncode))
        log("prefill: %d records in %.0f s" % (n, dt))

    # -- one randomized run ---------------------------------------------------

    def go(self):
        a = self.a
        log("run %s: %d nodes, %ds, rate %s, workers %d, workload %s, "
            "nemesis %s, seed %d" % (os.path.basename(self.dir), a.nodes,
                                     a.time_limit, a.rate, a.workers, a.workload,
                                     ",".join(a.nemesis) or "none", a.seed))
        self.write_options({K("time-limit"): a.time_limit,
                            K("workload"): a.workload,
                            K("nemesis"): [K(x) for x in a.nemesis],
                            K("tempo"): a.tempo})
        prepare = getattr(WORKLOADS[a.workload], "prepare", None)
        if prepare is not None:       # settings the workload needs (timeload)
            prepare(self)
        self.cluster.bootstrap(a.nodes)
        if a.prefill > 0:
            self.prefill(a.prefill)
        self.wl = WORKLOADS[a.workload](self, random.Random(a.seed + 1))
        stop, nstop = threading.Event(), threading.Event()
        nem = Nemesis(self, a.nemesis or ["none"], random.Random(a.seed), a.tempo)
        ws = [threading.Thread(target=worker, args=(self, w, self.wl, stop),
                               daemon=True) for w in range(self.n_workers)]
        for t in ws:
            t.start()
        nt = threading.Thread(target=nem.loop, args=(nstop,), daemon=True)
        nt.start()
        time.sleep(a.time_limit)
        nstop.set()
        nt.join()
        nem.heal_all()
        stop.set()
        for e in self.wl.keys.wake:
            e.set()
        for t in ws:
            t.join(timeout=30)
        log("workload done: %d keys, %d nemesis events %s" % (
            self.wl.keys.next_key, nem.events,
            " ".join("%s=%d" % kv for kv in sorted(nem.counts.items()))))
        members = self.settle()
        self.probe_all(list(self.wl.keys.keys), members, self.wl.idempotent)
        self.finish()
        return self.check()


def parse(argv):
    p = argparse.ArgumentParser(
        prog="jepsen/local/run",
        description="Local chaos run of once: nodes on 127.0.1.x in a "
        "private namespace, a workload, nemeses, the checker. Exit 0 only "
        "when every check passed (1 anomalies, 2 runner error).")
    p.add_argument("--nodes", type=int, default=3, choices=(3, 5),
                   help="initial voters (default 3); membership may move "
                   "between 3 and 5")
    p.add_argument("--time-limit", type=int, default=60,
                   help="seconds of workload + nemesis (default 60)")
    p.add_argument("--rate", type=float, default=40,
                   help="target client ops/s over all workers (default 40)")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--nemesis", default="kill,partition",
                   help="comma list of %s; or none (default kill,partition)"
                   % ", ".join(KINDS))
    p.add_argument("--workload", default="nonce", choices=sorted(WORKLOADS))
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--prefill", type=int, default=0, metavar="N",
                   help="claim N unique keys (once-bench --count) before the "
                   "workload, so that snapshots, installs and replacements "
                   "move a large table (default 0)")
    p.add_argument("--tempo", type=float, default=1.0,
                   help="scale the nemesis' gaps and fault lengths (default 1; "
                   "0.4 in the soak: faults 2.5x as often)")
    sandbox.add_common_args(p)
    a = p.parse_args(argv)
    if not 0.05 <= a.tempo <= 10:
        p.error("--tempo must be in [0.05, 10]")
    a.nemesis = [x for x in a.nemesis.split(",") if x and x != "none"]
    for x in a.nemesis:
        if x not in KINDS:
            p.error("unknown nemesis %r (%s, none)" % (x, ", ".join(KINDS)))
    if a.time_limit < 1:
        p.error("--time-limit must be at least 1")
    if not 0 <= a.prefill <= 50000000:
        p.error("--prefill must be in [0, 50000000]")
    if a.rate <= 0 or a.workers < 1:
        p.error("--rate and --workers must be positive")
    return p, a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p, a = parse(argv)
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big") % 1000000
    needs = set()
    if set(a.nemesis) & {"partition", "loss"} or "membership" in a.nemesis:
        needs.add("iptables")
    if "clock" in a.nemesis:
        needs.add("faketime")
    sandbox.main(p, a, argv, "run", lambda: Run(a).go(), needs)
