"""Fixed one-way delays between addresses of the private namespace.

The region drill (regions.py) needs 20-40 ms between "regions" and a few ms
inside one. `tc qdisc ... netem` would be the usual tool, but the kernels
we run on are built without sch_netem (and without prio, fq, etf: only
htb, tbf and pfifo), while the netfilter queue is built in. So the delay
is made in user space with NFQUEUE:

  iptables -A OUTPUT -s SRC -d DST -j NFQUEUE --queue-num Q --queue-bypass

sends every packet from SRC to DST to queue Q; a Delayer thread holds the
packets of its queue and accepts them DELAY seconds after they arrived. All
packets of a queue have the same delay, and the kernel numbers a queue's
packets in order, so the due packets are always a prefix: one batch verdict
(NFQNL_MSG_VERDICT_BATCH, "accept every id <= N") releases them, and also
any packet whose netlink message was lost to a full socket buffer (none
is ever stuck). Order within a queue is kept, so TCP sees no reordering.

--queue-bypass lets packets through undelayed when no Delayer listens (it
stopped or died): the drill measures the round-trip times it really got
(measure_rtt()) at the start and the end and fails if they are short.

Only the Python standard library is used: the netlink messages are packed
by hand (linux/netfilter/nfnetlink_queue.h).
"""

import collections
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQA_CFG_MASK, NFQA_CFG_FLAGS = 4, 5
NFQA_CFG_F_FAIL_OPEN = 1
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
# Packets a queue may hold: at 40 ms and a few thousand packets/s between
# two regions, a few hundred are in flight; beyond this the kernel lets
# packets through undelayed (fail-open) instead of dropping them.
QUEUE_MAXLEN = 20000
RCVBUF = 8 << 20
NICE = -10                # the delayer process's priority: it is the network


def _attr(typ, payload):
    """One netlink attribute, padded to 4 bytes."""
    n = 4 + len(payload)
    return struct.pack("=HH", n, typ) + payload + b"\0" * ((4 - n % 4) % 4)


def _msg(msg_type, queue, attrs, flags=NLM_F_REQUEST, seq=0):
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    typ = (NFNL_SUBSYS_QUEUE << 8) | msg_type
    return struct.pack("=IHHII", 16 + len(body), typ, flags, seq, 0) + body


def packet_ids(data):
    """The packet ids of the NFQNL_MSG_PACKET messages in one recv()."""
    ids, off = [], 0
    while off + 16 <= len(data):
        ln, typ = struct.unpack_from("=IH", data, off)
        if ln < 16 or off + ln > len(data):
            break
        if typ == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = off + 20                     # after nlmsghdr + nfgenmsg
            while a + 4 <= off + ln:
                alen, atyp = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if atyp & 0x7fff == NFQA_PACKET_HDR and alen >= 8:
                    ids.append(struct.unpack_from("!I", data, a + 4)[0])
                a += (alen + 3) & ~3
        off += (ln + 3) & ~3
    return ids


