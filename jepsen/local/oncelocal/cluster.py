"""Nodes, oncectl calls and sessions, network faults and membership steps.

A *host* is an address slot 127.0.1.h (client port 7101, Raft port 7111) of
the private namespace; a *Node* is one onced incarnation on a host: its own
data directory (so its own node id) and log file. Replacing a node means a
new incarnation with a fresh id, on a free host. A host is free again once
its last incarnation's process is gone.

The Cluster keeps `members`, the nodes the harness believes are voters. It
is reconciled from the leader's directory (`members list`) after every
membership step whose outcome is unknown, and before the final phase, so
the :final-phase event names the voters the cluster really has.

Faults applied here are verified here (faults.py says how): cut() is
followed by verify_cut(), heal() probes the links it reopens, kill_fault()
and pause_fault() read /proc. A fault that did not take effect is an
assertion (the run fails) and raises FaultError; one that did is a
:fault-effective event and counts in `tally`.
"""

import json
import os
import queue
import signal
import subprocess
import threading
import time

from . import faults
from .common import K, REPO, edn_value, log
from .faults import FaultError

CLIENT_PORT, RAFT_PORT = 7101, 7111
ELECTION, HEARTBEAT = "400ms", "75ms"
ELECTION_S = 0.4
HOSTS = 9
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


class Node:
    def __init__(self, cl, host, gen):
        self.cl = cl
        self.host = host
        self.gen = gen
        self.name = "n%dg%d" % (host, gen)
        self.ip = "127.0.1.%d" % host
        self.client_addr = "%s:%d" % (self.ip, CLIENT_PORT)
        self.raft_addr = "%s:%d" % (self.ip, RAFT_PORT)
        self.dir = os.path.join(cl.dir, self.name)
        self.log = os.path.join(cl.dir, self.name + ".log")
        self.proc = None
        self.log_mark = 0          # size of the log when the process started
        self.started_wall = None   # time.time() at that start
        self.paused = False
        self.starts = 0
        self.retired = False      # removed: never start it again
        self.broken = False       # refused to start on its own data
        self.faketime = None      # FAKETIME offset of the running process
        self.mount = None         # tmpfs under its data dir, if any
        self.id = None
        self.sampler = None
        os.makedirs(self.dir, exist_ok=True)

    def __repr__(self):
        return "%s(%s)" % (self.name, self.id or "?")

    def start(self, bootstrap=False, join=None, role=None, faketime=None):
        args = [self.cl.onced, "--data-dir", self.dir, "--raft-addr",
                self.raft_addr, "--client-addr", self.client_addr,
                "--election-timeout", ELECTION, "--heartbeat", HEARTBEAT]
        args += self.cl.extra_node_args
        if self.cl.tls is not None:
            args += self.cl.tls.node_args(self.host, self.ip)
        if bootstrap:
            args.append("--bootstrap")
        if join:
            args += ["--join", ",".join(join)]
        if role:
            args += ["--role", role]
        env = dict(self.cl.node_env)
        env["ONCE_JEPSEN_BIND"] = self.ip
        self.faketime = faketime
        if faketime:
            # libfaketime after the bind shim; monotonic time stays real so
            # only the wall clock (what a skewed host has wrong) moves.
            env["LD_PRELOAD"] = env["LD_PRELOAD"] + ":" + FAKETIME_LIB
            env["FAKETIME"] = faketime
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            env["FAKETIME_NO_CACHE"] = "1"
        self.starts += 1
        with open(self.log, "ab") as f:
            self.log_mark = f.tell()
            self.started_wall = time.time()
            f.write(("=== %s start #%d%s: %s\n" % (
                time.strftime("%H:%M:%S"), self.starts,
                " FAKETIME=%s" % faketime if faketime else "",
                " ".join(args))).encode())
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=f, stderr=f, env=env)
        self.paused = False
        self.cl.watch(self)

    def log_lines(self):
        """The lines its process has logged since its last start."""
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_mark)
                data = f.read()
        except OSError:
            return []
        return data.decode("utf-8", "replace").splitlines()[1:]

    def read_id(self):
        if self.id is None:
            try:
                with open(os.path.join(self.dir, "node-id")) as f:
                    v = f.read().strip()
                if len(v) == 16:
                    self.id = v
            except OSError:
                pass
        return self.id

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def exit_code(self):
        return None if self.proc is None else self.proc.poll()

    def kill9(self, send=True):
        """SIGKILL and reap; (pid, exit status) of the process it was sent
        to, or None when none was running. @send=False (the test-only no-op
        switch) sends nothing and does not wait."""
        if not self.alive():
            self.paused = False
            return None
        pid = self.proc.pid
        if send:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.paused = False
        return pid, self.proc.poll()

    def pause(self):
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)
            self.paused = True

    def resume(self):
        if self.alive() and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self, timeout=15):
        """SIGTERM by PID, SIGKILL after @timeout. Returns the exit code."""
        if self.proc is None:
            return None
        self.resume()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def wait_exit(self, timeout):
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def tombstoned(self):
        return os.path.exists(os.path.join(self.dir, "tombstone"))


