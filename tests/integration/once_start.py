#!/usr/bin/env python3
"""once_start.py: onced refuses to start, cleanly, on a bad data directory
or a taken address.

Each case starts onced once and expects it to exit by itself within 20 s
with the given exit code and log line, and with no sanitizer report (ASan
and LeakSanitizer are on in make check): node.c's start steps release what
they had set up (raft closed through the loop, or the store alone, uvio,
the fsm, the uv loop) on every failure. A handle left on the loop would
also show as a "uv_loop_close" warning, which no case may print.

  storage-uv-log    DIR holds a raft_uv log, --storage pwrite: exit 1
  storage-both      DIR holds both formats: exit 1
  storage-our-log   DIR holds DIR/log, --storage uv: exit 1
  store-not-dir     DIR/log is a regular file, --storage pwrite: exit 1
                    (the store itself fails to open, after uvio)
  tombstone         DIR/tombstone: exit 3
  bad-node-id       DIR/node-id is not an id: exit 1
  raft-addr-taken   the Raft port is listened on: exit 1 (raft started
                    and closed again)
  client-addr-taken the client port is listened on: exit 1 (raft running;
                    the stop goes through node_stop and the loop)
  raft-listen-taken --raft-listen names a port that is listened on (the
                    --raft-addr port is free): exit 1, raft listened there
  listen-same       --client-listen equal to the Raft listen address:
                    exit 2 (a bad flag)
  http-on-listen    --http-addr equal to --raft-listen (the advertised
                    addresses differ): exit 2 (a bad flag)
"""

import os
import socket
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

WAIT_S = 20
EXIT_TOMBSTONE = 3  # onced: the data directory belongs to a removed node


def touch(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run_case(t, name, base, want_rc, want_line, prepare, flags=(),
             hold=None):
    d = os.path.join(t.work, name)
    os.makedirs(d)
    prepare(d)
    if callable(flags):
        flags = flags(base)
    raft, client = "127.0.0.1:%d" % base, "127.0.0.1:%d" % (base + 1)
    held = None
    if hold is not None:
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", base + hold))
        held.listen(1)
    log = os.path.join(t.work, name + ".log")
    with open(log, "w") as errf:
        proc = subprocess.Popen(
            [t.onced, "--data-dir", d, "--raft-addr", raft, "--client-addr",
             client] + list(flags),
            stdout=subprocess.DEVNULL, stderr=errf, env=t.child_env)
        try:
            rc = proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # this case's own process, by its pid
            proc.wait()
            rc = None
    if held is not None:
        held.close()
    with open(log) as f:
        text = f.read()
    bad = [ln for ln in text.splitlines()
           if any(m in ln for m in oc.SANITIZER_MARKS)]
    t.check(rc == want_rc, "%s: onced exits %s by itself (want %s)"
            % (name, rc, want_rc), text[-2000:])
    t.check(want_line in text, "%s: logs %r" % (name, want_line),
            text[-2000:])
    t.check(not bad, "%s: no sanitizer report" % name, "\n".join(bad[:5]))
    t.check("uv_loop_close" not in text,
            "%s: nothing left on the uv loop" % name, text[-2000:])


def scenario(t):
    base = oc.pick_base(8900)  # 16 ports; the other scenarios use 81xx..88xx
    cases = [
        ("storage-uv-log", 1, "refusing to start: storage",
         lambda d: touch(os.path.join(d, "metadata1")),
         ["--storage", "pwrite"], None),
        ("storage-both", 1, "refusing to start: storage",
         lambda d: (touch(os.path.join(d, "metadata1")),
                    touch(os.path.join(d, "log", "meta-a"))), [], None),
        ("storage-our-log", 1, "refusing to start: storage",
         lambda d: touch(os.path.join(d, "log", "meta-a")),
         ["--storage", "uv"], None),
        ("store-not-dir", 1, "refusing to start: storage",
         lambda d: touch(os.path.join(d, "log")),
         ["--storage", "pwrite"], None),
        ("tombstone", EXIT_TOMBSTONE,
         "refusing to start: this data directory belongs to a node",
         lambda d: touch(os.path.join(d, "tombstone"), "removed\n"), [],
         None),
        ("bad-node-id", 1, "refusing to start: node identity",
         lambda d: touch(os.path.join(d, "node-id"), "not an id\n"), [],
         None),
        ("raft-addr-taken", 1, "cannot start raft",
         lambda d: None, ["--bootstrap"], 0),
        ("client-addr-taken", 1, "cannot serve the client address",
         lambda d: None, ["--bootstrap"], 1),
        ("raft-listen-taken", 1, "listen on 127.0.0.1:",
         lambda d: None, lambda b: [
             "--bootstrap", "--raft-listen", "127.0.0.1:%d" % (b + 1),
             "--client-listen", "127.0.0.2:%d" % (b + 1)], 1),
        ("listen-same", 2, "--client-listen",
         lambda d: None, lambda b: ["--client-listen", "127.0.0.1:%d" % b],
         None),
        ("http-on-listen", 2, "--http-addr",
         lambda d: None, lambda b: [
             "--raft-listen", "127.0.0.2:%d" % b,
             "--http-addr", "127.0.0.2:%d" % b], None),
    ]
    for i, (name, rc, line, prep, flags, hold) in enumerate(cases):
        run_case(t, name, base + 2 * i, rc, line, prep, flags, hold)


if __name__ == "__main__":
    oc.main("once-start", scenario)
