#!/usr/bin/env python3
"""Load client and checker for tests/integration/raft-crash.sh.

Talks raftnode's line protocol (tests/integration/raftnode.c). Standard
library only. Subcommands:

  ports N                      print N free TCP ports on 127.0.0.1 (a base
                               derived from the parent shell's pid)
  load --nodes 1:Q1,2:Q2,... --acked FILE --stop FILE [--conns C]
                               claim unique keys from C threads until FILE
                               (--stop) exists; every key answered
                               "OK ACCEPTED" is appended to --acked
  status --nodes ...           print each node's STATUS line
  converge --nodes ... [--timeout S]
                               wait until every node reports the same
                               applied and last index; compare digests
  check --nodes ... --acked FILE
                               every acked key must be FOUND (LOCAL) on
                               every node
  garbage --nodes ...          send malformed input; the node must answer
                               ERR INVALID and stay up
"""

import argparse
import os
import random
import socket
import sys
import threading
import time

RECV_TIMEOUT = 3.0


def parse_nodes(spec):
    nodes = {}
    for item in spec.split(","):
        nid, port = item.split(":")
        nodes[int(nid)] = int(port)
    return nodes


class Conn:
    """One line-protocol connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=RECV_TIMEOUT):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def readline(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by peer")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("ascii", "replace")

    def call(self, line):
        self.send(line.encode() + b"\n")
        return self.readline()


def status_of(port):
    c = Conn(port, timeout=2.0)
    try:
        line = c.call("STATUS")
    finally:
        c.close()
    parts = line.split()
    if not parts or parts[0] != "STATUS":
        raise ValueError("bad status: " + line)
    return dict(p.split("=", 1) for p in parts[1:] if "=" in p), line


# --- load ------------------------------------------------------------------


class Load:
    def __init__(self, nodes, acked_path, stop_path, conns, prefix):
        self.nodes = nodes
        self.ids = sorted(nodes)
        self.stop_path = stop_path
        self.conns = conns
        self.prefix = prefix
        self.lock = threading.Lock()
        self.acked_file = open(acked_path, "a", encoding="ascii")
        self.stats = {
            "acked": 0,
            "acked_retry": 0,
            "notleader": 0,
            "unknown": 0,
            "conn_errors": 0,
            "other_err": 0,
            "unexpected": 0,
            "abandoned": 0,
        }
        self.stop = False

    def bump(self, k, n=1):
        with self.lock:
            self.stats[k] += n

    def ack(self, key, retry):
        with self.lock:
            self.acked_file.write(key + "\n")
            self.acked_file.flush()
            self.stats["acked"] += 1
            if retry:
                self.stats["acked_retry"] += 1

    def stopped(self):
        return self.stop or os.path.exists(self.stop_path)

    def worker(self, w):
        rnd = random.Random(os.getpid() * 1000 + w)
        target = self.ids[w % len(self.ids)]
        conn = None
        seq = 0
        while not self.stopped():
            seq += 1
            key = "%s-%d-%d" % (self.prefix, w, seq)
            rid = "%032x" % rnd.getrandbits(128)
            done = False
            while not done:
                if self.stopped():
                    self.bump("abandoned")
                    break
                try:
                    if conn is None:
                        conn = Conn(self.nodes[target])
                    reply = conn.call("CLAIM %s %s" % (key, rid))
                except (OSError, ConnectionError):
                    self.bump("conn_errors")
                    if conn is not None:
                        conn.close()
                        conn = None
                    target = rnd.choice([i for i in self.ids if i != target])
                    time.sleep(0.05)
                    continue
                p = reply.split()
                if len(p) == 3 and p[0] == "OK" and p[1] == "ACCEPTED":
                    self.ack(key, p[2] == "1")
                    done = True
                elif len(p) >= 2 and p[0] == "OK":
                    # A unique key claimed with one request id can only be
                    # ACCEPTED; FAILED_PRECONDITION before the fsm is
                    # bootstrapped is retried.
                    if p[1] != "FAILED_PRECONDITION":
                        self.bump("unexpected")
                        sys.stderr.write("unexpected: %s -> %s\n" % (key, reply))
                        done = True
                    else:
                        time.sleep(0.05)
                elif len(p) == 3 and p[0] == "ERR" and p[1] == "NOTLEADER":
                    self.bump("notleader")
                    lid = int(p[2]) if p[2].isdigit() else 0
                    if lid in self.nodes and lid != target:
                        new = lid
                    else:
                        # Unknown leader, or this node is a leader that is
                        # not ready yet: wait, then try another node.
                        time.sleep(0.05)
                        new = target if lid == target else rnd.choice(self.ids)
                    if new != target:
                        conn.close()
                        conn = None
                        target = new
                elif p[:2] == ["ERR", "UNKNOWN"]:
                    # Outcome unknown: retry with the same request id; the
                    # fsm answers ACCEPTED retry=1 if the first one applied.
                    self.bump("unknown")
                    time.sleep(0.02)
                else:
                    self.bump("other_err")
                    time.sleep(0.05)
        if conn is not None:
            conn.close()

    def run(self):
        threads = [
            threading.Thread(target=self.worker, args=(w,), daemon=True)
            for w in range(self.conns)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.acked_file.close()
        print(" ".join("%s=%d" % kv for kv in sorted(self.stats.items())))
        return 1 if self.stats["unexpected"] else 0


# --- subcommands ---------------------------------------------------------------


def ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def cmd_ports(args):
    # Stay out of the kernel's ephemeral range: an outgoing connection (the
    # nodes connect to each other all the time) may take any port in it
    # between our check and the node's bind.
    n = args.n
    lo, hi = ephemeral_range()
    # Above 20000: oncecluster.py reserves (flock) its clusters' ports
    # in [6000, 20000), and these tests run beside those.
    if lo - 20000 > 4 * n:
        first, span = 20000, lo - 20000 - n
    else:
        first, span = hi + 1, 65535 - hi - n
    base0 = (os.getppid() * 37) % span
    for attempt in range(200):
        base = first + (base0 + attempt * 97) % span
        socks = []
        ok = True
        try:
            for p in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        for s in socks:
            s.close()
        if ok:
            print(" ".join(str(p) for p in range(base, base + n)))
            return 0
    sys.stderr.write("no free port range\n")
    return 1


def cmd_status(args):
    for nid, port in sorted(parse_nodes(args.nodes).items()):
        try:
            print(status_of(port)[1])
        except (OSError, ValueError, ConnectionError) as e:
            print("node %d: %s" % (nid, e))
    return 0


def cmd_converge(args):
    nodes = parse_nodes(args.nodes)
    deadline = time.time() + args.timeout
    last = None
    stable = 0
    while time.time() < deadline:
        try:
            st = {nid: status_of(port)[0] for nid, port in sorted(nodes.items())}
        except (OSError, ValueError, ConnectionError):
            time.sleep(0.2)
            continue
        applied = {s["applied"] for s in st.values()}
        lasts = {s["last"] for s in st.values()}
        leaders = [s for s in st.values() if s["state"] == "leader"]
        if len(applied) == 1 and lasts == applied and leaders:
            key = next(iter(applied))
            stable = stable + 1 if key == last else 1
            last = key
            if stable >= 3:
                digests = {nid: s["digest"] for nid, s in st.items()}
                snap = max(int(s.get("snap", 0)) for s in st.values())
                print(
                    "applied=%s snapshot_index=%d digests=%s"
                    % (key, snap,
                       ",".join("%d:%s" % kv for kv in sorted(digests.items())))
                )
                if len(set(digests.values())) != 1:
                    print("DIGEST MISMATCH at equal applied index")
                    return 1
                return 0
        else:
            stable = 0
        time.sleep(0.2)
    print("no convergence within %ss:" % args.timeout)
    cmd_status(args)
    return 1


def cmd_check(args):
    nodes = parse_nodes(args.nodes)
    with open(args.acked, encoding="ascii") as f:
        keys = [k.strip() for k in f if k.strip()]
    if len(set(keys)) != len(keys):
        print("a key was acked twice")
        return 1
    bad = 0
    for nid, port in sorted(nodes.items()):
        c = Conn(port, timeout=10.0)
        missing = []
        try:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                c.send("".join("LOCAL %s\n" % k for k in chunk).encode())
                for k in chunk:
                    r = c.readline()
                    if r != "OK FOUND":
                        missing.append((k, r))
        finally:
            c.close()
        print("node %d: %d/%d acked keys FOUND" % (nid, len(keys) - len(missing), len(keys)))
        for k, r in missing[:10]:
            print("  missing %s: %s" % (k, r))
        bad += len(missing)
    return 1 if bad else 0


def cmd_garbage(args):
    nodes = parse_nodes(args.nodes)
    port = nodes[min(nodes)]
    c = Conn(port)
    try:
        tests = [
            b"\n",
            b"HELLO\n",
            b"CLAIM\n",
            b"CLAIM k\n",
            b"CLAIM k nothex\n",
            b"CLAIM k 0123456789abcdef0123456789abcdeZ\n",
            b"CLAIM k 00 11\n",
            b"LOCAL\n",
            b"LOCAL " + b"k" * 300 + b"\n",
            b"STATUS x\n",
            b"\x00\xff\x01binary\n",
            b"X" * 5000 + b"\n",
        ]
        for t in tests:
            c.send(t)
            r = c.readline()
            if r != "ERR INVALID":
                print("garbage %r -> %r" % (t[:40], r))
                return 1
        r = c.call("STATUS")
        if not r.startswith("STATUS "):
            print("node does not answer after garbage: %r" % r)
            return 1
    finally:
        c.close()
    print("garbage: %d malformed requests answered ERR INVALID" % len(tests))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ports")
    p.add_argument("n", type=int)
    for name in ("load", "status", "converge", "check", "garbage"):
        p = sub.add_parser(name)
        p.add_argument("--nodes", required=True)
        if name in ("load", "check"):
            p.add_argument("--acked", required=True)
        if name == "load":
            p.add_argument("--stop", required=True)
            p.add_argument("--conns", type=int, default=8)
            p.add_argument("--prefix", default="k%d" % os.getpid())
        if name == "converge":
            p.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()
    if args.cmd == "ports":
        return cmd_ports(args)
    if args.cmd == "load":
        return Load(parse_nodes(args.nodes), args.acked, args.stop, args.conns,
                    args.prefix).run()
    return {"status": cmd_status, "converge": cmd_converge, "check": cmd_check,
            "garbage": cmd_garbage}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
