#!/usr/bin/env python3
"""with_cluster.py: run a command against a real 3-node once cluster.

    clients/testing/with_cluster.py [--tls] -- CMD ARGS...

The client packages' test suites (clients/python, clients/node, clients/go)
run under this: it starts three onced on 127.0.0.1, each with --http-addr
(and with --tls, TLS on the client and HTTP ports, certificates from
scripts/make-certs.sh and an access file where "ops" is admin and
"tenant-a" a client of the scopes tenant-a and tenant-a/*), waits for a
leader that serves, runs CMD, stops every node by PID and exits with CMD's
exit code (77, "skip", passes through). It is built on
tests/integration/oncecluster.py (ports reserved by flock, nodes that die
with this process, sanitizer checks of the node logs, log tails and the
kept work directory on failure); nothing of it is copied here.

CMD's environment gets:
  ONCE_TEST_HTTP      the three base URLs, comma-separated, in node order
                      (http://127.0.0.1:P, or https://127.0.0.1:P)
  ONCE_TEST_CONTROL   the path of a Unix socket that controls the cluster
  ONCE_TEST_CA, ONCE_TEST_TENANT_CERT, ONCE_TEST_TENANT_KEY,
  ONCE_TEST_ADMIN_CERT, ONCE_TEST_ADMIN_KEY   (--tls only: PEM files)

The control socket speaks JSON lines: one object per line in, one per line
out, on as many connections as the caller likes (requests are served one at
a time, in the order they arrive). "node" is "leader", "follower" (one that
is running and not the leader), a node's base URL from ONCE_TEST_HTTP, or
its name "a", "b", "c".

  {"op":"info"}           -> {"ok":true,"http":[URL,...],"leader":URL|null,
                              "cluster_id":HEX,"nodes":[{"url","name",
                              "state":"running"|"paused"|"killed","pid"}]}
  {"op":"kill","node":N}  SIGKILL by PID          -> {"ok":true,"node":URL}
  {"op":"pause","node":N} SIGSTOP; "resume" SIGCONT -> {"ok":true,"node":URL}
  {"op":"start","node":N} restart a killed node from its data directory and
                          wait until it answers   -> {"ok":true,"node":URL}
  {"op":"wait_leader"}    until a majority names a leader and it serves
                          (up to "timeout" seconds, default 30)
                                                  -> {"ok":true,"leader":URL}
  {"op":"recreate"}       stop every node, wipe every data directory, start
                          a NEW empty cluster on the same addresses (another
                          cluster id)  -> {"ok":true,"cluster_id":HEX,...}
  anything wrong          -> {"ok":false,"error":"..."}

Environment: ONCED / ONCECTL (the binaries), else top_builddir (default:
the repository's build/debug); ONCE_TEST_KEEP=1 keeps the work directory
(it is kept anyway when CMD or the cluster failed); the timings of
oncecluster (ONCE_TEST_ELECTION, ONCE_TEST_HEARTBEAT, ONCE_TEST_STORAGE).

Exit: CMD's exit code; if CMD passed but a node did not stop cleanly at
SIGTERM or its log has a sanitizer report, 1; 99 when the cluster could
not be started or on SIGINT/SIGTERM (CMD is sent SIGTERM by its PID first);
2 on a usage error.
"""

import json
import os
import queue
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
# make-certs.sh is found through top_srcdir; the binaries through
# top_builddir (ONCED / ONCECTL win over both).
os.environ.setdefault("top_srcdir", ROOT)
os.environ.setdefault("top_builddir", os.path.join(ROOT, "build", "debug"))
import oncecluster as oc  # noqa: E402

NAMES = ("a", "b", "c")
# Where the port search starts (oncecluster reserves the span by flock and
# moves up when another test holds it).
BASE = 12000


class ControlError(Exception):
    """A control request that cannot be done: {"ok":false,"error":...}."""


