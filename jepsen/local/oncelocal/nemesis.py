"""The fault schedule (jepsen/README.md "Nemeses").

Every 2-5 s (seeded) the nemesis takes the next of its kinds (seeded
rounds: each round a permutation of the kinds) and runs one fault of it to
the end (the fault heals itself after a seeded time); each step is an :info
op of :process :nemesis in the history. heal_all() undoes whatever is still
in force (the final phase calls it).

Every fault and heal is verified (faults.py): one that did not take effect,
or any exception of a step (a :nemesis-error event), is a harness assertion
and fails the run.

Kinds: partition, loss, kill, pause, membership, clock, disk, corrupt.
"""

import errno
import os
import time

from . import faults
from .cluster import ELECTION_S
from .common import K, log, rid
from .faults import FaultError
from .workload import Client

KINDS = ("partition", "loss", "kill", "pause", "membership", "clock", "disk",
         "corrupt")
PARTITIONS = ("one", "leader", "majority", "majorities-ring", "minority-third",
              "bridge", "one-way")
MEMBERSHIP = ("grow", "shrink", "replace", "remove-leader", "resize", "role",
              "transfer", "zombie", "readd-retired")
DISK_MB = 96


class Nemesis:
    def __init__(self, run, kinds, rng, tempo=1.0):
        self.run = run
        self.tempo = tempo
        self.cl = run.cluster
        self.kinds = list(kinds)
        self.rng = rng
        self.killed = []
        self.paused = []
        self.skewed = []
        self.filled = []
        self.zombies = []
        self.events = 0
        self.counts = {}
        self.schedule = faults.rounds(
            rng, self.kinds,
            lambda: set(self.cl.tally.summary()["effective"]))

    def hold(self, stop, lo, hi):
        """Wait a seeded time in [lo, hi) s times the tempo; True if stopped."""
        return stop.wait(self.rng.uniform(lo, hi) * self.tempo)

    def event(self, f, value, typ="info"):
        self.run.hist.op(typ, "nemesis", f, value)
        self.counts[f] = self.counts.get(f, 0) + 1

    # -- targets ------------------------------------------------------------

    def members(self):
        with self.cl.lock:
            return list(self.cl.members)

    def leader(self):
        return self.cl.leader(quick=True)

    def target(self):
        # The rng is drawn the same way whatever the cluster's state, so a
        # seed fixes the schedule's choices; "the leader" is resolved at run
        # time (a random member when none is known).
        want_leader = self.rng.random() < 0.4
        ms = self.members()
        pick = ms[self.rng.randrange(len(ms))]
        if want_leader:
            ld = self.leader()
            if ld is not None:
                return ld, "leader"
        return pick, "one"

    def loop(self, stop):
        while not stop.is_set():
            if self.hold(stop, 2, 5):
                break
            kind = next(self.schedule)
            try:
                getattr(self, "do_" + kind)(stop)
            except FaultError as e:
                # already an assertion (fault-not-effective / heal-not-effective)
                log("nemesis %s: %s" % (kind, e))
                self.heal_all(final=False)
            except Exception as e:   # noqa: BLE001 -- a harness error: fails the run
                import traceback
                log("nemesis %s: error %r\n%s" % (kind, e, traceback.format_exc()))
                self.event("nemesis-error", {K("kind"): kind, K("message"): repr(e)})
                self.cl.tally.error()
                self.cl.fail("nemesis-error", "%s step raised %r" % (kind, e))
                self.heal_all(final=False)
            self.events += 1

    # -- network --------------------------------------------------------------

    def do_partition(self, stop, mode=None, hold=None):
        ms = self.members()
        others = [n for n in self.cl.running() if n not in ms]
        mode = mode or self.rng.choice(PARTITIONS)
        self.rng.shuffle(ms)
        ld = self.leader()
        n = len(ms)
        desc = None
        if mode == "leader" and ld is None:
            mode = "one"
        if mode in ("majorities-ring", "bridge") and n < 5:
            mode = "majority"      # with 3 nodes a ring is no partition at all
        if mode in ("one", "leader"):
            a = [ld] if mode == "leader" else [ms[0]]
            b = [x for x in ms + others if x not in a]
            self.cl.cut(a, b)
            desc = [a, b]
        elif mode == "majority":
            a = ms[:n // 2]
            b = [x for x in ms + others if x not in a]
            self.cl.cut(a, b)
            desc = [a, b]
        elif mode == "minority-third":
            a = ms[:max(1, n // 3)]
            b = [x for x in ms + others if x not in a]
            self.cl.cut(a, b)
            desc = [a, b]
        elif mode == "majorities-ring":
            # each node sees its ring neighbours only: with 5, every node has
            # a majority (itself + 1 each side) but no two majorities agree.
            for j, i in faults.ring_drops(n):
                self.cl.drop(ms[j], ms[i])
            desc = [[ms[(i + d) % n] for d in (-1, 0, 1)] for i in range(n)]
        elif mode == "bridge":
            # two halves that only the bridge node sees both of
            bridge = ms[0]
            rest = ms[1:]
            a, b = rest[:len(rest) // 2], rest[len(rest) // 2:]
            self.cl.cut(a, b)
            desc = [a + [bridge], [bridge] + b]
        elif mode == "one-way":
            # the leader (or a node) hears nobody; everybody hears it
            x = ld or ms[0]
            for y in ms + others:
                if y is not x:
                    self.cl.drop(y, x)
            desc = [[x], [y for y in ms if y is not x]]
        grp = [[x.client_addr for x in g] for g in desc]
        self.event("start-partition", {K("mode"): mode, K("groups"): grp})
        log("nemesis: partition %s: %s" % (mode, " | ".join(" ".join(g) for g in grp)))
        links = self.cl.verify_cut("partition")
        self.cl.effective("partition", {K("mode"): mode, K("links-cut"): links})
        if hold is None:
            self.hold(stop, 3, 8)
            self.heal_net()

    def do_loss(self, stop):
        ms = self.members()
        p = self.rng.choice((0.2, 0.3, 0.5))
        for x in ms:
            for y in ms:
                if x is not y:
                    self.cl.drop(x, y, prob=p, kind="loss")
        self.event("start-loss", {K("probability"): p})
        log("nemesis: packet loss %.0f%% between members" % (100 * p))
        self.hold(stop, 3, 8)
        dropped = self.cl.verify_loss("loss")
        self.cl.effective("loss", {K("probability"): p, K("dropped"): dropped})
        log("nemesis: packet loss dropped %d packets" % dropped)
        self.heal_net("loss")

    def heal_net(self, kind=None):
        if self.cl.heal(kind):
            self.event("stop-partition", {})
            log("nemesis: heal (iptables -F)")

    # -- processes ------------------------------------------------------------

    def do_kill(self, stop):
        ms = self.members()
        mode = self.rng.choice(("one", "leader", "majority", "all", "one"))
        self.rng.shuffle(ms)
        if mode == "leader":
            ld = self.leader()
            victims = [ld] if ld else ms[:1]
        elif mode == "one":
            victims = ms[:1]
        elif mode == "majority":
            victims = ms[:len(ms) // 2 + 1]
        else:
            victims = ms
        self.event("kill", {K("mode"): mode,
                            K("nodes"): [n.client_addr for n in victims]})
        log("nemesis: kill -9 %s: %s" % (mode, victims))
        for n in victims:
            self.killed.append(n)
            self.cl.kill_fault(n)
        self.hold(stop, 2, 5)
        self.restart_killed()

    def restart_killed(self):
        killed, self.killed = self.killed, []
        for n in killed:
            if not n.alive() and not n.retired and not n.broken:
                if self.start_checked(n, kind="kill"):
                    self.event("restart", {K("node"): n.client_addr})
                    log("nemesis: restart %s" % n.name)

    def start_checked(self, n, faketime=None, kind="kill"):
        """False when @n was removed meanwhile (cluster.restart_verified)."""
        return self.cl.restart_verified(n, kind, faketime=faketime)

    def do_pause(self, stop):
        n, how = self.target()
        self.event("pause", {K("node"): n.client_addr, K("target"): how})
        log("nemesis: SIGSTOP %s (%s)" % (n.name, how))
        self.paused.append(n)
        self.cl.pause_fault(n)
        # never shorter than 2 election timeouts, whatever the tempo
        stop.wait(max(2 * ELECTION_S,
                      self.rng.uniform(4 * ELECTION_S, 10 * ELECTION_S) * self.tempo))
        self.resume_paused()

    def resume_paused(self):
        paused, self.paused = self.paused, []
        for n in paused:
            self.cl.resume_verified(n)
            self.event("resume", {K("node"): n.client_addr})
            log("nemesis: SIGCONT %s" % n.name)

    # -- clock ----------------------------------------------------------------

    def do_clock(self, stop):
        """A minority member runs with its wall clock ±5 min off (libfaketime;
        monotonic time is left alone), then is restarted on the true clock."""
        ms = self.members()
        n = ms[self.rng.randrange(len(ms))]
        off = self.rng.choice(("+5m", "-5m", "+299s", "-301s"))
        self.event("clock-skew", {K("node"): n.client_addr, K("offset"): off})
        log("nemesis: clock %s on %s (restart under libfaketime)" % (off, n.name))
        n.kill9()
        if not self.start_checked(n, faketime=None if faults.noop("clock")
                                  else off, kind="clock"):
            return  # removed meanwhile: no fault, nothing to heal
        self.skewed.append(n)
        n.faketime = off
        skew = self.node_skew(n)
        if not faults.skew_ok(skew, faults.offset_seconds(off)):
            self.cl.not_effective("clock", "%s started with FAKETIME=%s logs a "
                                  "clock %s off" % (n.name, off, fmt_s(skew)))
        self.cl.effective("clock", {K("node"): n.client_addr, K("offset"): off,
                                    K("logged-skew-s"): round(skew, 1)})
        log("nemesis: %s logs a clock %.1f s off" % (n.name, skew))
        self.hold(stop, 5, 12)
        self.unskew()

    def node_skew(self, n, timeout=20):
        """Its first log line's ts= minus the true time of its start (None
        when it logged no line within @timeout s)."""
        deadline = time.monotonic() + timeout
        while True:
            skew = faults.skew_of(n.log_lines(), n.started_wall)
            if skew is not None or time.monotonic() >= deadline:
                return skew
            time.sleep(0.1)

    def unskew(self):
        skewed, self.skewed = self.skewed, []
        for n in skewed:
            if n.faketime and not n.retired and not n.broken:
                n.kill9()
                if not self.start_checked(n, kind="clock"):
                    continue
                skew = self.node_skew(n)
                if not faults.skew_ok(skew, 0):
                    self.cl.heal_failed("clock", "%s restarted on the true clock "
                                        "logs a clock %s off" % (n.name, fmt_s(skew)))
                self.cl.healed("clock", {K("node"): n.client_addr,
                                         K("logged-skew-s"): round(skew, 1)})
                self.event("clock-reset", {K("node"): n.client_addr})
                log("nemesis: clock reset on %s (logs %.1f s off)" % (n.name, skew))

    # -- disk -----------------------------------------------------------------

    def do_disk(self, stop):
        """Fill a minority member's data directory (its own tmpfs, mounted by
        the runner when `disk` is a nemesis) to the last byte."""
        ms = [n for n in self.members() if n.mount]
        if not ms:
            self.cl.not_effective("disk", "no member has a tmpfs of its own")
        n = ms[self.rng.randrange(len(ms))]
        path = os.path.join(n.dir, "ballast")
        self.event("disk-full", {K("node"): n.client_addr})
        log("nemesis: disk full on %s" % n.name)
        self.filled.append(n)
        n.fill_mark = len(n.log_lines())
        written, enospc = fill(path, write=not faults.noop("disk"))
        if not enospc:
            self.cl.not_effective("disk", "%s: a write after filling %d bytes "
                                  "did not fail with ENOSPC" % (n.name, written))
        self.cl.effective("disk", {K("node"): n.client_addr, K("ballast"): written})
        self.hold(stop, 4, 10)
        self.free_disk()

    def free_disk(self):
        filled, self.filled = self.filled, []
        for n in filled:
            try:
                os.unlink(os.path.join(n.dir, "ballast"))
            except OSError:
                pass
            st = os.statvfs(n.dir)
            free = st.f_bavail * st.f_frsize
            rc = n.exit_code()
            seen = faults.logged_enospc(n.log_lines()[getattr(n, "fill_mark", 0):])
            self.event("disk-freed", {K("node"): n.client_addr,
                                      K("exit"): rc, K("free"): free,
                                      K("logged-enospc"): seen})
            log("nemesis: disk freed on %s (%d bytes free; process %s; %d log "
                "lines of ENOSPC)" % (n.name, free, "running" if rc is None else
                                      "exited %s" % rc, seen))
            if free < (1 << 20):
                self.cl.heal_failed("disk", "%s: only %d bytes free after the "
                                    "ballast went" % (n.name, free))
            self.cl.healed("disk", {K("node"): n.client_addr, K("free"): free})
            if rc is not None and not n.retired:
                self.start_checked(n, kind="disk")

    # -- corruption -----------------------------------------------------------

    def do_corrupt(self, stop):
        """kill -9 a minority member, cut or flip bytes in its newest log
        file's tail, restart it. If it refuses to start (a bad record it
        will not take for a torn tail), replace it with a fresh id."""
        ms = self.members()
        n = ms[self.rng.randrange(len(ms))]
        n.kill9()
        seg = newest_segment(n.dir)
        how = self.rng.choice(("truncate", "bitflip"))
        info = {K("node"): n.client_addr, K("how"): how}
        if seg is None:
            n.start()
            self.cl.not_effective("corrupt", "%s: no log file with data in %s"
                                  % (n.name, n.dir))
        before = faults.file_sha256(seg)
        if not faults.noop("corrupt"):
            # the written end: segments are preallocated and zero-filled, so
            # the last record ends at the last non-zero byte
            with open(seg, "rb") as f:
                data = f.read()
            end = len(data.rstrip(b"\0"))
            if end > 8:
                k = self.rng.randint(1, min(200, end - 8))
                with open(seg, "r+b") as f:
                    if how == "truncate":
                        # a torn write: the tail from end-k on never landed
                        f.seek(end - k)
                        f.write(b"\0" * k)
                        info[K("zeroed")] = k
                    else:
                        f.seek(end - k)
                        f.write(bytes([data[end - k] ^ (1 << self.rng.randrange(8))]))
                        info[K("offset")] = end - k
            info[K("file")] = os.path.basename(seg)
            info[K("end")] = end
        after = faults.file_sha256(seg)
        self.event("corrupt", info)
        log("nemesis: corrupt %s: %s" % (n.name, " ".join("%s=%s" % (k.name, v) for k, v in info.items())))
        if after == before:
            n.start()
            self.cl.not_effective("corrupt", "%s: %s unchanged (sha256 %s)"
                                  % (n.name, os.path.basename(seg), before[:16]))
        self.cl.effective("corrupt", {K("node"): n.client_addr,
                                      K("file"): os.path.basename(seg),
                                      K("sha256-before"): before[:16],
                                      K("sha256-after"): after[:16]})
        n.start()
        rc = n.wait_exit(4)
        if rc is None:
            self.cl.healed("corrupt", {K("node"): n.client_addr,
                                       K("restarted"): True})
        if rc is not None and rc != 0:
            n.broken = True
            self.event("corrupt-refused", {K("node"): n.client_addr, K("exit"): rc})
            log("nemesis: %s refused its data (exit %s): replace it" % (n.name, rc))
            out = self.cl.remove(n, wait_exit=0)
            if out != "OK":
                self.cl.reconcile()
            self.cl.grow(timeout=30)

    # -- membership -----------------------------------------------------------

    def do_membership(self, stop, op=None):
        op = op or self.rng.choice(MEMBERSHIP)
        ms = self.members()
        n = len(ms)
        if op == "grow" and n >= 5:
            op = "shrink"
        if op == "shrink" and n <= 3:
            op = "grow"
        if op == "resize":
            op = "resize-up" if n <= 3 else "resize-down"
        under = None
        if "partition" in self.kinds and self.rng.random() < 0.3 and op not in (
                "zombie", "readd-retired"):
            under = self.rng.choice(("leader", "one"))
            # A run must show an effective membership change (jepsen/local/ci
            # fails it otherwise) and a change under a partition may rightly
            # fail (a cut-off leader commits nothing): until one took effect,
            # the step runs without the partition. CI's 90 s clock run saw two
            # grows under a partitioned leader fail and nothing else.
            if "membership" not in self.cl.tally.summary()["effective"]:
                under = None
        self.event("membership", {K("op"): op, K("members"): self.cl.addrs(ms),
                                  K("under-partition"): under})
        log("nemesis: membership %s%s (members %s)" % (
            op, " under partition " + under if under else "", ms))
        if under:
            self.do_partition(stop, mode=under, hold=True)
        res = getattr(self, "m_" + op.replace("-", "_"))(stop)
        if under:
            self.hold(stop, 1, 4)
            self.heal_net()
        if res is None or res is False:
            self.cl.reconcile()
        # never fewer than 3 voters for long: a failed step may have left 2
        while len(self.members()) < 3 and not stop.is_set():
            if self.cl.grow(timeout=30) is None:
                self.cl.reconcile()
                break
        if res is True:
            self.cl.tally.took_effect("membership")
        self.event("membership-done", {K("op"): op, K("result"): str(res),
                                       K("members"): self.cl.addrs()})
        log("nemesis: membership %s -> %s; members %s" % (op, res, self.cl.members))

    def m_grow(self, stop):
        n = self.cl.grow(timeout=30)
        return n is not None

    def m_shrink(self, stop):
        ms = self.members()
        ld = self.leader()
        cand = [x for x in ms if x is not ld] or ms
        victim = cand[self.rng.randrange(len(cand))]
        return self.cl.remove(victim) == "OK"

    def m_replace(self, stop):
        ms = self.members()
        victim = ms[self.rng.randrange(len(ms))]
        ok = self.cl.remove(victim) == "OK"
        if not ok:
            return False
        return self.cl.grow(timeout=30) is not None

    def m_remove_leader(self, stop):
        # at 3 voters a replacement joins first (as an operator would), so
        # the removal itself never leaves the cluster with 2
        if len(self.members()) <= 3 and self.cl.grow(timeout=30) is None:
            return False
        ld = self.cl.leader()
        if ld is None:
            return False
        return self.cl.remove(ld) == "OK"

    def m_resize_up(self, stop):
        a = self.cl.grow(timeout=30) is not None
        b = a and self.cl.grow(timeout=30) is not None
        return a and b

    def m_resize_down(self, stop):
        ok = True
        while len(self.members()) > 3 and ok:
            ok = self.m_shrink(stop)
        return ok

    def m_role(self, stop):
        ms = self.members()
        ld = self.leader()
        cand = [x for x in ms if x is not ld] or ms
        x = cand[self.rng.randrange(len(cand))]
        a = self.cl.assign(x, "standby")
        with self.cl.lock:
            if a == "OK" and x in self.cl.members:
                self.cl.members.remove(x)
        self.hold(stop, 1, 3)
        b = self.cl.assign(x, "voter")
        if b == "OK":
            with self.cl.lock:
                if x not in self.cl.members:
                    self.cl.members.append(x)
        return a == "OK" and b == "OK"

    def m_transfer(self, stop):
        return self.cl.transfer() == "OK"

    def m_readd_retired(self, stop):
        old = [x for x in self.cl.nodes if x.retired and x.id]
        if not old:
            ms = self.members()
            if len(ms) <= 3:
                if self.cl.grow(timeout=30) is None:
                    return False
            if not self.m_shrink(stop):
                return False
            old = [x for x in self.cl.nodes if x.retired and x.id]
        x = old[self.rng.randrange(len(old))]
        out, why = self.cl.readd_retired(x)
        self.event("readd-retired", {K("node-id"): x.id, K("outcome"): str(out),
                                     K("reason"): str(why)})
        return out == "FAILED_PRECONDITION"

    def m_zombie(self, stop):
        """Isolate a follower, remove it through the majority, send claims
        to it while it still believes it is a member, heal, then stop it."""
        ms = self.members()
        if len(ms) <= 3 and self.cl.grow(timeout=30) is None:
            return False
        ms = self.members()
        ld = self.leader()
        cand = [x for x in ms if x is not ld]
        if not cand:
            return False
        z = cand[self.rng.randrange(len(cand))]
        rest = [x for x in self.cl.running() if x is not z]
        self.cl.cut([z], rest)
        self.event("start-partition", {K("mode"): "zombie",
                                       K("groups"): [[z.client_addr],
                                                     self.cl.addrs(rest)]})
        self.cl.verify_cut("partition")
        out = self.cl.remove(z, wait_exit=0)
        if out != "OK":
            # Not removed (or not known to be): it is no zombie but a
            # member cut off; heal and leave it be (stopping it would take
            # a voter away for the rest of the run).
            self.heal_net()
            self.cl.reconcile()
            if z.read_id() in (self.cl.voters() or set()):
                return False
        self.zombies.append(z)
        cl = Client(self.run, z.client_addr, sticky=True)
        try:
            for _ in range(3):
                key = self.run.wl.keys.old_key()
                if key:
                    if self.run.wl.idempotent:
                        cl.claim(self.run.scope, key, rid(), idempotent=True)
                    else:
                        cl.claim(self.run.scope, key, rid())
            self.heal_net()
            self.hold(stop, 1, 3)
            key = self.run.wl.keys.old_key()
            if key:
                cl.claim(self.run.scope, key, rid(),
                         idempotent=self.run.wl.idempotent)
        finally:
            cl.close()
        self.stop_zombies()
        if out == "OK":
            self.cl.grow(timeout=30)
        return out == "OK"

    def stop_zombies(self):
        for z in self.zombies:
            rc = z.stop(timeout=10)
            self.event("zombie-stopped", {K("node"): z.client_addr, K("exit"): rc})
            log("nemesis: zombie %s stopped (exit %s)" % (z.name, rc))
        self.zombies = []

    # -- the end ----------------------------------------------------------------

    def heal_all(self, final=True):
        """Undo everything in force. Each heal is tried even when another
        did not take effect (that one is already an assertion)."""
        for heal in (self.heal_net, self.resume_paused, self.restart_killed,
                     self.unskew, self.free_disk, self.stop_zombies):
            try:
                heal()
            except FaultError as e:
                log("nemesis: heal: %s" % e)
            except Exception as e:   # noqa: BLE001 -- fails the run, as in loop()
                self.event("nemesis-error", {K("kind"): "heal",
                                             K("message"): repr(e)})
                self.cl.tally.error()
                self.cl.fail("nemesis-error", "%s raised %r" % (heal.__name__, e))


def fmt_s(skew):
    return "no time (no log line)" if skew is None else "%.1f s" % skew


def fill(path, write=True):
    """Write @path until its file system has not one byte left: 1 MiB
    writes, then smaller ones down to 1 byte (a partial last chunk of a
    buffered write would leave up to a MiB free). Returns (bytes written,
    whether one more byte then fails with ENOSPC). @write=False (the
    test-only no-op switch) writes nothing. An error other than ENOSPC
    raises."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    written = 0
    try:
        size = 1 << 20
        buf = b"\xa5" * size
        while size >= 1 and write:
            try:
                n = os.write(fd, buf[:size])
                written += n
                if n < size:
                    size //= 2
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                size //= 2
        return written, faults.at_enospc(fd)
    finally:
        os.close(fd)


def newest_segment(d):
    """The raft log file written last in data dir @d (raft_uv's open-N or
    START-END segments; the once stores' seg-* files) that holds data, or
    None."""
    best = None
    for root, _, files in os.walk(d):
        for f in files:
            # not log files: identity, ballast, raft_uv's metadata and
            # snapshots, the once store's meta-a/b, prep-next, snap-*
            if f in ("node-id", "tombstone", "ballast", "metadata1",
                     "metadata2") or f.startswith(("snap", "meta-", "prep")):
                continue
            p = os.path.join(root, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            if st.st_size == 0:
                continue
            if best is None or st.st_mtime_ns > best[0]:
                # a preallocated segment not yet written is all zeros:
                # damaging it would change nothing
                if written_end(p) > 8:
                    best = (st.st_mtime_ns, p)
    return best[1] if best else None


def written_end(path):
    """The offset after the last non-zero byte of @path (0 if unreadable)."""
    try:
        with open(path, "rb") as f:
            return len(f.read().rstrip(b"\0"))
    except OSError:
        return 0
