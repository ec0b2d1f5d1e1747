"""The region-loss drill (jepsen/README.md "The region-loss drill").

Five nodes in three regions of the private namespace, placed 2 + 2 + 1:

    region A: hosts 1, 2 (127.0.1.1-2)   and the clients (127.0.1.10)
    region B: hosts 3, 4
    region C: host 5

with fixed one-way delays between every pair of addresses (netdelay.py:
NFQUEUE in user space, since the kernel has no netem): 1 ms inside a
region, A-B 10 ms, A-C 15 ms, B-C 20 ms, so round trips of 2 ms inside and
20, 30 and 40 ms between regions. The delays are measured (TCP connect
round trips) before the cluster starts and after the last phase (the final
phase runs without them); a link
faster than 90 % of its round trip fails the drill. --flat runs the same
drill with no delay at all (what a claim costs without round trips).

Under the nonce workload (workload.py, every worker's oncectl bound to the
clients' address in region A) and a latency probe (one claim of a fresh key
every 200 ms through the current leader), the drill runs, in this order:

    baseline      leader moved to A, nothing down
    crash C       kill -9 of the region's node (the leader stays in A)
    crash A       leader moved to A first, then both its nodes killed
    crash B       leader moved to B first, then both its nodes killed
    isolate C     leader moved to C first, then C cut from A and B
    isolate A     leader moved to A first, then A cut from B and C
    isolate B     leader moved to B first, then B cut from A and C

each held --hold seconds, then restarted or healed; the drill then waits
until every member follows one leader and has applied to within 64 entries
of it (the "rejoin" time, from the status samples: ~0.5 s resolution), and
--recover seconds more. Without that wait a region still reconnecting
(after a cut, a link is redialed within about the Raft links' dead-link
bound, seconds) would turn the next region's loss into a majority's. A cut is
between nodes only: the clients still reach the isolated nodes, which must
acknowledge nothing. The leader is moved into
the region about to be lost so that the loss takes the leader with it (the
worst case) except for C, whose loss is measured with the leader in A (the
latency "without the far region").

Per phase the drill prints the window without a successful claim (the
longest stretch between two :ok claim answers that overlaps the fault;
the fault's start and its end bound it), the latency probe's p50/p99 in the
phase's steady part (the second half of the hold, or after the window if
it ends later), the p50 of every :ok claim of the workers there, where the
leader was before and during the fault, and the rejoin time. The checker
(oncecheck) judges the whole history: no acknowledged claim lost,
every replay REPLAYED. The drill fails if the checker does, if a fault or
heal did not take effect, if a delay did not hold, or if a phase with a
region down had no successful claim at all (every 2 + 2 + 1 loss leaves a
majority of 3).
"""

import argparse
import math
import os
import random
import sys
import threading
import time

from . import faults, netdelay, sandbox
from .cluster import CLIENT_PORT, RAFT_PORT
from .common import K, dumps, log
from .faults import FaultError
from .runner import Run
from .workload import Client, NonceWorkload, worker

REGIONS = (("A", (1, 2)), ("B", (3, 4)), ("C", (5,)))
CLIENT_HOST = 10                 # outside the node slots 1-9
CLIENT_REGION = "A"
INSIDE_S = 0.001                 # one-way delay inside a region
BETWEEN_S = {frozenset("AB"): 0.010, frozenset("AC"): 0.015,
             frozenset("BC"): 0.020}
DELAY_FLOOR = 0.9                # a measured round trip below 90 % fails
LAT_PERIOD_S = 0.2               # the latency probe's pace
REJOIN_SLACK = 64                # "caught up": applied within this of the leader
REJOIN_TIMEOUT_S = 60
# (name, region, fault, region the leader is moved to first)
PLAN = (("baseline", None, None, "A"),
        ("crash C", "C", "crash", "A"),
        ("crash A", "A", "crash", "A"),
        ("crash B", "B", "crash", "B"),
        ("isolate C", "C", "isolate", "C"),
        ("isolate A", "A", "isolate", "A"),
        ("isolate B", "B", "isolate", "B"))