class Controller:
    def __init__(self, t, tls):
        self.t = t
        self.tls = tls
        self.certs = None
        self.paused = set()  # names of nodes under SIGSTOP
        self.ssl_ctx = None
        self.c = oc.Cluster(t, "clients", BASE, http=True)
        if tls:
            self._setup_tls()

    # -- setup --------------------------------------------------------------

    def _setup_tls(self):
        d = self.certs = os.path.join(self.t.work, "certs")
        oc.make_certs(d, oc.TENANT_CERTS)
        with open(os.path.join(d, "access.json"), "w") as f:
            json.dump(oc.tenant_access(), f)
        self.c.node_extra = lambda n: [
            "--tls-cert", os.path.join(d, n.name + ".pem"),
            "--tls-key", os.path.join(d, n.name + ".key"),
            "--tls-ca", os.path.join(d, "ca.pem"),
            "--access", os.path.join(d, "access.json")]
        # The harness's own oncectl calls (status, lookups) are the admin's.
        self.c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                            "--tls-cert", os.path.join(d, "ops.pem"),
                            "--tls-key", os.path.join(d, "ops.key")]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(os.path.join(d, "ca.pem"))
        ctx.load_cert_chain(os.path.join(d, "ops.pem"),
                            os.path.join(d, "ops.key"))
        self.ssl_ctx = ctx

    def env(self):
        e = {"ONCE_TEST_HTTP": ",".join(self.urls())}
        if self.tls:
            d = self.certs
            e.update({
                "ONCE_TEST_CA": os.path.join(d, "ca.pem"),
                "ONCE_TEST_TENANT_CERT": os.path.join(d, "tenant-a.pem"),
                "ONCE_TEST_TENANT_KEY": os.path.join(d, "tenant-a.key"),
                "ONCE_TEST_ADMIN_CERT": os.path.join(d, "ops.pem"),
                "ONCE_TEST_ADMIN_KEY": os.path.join(d, "ops.key")})
        return e

    def url(self, n):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http",
                                      n.http_port)

    def urls(self):
        return [self.url(self.c.node(nm)) for nm in NAMES]

    def start(self):
        nodes = self.c.start_cluster(list(NAMES))
        self._ready(nodes)

    def _ready(self, nodes, timeout=60):
        """Until a leader serves through every running node and each HTTP
        port answers /v1/status: what CMD may rely on when it starts."""
        ld = self.c.wait_leader(nodes, timeout)
        self.c.wait_serving([n for n in nodes if n.alive()], timeout)
        for n in nodes:
            if n.alive():
                self._wait_http(n, timeout)
        return ld

    def _wait_http(self, n, timeout):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.url(n) + "/v1/status",
                                            timeout=2,
                                            context=self.ssl_ctx) as r:
                    if r.status == 200:
                        return
                    last = r.status
            except OSError as e:
                last = e
            time.sleep(0.2)
        raise oc.TestFailure("%s: HTTP /v1/status does not answer after "
                             "%ds: %s" % (n.name, timeout, last))

    # -- nodes ----------------------------------------------------------------

    def state(self, n):
        if not n.alive():
            return "killed"
        return "paused" if n.name in self.paused else "running"

    def leader(self):
        """The node a majority of the three names as leader, asking only
        the running nodes (a paused one would only time out); or None."""
        votes = {}
        leaders = []
        for nm in NAMES:
            n = self.c.node(nm)
            if self.state(n) != "running":
                continue
            st = self.c.status(n)
            if not st:
                continue
            lid = st.get("leader") or ""
            if lid and int(lid, 16) != 0:
                votes[lid] = votes.get(lid, 0) + 1
            if str(st.get("role", "")).lower() == "leader":
                leaders.append((n, st.get("node_id")))
        for n, nid in leaders:
            if nid and votes.get(nid, 0) * 2 > len(NAMES):
                return n
        return None

    def cluster_id(self):
        for nm in NAMES:
            n = self.c.node(nm)
            if self.state(n) == "running":
                st = self.c.status(n)
                if st and st.get("cluster_id"):
                    return st["cluster_id"]
        return None

    def find(self, spec):
        if not isinstance(spec, str) or not spec:
            raise ControlError("node: want \"leader\", \"follower\", a URL "
                               "of ONCE_TEST_HTTP or a name a, b, c")
        if spec == "leader":
            ld = self.leader()
            if ld is None:
                raise ControlError("no leader now")
            return ld
        if spec == "follower":
            ld = self.leader()
            for nm in NAMES:
                n = self.c.node(nm)
                if n is not ld and self.state(n) == "running":
                    return n
            raise ControlError("no running follower")
        for nm in NAMES:
            n = self.c.node(nm)
            if spec in (nm, self.url(n), self.url(n) + "/"):
                return n
        raise ControlError("no node %r (nodes: %s)" % (spec,
                                                       ", ".join(self.urls())))

    # -- requests ---------------------------------------------------------------

    def info(self):
        ld = self.leader()
        nodes = []
        for nm in NAMES:
            n = self.c.node(nm)
            nodes.append({"url": self.url(n), "name": nm,
                          "state": self.state(n),
                          "pid": n.proc.pid if n.alive() else None})
        return {"http": self.urls(),
                "leader": self.url(ld) if ld else None,
                "cluster_id": self.cluster_id(), "nodes": nodes}

    def handle(self, req):
        if not isinstance(req, dict):
            raise ControlError("want a JSON object")
        op = req.get("op")
        if op == "info":
            return self.info()
        if op == "wait_leader":
            timeout = req.get("timeout", 30)
            if not isinstance(timeout, (int, float)) or timeout <= 0:
                raise ControlError("timeout: want seconds > 0")
            deadline = time.time() + timeout
            while time.time() < deadline:
                ld = self.leader()
                if ld is not None:
                    try:
                        self.c.wait_serving([ld], max(1, deadline -
                                                      time.time()))
                    except oc.TestFailure:
                        continue
                    return {"leader": self.url(ld)}
                time.sleep(0.2)
            raise ControlError("no leader after %gs" % timeout)
        if op == "recreate":
            return self.recreate()
        if op in ("kill", "pause", "resume", "start"):
            n = self.find(req.get("node"))
            st = self.state(n)
            if op == "kill":
                if st == "killed":
                    raise ControlError("%s is not running" % n.name)
                n.kill9()
                self.paused.discard(n.name)
            elif op == "pause":
                if st != "running":
                    raise ControlError("%s is %s" % (n.name, st))
                os.kill(n.proc.pid, signal.SIGSTOP)
                self.paused.add(n.name)
            elif op == "resume":
                if st != "paused":
                    raise ControlError("%s is %s, not paused" % (n.name, st))
                os.kill(n.proc.pid, signal.SIGCONT)
                self.paused.discard(n.name)
            else:
                if st != "killed":
                    raise ControlError("%s is %s, not killed" % (n.name, st))
                n.start()  # its data dir: --bootstrap/--join not needed
                self.c.wait_answering(n, 30)
                self._wait_http(n, 30)
            return {"node": self.url(n)}
        raise ControlError("op: unknown %r (info, kill, pause, resume, "
                           "start, wait_leader, recreate)" % (op,))

    def recreate(self):
        self.resume_all()
        for nm in NAMES:
            n = self.c.node(nm)
            if n.alive():
                rc, killed = n.stop()
                self.t.check(rc == 0 and not killed, "recreate: %s stops at "
                             "SIGTERM with exit 0" % nm, "rc=%s" % rc)
            n.wipe()
        # The same Node objects (same ports, the log appended to, so the
        # final sanitizer check reads every incarnation), empty data dirs.
        nodes = self.c.start_cluster(list(NAMES))
        self._ready(nodes)
        return self.info()

    def resume_all(self):
        for nm in sorted(self.paused):
            n = self.c.node(nm)
            if n.alive():
                os.kill(n.proc.pid, signal.SIGCONT)
        self.paused.clear()


