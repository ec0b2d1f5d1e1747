#!/usr/bin/env python3
"""Helpers for tests/integration/raft-members.sh (membership over processes).

Talks raftnode's line protocol (tests/integration/raftnode.c) to nodes
started with --id auto (ids are 16 hex digits). Standard library only.
NODES is a list NAME:PORT,NAME:PORT,... of client ports on 127.0.0.1; the
leader is found from STATUS and from ERR NOTLEADER hints. Subcommands:

  call PORT LINE [--timeout S]       send one line, print the answer
  wait-leader --nodes N [--timeout S]
                                     wait for a ready leader with the FSM
                                     bootstrapped; print "NAME PORT ID"
  admin --nodes N --timeout S LINE   send LINE to the ready leader (BUSY and
                                     not-ready are retried until the
                                     timeout); print the final answer
  claim --nodes N --acked F --prefix P --n K
                                     claim K unique keys (one at a time,
                                     via the leader); append acked keys to F
  load --nodes N --acked F --stop F2 --prefix P [--conns C]
                                     claim unique keys until F2 exists
  caught-up --nodes N --acked F [--timeout S]
                                     wait until every acked key is FOUND
                                     (LOCAL) on every node of N
  converge --nodes N [--timeout S]   equal applied (= last) index on all,
                                     a leader; then digests must be equal
  check --nodes N --acked F          every acked key FOUND on every node
  replay --nodes N --acked F         claim acked keys with fresh request
                                     ids: each must be REPLAYED
  zombie PORT --acked F [--seconds S]
                                     claim acked keys on a removed node with
                                     fresh request ids: "OK ACCEPTED" fails
  status --nodes N                   print each node's STATUS line
"""

import argparse
import os
import random
import socket
import sys
import threading
import time

RECV_TIMEOUT = 5.0


def parse_nodes(spec):
    nodes = {}
    for item in spec.split(","):
        name, port = item.split(":")
        nodes[name] = int(port)
    return nodes


