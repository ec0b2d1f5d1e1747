#!/usr/bin/env python3
"""deploy_statefulset.py: the StatefulSet of deploy/kubernetes simulated
with deploy/image/entrypoint.sh, without Kubernetes.

Runs inside its own network and mount namespaces (deploy-statefulset.sh):
  * the per-pod Services: /etc/hosts (bind-mounted in this namespace only)
    maps once-member-N to 127.0.1.(N+1), the stable "ClusterIP";
  * kube-proxy: an iptables nat chain per pod DNATs that address to the
    pod's current IP, 127.0.(10+G).(N+1) for the pod's G-th start, so every
    restart is a reschedule with a new pod IP;
  * a pod: the entrypoint with HOSTNAME=once-N, POD_IP, ONCE_DATA_DIR a
    directory (the PVC), ONCE_RUN_DIR its own directory, ONCE_TLS_DIR the
    "secret" (scripts/make-certs.sh: a certificate whose IP SAN is the
    member Service's address, not the pod's), ONCE_BOOTSTRAP=1 as the
    first rollout's template sets it for every pod; preStop is
    deploy/image/prestop.sh, then SIGTERM;
  * readiness: GET /readyz on POD_IP:9101 over HTTPS without a client
    certificate, checking nothing, as the kubelet's probe (scheme: HTTPS).

Steps:
  1. first start: three pods at once (podManagementPolicy Parallel); all
     ready; three voters whose Raft addresses are the stable ones; one
     cluster id.
  2. rolling restart under claim load, pods 2, 1, 0 (the StatefulSet's
     order), each gated on the restarted pod's /readyz before the next:
     every pod restarts on a new IP with its own volume, keeps its id, and
     never bootstraps again; the leader hands leadership away in preStop;
     no member removed; no key ACCEPTED twice; every key accepted before
     is still answered DUPLICATE/REPLAYED (not ACCEPTED).
  3. a lost volume: once-0 (ONCE_BOOTSTRAP=1 still set) restarts on an
     empty directory: it must not bootstrap a second cluster; it waits,
     naming the stale id to remove; after the documented
     `oncectl members remove OLD` it joins with a new id; same cluster id.
  4. scale 3 -> 5 (pods 3 and 4 with ONCE_REPLICAS=5 join) and 5 -> 3
     (the documented `oncectl members remove` of 4, then 3: the removed
     pods stop by themselves with exit 0), claims accepted throughout.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402

SRC = os.environ.get("top_srcdir",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                  "..", ".."))
ENTRY = os.path.join(SRC, "deploy", "image", "entrypoint.sh")
PRESTOP = os.path.join(SRC, "deploy", "image", "prestop.sh")
MAKE_CERTS = os.path.join(SRC, "scripts", "make-certs.sh")
MAX_PODS = 5
RAFT, CLIENT, HTTP = 7201, 7101, 9101


def chk(t, cond, what, detail=""):
    t.check(cond, what, detail if isinstance(detail, str) else repr(detail))


def req(t, cond, what, detail=""):
    t.require(cond, what, detail if isinstance(detail, str) else repr(detail))


def svc_ip(n):
    return "127.0.1.%d" % (n + 1)


def run(t, args):
    p = subprocess.run(args, capture_output=True)
    req(t, p.returncode == 0, " ".join(args),
              p.stderr.decode("utf-8", "replace"))
    return p.stdout.decode()


class Pod:
    def __init__(self, t, work, n):
        self.t, self.n = t, n
        self.name = "once-%d" % n
        self.pv = os.path.join(work, "pv-%d" % n)
        self.run_dir = os.path.join(work, "run-%d" % n)
        self.log = os.path.join(work, "%s.log" % self.name)
        # The mounted secret: a certificate for the member Service's IP.
        self.tls_dir = os.path.join(work, "tls-%d" % n)
        certs = os.path.join(work, "certs")
        run(t, ["sh", MAKE_CERTS, "node", certs, self.name, svc_ip(n)])
        os.makedirs(self.tls_dir)
        for src, dst in ((self.name + ".pem", "tls.crt"),
                         (self.name + ".key", "tls.key"), ("ca.pem", "ca.crt")):
            shutil.copy(os.path.join(certs, src),
                        os.path.join(self.tls_dir, dst))
        # The mounted ConfigMap: the access file (deploy/kubernetes/access.yaml
        # in the members' names: their certificates' CN here; ops is admin).
        self.access = os.path.join(work, "access-%d.json" % n)
        with open(self.access, "w") as f:
            json.dump({"identities":
                       [{"match": "cn:once-%d" % i, "role": "member"}
                        for i in range(5)] +
                       [{"match": "dns:ops", "role": "admin"}]}, f)
        self.gen = 0
        self.proc = None
        self.pod_ip = None
        run(t, ["iptables", "-w", "-t", "nat", "-N", "POD%d" % n])
        run(t, ["iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-d",
                svc_ip(n), "-j", "POD%d" % n])

    @property
    def client_addr(self):
        return "%s:%d" % (svc_ip(self.n), CLIENT)

    @property
    def http_addr(self):
        return "%s:%d" % (self.pod_ip, HTTP)

    def env(self, replicas):
        e = dict(self.t.child_env)
        e.update({
            "HOSTNAME": self.name, "POD_IP": self.pod_ip,
            "ONCE_REPLICAS": str(replicas), "ONCE_BOOTSTRAP": "1",
            "ONCE_DATA_DIR": self.pv, "ONCE_RUN_DIR": self.run_dir,
            "ONCE_TLS_DIR": self.tls_dir, "ONCE_ACCESS": self.access,
            "ONCED": self.t.onced, "ONCECTL": self.t.oncectl,
            "ONCE_ONCED_ARGS": "--election-timeout 400ms --heartbeat 75ms",
        })
        return e

    def start(self, replicas=3):
        """A new pod: a new IP, kube-proxy pointed at it, the entrypoint."""
        self.gen += 1
        self.pod_ip = "127.0.%d.%d" % (10 + self.gen, self.n + 1)
        run(self.t, ["iptables", "-w", "-t", "nat", "-F", "POD%d" % self.n])
        run(self.t, ["iptables", "-w", "-t", "nat", "-A", "POD%d" % self.n,
                     "-p", "tcp", "-j", "DNAT", "--to-destination",
                     self.pod_ip])
        with open(self.log, "ab") as f:
            f.write(("=== start #%d pod_ip=%s\n" % (self.gen, self.pod_ip))
                    .encode())
        logf = open(self.log, "ab")
        try:
            self.proc = subprocess.Popen(["sh", ENTRY], env=self.env(replicas),
                                         stdin=subprocess.DEVNULL,
                                         stdout=logf, stderr=logf,
                                         preexec_fn=oc._die_with_parent)
        finally:
            logf.close()

    def prestop(self):
        e = dict(self.t.child_env, ONCE_RUN_DIR=self.run_dir,
                 ONCECTL=self.t.oncectl)
        return subprocess.run(["sh", PRESTOP], env=e, capture_output=True,
                              timeout=60).returncode

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def term(self, timeout=30):
        """SIGTERM by PID (the kubelet after preStop); the exit code."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def log_text(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def ready(self):
        return oh.request(self.http_addr, "/readyz",
                          ctx=oh.tls_context(None, verify=False))[0] == 200


