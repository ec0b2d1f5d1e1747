"""The seed's acceptance sequence (jepsen/README.md, 'Acceptance sequence') and its variants.

A claim R (scope S, key N, request id r0) is accepted through n1; replays of
R (fresh request ids) must be denied naming r0 by every node that is a
member at each step, while the node that recorded N is removed, replaced
by a fresh id that can learn N only from a snapshot, the cluster grows to
5, and shrinks to 3 nodes none of which existed when R was accepted. A
light background workload runs all the while. Every call is a history op
(the checker runs at the end: R1-R10, LIN); each step also asserts its own
expected outcome, and a failed assertion fails the run.

Variants (--variant):
  base                  n1 is a follower when it is removed
  leader-removal        n1 leads when it is removed (it transfers first)
  kill-first            n1 is killed (-9) first, then the dead member removed
  zombie                n1 is cut off, removed by the majority, replays sent
                        to it (never ACCEPT), then healed and stopped
  snapshot-only         hundreds of entries and two snapshots before n4
                        joins: N reaches it only by InstallSnapshot (its data
                        directory must hold a snapshot)
  partition-membership  every membership step runs while the leader is cut
                        off for a while; the leader is paused during n4's
                        promotion
  all-restart           after the shrink, kill -9 of every node, restart,
                        replays at once: DENY or a definite error, never
                        ACCEPT
Every variant also runs step 8 with 5 members: a fresh claim sent at once
through all 5 nodes gets exactly one ACCEPTED.
"""

import argparse
import os
import random
import sys
import threading
import time

from . import sandbox
from .common import K, log, rid
from .runner import Run
from .workload import NonceWorkload, Client, worker

VARIANTS = ("base", "leader-removal", "kill-first", "zombie", "snapshot-only",
            "partition-membership", "all-restart")
NODE_ARGS = ["--snapshot-threshold", "64", "--snapshot-trailing", "16"]
STEP_TIMEOUT = 30