class Conn:
    def __init__(self, port, timeout=RECV_TIMEOUT):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def readline(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by peer")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("ascii", "replace")

    def call(self, line):
        self.sock.sendall(line.encode() + b"\n")
        return self.readline()


def call(port, line, timeout=RECV_TIMEOUT):
    c = Conn(port, timeout)
    try:
        return c.call(line)
    finally:
        c.close()


def status_of(port):
    line = call(port, "STATUS", 2.0)
    parts = line.split()
    if not parts or parts[0] != "STATUS":
        raise ValueError("bad status: " + line)
    return dict(p.split("=", 1) for p in parts[1:] if "=" in p)


def all_status(nodes):
    st = {}
    for name, port in nodes.items():
        try:
            st[name] = status_of(port)
        except (OSError, ValueError, ConnectionError):
            st[name] = None
    return st


def find_leader(nodes):
    """(name, port, id) of a ready leader with the fsm bootstrapped."""
    for name, s in all_status(nodes).items():
        if s and s["state"] == "leader" and s["ready"] == "1" and \
                s["fsm_boot"] == "1":
            return name, nodes[name], s["id"]
    return None


def wait_leader(nodes, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        ld = find_leader(nodes)
        if ld:
            return ld
        time.sleep(0.1)
    return None


def rid(rnd):
    return "%032x" % rnd.getrandbits(128)


class Claimer:
    """Claims through the leader, following hints; one key at a time."""

    def __init__(self, nodes, seed):
        self.nodes = nodes
        self.rnd = random.Random(seed)
        self.ids = {}  # hex id -> name
        self.target = None
        self.conn = None

    def learn_ids(self):
        for name, port in self.nodes.items():
            if name in self.ids.values():
                continue
            try:
                r = call(port, "ID", 1.0).split()
                if len(r) == 2:
                    self.ids[r[1]] = name
            except (OSError, ConnectionError):
                pass

    def drop(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def claim(self, key, deadline, stopped=lambda: False):
        """'ACCEPTED' (with retry flag), another outcome, or None (gave up)."""
        r_id = rid(self.rnd)
        while time.time() < deadline and not stopped():
            if self.target is None:
                self.target = self.rnd.choice(sorted(self.nodes))
            try:
                if self.conn is None:
                    self.conn = Conn(self.nodes[self.target])
                reply = self.conn.call("CLAIM %s %s" % (key, r_id))
            except (OSError, ConnectionError):
                self.drop()
                self.target = None
                time.sleep(0.05)
                continue
            p = reply.split()
            if len(p) == 3 and p[0] == "OK":
                if p[1] == "FAILED_PRECONDITION":
                    time.sleep(0.05)  # fsm not bootstrapped yet
                    continue
                return p[1], p[2] == "1"
            if len(p) >= 2 and p[:2] == ["ERR", "NOTLEADER"]:
                lid = p[2] if len(p) > 2 else ""
                if lid not in self.ids:
                    self.learn_ids()
                new = self.ids.get(lid)
                self.drop()
                if new is None or new == self.target:
                    time.sleep(0.05)
                    new = self.rnd.choice(sorted(self.nodes))
                self.target = new
                continue
            # ERR UNKNOWN: retry with the same request id; ERR BUSY etc.
            time.sleep(0.02)
        return None, False


def read_keys(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="ascii") as f:
        return [k.strip() for k in f if k.strip()]


def missing_on(port, keys):
    c = Conn(port, timeout=10.0)
    missing = []
    try:
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            c.sock.sendall("".join("LOCAL %s\n" % k for k in chunk).encode())
            for k in chunk:
                if c.readline() != "OK FOUND":
                    missing.append(k)
    finally:
        c.close()
    return missing


# --- subcommands ------------------------------------------------------------


def cmd_call(a):
    try:
        print(call(a.port, " ".join(a.line), a.timeout))
        return 0
    except (OSError, ConnectionError) as e:
        print("NOANSWER %s" % e)
        return 1


def cmd_wait_leader(a):
    ld = wait_leader(parse_nodes(a.nodes), a.timeout)
    if not ld:
        print("no ready leader")
        return 1
    print("%s %d %s" % ld)
    return 0


def cmd_admin(a):
    nodes = parse_nodes(a.nodes)
    line = " ".join(a.line)
    deadline = time.time() + a.timeout
    last = "no ready leader"
    while time.time() < deadline:
        ld = find_leader(nodes)
        if not ld:
            time.sleep(0.1)
            continue
        try:
            reply = call(ld[1], line, max(1.0, deadline - time.time()))
        except (OSError, ConnectionError) as e:
            last = "NOANSWER %s" % e
            time.sleep(0.1)
            continue
        last = reply
        p = reply.split()
        # Not started (or the internal upkeep runs): try again.
        if p[:2] == ["ERR", "BUSY"] or (p[:2] == ["ERR", "NOTLEADER"] and
                                         "not the leader" in reply):
            time.sleep(0.1)
            continue
        break
    print(last)
    return 0 if last.startswith("OK") else 1


def cmd_claim(a):
    cl = Claimer(parse_nodes(a.nodes), os.getpid())
    deadline = time.time() + a.timeout
    acked = 0
    with open(a.acked, "a", encoding="ascii") as f:
        for i in range(a.n):
            key = "%s-%d" % (a.prefix, i)
            out, _ = cl.claim(key, deadline)
            if out == "ACCEPTED":
                f.write(key + "\n")
                f.flush()
                acked += 1
            elif out is None:
                print("claim: gave up at %s (acked %d)" % (key, acked))
                return 1
            else:
                print("claim: unexpected %s -> %s" % (key, out))
                return 1
    cl.drop()
    print("claimed %d keys (prefix %s)" % (acked, a.prefix))
    return 0


def cmd_load(a):
    nodes = parse_nodes(a.nodes)
    lock = threading.Lock()
    stats = {"acked": 0, "unexpected": 0, "abandoned": 0}
    f = open(a.acked, "a", encoding="ascii")

    def stopped():
        return os.path.exists(a.stop)

    def worker(w):
        cl = Claimer(nodes, os.getpid() * 100 + w)
        seq = 0
        while not stopped():
            seq += 1
            key = "%s-%d-%d" % (a.prefix, w, seq)
            out, _ = cl.claim(key, time.time() + 3600, stopped)
            with lock:
                if out == "ACCEPTED":
                    f.write(key + "\n")
                    f.flush()
                    stats["acked"] += 1
                elif out is None:
                    stats["abandoned"] += 1
                else:
                    stats["unexpected"] += 1
                    sys.stderr.write("unexpected: %s -> %s\n" % (key, out))
        cl.drop()

    ts = [threading.Thread(target=worker, args=(w,), daemon=True)
          for w in range(a.conns)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    f.close()
    print(" ".join("%s=%d" % kv for kv in sorted(stats.items())))
    return 1 if stats["unexpected"] else 0


def cmd_caught_up(a):
    nodes = parse_nodes(a.nodes)
    keys = read_keys(a.acked)
    deadline = time.time() + a.timeout
    left = {}
    while time.time() < deadline:
        left = {}
        for name, port in nodes.items():
            try:
                m = missing_on(port, keys)
            except (OSError, ConnectionError):
                m = keys
            if m:
                left[name] = len(m)
        if not left:
            print("caught up: %d acked keys FOUND on %s" %
                  (len(keys), ",".join(sorted(nodes))))
            return 0
        time.sleep(0.2)
    print("not caught up: missing %s of %d" % (left, len(keys)))
    return 1


def cmd_converge(a):
    nodes = parse_nodes(a.nodes)
    deadline = time.time() + a.timeout
    last, stable = None, 0
    while time.time() < deadline:
        st = all_status(nodes)
        if None not in st.values():
            applied = {s["applied"] for s in st.values()}
            lasts = {s["last"] for s in st.values()}
            leaders = [s for s in st.values() if s["state"] == "leader"]
            if len(applied) == 1 and lasts == applied and leaders:
                k = next(iter(applied))
                stable = stable + 1 if k == last else 1
                last = k
                if stable >= 3:
                    dig = {n: s["digest"] for n, s in st.items()}
                    print("applied=%s digests=%s voters=%s" % (
                        k, ",".join("%s:%s" % kv for kv in sorted(dig.items())),
                        ",".join("%s:%s" % (n, s["voters"])
                                 for n, s in sorted(st.items()))))
                    if len(set(dig.values())) != 1:
                        print("DIGEST MISMATCH at equal applied index")
                        return 1
                    return 0
            else:
                stable = 0
        time.sleep(0.2)
    print("no convergence within %ss" % a.timeout)
    cmd_status(a)
    return 1


def cmd_check(a):
    nodes = parse_nodes(a.nodes)
    keys = read_keys(a.acked)
    if len(set(keys)) != len(keys):
        print("a key was acked twice")
        return 1
    bad = 0
    for name, port in sorted(nodes.items()):
        m = missing_on(port, keys)
        print("node %s: %d/%d acked keys FOUND" % (name, len(keys) - len(m),
                                                  len(keys)))
        for k in m[:10]:
            print("  missing %s" % k)
        bad += len(m)
    return 1 if bad else 0


def cmd_replay(a):
    keys = read_keys(a.acked)
    rnd = random.Random(os.getpid())
    sample = rnd.sample(keys, min(a.n, len(keys)))
    cl = Claimer(parse_nodes(a.nodes), os.getpid() + 7)
    deadline = time.time() + a.timeout
    for k in sample:
        out, _ = cl.claim(k, deadline)
        if out != "REPLAYED":
            print("replay of acked %s with a fresh request id -> %s" % (k, out))
            return 1
    cl.drop()
    print("replay: %d acked keys REPLAYED with fresh request ids" % len(sample))
    return 0


def cmd_zombie(a):
    keys = read_keys(a.acked)
    rnd = random.Random(os.getpid() + 11)
    deadline = time.time() + a.seconds
    answers = {}
    n = 0
    while time.time() < deadline:
        k = rnd.choice(keys)
        try:
            reply = call(a.port, "CLAIM %s %s" % (k, rid(rnd)), 1.0)
        except socket.timeout:
            reply = "TIMEOUT"
        except (OSError, ConnectionError):
            reply = "NOCONN"
            time.sleep(0.1)
        p = reply.split()
        kind = " ".join(p[:2])
        answers[kind] = answers.get(kind, 0) + 1
        n += 1
        if p[:2] == ["OK", "ACCEPTED"]:
            print("ZOMBIE accepted an already-claimed key %s: %s" % (k, reply))
            return 1
        time.sleep(0.05)
    print("zombie: %d claims of acked keys, answers %s" % (
        n, ",".join("%s=%d" % kv for kv in sorted(answers.items()))))
    return 0


def cmd_status(a):
    for name, port in sorted(parse_nodes(a.nodes).items()):
        try:
            print("%s: %s" % (name, call(port, "STATUS", 2.0)))
        except (OSError, ConnectionError) as e:
            print("%s: %s" % (name, e))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("call")
    p.add_argument("port", type=int)
    p.add_argument("line", nargs="+")
    p.add_argument("--timeout", type=float, default=RECV_TIMEOUT)
    p = sub.add_parser("zombie")
    p.add_argument("port", type=int)
    p.add_argument("--acked", required=True)
    p.add_argument("--seconds", type=float, default=3.0)
    for name in ("wait-leader", "admin", "claim", "load", "caught-up",
                 "converge", "check", "replay", "status"):
        p = sub.add_parser(name)
        p.add_argument("--nodes", required=True)
        p.add_argument("--timeout", type=float, default=20.0)
        if name in ("claim", "load", "caught-up", "check", "replay"):
            p.add_argument("--acked", required=True)
        if name in ("claim", "load"):
            p.add_argument("--prefix", required=True)
        if name == "claim":
            p.add_argument("--n", type=int, required=True)
        if name == "replay":
            p.add_argument("--n", type=int, default=5)
        if name == "load":
            p.add_argument("--stop", required=True)
            p.add_argument("--conns", type=int, default=4)
        if name == "admin":
            p.add_argument("line", nargs="+")
    a = ap.parse_args()
    return {"call": cmd_call, "wait-leader": cmd_wait_leader,
            "admin": cmd_admin, "claim": cmd_claim, "load": cmd_load,
            "caught-up": cmd_caught_up, "converge": cmd_converge,
            "check": cmd_check, "replay": cmd_replay, "zombie": cmd_zombie,
            "status": cmd_status}[a.cmd.replace("_", "-")](a)


if __name__ == "__main__":
    sys.exit(main())