def ctl(cl, args, addrs, timeout="1s", wall=10):
    """One `oncectl --json` call; the parsed object or None."""
    cmd = [cl.oncectl, "--cluster", ",".join(addrs), "--json",
           "--timeout", timeout] + args
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=wall, env=cl.ctl_env)
    except subprocess.TimeoutExpired:
        return None
    try:
        o = json.loads(p.stdout.decode().strip().splitlines()[-1])
        return o if isinstance(o, dict) else None
    except (ValueError, IndexError):
        return None


class SessionLost(Exception):
    pass


class Session:
    """One `oncectl --json session` bound to one node's client address."""

    def __init__(self, cl, addr, call_timeout):
        self.addr = addr
        self.errf = open(os.path.join(cl.dir, "sessions.log"), "ab")
        self.proc = subprocess.Popen(
            [cl.oncectl, "--cluster", addr, "--json", "--timeout",
             call_timeout, "session"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf,
            env=cl.ctl_env)
        self.lines = queue.Queue()
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            for raw in self.proc.stdout:
                self.lines.put(raw)
        except (OSError, ValueError):
            pass
        self.lines.put(None)

    def call(self, req, timeout):
        """Send @req; its answer object. SessionLost on EOF, bad output or
        no answer within @timeout seconds (the caller starts a new one)."""
        req = dict(req)
        req["id"] = self.next_id
        self.next_id += 1
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise SessionLost("write: %s" % e)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionLost("no answer in %.1fs" % timeout)
            try:
                raw = self.lines.get(timeout=left)
            except queue.Empty:
                raise SessionLost("no answer in %.1fs" % timeout)
            if raw is None:
                raise SessionLost("session ended (rc %s)" % self.proc.poll())
            try:
                obj = json.loads(raw)
            except ValueError:
                raise SessionLost("bad JSON line %r" % raw[:200])
            if not isinstance(obj, dict):
                raise SessionLost("not an object: %r" % raw[:200])
            if obj.get("id") == req["id"]:
                return obj
            # an answer to an older request we gave up on: skip it

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.close()

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
        self.errf.close()


DIGEST_EVERY = 10      # status samples per state digest (about 5 s)
DIGEST_TIMEOUT = "10s"  # a state digest hashes the whole table (O(state))


def sampler(cl, node):
    """Samples one node's status at ~2 Hz through its own session
    ({"cmd":"status","node":ADDR}): :status and :dump events. Every
    DIGEST_EVERY-th sample also asks the state digest, with a timeout of
    its own: at millions of records hashing the table takes seconds, and a
    digest with every sample would leave no sample at all (R8 would see no
    leader). Ends when the node's process is gone for good or the cluster
    stops sampling."""
    sess = None
    k = 0
    while not cl.sstop.is_set() and node.sampler is threading.current_thread():
        t0 = time.monotonic()
        if node.alive() and not node.paused:
            try:
                if sess is None:
                    sess = Session(cl, node.client_addr, "1s")
                req = {"cmd": "status", "node": node.client_addr,
                       "timeout": "500ms"}
                wait = 3
                if k % DIGEST_EVERY == 0:
                    req["state_digest"] = True
                    req["timeout"] = DIGEST_TIMEOUT
                    wait = 13
                k += 1
                obj = sess.call(req, wait)
                cl.record_status(node, obj)
            except SessionLost:
                if sess is not None:
                    sess.kill()
                sess = None
        cl.sstop.wait(max(0.05, 0.5 - (time.monotonic() - t0)))
    if sess is not None:
        sess.close()


class Tls:
    """--tls: a CA, a certificate per host (IP SAN: its 127.0.1.x address,
    which every peer and client checks; DNS SAN hostN.once.jepsen, which
    the access file makes a member) and one client certificate (admin),
    made with scripts/make-certs.sh; oncectl finds them in ONCE_TLS_*."""

    ACCESS = {"identities": [
        {"match": "dns:*.once.jepsen", "role": "member"},
        {"match": "dns:jepsen", "role": "admin"}]}

    def __init__(self, d):
        self.d = d
        self.script = os.path.join(REPO, "scripts", "make-certs.sh")
        self._make(["ca", d])
        self._make(["client", d, "jepsen"])
        with open(self._path("access", "json"), "w") as f:
            json.dump(self.ACCESS, f)

    def _make(self, args):
        subprocess.run(["sh", self.script] + args, check=True,
                       capture_output=True)

    def _path(self, name, ext):
        return os.path.join(self.d, "%s.%s" % (name, ext))

    def node_args(self, host, ip):
        name = "host%d" % host
        if not os.path.exists(self._path(name, "pem")):
            self._make(["node", self.d, name, ip, name + ".once.jepsen"])
        return ["--tls-cert", self._path(name, "pem"), "--tls-key",
                self._path(name, "key"), "--tls-ca", self._path("ca", "pem"),
                "--access", self._path("access", "json")]

    def ctl_env(self):
        return {"ONCE_TLS_CA": self._path("ca", "pem"),
                "ONCE_TLS_CERT": self._path("jepsen", "pem"),
                "ONCE_TLS_KEY": self._path("jepsen", "key")}


class Cluster:
    """The nodes of one run and what the harness does to them."""

    def __init__(self, rdir, build_dir, shim, hist, samples, extra_node_args=(),
                 tls=False):
        self.dir = rdir
        self.onced = os.path.join(build_dir, "onced")
        self.oncectl = os.path.join(build_dir, "oncectl")
        self.hist = hist
        self.samples = samples
        self.extra_node_args = list(extra_node_args)
        asan = os.environ.get("ASAN_OPTIONS", "")
        asan = (asan + ":" if asan else "") + "verify_asan_link_order=0"
        self.ctl_env = dict(os.environ)
        self.tls = Tls(os.path.join(rdir, "certs")) if tls else None
        if self.tls is not None:
            self.ctl_env.update(self.tls.ctl_env())
        self.node_env = dict(os.environ, ASAN_OPTIONS=asan, LD_PRELOAD=shim)
        self.nodes = []           # every incarnation, in start order
        self.members = []         # the voters as the harness knows them
        self.gens = {}
        self.lock = threading.RLock()
        self.last_status = {}
        self.sstop = threading.Event()
        self.rules = []           # iptables rules in force
        self.installed = None     # monotonic time of the first of them
        self.ipt_lock = threading.Lock()
        self.asserts = []         # harness expectations that failed
        self.tally = faults.Tally()  # faults that took effect, by kind
        self.tmpfs_mb = None      # each data dir on its own tmpfs (disk nemesis)

    # -- bookkeeping ------------------------------------------------------

    # restart_verified: how long a tombstoned node's id may stay in the
    # directory before that counts as an anomaly.
    TOMBSTONE_WAIT_S = 10

    def fail(self, what, msg):
        """A harness expectation failed (an anomaly the checker cannot see,
        e.g. a retired id re-added). Recorded; the run fails."""
        with self.lock:
            self.asserts.append((what, msg))
        self.hist.op("info", "nemesis", "assert-failed",
                     {K("what"): what, K("message"): msg})
        log("ASSERTION FAILED: %s: %s" % (what, msg))

    def effective(self, kind, value):
        """A fault of @kind took effect (@value: what shows it)."""
        self.tally.took_effect(kind)
        v = {K("kind"): kind}
        v.update(value)
        self.hist.op("info", "nemesis", "fault-effective", v)

    def not_effective(self, kind, msg):
        """A fault of @kind did not take effect: the run fails."""
        self.tally.did_not(kind)
        self.fail("fault-not-effective", "%s: %s" % (kind, msg))
        raise FaultError("%s: %s" % (kind, msg))

    def healed(self, kind, value):
        v = {K("kind"): kind}
        v.update(value)
        self.hist.op("info", "nemesis", "heal-verified", v)

    def heal_failed(self, kind, msg):
        """The undoing of a fault of @kind did not take effect: the run fails."""
        self.tally.heal_did_not(kind)
        self.fail("heal-not-effective", "%s: %s" % (kind, msg))
        raise FaultError("heal of %s: %s" % (kind, msg))

    def watch(self, node):
        with self.lock:
            if node.sampler is None or not node.sampler.is_alive():
                node.sampler = threading.Thread(target=sampler,
                                                args=(self, node), daemon=True)
                node.sampler.start()

    def running(self):
        return [n for n in self.nodes if n.alive()]

    def free_host(self):
        with self.lock:
            busy = {n.host for n in self.nodes
                    if n.alive() or (n in self.members) or
                    (not n.retired and not n.broken and n.proc is not None and
                     not n.tombstoned())}
            for h in range(1, HOSTS + 1):
                if h not in busy:
                    return h
        return None

    def new_node(self, host=None):
        with self.lock:
            if host is None:
                host = self.free_host()
            if host is None:
                return None
            g = self.gens.get(host, 0)
            self.gens[host] = g + 1
            n = Node(self, host, g)
            if self.tmpfs_mb:
                subprocess.run(["mount", "-t", "tmpfs", "-o",
                                "size=%dm" % self.tmpfs_mb, "tmpfs", n.dir],
                               check=True)
                n.mount = n.dir
            self.nodes.append(n)
            return n

    def addrs(self, nodes=None):
        return [n.client_addr for n in (self.members if nodes is None else nodes)]

    def record_status(self, node, obj):
        if obj.get("error") or obj.get("exit") not in (0, None):
            return
        if obj.get("node_id") and node.id is None:
            node.id = obj.get("node_id")
        self.last_status[node.client_addr] = obj
        v = edn_value(obj)
        v[K("node")] = node.client_addr
        v[K("node-id")] = obj.get("node_id")
        self.samples.event("status", "status", v)
        if "applied_index" in obj and "applied_digest" in obj:
            d = {K("node"): node.client_addr,
                 K("applied-index"): obj["applied_index"],
                 K("digest"): obj["applied_digest"]}
            if obj.get("state_digest"):
                d[K("state-digest")] = obj["state_digest"]
            self.samples.event("checker", "dump", d)

    def status(self, node, timeout="500ms", digest=False, wall=3):
        return ctl(self, ["status"] + (["--state-digest"] if digest else []),
                   [node.client_addr], timeout, wall)

    def leader(self, quick=False):
        """The member that says LEADER (in a recent status sample, or asked
        now), if a majority of members agree on its id."""
        votes, leaders = {}, {}
        with self.lock:
            members = list(self.members)
        for n in members:
            if not n.alive() or n.paused:
                continue
            st = self.last_status.get(n.client_addr) if quick else self.status(n)
            if not st:
                continue
            lid = st.get("leader")
            if lid:
                votes[lid] = votes.get(lid, 0) + 1
            if str(st.get("role", "")).upper() == "LEADER":
                leaders[st.get("node_id")] = n
        for nid, n in leaders.items():
            if votes.get(nid, 0) * 2 > len(members):
                return n
        return None

    def wait(self, pred, timeout, what, step=0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = pred()
            if r:
                return r
            time.sleep(step)
        raise TimeoutError("timeout (%ds) waiting for %s" % (timeout, what))

    def directory(self, via=None):
        """The leader's member directory: {id: role} or None."""
        via = via or self.addrs(self.running()) or self.addrs()
        o = ctl(self, ["members", "list"], via, "1s", 5)
        if not o or not isinstance(o.get("members"), list):
            return None
        return {m.get("id"): str(m.get("role", "")).lower() for m in o["members"]}

    def voters(self, via=None):
        d = self.directory(via)
        return None if d is None else {i for i, r in d.items() if r == "voter"}

    def reconcile(self, timeout=20):
        """Set `members` from the leader's directory (its voters among our
        nodes). Returns False if no directory could be read."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.voters()
            if v is not None:
                with self.lock:
                    old = list(self.members)
                    self.members = [n for n in self.nodes
                                    if n.read_id() in v and not n.retired]
                    for n in old:
                        if n not in self.members and n.read_id() not in v:
                            n.retired = n.retired or n.tombstoned()
                if [n.name for n in old] != [n.name for n in self.members]:
                    log("members now %s" % self.members)
                return True
            time.sleep(0.5)
        return False

    # -- membership steps -------------------------------------------------

    def bootstrap(self, n_nodes):
        first = self.new_node()
        first.start(bootstrap=True)
        self.wait(lambda: (self.status(first) or {}).get("role") == "LEADER",
                  30, "%s to lead" % first.name)
        first.read_id()
        with self.lock:
            self.members = [first]
        for _ in range(n_nodes - 1):
            if not self.grow(timeout=60):
                raise RuntimeError("could not grow the cluster to %d" % n_nodes)
        log("cluster up: %s" % self.members)

    def grow(self, timeout=30, role=None):
        """Start a fresh node with --join through the members; wait until it
        is a voter. Returns the node, or None (it may still join later: it
        keeps trying, and reconcile() picks it up)."""
        n = self.new_node()
        if n is None:
            return None
        n.start(join=self.addrs(), role=role)
        try:
            self.wait(n.read_id, 10, "%s's node-id" % n.name)
        except TimeoutError:
            return None
        want = "standby" if role == "standby" else "voter"
        try:
            self.wait(lambda: (self.directory(self.addrs()) or {}).get(n.id) == want,
                      timeout, "%s to be a %s" % (n.name, want), step=0.5)
        except TimeoutError:
            log("grow: %s not a %s after %ds (left running)" % (n.name, want, timeout))
            return None
        if want == "voter":
            with self.lock:
                self.members.append(n)
        return n

    def remove(self, n, wait_exit=20):
        """Remove member @n (`leave` if it is the leader: transfer first).
        Returns the ConfigResult outcome ("OK", ...) or None if unknown."""
        others = [m.client_addr for m in self.members if m is not n]
        if n.alive() and self.leader(quick=True) is n:
            # the leader: `leave` transfers leadership first, then removes
            o = ctl(self, ["leave"], [n.client_addr] + others, "10s", 40)
        else:
            # through the others, so the answer does not depend on the
            # node that is about to stop
            o = ctl(self, ["members", "remove", n.read_id()], others, "10s", 40)
        out = (o or {}).get("outcome") or (o or {}).get("error")
        if out != "OK":
            log("remove %s: %s %s" % (n.name, out or "no answer",
                                      (o or {}).get("reason") or
                                      (o or {}).get("message") or ""))
        if out == "OK":
            self.retire(n)
            if n.alive() and wait_exit:
                rc = n.wait_exit(wait_exit)
                if rc is None:
                    log("remove: %s still running %ds after its removal" %
                        (n.name, wait_exit))
                elif rc != 0:
                    self.fail("removed-node-exit",
                              "%s exited %s after its removal (want 0)" % (n.name, rc))
        return out

    def retire(self, n):
        """@n is no member any more and is never started again."""
        with self.lock:
            n.retired = True
            if n in self.members:
                self.members.remove(n)

    def readd_retired(self, n):
        """Re-adding a retired id must be refused (FAILED_PRECONDITION)."""
        o = ctl(self, ["members", "add", n.id, n.raft_addr, n.client_addr],
                self.addrs(), "5s", 20)
        out = (o or {}).get("outcome") or (o or {}).get("error")
        if out == "OK":
            self.fail("retired-id-re-added",
                      "members add of retired id %s answered OK" % n.id)
        return out, (o or {}).get("reason") or (o or {}).get("message")

    def assign(self, n, role):
        o = ctl(self, ["members", "assign", n.read_id(), role], self.addrs(),
                "10s", 40)
        return (o or {}).get("outcome") or (o or {}).get("error")

    def transfer(self, to=None):
        o = ctl(self, ["transfer"] + ([to.read_id()] if to else []),
                self.addrs(), "5s", 20)
        return (o or {}).get("outcome") or (o or {}).get("error")

    def snapshot(self):
        o = ctl(self, ["snapshot", "take"], self.addrs(), "10s", 30)
        return o or {}

    # -- network faults ---------------------------------------------------

    def iptables(self, args):
        """One iptables call; (ok, why)."""
        p = subprocess.run(["iptables", "-w"] + args, capture_output=True)
        if p.returncode != 0:
            why = "iptables %s: rc %d %s" % (" ".join(args), p.returncode,
                                             p.stderr.decode().strip())
            log(why)
            return False, why
        return True, None

    def drop(self, src, dst, prob=None, kind="partition"):
        """Drop packets from node @src to node @dst (one way). An iptables
        failure is a fault that did not take effect (FaultError)."""
        rule = ["-s", src.ip, "-d", dst.ip]
        if prob:
            rule += ["-m", "statistic", "--mode", "random", "--probability",
                     "%.2f" % prob]
        rule += ["-j", "DROP"]
        with self.ipt_lock:
            if faults.noop(kind):
                ok, why = True, None     # recorded as in force, never installed
            else:
                ok, why = self.iptables(["-A", "INPUT"] + rule)
            if ok:
                self.rules.append(rule)
                if self.installed is None:
                    self.installed = time.monotonic()
        if not ok:
            self.not_effective(kind, why)

    def cut(self, a, b, kind="partition"):
        """No traffic between the nodes of @a and those of @b (unverified:
        verify_cut() after the last cut of a step)."""
        for x in a:
            for y in b:
                self.drop(x, y, kind=kind)
                self.drop(y, x, kind=kind)

    def rule_pairs(self, statistic=False):
        """The (src_ip, dst_ip) of the DROP rules in force: the cuts, or
        (@statistic) the random-loss ones."""
        with self.ipt_lock:
            return sorted({(r[1], r[3]) for r in self.rules
                           if ("statistic" in r) == statistic})

    def verify_cut(self, kind="partition"):
        """Every cut link really drops: a TCP connect from its source
        address to its destination's Raft port gets no answer. Returns the
        number of links probed; FaultError if one answered or none is cut."""
        pairs = self.rule_pairs()
        if not pairs:
            self.not_effective(kind, "no DROP rule in force after the cut")
        res = faults.probe_all(pairs, RAFT_PORT, faults.CUT_PROBE_S)
        bad = faults.cut_failures(res)
        if bad:
            self.not_effective(kind, "%d of %d cut links still carry traffic: %s"
                               % (len(bad), len(pairs), ", ".join(
                                   "%s->%s:%d %s" % (p[0], p[1], RAFT_PORT, r)
                                   for p, r in bad[:6])))
        return len(pairs)

    def drop_counts(self):
        """{(src_ip, dst_ip, statistic?): packets dropped} of the DROP rules
        in INPUT (the kernel's counters), or None if iptables fails."""
        p = subprocess.run(["iptables", "-w", "-L", "INPUT", "-v", "-x", "-n"],
                           capture_output=True)
        if p.returncode != 0:
            return None
        out = {}
        for pk, src, dst, stat in faults.parse_counters(p.stdout.decode()):
            out[(src, dst, stat)] = out.get((src, dst, stat), 0) + pk
        return out

    def verify_loss(self, kind="loss"):
        """The random-loss rules dropped packets (at least 1 s after they
        went in; probe connects add traffic if the nodes sent too little).
        Returns the packets dropped; FaultError if none."""
        pairs = self.rule_pairs(statistic=True)
        if not pairs:
            self.not_effective(kind, "no loss rule in force")
        with self.ipt_lock:
            since = self.installed
        if since is not None and time.monotonic() - since < 1.0:
            time.sleep(1.0 - (time.monotonic() - since))
        dropped = 0
        for attempt in range(3):
            c = self.drop_counts()
            if c is None:
                self.not_effective(kind, "iptables -L INPUT -v failed")
            dropped = sum(v for (s, d, st), v in c.items() if st)
            if dropped > 0:
                return dropped
            faults.probe_all(pairs * 4, RAFT_PORT, 0.2)
        self.not_effective(kind, "the loss rules of %d links dropped no packet"
                           % len(pairs))

    def heal(self, kind=None):
        """Flush INPUT, then probe every link that had a rule: each must
        carry traffic again (connect or refused). Returns whether any rule
        was in force; FaultError if the flush failed or a link stays cut.
        @kind names the fault healed (default: loss if a random-loss rule
        was in force, else partition)."""
        with self.ipt_lock:
            had = bool(self.rules)
            if kind is None:
                kind = "loss" if any("statistic" in r for r in self.rules) \
                    else "partition"
            pairs = sorted({(r[1], r[3]) for r in self.rules})
            if faults.noop("heal"):
                ok, why = True, None     # the flush skipped, the rules forgotten
            else:
                ok, why = self.iptables(["-F", "INPUT"])
            if ok:
                self.rules = []
                self.installed = None
        if not ok:
            self.heal_failed(kind, why)
        if pairs:
            res = faults.probe_all(pairs, RAFT_PORT, faults.OPEN_PROBE_S)
            bad = faults.open_failures(res)
            if bad:
                self.heal_failed(kind, "%d of %d links still cut after the flush: %s"
                                 % (len(bad), len(pairs), ", ".join(
                                     "%s->%s %s" % (p[0], p[1], r) for p, r in bad[:6])))
            self.healed(kind, {K("links"): len(pairs)})
        return had

    # -- process faults -----------------------------------------------------

    def kill_fault(self, n, kind="kill"):
        """kill -9 of member @n, verified: its PID is gone and it died of
        SIGKILL. FaultError if it was not running or survived."""
        if not n.alive():
            self.not_effective(kind, "%s was not running (exit %s)"
                               % (n.name, n.exit_code()))
        r = n.kill9(send=not faults.noop(kind))
        if r is None:
            self.not_effective(kind, "%s exited by itself (exit %s) before "
                               "SIGKILL" % (n.name, n.exit_code()))
        pid, rc = r
        state = faults.proc_state(pid)
        if rc != -signal.SIGKILL or state is not None:
            self.not_effective(kind, "%s (pid %d) after SIGKILL: exit %s, /proc "
                               "state %s" % (n.name, pid, rc, state))
        self.effective(kind, {K("node"): n.client_addr, K("pid"): pid,
                              K("exit"): rc})
        return pid

    def restart_verified(self, n, kind, faketime=None):
        """Start @n again; FaultError (a heal that did not take effect) if
        the process exits within half a second. Returns False, starting
        nothing, when @n was removed from the cluster while it was down or
        skewed: a removal whose answer was lost (DEADLINE_EXCEEDED under a
        partition) takes effect later, the node learns it at its next
        start, writes its tombstone and stops, and a tombstoned directory
        refuses every later start by design. That is the membership
        nemesis's doing, not a failed heal; a tombstone on a node the
        leader's directory still lists is an anomaly (fail)."""
        if n.tombstoned():
            # The directory is updated by an entry of its own after the
            # configuration change: give it a few seconds to drop the id.
            deadline = time.monotonic() + self.TOMBSTONE_WAIT_S
            d = self.directory()
            while (d is None or n.read_id() in d) and \
                    time.monotonic() < deadline:
                time.sleep(0.5)
                d = self.directory()
            if d is not None and n.read_id() in d:
                self.fail("tombstone-of-member",
                          "%s has a tombstone but the directory lists %s as %s"
                          % (n.name, n.id, d[n.read_id()]))
            else:
                self.retire(n)
                log("%s was removed from the cluster (tombstone): not "
                    "restarted for the %s heal" % (n.name, kind))
                return False
        n.start(faketime=faketime)
        rc = n.wait_exit(0.5)
        if rc is not None:
            self.heal_failed(kind, "%s exited %s at once on its restart"
                             % (n.name, rc))
        return True

    def wait_state(self, pid, want_stopped, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            st = faults.proc_state(pid)
            if st is None or faults.stopped(st) == want_stopped:
                return st
            if time.monotonic() >= deadline:
                return st
            time.sleep(0.02)

    def pause_fault(self, n, kind="pause"):
        """SIGSTOP of @n, verified: /proc/PID/stat shows state T."""
        if not n.alive():
            self.not_effective(kind, "%s was not running (exit %s)"
                               % (n.name, n.exit_code()))
        pid = n.proc.pid
        if faults.noop(kind):
            n.paused = True
        else:
            n.pause()
        st = self.wait_state(pid, True)
        if not faults.stopped(st):
            self.not_effective(kind, "%s (pid %d) after SIGSTOP: state %s (want T)"
                               % (n.name, pid, st))
        self.effective(kind, {K("node"): n.client_addr, K("pid"): pid,
                              K("state"): st})

    def resume_verified(self, n, kind="pause"):
        """SIGCONT of @n, verified: its state is no longer T."""
        if not n.alive():
            n.paused = False
            return
        pid = n.proc.pid
        n.resume()
        st = self.wait_state(pid, False)
        if st is not None and faults.stopped(st):
            self.heal_failed(kind, "%s (pid %d) after SIGCONT: state %s"
                             % (n.name, pid, st))
        self.healed(kind, {K("node"): n.client_addr, K("state"): st})

    # -- the end ----------------------------------------------------------

    def stop_all(self):
        out = []
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                rc = n.stop()
                out.append((n, rc))
        self.sstop.set()
        return out