class Acceptance(Run):
    def __init__(self, a):
        a.rate, a.workers, a.nemesis, a.nodes = 10, 3, [], 3
        a.node_args = NODE_ARGS + list(a.node_args)
        super().__init__(a)
        self.variant = a.variant
        self.key = "N"
        self.r0 = rid()
        self.resume_lock = threading.Lock()

    # -- helpers --------------------------------------------------------------

    def expect(self, cond, what, msg):
        if not cond:
            self.cluster.fail("%s: %s" % (self.variant, what), msg)
        return cond

    def node(self, i):
        """The first incarnation on host i (n1 = host 1, ...)."""
        for n in self.cluster.nodes:
            if n.host == i:
                return n
        return None

    def claim_until(self, node, key, req_id, timeout=STEP_TIMEOUT):
        """Claim through @node until a definite answer (:ok); :info keeps
        the request id (a client retry), :fail retries too. Returns the
        answer object, or None at the timeout."""
        c = Client(self, node.client_addr, sticky=True)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                typ, obj = c.claim(self.scope, key, req_id)
                if typ == "ok":
                    return obj
                time.sleep(0.3)
        finally:
            c.close()
        return None

    def deny_all(self, nodes, what, timeout=STEP_TIMEOUT):
        """Replay R (fresh request id) through each of @nodes: REPLAYED with
        first_request_id r0 expected from each."""
        for n in nodes:
            obj = self.claim_until(n, self.key, rid(), timeout)
            if obj is None:
                self.expect(False, what, "no answer from %s in %ds" % (n.name, timeout))
                continue
            self.expect(obj.get("outcome") == "REPLAYED" and
                        obj.get("first_request_id") == self.r0, what,
                        "%s answered %s first_request_id=%s (want REPLAYED %s)"
                        % (n.name, obj.get("outcome"), obj.get("first_request_id"),
                           self.r0))
        log("step ok: %s: R denied by %s" % (what, [n.name for n in nodes]))

    def step(self, name):
        self.hist.op("info", "nemesis", "acceptance-step",
                     {K("variant"): self.variant, K("step"): name})
        log("=== step %s" % name)

    def under_partition(self, fn):
        """partition-membership: run @fn while the leader is cut off for
        2-4 s (started before @fn, healed while or after it runs)."""
        cl = self.cluster
        if self.variant != "partition-membership":
            return fn()
        ld = cl.leader()
        if ld is None:
            return fn()
        rest = [n for n in cl.running() if n is not ld]
        cl.cut([ld], rest)
        self.hist.op("info", "nemesis", "start-partition",
                     {K("mode"): "leader", K("groups"): [[ld.client_addr],
                                                         cl.addrs(rest)]})
        cl.effective("partition", {K("mode"): "leader",
                                   K("links-cut"): cl.verify_cut()})
        log("leader %s cut off during the step" % ld.name)
        t = threading.Timer(self.rng.uniform(2, 4), self.heal)
        t.start()
        try:
            return fn()
        finally:
            t.join()
            self.heal()

    def resume(self, n):
        """SIGCONT of @n if it is still stopped (verified), once."""
        with self.resume_lock:
            if not n.paused:
                return
            self.cluster.resume_verified(n)
        self.hist.op("info", "nemesis", "resume", {K("node"): n.client_addr})

    def heal(self):
        if self.cluster.heal():
            self.hist.op("info", "nemesis", "stop-partition", {})
            log("healed")

    def until(self, fn, what, timeout=90):
        """Repeat a membership step until it is done (it may fail while a
        partition is in force); reconcile between tries."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.under_partition(fn)
            if r:
                return r
            self.cluster.reconcile()
            time.sleep(1)
        self.expect(False, what, "not done in %ds" % timeout)
        return None

    def remove(self, n):
        cl = self.cluster

        def once():
            if n not in cl.members:
                return True
            return cl.remove(n) == "OK"
        return self.until(once, "remove %s" % n.name)

    def add(self, host, standby=False):
        cl = self.cluster
        box = []

        def once():
            if box and box[0].read_id() in (cl.voters() or set()):
                return box[0]
            if box:
                # a joiner still trying; it goes on by itself
                try:
                    cl.wait(lambda: box[0].read_id() in (cl.voters() or set()),
                            20, "%s to be a voter" % box[0].name, step=0.5)
                    with cl.lock:
                        if box[0] not in cl.members:
                            cl.members.append(box[0])
                    return box[0]
                except TimeoutError:
                    return None
            n = cl.new_node(host)
            box.append(n)
            n.start(join=cl.addrs(), role="standby" if standby else None)
            try:
                cl.wait(n.read_id, 10, "%s's node-id" % n.name)
                want = "standby" if standby else "voter"
                cl.wait(lambda: (cl.directory() or {}).get(n.id) == want, 30,
                        "%s to be a %s" % (n.name, want), step=0.5)
            except TimeoutError:
                return None
            if not standby:
                with cl.lock:
                    cl.members.append(n)
            return n
        return self.until(once, "add a node on host %d" % host)

    def promote(self, n):
        cl = self.cluster
        paused = []
        if self.variant == "partition-membership":
            ld = cl.leader()
            if ld is not None:
                self.hist.op("info", "nemesis", "pause", {K("node"): ld.client_addr,
                                                          K("target"): "leader"})
                cl.pause_fault(ld)
                paused.append(ld)
                log("leader %s paused during the promotion" % ld.name)
                t = threading.Timer(2.5, self.resume, args=(ld,))
                t.start()
                paused.append(t)

        def once():
            if n.read_id() in (cl.voters() or set()):
                return True
            return cl.assign(n, "voter") == "OK"
        ok = self.until(once, "promote %s" % n.name)
        time.sleep(0.1)
        if paused:
            paused[1].cancel()
            self.resume(paused[0])
        if ok:
            with cl.lock:
                if n not in cl.members:
                    cl.members.append(n)
        return ok

    # -- the sequence -----------------------------------------------------------

    def go(self):
        a = self.a
        self.rng = random.Random(a.seed)
        cl = self.cluster
        v = self.variant
        log("acceptance %s: seed %d, scope %s, R = (%s, %s), r0 %s" % (
            v, a.seed, self.scope, self.scope, self.key, self.r0))
        self.write_options({K("variant"): v})
        self.step("start: 3 voters n1..n3")
        cl.bootstrap(3)
        self.wl = NonceWorkload(self, random.Random(a.seed + 1))
        stop = threading.Event()
        ws = [threading.Thread(target=worker, args=(self, w, self.wl, stop),
                               daemon=True) for w in range(self.n_workers)]
        for t in ws:
            t.start()
        n1, n2, n3 = self.node(1), self.node(2), self.node(3)

        self.step("1: R through n1")
        if v == "leader-removal" and cl.leader() is not n1:
            cl.transfer(n1)
            cl.wait(lambda: cl.leader() is n1, 20, "n1 to lead")
        if v in ("base", "kill-first", "zombie") and cl.leader() is n1:
            cl.transfer(n2)
            cl.wait(lambda: cl.leader() not in (n1, None), 20, "n1 to follow")
        obj = self.claim_until(n1, self.key, self.r0)
        self.expect(obj is not None and obj.get("outcome") == "ACCEPTED" and
                    obj.get("first_request_id") == self.r0, "1: ACCEPT",
                    "n1 answered %s" % (obj or {}).get("outcome"))
        ld = cl.leader()
        log("R accepted through n1; leader %s" % (ld.name if ld else None))

        self.step("2: replays through n2, n3")
        self.deny_all([n2, n3], "2: DENY")

        self.step("3: remove n1 (%s)" % v)
        if v == "kill-first":
            self.hist.op("info", "nemesis", "kill", {K("mode"): "one",
                                                     K("nodes"): [n1.client_addr]})
            cl.kill_fault(n1)
            self.remove(n1)
        elif v == "zombie":
            rest = [n for n in cl.running() if n is not n1]
            cl.cut([n1], rest)
            self.hist.op("info", "nemesis", "start-partition",
                         {K("mode"): "zombie", K("groups"): [[n1.client_addr],
                                                             cl.addrs(rest)]})
            cl.effective("partition", {K("mode"): "zombie",
                                       K("links-cut"): cl.verify_cut()})
            self.expect(cl.remove(n1, wait_exit=0) == "OK", "3: remove zombie",
                        "the majority did not remove n1")
            c = Client(self, n1.client_addr, sticky=True)
            for _ in range(3):
                typ, o = c.claim(self.scope, self.key, rid())
                self.expect(o.get("outcome") != "ACCEPTED", "3: zombie never ACCEPTs",
                            "zombie n1 answered ACCEPTED")
            c.close()
            self.heal()
            time.sleep(1.5)
            c = Client(self, n1.client_addr, sticky=True)
            typ, o = c.claim(self.scope, self.key, rid())
            self.expect(o.get("outcome") != "ACCEPTED", "3: zombie never ACCEPTs",
                        "healed zombie n1 answered ACCEPTED")
            c.close()
            rc = n1.stop()
            log("zombie n1 stopped (exit %s); its directory is not used again" % rc)
        else:
            if v == "leader-removal" and cl.leader() is not n1:
                cl.transfer(n1)
                try:
                    cl.wait(lambda: cl.leader() is n1, 20, "n1 to lead")
                except TimeoutError as e:
                    log(str(e))
            self.remove(n1)
        self.deny_all(list(cl.members), "3: DENY after the removal")

        self.step("4: snapshot, then n4 (fresh id) as standby, promoted")
        if v == "snapshot-only":
            for i in range(200):
                self.claim_until(n2, "pad-%d" % i, rid(), 10)
        snap = cl.snapshot()
        self.expect(snap.get("outcome") == "OK", "4: snapshot", "snapshot take: %s" % snap)
        if v == "snapshot-only":
            for i in range(200, 280):
                self.claim_until(n2, "pad-%d" % i, rid(), 10)
            snap = cl.snapshot()
            self.expect(snap.get("outcome") == "OK", "4: snapshot", "second snapshot: %s" % snap)
        n4 = self.add(4, standby=True)
        if n4 is not None:
            self.promote(n4)
            if v == "snapshot-only":
                # raft_uv: snapshot-T-I-MS(.meta); the once store: log/snap-T-I
                snaps = [f for _, _, fs in os.walk(n4.dir) for f in fs
                         if f.startswith("snap")]
                self.expect(snaps, "4: catch-up by snapshot",
                            "n4's directory holds no snapshot: %s" %
                            sorted(f for _, _, fs in os.walk(n4.dir) for f in fs))
            self.deny_all([n4], "4: DENY by n4")
            self.deny_all(list(cl.members), "4: DENY by all")

        self.step("5: grow to 5 (n5, n6)")
        n5 = self.add(5)
        n6 = self.add(6)
        self.deny_all([n for n in (n5, n6) if n], "5: DENY by n5, n6")

        self.step("8: a fresh claim sent at once through all 5 members")
        self.concurrent()

        self.step("6: shrink to 3 (remove n2, n3)")
        self.remove(n2)
        self.remove(n3)
        olds = {n1, n2, n3}
        self.expect(not (set(cl.members) & olds), "6: only new nodes",
                    "members %s include an original node" % cl.members)
        self.deny_all(list(cl.members), "6: DENY by n4, n5, n6")

        if v == "all-restart":
            self.step("7: kill -9 of every node, restart, replays at once")
            ms = list(cl.members)
            self.hist.op("info", "nemesis", "kill", {K("mode"): "all",
                                                     K("nodes"): cl.addrs(ms)})
            for n in ms:
                cl.kill_fault(n)
            for n in ms:
                cl.restart_verified(n, "kill")
                self.hist.op("info", "nemesis", "restart", {K("node"): n.client_addr})
            self.deny_all(ms, "7: DENY after the restart of all")

        stop.set()
        for e in self.wl.keys.wake:
            e.set()
        for t in ws:
            t.join(timeout=30)
        self.heal()
        members = self.settle()
        keys = [self.key, "C"] + list(self.wl.keys.keys)
        if v == "snapshot-only":
            keys += ["pad-%d" % i for i in range(280)]
        self.probe_all(keys, members, False)
        self.finish()
        rc = self.check()
        log("acceptance %s: %s" % (v, "PASS" if rc == 0 else "FAIL"))
        return rc

    def concurrent(self):
        cl = self.cluster
        ms = list(cl.members)
        rids = {n.client_addr: rid() for n in ms}
        answers = {}
        go = threading.Barrier(len(ms))

        def one(n):
            c = Client(self, n.client_addr, sticky=True)
            go.wait()
            typ, obj = c.claim(self.scope, "C", rids[n.client_addr])
            answers[n.name] = (typ, obj)
            c.close()

        ts = [threading.Thread(target=one, args=(n,)) for n in ms]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        acc = [k for k, (t, o) in answers.items() if t == "ok" and o.get("outcome") == "ACCEPTED"]
        den = [k for k, (t, o) in answers.items() if t == "ok" and o.get("outcome") == "REPLAYED"]
        self.expect(len(acc) <= 1, "8: at most one ACCEPT", "ACCEPTED through %s" % acc)
        self.expect(len(acc) == 1 or len(acc) + len(den) < len(ms), "8: one ACCEPT",
                    "every answer definite and none ACCEPTED: %s" % answers)
        log("step 8: %d members, ACCEPTED through %s, REPLAYED through %s" % (
            len(ms), acc, den))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(
        prog="jepsen/local/acceptance",
        description="The seed's acceptance sequence (jepsen/README.md, 'Acceptance sequence') "
        "and its variants, in a private namespace. Exit 0 only when every "
        "variant run passed.")
    p.add_argument("--variant", default="base",
                   help="one of %s, or all (default base)" % ", ".join(VARIANTS))
    p.add_argument("--seed", type=int, default=None)
    sandbox.add_common_args(p)
    a = p.parse_args(argv)
    if a.variant != "all" and a.variant not in VARIANTS:
        p.error("unknown variant %r (%s, all)" % (a.variant, ", ".join(VARIANTS)))
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big") % 1000000
    if a.variant == "all" and not a.inner:
        # one namespace per variant: each starts from nothing
        import subprocess
        failed = []
        for v in VARIANTS:
            cmd = [sys.executable, os.path.abspath(sys.argv[0]), "--variant", v,
                   "--seed", str(a.seed), "--build-dir", a.build_dir,
                   "--store", a.store] + ["--node-arg=" + x for x in a.node_args] + \
                (["--tls"] if a.tls else [])
            rc = subprocess.call(cmd)
            if rc != 0:
                failed.append(v)
        print("acceptance: %d variants, %d failed%s" % (
            len(VARIANTS), len(failed), (": " + " ".join(failed)) if failed else ""))
        sys.exit(1 if failed else 0)
    a.name = "acceptance-" + a.variant
    sandbox.main(p, a, argv, "acceptance-" + a.variant,
                 lambda: Acceptance(a).go(), ("iptables",))
