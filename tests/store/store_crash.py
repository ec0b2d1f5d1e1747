#!/usr/bin/env python3
"""Crash test of the log store (tests/store/crash_child.c).

Each iteration starts the child on the same directory (uring with
O_DIRECT, pwrite, uring buffered in turn: one format), reads what it reports durable,
kills it with SIGKILL at a random moment, then runs the child's verify mode
and compares: every acknowledged entry that no later truncation or
snapshot removed must be there with its term; the term and the snapshot
must not go back. What was loaded is required from then on.

usage: store_crash.py CHILD ITERATIONS [SEED]
Standard library only. Exit 0 pass, 1 fail.
"""

import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
import shutil


def run_iteration(child, work, engine, seed, seg, model, rng):
    proc = subprocess.Popen(
        [child, "run", work, engine, str(seed), str(seg)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + rng.uniform(0.02, 0.4)
    buf = b""
    acks = 0
    fd = proc.stdout.fileno()
    lines = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\n")
        lines.extend(done)
    proc.send_signal(signal.SIGKILL)
    # Whatever the child wrote before it died is durable too.
    rest = proc.stdout.read()
    err = proc.stderr.read().decode(errors="replace")
    proc.wait()
    buf += rest
    lines.extend(buf.split(b"\n")[:-1])  # a last partial line is not a fact
    if proc.returncode not in (-signal.SIGKILL,):
        print("child ended by itself (%s): %s" % (proc.returncode, err))
        return None
    for raw in lines:
        f = raw.decode().split()
        if not f:
            continue
        if f[0] == "T":
            model["term"] = int(f[1])
        elif f[0] == "a":
            model["req"][int(f[1])] = int(f[2])
            acks += 1
        elif f[0] == "t":
            i = int(f[1])
            for k in [k for k in model["req"] if k >= i]:
                del model["req"][k]
        elif f[0] == "S":
            i = int(f[1])
            model["snap"] = i
            for k in [k for k in model["req"] if k <= i]:
                del model["req"][k]
    return acks


def verify(child, work, engine, seg, model):
    out = subprocess.run([child, "verify", work, engine, str(seg)],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return "verify failed: " + out.stderr.strip()
    lines = out.stdout.splitlines()
    v = lines[0].split()
    term, snap, start, n = int(v[1]), int(v[2]), int(v[3]), int(v[4])
    loaded = {}
    for line in lines[1:]:
        _, i, t = line.split()
        loaded[int(i)] = int(t)
    if term < model["term"]:
        return "term went back: %d < %d" % (term, model["term"])
    if snap < model["snap"]:
        return "snapshot went back: %d < %d" % (snap, model["snap"])
    for i, t in sorted(model["req"].items()):
        if i <= snap:
            continue  # in the snapshot (its put may have completed unseen)
        if loaded.get(i) != t:
            return "acknowledged entry %d (term %d) lost: loaded %s" % (
                i, t, loaded.get(i))
    if n and (min(loaded) != start or max(loaded) != start + n - 1):
        return "loaded indexes not contiguous"
    model["req"] = dict(loaded)
    model["term"] = term
    model["snap"] = snap
    return None


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    child, iterations = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int(time.time())
    rng = random.Random(seed)
    uring = subprocess.run([child, "verify", "/nonexistent/x", "uring", "0"],
                           capture_output=True, text=True)
    has_uring = "io_uring unavailable" not in uring.stderr
    work = tempfile.mkdtemp(prefix="store-crash-",
                            dir=os.environ.get("TMPDIR", "/tmp"))
    # STORE_CRASH_ENGINES (comma separated) narrows the rotation, e.g. to
    # "uring" to hunt a failure of one engine.
    engines = os.environ.get("STORE_CRASH_ENGINES",
                             "uring,pwrite,uring-buffered").split(",")
    model = {"req": {}, "term": 0, "snap": 0}
    seg = 64 << 10
    total = 0
    print("seed %d, %d iterations, dir %s, uring %s" %
          (seed, iterations, work, "yes" if has_uring else "no (pwrite only)"))
    try:
        for it in range(iterations):
            engine = engines[it % len(engines)] if has_uring else "pwrite"
            acks = run_iteration(child, work, engine, rng.randrange(1 << 30),
                                 seg, model, rng)
            if acks is None:
                return 1
            total += acks
            why = verify(child, work, "pwrite", seg, model)
            if why is not None:
                print("FAIL at iteration %d (%s): %s" % (it, engine, why))
                print("kept %s" % work)
                work = None
                return 1
        print("figures: iterations=%d acked_appends=%d entries_now=%d "
              "snapshot=%d term=%d" % (iterations, total, len(model["req"]),
                                       model["snap"], model["term"]))
        return 0
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