def wait_ready(t, pods, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if all(p.ready() for p in pods):
            return True
        time.sleep(0.2)
    return False


def status(c, addr):
    r = c.ctl(["status"], via=[addr], timeout="2s")
    return r.obj or {}


def members(c, pods):
    r = c.ctl(["members", "list"], via=[p.client_addr for p in pods],
              timeout="3s")
    return (r.obj or {}).get("members", [])


def voters(c, pods):
    return sorted(((m["id"], m["raft_addr"]) for m in members(c, pods)
                   if m.get("role") == "VOTER"), key=lambda v: v[1])


class Load:
    """Claims through every member's stable client address, round robin,
    each key twice in a row with fresh request ids (the second one is a
    replay: never ACCEPTED if the first was)."""

    def __init__(self, c, pods, scope):
        self.c, self.pods, self.scope = c, pods, scope
        self.results = []
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        while not self.stop_ev.is_set():
            key = "k-%d" % (i // 2)
            via = [p.client_addr for p in self.pods[i % 3:] + self.pods[:i % 3]]
            r = self.c.claim(self.scope, key, via, timeout="2s")
            self.results.append((key, r))
            i += 1
            if r.rc == oc.RC_NOT_APPLIED:
                time.sleep(0.05)

    def start(self):
        self.th.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        return self.results


def keys_accepted(results):
    acc = {}
    for k, r in results:
        if r.accepted:
            acc[k] = acc.get(k, 0) + 1
    return acc


def scenario(t):
    work = tempfile.mkdtemp(prefix="sts.", dir=t.work)
    hosts = os.path.join(work, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost\n")
        for n in range(MAX_PODS):
            f.write("%s once-member-%d\n" % (svc_ip(n), n))
    run(t, ["mount", "--bind", hosts, "/etc/hosts"])
    certs = os.path.join(work, "certs")
    run(t, ["sh", MAKE_CERTS, "ca", certs])
    run(t, ["sh", MAKE_CERTS, "client", certs, "ops"])
    c = oc.Cluster(t, "sts", 9900)  # for ctl(); its nodes are the pods
    c.ctl_flags = ["--tls-ca", os.path.join(certs, "ca.pem"),
                   "--tls-cert", os.path.join(certs, "ops.pem"),
                   "--tls-key", os.path.join(certs, "ops.key")]
    pods = [Pod(t, work, n) for n in range(MAX_PODS)]
    three = pods[:3]
    try:
        steps(t, c, pods, three)
    finally:
        for p in pods:
            p.term(10)
        for p in pods:
            for mark in oc.SANITIZER_MARKS:
                if mark in p.log_text():
                    chk(t, False, "%s: no sanitizer report" % p.name, mark)
        if t.failures:
            for p in pods:
                t.info("--- %s log tail:\n%s" % (
                    p.name, "\n".join(p.log_text().splitlines()[-25:])))


def steps(t, c, pods, three):
    # 1. first start
    for p in three:
        p.start()
    req(t, wait_ready(t, three, 90), "first rollout: all three ready")
    v = voters(c, three)
    chk(t, [a for _, a in v] == ["%s:%d" % (svc_ip(n), RAFT)
                                  for n in range(3)],
            "three voters at the stable per-pod addresses", v)
    ids = {p.n: status(c, p.client_addr).get("node_id") for p in three}
    cids = set(status(c, p.client_addr).get("cluster_id") for p in three)
    chk(t, len(cids) == 1 and None not in cids, "one cluster id", cids)
    cid = cids.pop()
    boots = [p for p in three if "bootstrap: member" in p.log_text()]
    chk(t, [p.name for p in boots] == ["once-0"],
            "only once-0 bootstrapped", [p.name for p in boots])

    # 2. rolling restart under load
    load = Load(c, three, "roll").start()
    time.sleep(1)
    leaders_moved = 0
    for p in reversed(three):
        was_leader = status(c, p.client_addr).get("role") == "LEADER"
        rc = p.prestop()
        chk(t, rc == 0, "%s: preStop exits 0" % p.name, rc)
        if was_leader:
            st = status(c, p.client_addr)
            chk(t, st.get("role") != "LEADER",
                    "%s led: preStop moved leadership away" % p.name, st)
            leaders_moved += 1
        old_ip = p.pod_ip
        rc = p.term()
        chk(t, rc == 0, "%s: SIGTERM, exit 0" % p.name, rc)
        p.start()
        chk(t, p.pod_ip != old_ip, "%s: rescheduled on a new IP %s" % (
            p.name, p.pod_ip))
        req(t, wait_ready(t, [p], 60), "%s: ready again (gates the next "
                  "pod)" % p.name)
        chk(t, status(c, p.client_addr).get("node_id") == ids[p.n],
                "%s: same id after the restart" % p.name)
    chk(t, leaders_moved >= 1, "a leader's preStop moved leadership",
            leaders_moved)
    time.sleep(1)
    results = load.stop()
    acc = keys_accepted(results)
    chk(t, len(acc) > 10, "claims accepted during the roll (%d keys, %d "
            "calls)" % (len(acc), len(results)))
    twice = [k for k, n in acc.items() if n > 1]
    chk(t, not twice, "no key ACCEPTED twice during the roll", twice[:5])
    again = [(k, c.claim("roll", k, [p.client_addr for p in three],
                         timeout="3s")) for k in sorted(acc)]
    bad = [(k, r.describe()) for k, r in again if r.accepted or
           r.outcome not in ("DUPLICATE", "REPLAYED")]
    chk(t, not bad, "every key accepted in the roll answers "
            "DUPLICATE/REPLAYED now", bad[:3])
    chk(t, voters(c, three) == v, "no member removed or added by the roll")
    restarts = [p for p in three if p.log_text().count("bootstrap: member")
                > 1]
    chk(t, not restarts, "no pod bootstrapped again")

    # 3. a lost volume on once-0, ONCE_BOOTSTRAP=1 still in its env
    p0 = three[0]
    p0.prestop()
    chk(t, p0.term() == 0, "once-0: stopped to lose its volume")
    old_id = ids[0]
    subprocess.run(["rm", "-rf", p0.pv])
    p0.start()
    end = time.time() + 20
    while time.time() < end and "oncectl members remove" not in p0.log_text():
        time.sleep(0.2)
    text = p0.log_text()
    chk(t, "already answers" in text,
            "once-0 on an empty volume: sees the cluster, does not bootstrap")
    chk(t, "oncectl members remove %s" % old_id in text,
            "once-0: names the stale id %s to remove" % old_id)
    chk(t, not p0.ready(), "once-0: not ready while the stale id stands")
    chk(t, all(status(c, p.client_addr).get("cluster_id") == cid
                for p in three[1:]), "the cluster id did not change")
    r = c.ctl(["members", "remove", old_id],
              via=[p.client_addr for p in three[1:]], timeout="30s")
    chk(t, r.rc == 0, "documented step: oncectl members remove %s" % old_id,
            r.describe())
    req(t, wait_ready(t, [p0], 90), "once-0: joined and ready")
    st = status(c, p0.client_addr)
    chk(t, st.get("node_id") not in (None, old_id) and
            st.get("cluster_id") == cid,
            "once-0: a new id in the same cluster", st)
    v = voters(c, three)
    chk(t, len(v) == 3 and old_id not in [i for i, _ in v] and
            v[0][1] == "%s:%d" % (svc_ip(0), RAFT),
            "three voters, the stale id gone, once-0 at its stable address",
            v)
    r = c.claim("roll", sorted(acc)[0], [p0.client_addr], timeout="3s")
    chk(t, r.outcome in ("DUPLICATE", "REPLAYED"),
            "once-0 (new volume) answers an old key DUPLICATE/REPLAYED",
            r.describe())

    # 4. scale 3 -> 5 -> 3
    for p in pods[3:]:
        p.start(replicas=5)
    req(t, wait_ready(t, pods, 90), "scaled to 5: all ready")
    v5 = voters(c, pods)
    chk(t, len(v5) == 5, "five voters", v5)
    r = c.claim("scale", "five", [pods[4].client_addr], timeout="3s")
    chk(t, r.accepted, "a claim through once-4", r.describe())
    for p in reversed(pods[3:]):
        pid = status(c, p.client_addr).get("node_id")
        r = c.ctl(["members", "remove", pid],
                  via=[q.client_addr for q in three], timeout="30s")
        chk(t, r.rc == 0, "scale down: members remove %s (%s)" % (
            pid, p.name), r.describe())
        try:
            rc = p.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            rc = None
        chk(t, rc == 0, "%s: removed, stops by itself with exit 0" % p.name,
                rc)
    chk(t, len(voters(c, three)) == 3, "three voters again")
    r = c.claim("scale", "three", [p.client_addr for p in three],
                timeout="3s")
    chk(t, r.accepted, "a claim after scaling back to 3", r.describe())
    for p in three:
        p.prestop()
        chk(t, p.term() == 0, "%s: clean stop" % p.name)


if __name__ == "__main__":
    oc.main("deploy-statefulset", scenario)
