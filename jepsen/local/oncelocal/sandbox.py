"""The private namespace every run executes in.

The command (run, acceptance) starts, checks what it needs, makes its store
directory, compiles the bind shim, then re-executes itself as
`unshare --net --mount --pid --fork --mount-proc --kill-child -- CMD --inner DIR`:
its own loopback (nodes on 127.0.1.x; no address outside the namespace is
ever used), its own /proc (LeakSanitizer works), and every process it
starts dies with it. Inside, it brings `lo` up and runs the body; every node
is stopped by its PID at the end or on an error.
"""

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

from .common import HERE, REPO, log, set_log

INNER_ENV = "ONCE_JEPSEN_INNER"
CLEANUPS = []          # callables run (once) when the body fails


def add_common_args(p):
    p.add_argument("--build-dir", default=os.path.join(REPO, "build", "debug"),
                   help="where onced and oncectl are (default build/debug)")
    p.add_argument("--store", default=os.path.join(REPO, "jepsen", "store"),
                   help="where run directories go (default jepsen/store)")
    p.add_argument("--node-arg", dest="node_args", action="append", default=[],
                   metavar="ARG", help="an extra onced argument for every node "
                   "(repeatable), e.g. --node-arg=--storage=pwrite")
    p.add_argument("--tls", action="store_true",
                   help="TLS on both ports of every node and for oncectl: "
                   "a CA, a certificate per host and a client certificate, "
                   "made in the run directory (scripts/make-certs.sh)")
    p.add_argument("--inner", help=argparse.SUPPRESS)
    p.add_argument("--shim", help=argparse.SUPPRESS)


def build_shim(store):
    src = os.path.join(HERE, "bindshim.c")
    out = os.path.join(store, ".bindshim.so")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", out + ".tmp",
                        src, "-ldl"], check=True)
        os.rename(out + ".tmp", out)
    return out


def install(what):
    print("%s: installing what is missing (scripts/deps.sh)" % what, flush=True)
    subprocess.run(["sh", "-c", ". %s/scripts/deps.sh && once_install_deps"
                    % REPO], check=True)


def inner(name, a, body):
    set_log(os.path.join(a.inner, name + ".log"), name)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    def term(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, term)
    try:
        return body()
    except (Exception, KeyboardInterrupt) as e:   # noqa: BLE001
        import traceback
        log("runner error: %s\n%s" % (e, traceback.format_exc()))
        for c in CLEANUPS:
            try:
                c()
            except Exception as e2:   # noqa: BLE001
                log("cleanup error: %r" % e2)
        return 3


def main(p, a, argv, name, body, needs=()):
    """Outer half (checks, store, unshare) or, with --inner, the body."""
    a.build_dir = os.path.abspath(a.build_dir)
    if a.inner:
        if os.environ.get(INNER_ENV) != "1" or os.getpid() != 1:
            p.error("--inner is internal")
        sys.exit(inner(name, a, body))
    for b in ("onced", "oncectl"):
        if not os.access(os.path.join(a.build_dir, b), os.X_OK):
            sys.exit("%s: not built: %s/%s (cd %s && make -j2 onced oncectl)"
                     % (name, a.build_dir, b, a.build_dir))
    if os.geteuid() != 0:
        sys.exit("%s: needs root (unshare --net --mount --pid, iptables)" % name)
    import shutil
    if ("iptables" in needs and not shutil.which("iptables")) or (
            "faketime" in needs and not os.path.exists(
                "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")):
        install(name)
    os.makedirs(a.store, exist_ok=True)
    tag = "-s%d" % a.seed if getattr(a, "seed", None) is not None else ""
    rname = time.strftime("%Y%m%dT%H%M%S") + "-" + name + tag
    rdir = os.path.join(os.path.abspath(a.store), rname)
    i = 1
    while os.path.exists(rdir):
        i += 1
        rdir = os.path.join(os.path.abspath(a.store), "%s.%d" % (rname, i))
    os.makedirs(rdir)
    shim = build_shim(os.path.abspath(a.store))
    latest = os.path.join(a.store, "latest")
    try:
        if os.path.islink(latest):
            os.unlink(latest)
        os.symlink(os.path.basename(rdir), latest)
    except OSError:
        pass
    if getattr(a, "seed", None) is not None:
        print("%s: seed %d, store %s" % (name, a.seed, rdir), flush=True)
    else:
        print("%s: store %s" % (name, rdir), flush=True)
    args = [sys.executable, os.path.abspath(sys.argv[0])] + list(argv) + [
        "--inner", rdir, "--shim", shim]
    if getattr(a, "seed", None) is not None and "--seed" not in argv:
        args += ["--seed", str(a.seed)]
    env = dict(os.environ)
    env[INNER_ENV] = "1"
    child = subprocess.Popen(["unshare", "--net", "--mount", "--pid", "--fork",
                              "--mount-proc", "--kill-child", "--"] + args, env=env)

    def fwd(signum, frame):
        # unshare does not pass SIGTERM on: signal the body inside (its
        # child, PID 1 of the namespace), which stops the nodes and exits;
        # if it is not gone in 30 s, SIGKILL unshare (--kill-child then
        # kills the namespace's init, and with it every process in it).
        try:
            with open("/proc/%d/task/%d/children" % (child.pid, child.pid)) as f:
                kids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            kids = []
        for k in kids:
            try:
                os.kill(k, signal.SIGTERM)
            except OSError:
                pass

        def hard():
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
        t = threading.Timer(30, hard)
        t.daemon = True
        t.start()
    signal.signal(signal.SIGTERM, fwd)
    signal.signal(signal.SIGINT, fwd)
    rc = child.wait()
    verdict = {0: "PASS: every check passed",
               1: "FAIL: anomalies found (see check.out / %s.log)" % name,
               2: "ERROR: the history is unreadable"}.get(
                   rc, "ERROR: the runner failed (rc %s; see %s.log)" % (rc, name))
    seed = "; seed %d" % a.seed if getattr(a, "seed", None) is not None else ""
    print("%s: %s%s; %s" % (name, verdict, seed, rdir), flush=True)
    sys.exit(0 if rc == 0 else (1 if rc == 1 else 2))
