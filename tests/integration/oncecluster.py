#!/usr/bin/env python3
"""oncecluster.py: real-process test harness for onced and oncectl.

Standard library only. The test scripts tests/integration/once_*.py import
it; tests/integration/once-*.sh run them under `make check` (automake's
test-driver: exit 0 pass, 1 fail, 77 skip, 99 hard error).

What it gives a test:

  Test       a scenario: a temporary work directory (removed on success,
             kept and printed on failure or with ONCE_TEST_KEEP=1), PASS /
             FAIL lines per check, the tails of every node's log on failure,
             and a `finally` that stops every process the test started.
  Cluster    onced processes on 127.0.0.1 with ports from a per-test base
             (client port base+i, raft port base+50+i for node slot i, and
             with http=True --http-addr on base+100+i); the first node
             --bootstrap, the others --join; fast Raft timings.
  Node       one onced: its Popen, data dir, log file (stdout and stderr),
             start / stop (SIGTERM, then SIGKILL after a timeout) / kill -9,
             all by PID, never by name (other people run the same binaries).
  ctl()      one `oncectl --json` run: exit code, the parsed JSON object,
             stderr and the wall time it took.
  Session    one long-lived `oncectl session` process: JSON lines in, JSON
             lines out, pipelined and matched by "id".

Contract followed (docs/design.md §6): onced --data-dir --raft-addr --client-addr
(--bootstrap | --join CLIENT_ADDRS), timing / snapshot / settings flags;
oncectl [--cluster ADDRS] [--json] [--timeout DUR] [--cluster-id HEX]
COMMAND; exit codes 0 accepted/success, 1 definite non-accept, 2 usage or
INVALID_ARGUMENT, 3 error not applied, 4 error outcome unknown.

Environment: top_builddir / top_srcdir (as make check sets them), or ONCED
and ONCECTL (paths of the binaries); ONCE_TEST_KEEP=1 keeps the work
directory; ONCE_TEST_ELECTION / ONCE_TEST_HEARTBEAT override the Raft
timings (defaults 400ms / 75ms); ONCE_TEST_STORAGE=uring|pwrite|uv gives
every node that --storage (default: onced's own choice); TMPDIR.
"""

import fcntl
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_HARD = 0, 1, 77, 99

# Node slots per cluster: client port base+slot, raft port base+50+slot,
# HTTP port (Cluster(http=True)) base+100+slot.
SLOTS = 50
# Ports are reserved, not just found free. make check runs tests side by
# side, and a test's nominal base is only where the search starts: spans of
# different tests overlap (an http=True span is 150 ports), and a "free"
# check races with the other test's bind (CI once lost once-https to
# once-notify's node on 9701 that way). So every span is covered by
# SLOTS-aligned blocks, each reserved by flock(2) on a file in
# PORT_LOCK_DIR, held until this process exits (the kernel drops the locks
# of a killed test too); a span is used only when all its blocks are locked
# by us and all its ports bind. Candidates go up from the nominal base in
# SLOTS steps and wrap within [PORT_LO, PORT_HI). raft_load.py's `ports`
# (the shell-driven raft tests) stays above PORT_HI, and everything stays
# below the kernel's ephemeral range (checked), where outgoing connections
# (the nodes connect to each other all the time) could take a port between
# our check and the node's bind.
# PORT_LO stays above the ports the C suites bind without a reservation
# (unit-conn 7601..7699, unit-client 7321..7329, unit-verify 7331; make
# check runs them beside these tests): a span that wandered into them made
# unit-conn's listen fail with "address already in use".
PORT_SPAN = 2 * SLOTS
PORT_LO, PORT_HI = 7700, 20000
PORT_LOCK_DIR = os.environ.get("ONCE_TEST_PORT_LOCKS",
                               os.path.join(tempfile.gettempdir(),
                                            "once-test-ports"))
_port_locks = []  # fds of the blocks this process holds (never closed)

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:", "ERROR: UndefinedBehaviorSanitizer")

# Exit codes of oncectl (docs/design.md §6).
RC_OK, RC_NO, RC_USAGE, RC_NOT_APPLIED, RC_UNKNOWN = 0, 1, 2, 3, 4


class Interrupted(BaseException):
    """SIGTERM/SIGHUP/SIGINT: stop the nodes, then exit 99."""