def host_ip(h):
    return "127.0.1.%d" % h


def region_of_host(h):
    if h == CLIENT_HOST:
        return CLIENT_REGION
    for name, hosts in REGIONS:
        if h in hosts:
            return name
    return None


def one_way(ra, rb):
    return INSIDE_S if ra == rb else BETWEEN_S[frozenset(ra + rb)]


def delay_pairs():
    """{(src_ip, dst_ip): one-way delay} over the nodes and the clients."""
    hosts = [h for _, hs in REGIONS for h in hs] + [CLIENT_HOST]
    return {(host_ip(a), host_ip(b)): one_way(region_of_host(a), region_of_host(b))
            for a in hosts for b in hosts if a != b}


def percentile(xs, p):
    """The @p-th percentile (nearest rank) of @xs, or None if empty."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(1, math.ceil(p * len(xs) / 100.0)) - 1]


def longest_gap(times, start, end):
    """(length, gap start, gap end) of the longest interval inside
    [@start, @end] that holds none of the sorted @times (ns)."""
    pts = [start] + [t for t in times if start < t < end] + [end]
    best = (0, start, start)
    for a, b in zip(pts, pts[1:]):
        if b - a > best[0]:
            best = (b - a, a, b)
    return best


class RegionDrill(Run):
    """One drill: a Run (history, cluster, final phase, checker) whose
    clients stand in region A, with the delays, the phases of PLAN and the
    per-phase figures (self.calls: every claim's completion time and
    latency, noted as the history records it)."""

    def __init__(self, a):
        super().__init__(a)
        cl = self.cluster
        # the clients stand in region A: their own source address, so the
        # delays apply to them too (the bind shim, as for the nodes)
        asan = cl.node_env.get("ASAN_OPTIONS", "")
        cl.ctl_env.update(LD_PRELOAD=a.shim, ONCE_JEPSEN_BIND=host_ip(CLIENT_HOST),
                          ASAN_OPTIONS=asan)
        self.delays = netdelay.Delays(delay_pairs())
        sandbox.CLEANUPS.append(self.delays.remove)
        self.calls = []       # (t_done ns, latency ns, type, outcome, key, node)
        self.invokes = {}
        self.phases = []
        self.lat_keys = []
        orig = self.hist.op

        def op(typ, process, f, value):
            i = orig(typ, process, f, value)
            if f == "claim":
                self._note(typ, process, value)
            return i
        self.hist.op = op

    def _note(self, typ, process, value):
        now = self.hist.now()
        if typ == "invoke":
            self.invokes[process] = (now, value.get(K("key")), value.get(K("node")))
            return
        inv = self.invokes.pop(process, None)
        if inv is None:
            return
        self.calls.append((now, now - inv[0], typ, value.get(K("outcome")),
                           inv[1], inv[2]))

    # -- the network ------------------------------------------------------------

    def measure_delays(self, when):
        """Every ordered link's connect round trip against its nominal one;
        a harness assertion for each that is too fast. Returns
        {(region, region): [measured ms]}."""
        out = {}
        bad = []
        for (src, dst), d in sorted(self.delays.pairs.items()):
            port = CLIENT_PORT if src == host_ip(CLIENT_HOST) else RAFT_PORT
            if dst == host_ip(CLIENT_HOST):
                continue          # nothing listens there; the reverse covers it
            rtt = netdelay.measure_rtt(src, dst, port)
            ra = region_of_host(int(src.rsplit(".", 1)[1]))
            rb = region_of_host(int(dst.rsplit(".", 1)[1]))
            key = "".join(sorted(ra + rb)) if ra != rb else ra + ra
            if rtt is None or rtt < DELAY_FLOOR * 2 * d:
                bad.append("%s->%s: %s (want >= %.1f ms)" % (
                    src, dst, "no answer" if rtt is None else "%.1f ms" % (1000 * rtt),
                    1000 * DELAY_FLOOR * 2 * d))
            out.setdefault(key, []).append(1000 * rtt if rtt is not None else None)
        probs = self.delays.problems()
        summary = {k: (min(v), max(v)) for k, v in sorted(out.items())
                   if None not in v}
        log("delays %s: round trips (ms, min-max) %s" % (when, ", ".join(
            "%s %.1f-%.1f" % (k, lo, hi) for k, (lo, hi) in summary.items())))
        self.hist.op("info", "nemesis", "region-delays",
                     {K("when"): when, K("rtt-ms"): {k: [round(lo, 1), round(hi, 1)]
                                                     for k, (lo, hi) in summary.items()},
                      K("too-fast"): bad, K("delayer-problems"): probs})
        for b in bad:
            self.cluster.fail("delay-not-effective", b)
        for p in probs:
            self.cluster.fail("delay-not-effective", "delayer " + p)
        return summary

    # -- leadership -------------------------------------------------------------

    def region_nodes(self, region):
        hosts = dict(REGIONS)[region]
        return [n for n in self.cluster.members if n.host in hosts]

    def leader_region(self):
        ld = self.cluster.leader(quick=True)
        return (region_of_host(ld.host), ld) if ld else (None, None)

    def lead_from(self, region, timeout=20):
        """Move the leadership into @region (a transfer to its first node)
        unless it is there already; the region it ends up in."""
        cl = self.cluster
        want = self.region_nodes(region)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, ld = self.leader_region()
            if r == region:
                return r
            out = cl.transfer(want[0])
            log("drill: transfer to %s: %s" % (want[0].name, out))
            t = time.monotonic() + 4
            while time.monotonic() < t:
                if self.leader_region()[0] == region:
                    return region
                time.sleep(0.2)
        r, _ = self.leader_region()
        log("drill: leader still in %s, not %s, after %ds" % (r, region, timeout))
        return r

    def rejoined(self):
        """True when every member runs, follows one leader (status samples)
        and has applied to within REJOIN_SLACK of the leader."""
        cl = self.cluster
        with cl.lock:
            ms = list(cl.members)
        sts = [cl.last_status.get(n.client_addr) or {} for n in ms]
        if not all(n.alive() for n in ms):
            return False
        lids = {st.get("leader") for st in sts}
        leads = [st for st in sts if str(st.get("role", "")).upper() == "LEADER"]
        if len(lids) != 1 or None in lids or len(leads) != 1:
            return False
        top = leads[0].get("applied_index") or 0
        return all((st.get("applied_index") or 0) + REJOIN_SLACK >= top for st in sts)

    def wait_rejoined(self, since):
        """Seconds from @since (monotonic) until rejoined(), or None after
        REJOIN_TIMEOUT_S. The samples are 2 Hz: a resolution of ~0.5 s."""
        deadline = since + REJOIN_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.rejoined():
                return time.monotonic() - since
            time.sleep(0.1)
        log("drill: the cluster has not rejoined %ds after the heal" % REJOIN_TIMEOUT_S)
        return None

    # -- the latency probe --------------------------------------------------------

    def latency_probe(self, stop):
        """A claim of a fresh key every LAT_PERIOD_S through the leader."""
        c = Client(self, None, sticky=True)
        self.clients.append(c)
        i = 0
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                ld = self.cluster.leader(quick=True)
                addr = ld.client_addr if ld else (c.addr or self.cluster.addrs()[0])
                if addr != c.addr:
                    if c.session is not None:
                        c.session.close()
                        c.session = None
                    c.addr = addr
                key = "lat-%d" % i
                i += 1
                with self.wl.keys.lock:
                    self.wl.keys.keys.append(key)
                self.lat_keys.append(key)
                c.claim(self.scope, key, os.urandom(16).hex())
                stop.wait(max(0.0, LAT_PERIOD_S - (time.monotonic() - t0)))
        finally:
            c.close()

    # -- faults -------------------------------------------------------------------

    def fault(self, region, kind):
        cl = self.cluster
        victims = self.region_nodes(region)
        if kind == "crash":
            self.hist.op("info", "nemesis", "kill",
                         {K("mode"): "region-" + region,
                          K("nodes"): [n.client_addr for n in victims]})
            for n in victims:
                cl.kill_fault(n)
        else:
            rest = [n for n in cl.members if n not in victims]
            cl.cut(victims, rest)
            self.hist.op("info", "nemesis", "start-partition",
                         {K("mode"): "region-" + region,
                          K("groups"): [[n.client_addr for n in victims],
                                        [n.client_addr for n in rest]]})
            links = cl.verify_cut("partition")
            cl.effective("partition", {K("mode"): "region-" + region,
                                       K("links-cut"): links})
        log("drill: %s %s: %s" % (kind, region, victims))
        return victims

    def undo(self, region, kind, victims):
        cl = self.cluster
        if kind == "crash":
            for n in victims:
                if not n.alive():
                    cl.restart_verified(n, "kill")
                    self.hist.op("info", "nemesis", "restart",
                                 {K("node"): n.client_addr})
        elif cl.heal("partition"):
            self.hist.op("info", "nemesis", "stop-partition", {})
        log("drill: %s %s undone" % (kind, region))

    def restore(self):
        """Heal every cut and start every member that is not running."""
        cl = self.cluster
        try:
            if cl.heal("partition"):
                self.hist.op("info", "nemesis", "stop-partition", {})
        except FaultError as e:
            log("drill: heal: %s" % e)
        for n in cl.members:
            if not n.alive():
                n.start()
                self.hist.op("info", "nemesis", "restart", {K("node"): n.client_addr})

    def phase(self, name, region, kind, lead, stop):
        a = self.a
        where = self.lead_from(lead)
        t_fault = self.hist.now()
        victims = self.fault(region, kind) if kind else []
        stop.wait(a.hold)
        ld_region, ld = self.leader_region()
        t_heal = self.hist.now()
        rejoin = None
        if kind:
            t0 = time.monotonic()
            self.undo(region, kind, victims)
            # the next phase starts from a whole cluster: a region still
            # reconnecting (TCP's retransmission backoff after a cut lasts
            # seconds) would make the next loss one of a majority
            rejoin = self.wait_rejoined(t0)
            log("drill: %s %s: every member follows the leader and has caught "
                "up %s after the %s" % (kind, region, "never" if rejoin is None
                                       else "%.1f s" % rejoin,
                                       "restart" if kind == "crash" else "heal"))
            stop.wait(a.recover)
        self.phases.append({"name": name, "region": region, "kind": kind,
                            "leader-before": where, "leader-during": ld_region,
                            "leader-node": ld.name if ld else None, "rejoin": rejoin,
                            "t-fault": t_fault, "t-heal": t_heal,
                            "t-end": self.hist.now()})

    # -- the result -------------------------------------------------------------

    def analyse(self):
        oks = sorted(t for t, _, typ, _, _, _ in self.calls if typ == "ok")
        rows = []
        for p in self.phases:
            gap, g0, g1 = longest_gap(oks, p["t-fault"], p["t-heal"])
            n_ok = sum(1 for t in oks if p["t-fault"] < t < p["t-heal"])
            # the steady part: the second half of the hold (or after the
            # window, if that ends later), until the fault ends
            steady0 = max(g1, p["t-fault"] + self.a.hold * 5e8) if p["kind"] \
                else p["t-fault"]
            lat = [l / 1e6 for t, l, typ, _, k, _ in self.calls
                   if typ == "ok" and k in self.lat_set and steady0 < t - l and
                   t < p["t-heal"]]
            allc = [l / 1e6 for t, l, typ, _, _, _ in self.calls
                    if typ == "ok" and steady0 < t - l and t < p["t-heal"]]
            rows.append(dict(p, window=gap / 1e9, ok=n_ok,
                             first_ok=(g1 - p["t-fault"]) / 1e9 if g0 == p["t-fault"] else 0.0,
                             lat_n=len(lat), p50=percentile(lat, 50),
                             p99=percentile(lat, 99), all_n=len(allc),
                             all_p50=percentile(allc, 50)))
        return rows

    def report(self, rows, rtts_before, rtts_after):
        fmt = lambda v: "-" if v is None else "%.1f" % v   # noqa: E731
        log("region drill: %d phases, hold %gs, recover %gs" % (
            len(rows), self.a.hold, self.a.recover))
        log("  %-10s %-6s %-6s %8s %6s %8s %8s %8s %8s %8s" % (
            "phase", "leader", "during", "window_s", "ok", "probe_n", "p50_ms",
            "p99_ms", "all_p50", "rejoin_s"))
        for r in rows:
            log("  %-10s %-6s %-6s %8.2f %6d %8d %8s %8s %8s %8s" % (
                r["name"], r["leader-before"] or "-", r["leader-during"] or "-",
                r["window"], r["ok"], r["lat_n"], fmt(r["p50"]), fmt(r["p99"]),
                fmt(r["all_p50"]), fmt(r["rejoin"])))
        acc = sum(1 for c in self.calls if c[2] == "ok" and c[3] == "ACCEPTED")
        rep = sum(1 for c in self.calls if c[2] == "ok" and c[3] == "REPLAYED")
        log("claims: %d acknowledged ACCEPTED, %d REPLAYED, %d ok, %d fail, %d info"
            % (acc, rep, sum(1 for c in self.calls if c[2] == "ok"),
               sum(1 for c in self.calls if c[2] == "fail"),
               sum(1 for c in self.calls if c[2] == "info")))
        stats = (self.delays.final or {}).get("stats", {})
        log("delayer: %s" % ", ".join(
            "%s ms: %d packets, %.2f ms late on average, %.1f ms at worst" % (
                "%g" % (1000 * float(d)), n, 1000 * mean, 1000 * worst)
            for d, (n, mean, worst) in sorted(stats.items(), key=lambda kv: float(kv[0]))))
        with open(os.path.join(self.dir, "regions.edn"), "w") as f:
            f.write(dumps({
                K("regions"): {name: [host_ip(h) for h in hs] for name, hs in REGIONS},
                K("client"): host_ip(CLIENT_HOST),
                K("rtt-ms-before"): {k: list(v) for k, v in rtts_before.items()},
                K("rtt-ms-after"): {k: list(v) for k, v in rtts_after.items()},
                K("accepted"): acc, K("replayed"): rep,
                K("delayer"): {float(d): v for d, v in stats.items()},
                K("phases"): [{K(k.replace("_", "-")): (round(v, 3) if isinstance(v, float)
                                                         else v)
                               for k, v in r.items()} for r in rows]}) + "\n")
        for r in rows:
            if r["kind"] and r["ok"] == 0:
                self.cluster.fail("region-loss-unavailable",
                                  "%s: no successful claim in %gs with a majority up"
                                  % (r["name"], self.a.hold))

    # -- the drill --------------------------------------------------------------

    def go(self):
        a = self.a
        log("region drill %s: regions %s, clients in %s, one-way delays: inside "
            "%.0f ms, %s; hold %gs, recover %gs, rate %s, seed %d" % (
                os.path.basename(self.dir),
                " ".join("%s=%s" % (r, ",".join(host_ip(h) for h in hs))
                         for r, hs in REGIONS), CLIENT_REGION, 1000 * INSIDE_S,
                ", ".join("%s %.0f ms" % ("-".join(sorted(k)), 1000 * v)
                          for k, v in sorted(BETWEEN_S.items(), key=lambda kv: kv[1])),
                a.hold, a.recover, a.rate, a.seed))
        self.write_options({K("drill"): "regions", K("flat"): a.flat, K("hold"): a.hold,
                            K("recover"): a.recover, K("workload"): "nonce"})
        before = {}
        if not a.flat:
            # ONCE_JEPSEN_NOOP_FAULT=delay (test-only): no delayer, so the
            # drill must fail with delay-not-effective
            self.delays.install(serve=not faults.noop("delay"))
            before = self.measure_delays("before")
        self.cluster.bootstrap(5)
        self.wl = NonceWorkload(self, random.Random(a.seed + 1))
        self.lat_set = set()
        stop, dstop = threading.Event(), threading.Event()
        ws = [threading.Thread(target=worker, args=(self, w, self.wl, stop),
                               daemon=True) for w in range(self.n_workers)]
        ws.append(threading.Thread(target=self.latency_probe, args=(stop,),
                                   daemon=True))
        for t in ws:
            t.start()
        try:
            for name, region, kind, lead in PLAN:
                if a.only and name not in a.only and name != "baseline":
                    continue
                try:
                    self.phase(name, region, kind, lead, dstop)
                except FaultError as e:
                    # already an assertion (the drill fails); the next
                    # phase starts from a whole cluster all the same
                    log("drill %s: %s" % (name, e))
                    self.restore()
        finally:
            self.restore()
            stop.set()
            for e in self.wl.keys.wake:
                e.set()
            for t in ws:
                t.join(timeout=30)
        self.lat_set = set(self.lat_keys)
        after = {}
        if not a.flat:
            # the delays end with the drill: the final phase checks the
            # state, not the network, and its probes (every key through
            # every member, one at a time) would take minutes over it
            after = self.measure_delays("after")
            self.delays.remove()
            for why in self.delays.final["problems"]:
                self.cluster.fail("delay-not-effective", "delayer " + why)
        members = self.settle()
        self.lead_from("A")
        self.probe_all(list(self.wl.keys.keys), members, False)
        rows = self.analyse()
        self.report(rows, before, after)
        self.finish()
        return self.check()


def parse(argv):
    p = argparse.ArgumentParser(
        prog="jepsen/local/region-drill",
        description="The region-loss drill: 5 nodes in 3 regions (2+2+1) with "
        "20-40 ms round trips between regions; each region crashed, then "
        "isolated, under load; the checker judges the history. Exit 0 only "
        "when every check passed (1 anomalies, 2 runner error).")
    p.add_argument("--hold", type=float, default=8,
                   help="seconds each region stays down (default 8)")
    p.add_argument("--recover", type=float, default=3,
                   help="seconds after each restart or heal, once every "
                   "member has caught up (default 3)")
    p.add_argument("--rate", type=float, default=40,
                   help="target workload ops/s over all workers (default 40)")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--only", action="append", default=[], metavar="PHASE",
                   help="run only this phase (repeatable; the baseline "
                   "always runs): %s" % ", ".join(n for n, _, _, _ in PLAN[1:]))
    p.add_argument("--flat", action="store_true",
                   help="no delays at all (the same drill on a flat network: "
                   "what a claim costs without any round trip)")
    p.add_argument("--seed", type=int, default=None)
    sandbox.add_common_args(p)
    a = p.parse_args(argv)
    for x in a.only:
        if x not in [n for n, _, _, _ in PLAN]:
            p.error("unknown phase %r" % x)
    if not 1 <= a.hold <= 600 or not 0 <= a.recover <= 600:
        p.error("--hold must be in [1, 600] and --recover in [0, 600]")
    if a.rate <= 0 or not 1 <= a.workers <= 64:
        p.error("--rate must be positive and --workers in [1, 64]")
    a.nodes = 5
    a.nemesis = ["kill", "partition"] if not a.only else sorted(
        {"kill" if x.startswith("crash") else "partition" for x in a.only})
    return p, a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p, a = parse(argv)
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big") % 1000000
    sandbox.main(p, a, argv, "region-drill", lambda: RegionDrill(a).go(),
                 {"iptables"})
