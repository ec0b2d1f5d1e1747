"""The long profile: randomized runs until >= 500 membership changes and
>= 1,000 partition/kill events have been survived, resumable in parts.

Each part is one jepsen/local/run (default 300 s) with the next schedule of
a fixed rotation (membership + network + process faults, alternating the
nonce and idempotent workloads; once one target is met, only the parts
that feed the other: next_part) and a seed derived from the soak's. After
each part the counts of its history are added to the state file; a part
that fails stops the soak (its store directory is kept and named), and so
does one whose faults.edn shows a kind it asked for that never took effect
(the rule jepsen/local/ci applies). Running
the command again resumes where the state file left off, with the part
that failed (a failed part's counts are kept in its record, "failures",
not in the totals); --reset starts over. Ends with exit 0 when the targets are met, 1 on a failed part, 3 when
the --parts budget ran out first (resume later).
"""

import argparse
import json
import os
import subprocess
import sys
import time

from . import faults
from .common import HERE, REPO

# (nemeses, workload, records claimed before the workload). The last part
# runs its membership changes over a table of 2 M records: replacing a
# member then means an InstallSnapshot of ~160 MB and a restore at size.
PREFILL = 2000000
ROTATION = (
    ("membership", "nonce", 0),
    ("partition,kill", "idempotent", 0),
    ("membership", "idempotent", 0),
    ("kill,partition,loss,disk", "nonce", 0),
    ("membership,pause,kill", "nonce", 0),
    ("membership,clock,partition,corrupt", "idempotent", 0),
    ("membership,kill", "nonce", PREFILL),
)
TEMPO = "0.4"
MEMBERSHIP_TARGET, FAULT_TARGET = 500, 1000
# Once one target is met the rest of the soak runs only the parts that
# feed the other: a rotation makes about as many membership changes as
# faults, so the fault target alone would otherwise take two more full
# rotations (about 80 min) of parts whose membership changes no longer
# count. By then every part of ROTATION has run at least twice.
FAULT_ROTATION = (
    ("partition,kill", "idempotent", 0),
    ("kill,partition,loss,disk", "nonce", 0),
)
MEMBERSHIP_ROTATION = (
    ("membership", "nonce", 0),
    ("membership", "idempotent", 0),
)


def next_part(st):
    """(nemeses, workload, prefill) of the soak's next part."""
    if st["membership"] >= MEMBERSHIP_TARGET:
        rot = FAULT_ROTATION
    elif st["faults"] >= FAULT_TARGET:
        rot = MEMBERSHIP_ROTATION
    else:
        return ROTATION[st["parts"] % len(ROTATION)]
    return rot[st["parts"] % len(rot)]


def count_history(path):
    """(membership changes, partition/kill events) in one history: the
    membership steps that succeeded (a change of the voter set or of a
    role), and the partition and loss steps verified to have taken effect
    plus the kill steps (every kill in a step is verified; one that fails
    fails the part)."""
    mem = n = 0
    with open(path) as f:
        for line in f:
            if ":process :nemesis" not in line:
                continue
            if (":f :membership-done" in line and ':result "True"' in line and
                    ':op "transfer"' not in line and ':op "readd-retired"' not in line):
                mem += 1
            elif ":f :fault-effective" in line and any(
                    x in line for x in (':kind "partition"', ':kind "loss"')):
                n += 1
            elif ":f :kill" in line:
                n += 1
    return mem, n