# --- the control socket --------------------------------------------------------

def serve_control(path, requests):
    """Accept connections on @path; each line becomes (request, reply
    queue) on @requests for the main thread (nodes are started only there:
    oncecluster's PR_SET_PDEATHSIG is per forking thread)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)

    def conn_loop(conn):
        with conn:
            f = conn.makefile("rwb")
            for line in f:
                if not line.strip():
                    continue
                try:
                    req = json.loads(line)
                except ValueError as e:
                    ans = {"ok": False, "error": "bad JSON: %s" % e}
                else:
                    reply = queue.Queue(1)
                    requests.put((req, reply))
                    ans = reply.get()
                try:
                    f.write((json.dumps(ans) + "\n").encode())
                    f.flush()
                except OSError:
                    return

    def accept_loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=conn_loop, args=(conn,),
                             daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()
    return srv


def body(t, tls, cmd, out):
    ctl = Controller(t, tls)
    ctl.start()
    info = ctl.info()
    t.info("cluster up: %s leader %s cluster_id %s" % (
        " ".join(info["http"]), info["leader"], info["cluster_id"]))
    sock = os.path.join(t.work, "control.sock")
    requests = queue.Queue()
    srv = serve_control(sock, requests)
    env = dict(os.environ)
    env.update(ctl.env())
    env["ONCE_TEST_CONTROL"] = sock
    t.info("running: %s" % " ".join(cmd))
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        print("with_cluster: cannot run %s: %s" % (cmd[0], e), flush=True)
        out["rc"] = 127
        srv.close()
        return
    try:
        while proc.poll() is None:
            try:
                req, reply = requests.get(timeout=0.1)
            except queue.Empty:
                continue
            t0 = time.time()
            try:
                ans = dict(ok=True, **ctl.handle(req))
            except (ControlError, oc.TestFailure) as e:
                ans = {"ok": False, "error": str(e)}
            except Exception as e:  # a bug here must not hang CMD
                ans = {"ok": False, "error": "controller: %r" % e}
            t.info("control %s -> %s (%.1fs)" % (
                json.dumps(req), json.dumps(ans), time.time() - t0))
            reply.put(ans)
        out["rc"] = proc.returncode
    finally:
        srv.close()
        if proc.poll() is None:  # interrupted: CMD goes first, by its PID
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        ctl.resume_all()  # a stopped node cannot answer SIGTERM
    rc = out["rc"]
    if rc not in (0, oc.EXIT_SKIP):
        # oncecluster then prints every node's log tail and keeps the work
        # directory.
        t.failures.append("the command exited %s" % rc)
        print("with_cluster: %s exited %s" % (cmd[0], rc), flush=True)


def main(argv):
    args = argv[1:]
    tls = False
    while args and args[0] != "--":
        if args[0] == "--tls":
            tls = True
        elif args[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            print("with_cluster.py: unknown option %s" % args[0],
                  file=sys.stderr)
            return 2
        args = args[1:]
    if len(args) < 2:
        print("usage: with_cluster.py [--tls] -- CMD ARGS...",
              file=sys.stderr)
        return 2
    cmd = args[1:]
    out = {}
    # The harness's lines (oncecluster prints its PASS/FAIL checks and log
    # tails) go to stderr: CMD's stdout stays CMD's alone, for the runners
    # whose output the clients' test scripts count.
    sys.stdout = sys.stderr
    t = oc.Test("with-cluster%s" % ("-tls" if tls else ""))
    code = t.run(body, tls, cmd, out)
    rc = out.get("rc")
    if rc is None:
        return code if code else oc.EXIT_HARD
    if rc != 0:
        return rc
    return code  # CMD passed: 0, or the cluster's own failure


if __name__ == "__main__":
    sys.exit(main(sys.argv))