class Delayer:
    """Holds the packets of one NFQUEUE queue for @delay seconds."""

    def __init__(self, queue, delay):
        self.queue = queue
        self.delay = delay
        self.packets = 0          # packets released
        self.late_max = 0.0       # the most a release came after its due time
        self.late_sum = 0.0
        self.error = None
        self.stop_ev = threading.Event()
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                                  NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE
        self.sock.bind((0, 0))
        self._config(_attr(NFQA_CFG_CMD, struct.pack("!BBH", NFQNL_CFG_CMD_BIND,
                                                     0, 0)))
        self._config(_attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)) +
                     _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)) +
                     _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)) +
                     _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_FAIL_OPEN)))
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="delay-q%d" % queue)
        self.thread.start()

    def _config(self, attrs):
        """One config message, acknowledged; OSError if the kernel refused."""
        self.sock.send(_msg(NFQNL_MSG_CONFIG, self.queue, attrs,
                            NLM_F_REQUEST | NLM_F_ACK, seq=1))
        self.sock.settimeout(2)
        data = self.sock.recv(65536)
        self.sock.settimeout(None)
        ln, typ = struct.unpack_from("=IH", data, 0)
        if typ == NLMSG_ERROR:
            err = struct.unpack_from("=i", data, 16)[0]
            if err != 0:
                raise OSError(-err, "nfqueue %d config refused" % self.queue)

    def _loop(self):
        held = collections.deque()       # (due, packet id), in id order
        try:
            while not self.stop_ev.is_set():
                wait = held[0][0] - time.monotonic() if held else 0.2
                r, _, _ = select.select([self.sock], [], [], max(0.0, wait))
                if r:
                    try:
                        data = self.sock.recv(1 << 20)
                    except OSError:
                        data = b""        # ENOBUFS: the batch verdict covers them
                    now = time.monotonic()
                    for pid in packet_ids(data):
                        held.append((now + self.delay, pid))
                now = time.monotonic()
                last = None
                while held and held[0][0] <= now:
                    due, last = held.popleft()
                    self.late_max = max(self.late_max, now - due)
                    self.late_sum += now - due
                    self.packets += 1
                if last is not None:
                    self.sock.send(_msg(NFQNL_MSG_VERDICT_BATCH, self.queue,
                                        _attr(NFQA_VERDICT_HDR,
                                              struct.pack("!II", NF_ACCEPT, last))))
        except Exception as e:   # noqa: BLE001 -- reported by the drill
            self.error = repr(e)
        finally:
            if held:
                try:
                    self.sock.send(_msg(NFQNL_MSG_VERDICT_BATCH, self.queue,
                                        _attr(NFQA_VERDICT_HDR,
                                              struct.pack("!II", NF_ACCEPT, held[-1][1]))))
                except OSError:
                    pass

    def stop(self):
        self.stop_ev.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Delays:
    """The delay of every ordered (src, dst) address pair: one queue per
    distinct one-way delay, one OUTPUT rule per pair. The Delayers run in
    a child process of their own (serve()) at a higher priority: in the
    drill's process they would wait for the GIL behind a dozen client and
    sampler threads, and the network would be as slow as the harness."""

    def __init__(self, pairs):
        """@pairs: {(src_ip, dst_ip): one-way delay in seconds}."""
        self.pairs = dict(pairs)
        self.queues = {d: 100 + i for i, d in enumerate(sorted(set(self.pairs.values())))}
        self.rules = []
        self.proc = None
        self.final = None         # the child's last report, once stopped

    def install(self, serve=True):
        """Start the delayers (they bind their queues, then say "ready"),
        then send each pair's packets to its queue. @serve=False (the
        test-only no-op switch) starts none: --queue-bypass then lets every
        packet through at once, and the round-trip check must see it."""
        if serve:
            args = [sys.executable, os.path.abspath(__file__), "--nice", str(NICE)]
            args += ["%d:%r" % (q, d) for d, q in sorted(self.queues.items())]
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
            line = self.proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError("netdelay did not start: %r (rc %s)"
                                   % (line, self.proc.poll()))
        for (src, dst), d in sorted(self.pairs.items()):
            rule = ["OUTPUT", "-s", src, "-d", dst, "-j", "NFQUEUE",
                    "--queue-num", str(self.queues[d]), "--queue-bypass"]
            subprocess.run(["iptables", "-w", "-A"] + rule, check=True,
                           capture_output=True)
            self.rules.append(rule)

    def problems(self):
        """Why the delays may not hold: [] while the delayers run."""
        if self.proc is None:
            return ["not started"]
        if self.proc.poll() is not None and self.final is None:
            return ["the delayer process exited (rc %s)" % self.proc.poll()]
        return [p for p in (self.final or {}).get("problems", [])]

    def stop(self):
        """Stop the delayers (the rules stay: with --queue-bypass they let
        packets through undelayed); their report: {"stats": {delay:
        [packets, mean late s, worst late s]}, "problems": [...]}."""
        if self.proc is None and self.final is None:
            self.final = {"stats": {}, "problems": ["no delayer was started"]}
        if self.proc is not None and self.final is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                out, _ = self.proc.communicate(timeout=10)
                self.final = json.loads(out.strip().splitlines()[-1])
            except (subprocess.TimeoutExpired, ValueError, IndexError):
                self.proc.kill()
                self.proc.wait()
                self.final = {"stats": {}, "problems": ["no report from the delayer"]}
        return self.final

    def remove(self):
        for rule in self.rules:
            subprocess.run(["iptables", "-w", "-D"] + rule, capture_output=True)
        self.rules = []
        self.stop()


def serve(argv):
    """The delayer process: `netdelay.py [--nice N] QUEUE:DELAY...`. Prints
    "ready" once every queue is bound; on SIGTERM prints its report (one
    JSON line) and exits."""
    if argv[:1] == ["--nice"]:
        try:
            os.nice(int(argv[1]))
        except OSError:
            pass                  # not root: the default priority
        argv = argv[2:]
    ds = [Delayer(int(q), float(d)) for q, d in (x.split(":") for x in argv)]
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: done.set())
    print("ready", flush=True)
    while not done.wait(0.5):
        pass
    for x in ds:
        x.stop()
    print(json.dumps({
        "stats": {"%g" % x.delay: [x.packets, x.late_sum / max(1, x.packets), x.late_max]
                  for x in ds},
        "problems": ["queue %d (%.0f ms): %s" % (x.queue, 1000 * x.delay, x.error)
                     for x in ds if x.error]}), flush=True)


def connect_rtt(src, dst, port, timeout=2.0):
    """Seconds one TCP connect from @src to @dst:@port takes (SYN out,
    SYN-ACK or RST back: one round trip), or None if it timed out or
    failed otherwise."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.bind((src, 0))
        t0 = time.monotonic()
        try:
            s.connect((dst, port))
        except ConnectionRefusedError:
            pass
        return time.monotonic() - t0
    except OSError:
        return None
    finally:
        s.close()


def measure_rtt(src, dst, port, tries=3):
    """The smallest of @tries connect round trips (load only adds)."""
    got = [r for r in (connect_rtt(src, dst, port) for _ in range(tries))
           if r is not None]
    return min(got) if got else None


if __name__ == "__main__":
    serve(sys.argv[1:])