def _interrupt(signum, frame):
    raise Interrupted("signal %d" % signum)


def _die_with_parent():
    """preexec_fn of every onced: SIGKILL it if the test process dies
    (even by SIGKILL), so that no node outlives its test and holds its
    ports. PR_SET_PDEATHSIG fires when the forking *thread* ends: nodes
    are only started from the main thread."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class TestFailure(Exception):
    """A required check failed: the scenario cannot go on."""


class HardError(Exception):
    """The environment is broken (binary missing, no free ports)."""


def now_ms():
    return int(time.time() * 1000)


def rand_hex(nbytes):
    return os.urandom(nbytes).hex()


# --- certificates (scripts/make-certs.sh) ---------------------------------

def make_certs(d, steps, ca=None):
    """Run scripts/make-certs.sh in directory @d once per step: (command,
    args...), e.g. ("client", "ops"); with @ca the certificates are signed
    by that CA of @d (the script's CA variable) instead of ca.pem."""
    script = os.path.join(os.environ.get("top_srcdir", "."), "scripts",
                          "make-certs.sh")
    env = dict(os.environ, CA=ca) if ca else None
    for cmd, *args in steps:
        subprocess.run(["sh", script, cmd, d] + list(args), check=True,
                       capture_output=True, env=env)


# Three members a, b, c (a.once.test ...), an admin "ops", a monitor
# "prom", a caller with no role "nobody" and two tenants: what the tests
# of roles and scopes share (TENANT_ACCESS gives the roles).
TENANT_CERTS = [("ca",), ("client", "ops"), ("client", "prom"),
                ("client", "nobody"),
                ("client", "tenant-a", "spiffe://test/tenant-a"),
                ("client", "tenant-b", "spiffe://test/tenant-b")] + [
    ("node", n, "127.0.0.1", n + ".once.test") for n in ("a", "b", "c")]


def tenant_access():
    """A fresh access file (a dict) for TENANT_CERTS."""
    return {"identities": [
        {"match": "dns:*.once.test", "role": "member"},
        {"match": "dns:ops", "role": "admin"},
        {"match": "uri:spiffe://test/tenant-a", "role": "client",
         "scopes": ["tenant-a", "tenant-a/*"]},
        {"match": "uri:spiffe://test/tenant-b", "role": "client",
         "scopes": ["tenant-b"]},
        {"match": "cn:prom", "role": "monitor"},
    ]}


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = f.read().split()
            return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def ports_free(first, n):
    socks = []
    try:
        for p in range(first, first + n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            # As libuv binds (SO_REUSEADDR): a port whose old connections
            # linger in TIME_WAIT is free for a node.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def _lock_block(first):
    """Reserve the SLOTS ports from @first: an fd holding the block's
    flock, or None when another process holds it."""
    if not os.path.isdir(PORT_LOCK_DIR):
        os.makedirs(PORT_LOCK_DIR, exist_ok=True)
        try:
            os.chmod(PORT_LOCK_DIR, 0o1777)  # shared by every user's tests
        except OSError:
            pass
    path = os.path.join(PORT_LOCK_DIR, "%d" % first)
    # Read-only: flock needs no write access, so any user can take a
    # block whose file another user created.
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def pick_base(base, span=PORT_SPAN):
    """The first base from @base whose @span ports this process now holds
    (see PORT_LO above) and which all bind."""
    lo, _ = ephemeral_range()
    hi = min(PORT_HI, lo)
    first = max(PORT_LO, base - base % SLOTS)
    blocks = (span + SLOTS - 1) // SLOTS
    n = (hi - PORT_LO) // SLOTS
    for k in range(n):
        b = PORT_LO + ((first - PORT_LO) // SLOTS + k) % n * SLOTS
        if b + blocks * SLOTS > hi:
            continue
        fds = []
        for j in range(blocks):
            fd = _lock_block(b + j * SLOTS)
            if fd is None:
                break
            fds.append(fd)
        if len(fds) == blocks and ports_free(b, span):
            _port_locks.extend(fds)
            return b
        for fd in fds:
            os.close(fd)
    raise HardError("no free port span of %d in [%d, %d) (locks in %s)"
                    % (span, PORT_LO, hi, PORT_LOCK_DIR))


def binaries():
    top = os.environ.get("top_builddir", ".")
    onced = os.environ.get("ONCED") or os.path.join(top, "onced")
    ctl = os.environ.get("ONCECTL") or os.path.join(top, "oncectl")
    for b in (onced, ctl):
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            raise HardError("not built: %s" % b)
    return os.path.abspath(onced), os.path.abspath(ctl)


def raise_nofile(want):
    """Raise RLIMIT_NOFILE's soft limit toward @want (up to the hard limit).
    Returns the new soft limit. Children (the nodes) inherit it."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


# ---------------------------------------------------------------------------
# oncectl results
# ---------------------------------------------------------------------------

class Result:
    """One oncectl answer: exit code, JSON object (or None), raw text."""

    def __init__(self, args, rc, out, err, secs):
        self.args = args
        self.rc = rc
        self.out = out
        self.err = err
        self.secs = secs
        self.obj = None
        self.parse_error = None
        text = out.strip()
        if text:
            lines = text.splitlines()
            try:
                self.obj = json.loads(lines[-1])
                if not isinstance(self.obj, dict):
                    self.parse_error = "not a JSON object"
                    self.obj = None
                elif len(lines) != 1:
                    self.parse_error = "%d lines on stdout" % len(lines)
            except ValueError as e:
                self.parse_error = "bad JSON: %s" % e

    @classmethod
    def from_session(cls, req, obj, secs):
        r = cls(["session", json.dumps(req)], None, "", "", secs)
        r.obj = obj
        r.rc = obj.get("exit") if isinstance(obj, dict) else None
        return r

    def get(self, k, default=None):
        return self.obj.get(k, default) if self.obj else default

    @property
    def outcome(self):
        return self.get("outcome")

    @property
    def error(self):
        return self.get("error")

    def is_outcome(self, name, rc=None):
        if self.outcome != name or self.error:
            return False
        if rc is None:
            rc = RC_OK if name in ("ACCEPTED", "OK", "COMPLETED", "RELEASED",
                                   "FOUND", "FORGOTTEN") else RC_NO
        return self.rc == rc

    @property
    def accepted(self):
        """For a claim: ACCEPTED in any form (the outcome, or exit 0, which
        means ACCEPTED for a claim)."""
        return self.outcome == "ACCEPTED" or self.rc == RC_OK

    def describe(self):
        s = "rc=%s secs=%.2f" % (self.rc, self.secs)
        if self.obj is not None:
            s += " json=%s" % json.dumps(self.obj, sort_keys=True)
        else:
            s += " stdout=%r" % self.out[-600:]
        if self.parse_error:
            s += " (%s)" % self.parse_error
        if self.err.strip():
            s += " stderr=%r" % self.err.strip()[-600:]
        return s


# ---------------------------------------------------------------------------
# onced processes
# ---------------------------------------------------------------------------

class Node:
    def __init__(self, cluster, name, slot):
        self.cluster = cluster
        self.name = name
        self.slot = slot
        self.client_port = cluster.base + slot
        self.raft_port = cluster.base + SLOTS + slot
        self.http_port = cluster.base + 2 * SLOTS + slot
        self.home = os.path.join(cluster.work, name)
        self.dir = os.path.join(self.home, "data")
        self.log = os.path.join(self.home, "onced.log")
        os.makedirs(self.dir, exist_ok=True)
        self.proc = None
        self.id = None
        self.starts = 0
        self.exit_codes = []  # (how, rc) of every end of a process

    @property
    def client_addr(self):
        return "127.0.0.1:%d" % self.client_port

    @property
    def raft_addr(self):
        return "127.0.0.1:%d" % self.raft_port

    @property
    def http_addr(self):
        return "127.0.0.1:%d" % self.http_port

    def __repr__(self):
        return "%s(%s pid=%s)" % (self.name, self.id or "?",
                                  self.proc.pid if self.proc else "-")

    def start(self, bootstrap=False, join=None, role=None, extra=(),
              env=None):
        """Start the node; @env (a dict) adds to the test's environment for
        this start only (e.g. libfaketime for a skewed wall clock)."""
        if self.alive():
            raise TestFailure("%s is already running" % self.name)
        c = self.cluster
        args = [c.onced, "--data-dir", self.dir, "--raft-addr",
                self.raft_addr, "--client-addr", self.client_addr]
        args += c.node_flags
        if c.http:
            args += ["--http-addr", self.http_addr]
        if c.node_extra is not None:
            args += list(c.node_extra(self))
        if bootstrap:
            args += ["--bootstrap"] + c.settings_flags
        if join:
            args += ["--join", ",".join(n.client_addr if isinstance(n, Node)
                                        else n for n in join)]
        if role:
            args += ["--role", role]
        args += list(extra)
        self.starts += 1
        with open(self.log, "ab") as f:
            f.write(("=== %s start #%d: %s\n" % (
                time.strftime("%H:%M:%S"), self.starts,
                " ".join(args))).encode())
        logf = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=logf,
                                         env=dict(c.test.child_env, **env)
                                         if env else c.test.child_env,
                                         preexec_fn=_die_with_parent)
        finally:
            logf.close()
        return self.proc

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _ended(self, how):
        rc = self.proc.returncode
        self.exit_codes.append((how, rc))
        self.proc = None
        return rc

    def wait_exit(self, timeout):
        """Wait for the process to end by itself; its exit code, or None."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return self._ended("self")

    def stop(self, timeout=20):
        """SIGTERM by PID; SIGKILL if it is still there after @timeout.
        Returns (exit code, killed?)."""
        if self.proc is None:
            return None, False
        if self.proc.poll() is not None:
            return self._ended("self"), False
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
            return self._ended("sigterm"), False
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self._ended("sigkill-after-sigterm")
            return None, True

    def kill9(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._ended("kill9")

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=25):
        return "\n".join(self.log_text().splitlines()[-n:])

    def sanitizer_lines(self):
        return [ln for ln in self.log_text().splitlines()
                if any(m in ln for m in SANITIZER_MARKS)]

    def tombstoned(self):
        return os.path.exists(os.path.join(self.dir, "tombstone"))

    def wipe(self):
        if self.alive():
            raise TestFailure("wipe of a running node %s" % self.name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir, exist_ok=True)
        self.id = None


class Cluster:
    def __init__(self, test, name, base, settings=None, snapshot=None,
                 extra_flags=(), http=False):
        self.test = test
        self.name = name
        # http: every node serves --http-addr on base+100+slot (the span
        # then covers those ports too).
        self.http = http
        self.base = pick_base(base, 3 * SLOTS if http else PORT_SPAN)
        self.work = os.path.join(test.work, name)
        os.makedirs(self.work, exist_ok=True)
        self.onced, self.oncectl = test.onced, test.oncectl
        self.nodes = {}
        el = os.environ.get("ONCE_TEST_ELECTION", "400ms")
        hb = os.environ.get("ONCE_TEST_HEARTBEAT", "75ms")
        self.node_flags = ["--election-timeout", el, "--heartbeat", hb]
        # ONCE_TEST_STORAGE=uring|pwrite|uv runs every node on that store
        # (default: onced's own choice).
        if os.environ.get("ONCE_TEST_STORAGE"):
            self.node_flags += ["--storage", os.environ["ONCE_TEST_STORAGE"]]
        for k, v in (snapshot or {}).items():
            self.node_flags += ["--snapshot-" + k, str(v)]
        self.node_flags += list(extra_flags)
        # Per-node flags (a function of the Node, e.g. its certificate) and
        # global oncectl flags (e.g. --tls-ca): none unless a test sets them.
        self.node_extra = None
        self.ctl_flags = []
        self.settings_flags = []
        for k, v in (settings or {}).items():
            self.settings_flags += ["--" + k, str(v)]
        test.clusters.append(self)
        test.info("cluster %s: client ports %d.., raft ports %d.., data in %s"
                  % (name, self.base, self.base + SLOTS, self.work))

    # -- nodes ----------------------------------------------------------

    def node(self, name):
        if name not in self.nodes:
            self.nodes[name] = Node(self, name, len(self.nodes))
        return self.nodes[name]

    def running(self):
        return [n for n in self.nodes.values() if n.alive()]

    def addrs(self, nodes):
        return ",".join(n.client_addr for n in nodes)

    def start_cluster(self, names, timeout=60):
        """Bootstrap names[0], join the others one by one through the
        nodes already in; wait until every one is a voter. Returns the
        nodes."""
        t = self.test
        first = self.node(names[0])
        first.start(bootstrap=True)
        self.wait_serving([first], timeout)
        self.node_id(first)
        members = [first]
        for nm in names[1:]:
            n = self.node(nm)
            self.join(n, members, timeout)
            members.append(n)
        t.check(True, "cluster %s: %s up, voters %s" % (
            self.name, names[0], " ".join("%s=%s" % (n.name, n.id)
                                          for n in members)))
        return members

    def join(self, n, members, timeout=60, role=None):
        """Start @n empty with --join through @members; wait until it is
        a voter (or standby when @role says so)."""
        n.start(join=members, role=role)
        self.wait_answering(n, timeout)
        self.node_id(n)
        self.wait_role(n.id, role or "voter", members, timeout)
        return n

    def node_id(self, n, timeout=20):
        """The node's Raft id (hex), from its own status answer."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if n.proc is not None and n.proc.poll() is not None:
                raise TestFailure("%s exited (rc %s) before answering "
                                  "status" % (n.name, n.proc.returncode))
            r = self.ctl(["status"], via=[n], timeout="1s")
            nid = r.get("node_id")
            if r.rc == RC_OK and nid and int(nid, 16) != 0:
                n.id = nid
                return nid
            last = r
            if r.rc == RC_USAGE:
                break
            time.sleep(0.2)
        raise TestFailure("%s: no node_id in status: %s" % (
            n.name, last.describe() if last else "-"))

    # -- oncectl ----------------------------------------------------------

    def ctl(self, args, via=None, timeout="5s", pin=None, json_out=True,
            wall=None):
        """Run oncectl once. @via: the nodes (or addresses) to give as
        --cluster (default: every running node). Returns a Result."""
        if via is None:
            via = self.running()
        addrs = ",".join(v.client_addr if isinstance(v, Node) else v
                         for v in via)
        cmd = [self.oncectl, "--cluster", addrs] + list(self.ctl_flags)
        if json_out:
            cmd.append("--json")
        if timeout:
            cmd += ["--timeout", timeout]
        if pin:
            cmd += ["--cluster-id", pin]
        cmd += [str(a) for a in args]
        return self.test.run_ctl(cmd, wall)

    def claim(self, scope, key, via, *opts, **kw):
        return self.ctl(["claim", scope, key] + list(opts), via=via, **kw)

    def status(self, n, timeout="1s"):
        r = self.ctl(["status"], via=[n], timeout=timeout)
        return r.obj if r.rc == RC_OK and r.obj else None

    def members(self, via, timeout="3s"):
        r = self.ctl(["members", "list"], via=via, timeout=timeout)
        if r.rc != RC_OK or not r.obj or not isinstance(r.get("members"),
                                                        list):
            return None
        return r.get("members")

    def session(self, via, timeout="10s"):
        return Session(self.test, self.oncectl, self.addrs(via), timeout,
                       os.path.join(self.work, "session-%d.log"
                                    % len(self.test.sessions)))

    # -- waiting ----------------------------------------------------------

    def wait_answering(self, n, timeout=20):
        """Until the node's own status answers (its RPC port is up)."""
        self.node_id(n, timeout)

    def leader_of(self, nodes):
        """The node that says it is leader and that a majority of @nodes
        name as leader; or None."""
        votes = {}
        leaders = []
        for n in nodes:
            if not n.alive():
                continue
            st = self.status(n)
            if not st:
                continue
            lid = st.get("leader") or ""
            if lid and int(lid, 16) != 0:
                votes[lid] = votes.get(lid, 0) + 1
            if str(st.get("role", "")).lower() == "leader":
                leaders.append((n, st.get("node_id")))
        for n, nid in leaders:
            if votes.get(nid, 0) * 2 > len(nodes):
                if nid:
                    n.id = nid
                return n
        return None

    def wait_leader(self, nodes, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            ld = self.leader_of(nodes)
            if ld is not None:
                return ld
            time.sleep(0.2)
        raise TestFailure("no leader among %s after %ds" % (
            " ".join(n.name for n in nodes), timeout))

    def wait_serving(self, nodes, timeout=30):
        """Until a linearizable lookup through each node answers (FOUND
        or NOT_FOUND): a ready leader exists and each node reaches it."""
        deadline = time.time() + timeout
        for n in nodes:
            last = None
            while True:
                if n.proc is not None and n.proc.poll() is not None:
                    raise TestFailure("%s exited (rc %s) while waiting for "
                                      "it to serve" % (n.name,
                                                       n.proc.returncode))
                r = self.ctl(["lookup", "probe", "serving"], via=[n],
                             timeout="2s")
                if r.rc in (RC_OK, RC_NO) and r.outcome in ("FOUND",
                                                            "NOT_FOUND"):
                    break
                last = r
                if r.rc == RC_USAGE:
                    raise TestFailure("oncectl refuses the lookup: %s"
                                      % r.describe())
                if time.time() > deadline:
                    raise TestFailure("%s does not serve after %ds: %s" % (
                        n.name, timeout, last.describe()))
                time.sleep(0.2)

    def wait_role(self, nid, role, via, timeout=60):
        """Until the member directory lists @nid with @role."""
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            ms = self.members([v for v in via if v.alive()] or via)
            if ms is not None:
                last = ms
                for m in ms:
                    if m.get("id") == nid and \
                            str(m.get("role", "")).lower() == role:
                        return
            time.sleep(0.3)
        raise TestFailure("member %s is not %s after %ds: members=%s" % (
            nid, role, timeout, json.dumps(last)))

    def member_ids(self, via):
        ms = self.members(via)
        return None if ms is None else [m.get("id") for m in ms]


# ---------------------------------------------------------------------------
# oncectl session
# ---------------------------------------------------------------------------

class Session:
    """One `oncectl --cluster ADDRS --timeout T session` process. Requests
    may be pipelined: answers are matched by the "id" echoed back."""

    def __init__(self, test, oncectl, addrs, timeout, errlog):
        self.test = test
        self.addrs = addrs
        self.errlog = errlog
        self.errf = open(errlog, "ab")
        self.proc = subprocess.Popen(
            [oncectl, "--cluster", addrs, "--timeout", timeout, "session"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errf,
            env=test.child_env)
        self.lines = queue.Queue()
        self.next_id = 1
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        test.sessions.append(self)

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def _send(self, req):
        line = (json.dumps(req) + "\n").encode()
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def _recv(self, timeout):
        try:
            raw = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TestFailure("session %s: no answer in %ds" % (self.addrs,
                                                                timeout))
        if raw is None:
            raise TestFailure("session %s ended (rc %s)" % (
                self.addrs, self.proc.poll()))
        try:
            obj = json.loads(raw)
        except ValueError:
            raise TestFailure("session %s: bad JSON line %r" % (self.addrs,
                                                                raw[:300]))
        if not isinstance(obj, dict):
            raise TestFailure("session %s: not an object: %r" % (self.addrs,
                                                                 raw[:300]))
        return obj

    def call(self, req, timeout=30):
        req = dict(req)
        req["id"] = self.next_id
        self.next_id += 1
        t0 = time.time()
        self._send(req)
        obj = self._recv(timeout)
        if obj.get("id") != req["id"]:
            raise TestFailure("session %s: answer id %r for request %r" % (
                self.addrs, obj.get("id"), req["id"]))
        return Result.from_session(req, obj, time.time() - t0)

    def pipeline(self, reqs, timeout=120):
        """Send every request (a writer thread) while reading the answers;
        returns the Results in request order."""
        tagged = []
        for r in reqs:
            r = dict(r)
            r["id"] = self.next_id
            self.next_id += 1
            tagged.append(r)
        werr = []

        def writer():
            try:
                for r in tagged:
                    self._send(r)
            except OSError as e:
                werr.append(e)

        t0 = time.time()
        w = threading.Thread(target=writer, daemon=True)
        w.start()
        byid = {}
        deadline = time.time() + timeout
        while len(byid) < len(tagged):
            left = deadline - time.time()
            if left <= 0:
                raise TestFailure("session %s: %d of %d answers in %ds" % (
                    self.addrs, len(byid), len(tagged), timeout))
            obj = self._recv(left)
            byid[obj.get("id")] = obj
        w.join()
        if werr:
            raise TestFailure("session %s: write failed: %s" % (self.addrs,
                                                                werr[0]))
        secs = time.time() - t0
        missing = [r["id"] for r in tagged if r["id"] not in byid]
        if missing:
            raise TestFailure("session %s: no answer for ids %s" % (
                self.addrs, missing[:10]))
        return [Result.from_session(r, byid[r["id"]], secs) for r in tagged]

    def close(self, timeout=15):
        """EOF on stdin ends the session with exit 0."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errf.close()
        return self.proc.returncode


# ---------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------

class Test:
    def __init__(self, name):
        self.name = name
        self.t0 = time.time()
        self.passed = 0
        self.failures = []
        self.clusters = []
        self.sessions = []
        self.ctl_lock = threading.Lock()
        self.onced = self.oncectl = None
        self.work = tempfile.mkdtemp(prefix="once-%s." % name,
                                     dir=os.environ.get("TMPDIR"))
        env = dict(os.environ)
        # ASan: make check sets ASAN_OPTIONS (abort_on_error, leaks); a
        # standalone run gets the same so a leak at a clean stop shows.
        env.setdefault("ASAN_OPTIONS", "abort_on_error=1:detect_leaks=1")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        env.pop("ONCE_CLUSTER", None)  # oncectl's default cluster: not ours
        self.child_env = env
        self.ctl_log = open(os.path.join(self.work, "oncectl.log"), "a")

    # -- reporting ----------------------------------------------------------

    def elapsed(self):
        return time.time() - self.t0

    def info(self, msg):
        print("[%6.1fs] %s" % (self.elapsed(), msg), flush=True)

    def check(self, cond, what, detail=""):
        """Record one check; go on either way. Returns @cond."""
        if cond:
            self.passed += 1
            print("[%6.1fs] PASS: %s" % (self.elapsed(), what), flush=True)
        else:
            self.failures.append(what)
            print("[%6.1fs] FAIL: %s%s" % (self.elapsed(), what,
                                           (": " + detail) if detail else ""),
                  flush=True)
        return cond

    def require(self, cond, what, detail=""):
        """A check the rest of the scenario depends on."""
        if not self.check(cond, what, detail):
            raise TestFailure(what)

    # -- processes ----------------------------------------------------------

    def run_ctl(self, cmd, wall=None):
        t0 = time.time()
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                               capture_output=True, env=self.child_env,
                               timeout=wall or 60)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = None, e.stdout or b"", (e.stderr or b"") + \
                b"\n[harness: oncectl killed after %ds]" % (wall or 60)
        r = Result(cmd[1:], rc, out.decode("utf-8", "replace"),
                   err.decode("utf-8", "replace"), time.time() - t0)
        with self.ctl_lock:
            self.ctl_log.write("%.3f %s\n  -> %s\n" % (
                t0, " ".join(cmd[1:]), r.describe()))
            self.ctl_log.flush()
        return r

    def all_nodes(self):
        for c in self.clusters:
            for n in c.nodes.values():
                yield c, n

    def stop_all(self, check=True):
        """SIGTERM every running node; with @check, each must exit 0."""
        for c, n in self.all_nodes():
            if n.alive():
                rc, killed = n.stop()
                if check:
                    self.check(rc == 0 and not killed,
                               "%s/%s stops at SIGTERM with exit 0"
                               % (c.name, n.name),
                               "rc=%s%s" % (rc, " (needed SIGKILL)"
                                            if killed else ""))

    def check_sanitizers(self):
        for c, n in self.all_nodes():
            bad = n.sanitizer_lines()
            self.check(not bad, "%s/%s: no sanitizer report in its log"
                       % (c.name, n.name), "; ".join(bad[:3]))
        # oncectl one-shot runs: a sanitizer abort shows as an unexpected
        # exit code in the check that ran it; sessions' stderr is here.
        for s in self.sessions:
            try:
                with open(s.errlog, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            bad = [ln for ln in text.splitlines()
                   if any(m in ln for m in SANITIZER_MARKS)]
            self.check(not bad, "session %s: no sanitizer report (%s)"
                       % (s.addrs, os.path.basename(s.errlog)),
                       "; ".join(bad[:3]))

    def cleanup(self):
        for s in self.sessions:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
        for _, n in self.all_nodes():
            if n.alive():
                n.proc.kill()
                n.proc.wait()

    def run(self, body, *args):
        """Run @body(self, *args); print the verdict; return the exit
        code for test-driver."""
        code = EXIT_PASS
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, _interrupt)
        try:
            self.onced, self.oncectl = binaries()
            self.info("%s: onced=%s oncectl=%s work=%s" % (
                self.name, self.onced, self.oncectl, self.work))
            body(self, *args)
            self.stop_all(check=True)
            self.check_sanitizers()
        except HardError as e:
            print("HARD ERROR: %s" % e, flush=True)
            code = EXIT_HARD
        except TestFailure as e:
            if not self.failures or self.failures[-1] != str(e):
                self.failures.append(str(e))
                print("[%6.1fs] FAIL: %s" % (self.elapsed(), e), flush=True)
        except Interrupted as e:
            print("INTERRUPTED: %s" % e, flush=True)
            code = EXIT_HARD
        except Exception:
            traceback.print_exc()
            self.failures.append("exception in the test")
        finally:
            self.cleanup()
        if code == EXIT_PASS and self.failures:
            code = EXIT_FAIL
        if code != EXIT_PASS:
            for c, n in self.all_nodes():
                print("--- %s/%s (id %s) log tail, %s:" % (c.name, n.name,
                                                           n.id, n.log))
                print(n.log_tail())
            print("--- last oncectl calls (%s):" % os.path.join(
                self.work, "oncectl.log"))
            self.ctl_log.flush()
            try:
                with open(os.path.join(self.work, "oncectl.log")) as f:
                    print("\n".join(f.read().splitlines()[-16:]))
            except OSError:
                pass
        self.ctl_log.close()
        keep = os.environ.get("ONCE_TEST_KEEP") or code != EXIT_PASS
        if keep:
            print("kept %s" % self.work)
        else:
            shutil.rmtree(self.work, ignore_errors=True)
        print("%s: %s, %d checks passed, %d failed, %.1fs" % (
            self.name, {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL",
                        EXIT_HARD: "HARD ERROR"}.get(code, code),
            self.passed, len(self.failures), self.elapsed()), flush=True)
        for f in self.failures:
            print("  failed: %s" % f)
        return code


def main(name, body, *args):
    sys.exit(Test(name).run(body, *args))


# ---------------------------------------------------------------------------
# helpers the scenarios share
# ---------------------------------------------------------------------------

class Prober:
    """A thread that claims (scope, keys) through one node over and over,
    with fresh request ids, and keeps every answer: the check that a
    removed or restarted node never answers ACCEPTED for them."""

    def __init__(self, cluster, node, scope, keys, timeout="1s"):
        self.c, self.node, self.scope, self.keys = cluster, node, scope, keys
        self.timeout = timeout
        self.results = []
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self.stop_ev.is_set():
            key = self.keys[i % len(self.keys)]
            i += 1
            r = self.c.claim(self.scope, key, [self.node],
                             timeout=self.timeout)
            self.results.append((key, r))
            if r.rc == RC_NOT_APPLIED and not r.obj:
                time.sleep(0.05)

    def start(self):
        self.th.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        return self.results

    def accepted(self):
        return [(k, r) for k, r in self.results if r.accepted]

    def summary(self):
        counts = {}
        for _, r in self.results:
            k = r.outcome or r.error or ("rc=%s" % r.rc)
            counts[k] = counts.get(k, 0) + 1
        return counts


def remove_member(t, c, victim_id, via, timeout=30):
    """`oncectl members remove ID` through @via, as an operator would: a
    not-applied error (exit 3) is safe to repeat; after an unknown outcome
    (exit 4) the member list decides. Returns the last Result and whether
    the member is gone."""
    deadline = time.time() + timeout
    r = None
    unknown = False
    while time.time() < deadline:
        alive_via = [v for v in via if v.alive()]
        r = c.ctl(["members", "remove", victim_id], via=alive_via,
                  timeout="5s")
        if r.rc == RC_OK and r.outcome == "OK":
            return r, True
        if r.rc == RC_UNKNOWN:
            unknown = True
        if r.rc not in (RC_NOT_APPLIED, RC_UNKNOWN) and not unknown:
            return r, False
        ids = c.member_ids(alive_via)
        if ids is not None and victim_id not in ids and unknown:
            return r, True
        time.sleep(0.5)
    return r, False


def session_claim(scope, key, **kw):
    req = {"cmd": "claim", "scope": scope, "key": key}
    req.update(kw)
    return req