def part_problems(rdir, asked):
    """Why a part's faults fail it (faults.problems of its faults.edn)."""
    try:
        with open(os.path.join(rdir or "", "faults.edn")) as f:
            _, summary = faults.from_edn(f.read())
    except (OSError, ValueError, TypeError) as e:
        return ["no readable faults.edn in %s (%s)" % (rdir, e)]
    return faults.problems(asked, summary)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="jepsen/local/soak",
        description="The long chaos profile (>= %d membership changes, >= %d "
        "partition/kill events), resumable in parts." % (MEMBERSHIP_TARGET,
                                                          FAULT_TARGET))
    p.add_argument("--part-seconds", type=int, default=300,
                   help="workload time of each part (default 300)")
    p.add_argument("--parts", type=int, default=1000,
                   help="at most this many parts in this invocation")
    p.add_argument("--nodes", type=int, default=5, choices=(3, 5))
    p.add_argument("--seed", type=int, default=None,
                   help="the soak's seed (kept in the state file)")
    p.add_argument("--state", default=os.path.join(REPO, "jepsen", "store",
                                                   "soak-state.json"))
    p.add_argument("--reset", action="store_true", help="start over")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build", "debug"))
    p.add_argument("--store", default=os.path.join(REPO, "jepsen", "store"))
    a = p.parse_args(argv)
    st = None
    if os.path.exists(a.state) and not a.reset:
        with open(a.state) as f:
            st = json.load(f)
    if st is None:
        seed = a.seed if a.seed is not None else \
            int.from_bytes(os.urandom(4), "big") % 1000000
        st = {"seed": seed, "parts": 0, "membership": 0, "faults": 0,
              "seconds": 0, "runs": []}
    print("soak: seed %d, %d parts done: %d membership changes, %d partition/"
          "kill events, %.0f s so far" % (st["seed"], st["parts"], st["membership"],
                                          st["faults"], st["seconds"]), flush=True)
    for _ in range(a.parts):
        if st["membership"] >= MEMBERSHIP_TARGET and st["faults"] >= FAULT_TARGET:
            break
        nem, wl, prefill = next_part(st)
        seed = st["seed"] * 1000 + st["parts"]
        t0 = time.monotonic()
        cmd = [sys.executable, os.path.join(HERE, "run"), "--nodes", str(a.nodes),
               "--time-limit", str(a.part_seconds), "--nemesis", nem,
               "--workload", wl, "--seed", str(seed), "--tempo", TEMPO,
               "--build-dir", a.build_dir,
               "--store", a.store, "--prefill", str(prefill)]
        print("soak: part %d: %s" % (st["parts"] + 1, " ".join(cmd[2:])), flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        sys.stdout.write(out.stdout[-3000:])
        dt = time.monotonic() - t0
        rdir = None
        for line in out.stdout.splitlines():
            if line.startswith("run: seed "):
                rdir = line.split("store ", 1)[1].strip()
        mem = nf = 0
        if rdir and os.path.exists(os.path.join(rdir, "history.edn")):
            mem, nf = count_history(os.path.join(rdir, "history.edn"))
        why = part_problems(rdir, nem.split(","))
        rc = out.returncode if out.returncode != 0 or not why else 1
        for w in why:
            print("soak: part %d: faults: %s" % (st["parts"] + 1, w), flush=True)
        rec = {"part": st["parts"] + 1, "dir": rdir, "rc": rc, "membership": mem,
               "faults": nf, "seconds": round(dt, 1), "nemesis": nem,
               "workload": wl, "seed": seed, "prefill": prefill}
        st["seconds"] += dt
        if rc == 0:
            st["parts"] += 1
            st["membership"] += mem
            st["faults"] += nf
            st["runs"].append(rec)
        else:
            st.setdefault("failures", []).append(rec)
        os.makedirs(os.path.dirname(os.path.abspath(a.state)), exist_ok=True)
        with open(a.state + ".tmp", "w") as f:
            json.dump(st, f, indent=1)
        os.replace(a.state + ".tmp", a.state)
        print("soak: part %d: rc %d, +%d membership, +%d faults in %.0f s; total "
              "%d / %d membership, %d / %d faults, %.0f s" % (
                  rec["part"], rc, mem, nf, dt, st["membership"],
                  MEMBERSHIP_TARGET, st["faults"], FAULT_TARGET, st["seconds"]),
              flush=True)
        if rc != 0:
            print("soak: FAIL: part %d (seed %d): %s (the next invocation runs "
                  "it again)" % (rec["part"], seed, rdir))
            sys.exit(1)
    if st["membership"] >= MEMBERSHIP_TARGET and st["faults"] >= FAULT_TARGET:
        print("soak: PASS: %d parts, %d membership changes, %d partition/kill "
              "events in %.0f s" % (st["parts"], st["membership"], st["faults"],
                                    st["seconds"]))
        sys.exit(0)
    print("soak: parts budget used; resume with the same command")
    sys.exit(3)
