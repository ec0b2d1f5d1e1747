#!/usr/bin/env python3
"""once_backup.py: backup, verify and restore with the replay fence
(docs/state-machine.md, "Restored clusters"; docs/operations.md, "Backup and restore").

  1. Cluster 1 (3 nodes, max_skew 2s): nonces (TTL-only and signed), an
     IDEMPOTENT key completed with a result, one left PENDING, and 20000
     more nonces (a backup of several 1 MiB chunks).
  2. `oncectl snapshot backup FILE` while a thread keeps claiming: OK, the
     claims go on, FILE holds at least the claims made before it, no
     temporary file is left beside it, none on the leader.
  3. Claims made AFTER the backup on cluster 1: a TTL-only nonce, a signed
     nonce, an IDEMPOTENT key: all ACCEPTED (so replayable after a restore).
  4. `snapshot verify FILE`: OK with records, index, the cluster id; a copy
     with a flipped byte and a truncated copy are CORRUPT with the offset
     (in the flipped byte's chunk; the truncated length), exit 1. Backups
     opened by hand and never read: two at once, the third refused, both
     removed by the leader after --backup-idle-timeout (2s).
  5. Cluster 1 stopped and wiped; cluster 2 restored on the same addresses
     (`--bootstrap --restore FILE`, two nodes joining): a new cluster id,
     status names the old one. Every claim of the backup keeps its answer
     (REPLAYED, DUPLICATE with the stored result, IN_PROGRESS) through each
     node; the TTL-only nonce and IDEMPOTENT key accepted after the backup
     are FAILED_PRECONDITION ("replay window open until"), the signed
     nonce STALE; a fresh signed nonce is ACCEPTED. The three nodes hold one
     state digest, and after a leadership transfer the new leader fences
     alike. A client pinned to
     cluster 1's id refuses cluster 2 (exit 3); pinned to the new id it is
     served. A restart with the same flags ignores --restore (and removes
     a backup file a crash left in its data directory).
  6. Cluster 3 restored with --accept-replay-window: the TTL-only nonce of
     step 3 is ACCEPTED again (the replay the operator accepted), the signed
     one still STALE, the backup's claims still answered.
"""

import base64
import os
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import once_hostile as raw  # noqa: E402  (hand-encoded frames)

SCOPE = "bk"
CHUNK = 1 << 20  # fsm/backup_file.h BACKUP_CHUNK
N_BEFORE = 40
N_FILL = 20000  # enough for a backup of several chunks


class Load(threading.Thread):
    """Claims of fresh keys through every node until stopped."""

    def __init__(self, c, nodes):
        super().__init__(daemon=True)
        self.c, self.nodes = c, nodes
        self.stop_ev = threading.Event()
        self.ok = self.bad = 0

    def run(self):
        i = 0
        while not self.stop_ev.is_set():
            r = self.c.claim(SCOPE, "load-%d-%s" % (i, oc.rand_hex(3)),
                             self.nodes, timeout="3s")
            if r.accepted:
                self.ok += 1
            else:
                self.bad += 1
            i += 1


def before_backup(t, c, nodes):
    """The claims the backup must keep: their keys and answers."""
    ts = oc.now_ms()
    keys = ["n-%d" % i for i in range(N_BEFORE)]
    for k in keys:
        t.require(c.claim(SCOPE, k, nodes).is_outcome("ACCEPTED"),
                  "cluster 1: claim %s ACCEPTED" % k)
    r = c.claim(SCOPE, "signed-1", nodes, "--ts", ts, "--window", "5m")
    t.require(r.is_outcome("ACCEPTED"), "signed nonce ACCEPTED", r.describe())
    r = c.claim(SCOPE, "idem-done", nodes, "--idempotent", "--payload-hash",
                "ab12")
    t.require(r.is_outcome("ACCEPTED"), "idempotent claim ACCEPTED")
    r2 = c.ctl(["complete", SCOPE, "idem-done", "--owner-token",
                r.get("owner_token"), "--result", '{"id":7}'], via=nodes)
    t.require(r2.is_outcome("COMPLETED"), "completed with a result",
              r2.describe())
    r = c.claim(SCOPE, "idem-pending", nodes, "--idempotent", "--lease",
                "1h")
    t.require(r.is_outcome("ACCEPTED"), "a PENDING idempotent claim")
    return keys, ts


def fill(t, c, nodes):
    s = c.session(nodes, timeout="20s")
    res = s.pipeline([{"cmd": "claim", "scope": "fill", "key": "f%d" % i}
                      for i in range(N_FILL)], timeout=600)
    s.close()
    bad = [r for r in res if not r.accepted]
    t.require(not bad, "cluster 1: %d fill claims ACCEPTED" % N_FILL,
              bad[0].describe() if bad else "")


def take_backup(t, c, nodes, path):
    load = Load(c, nodes)
    load.start()
    for _ in range(100):  # the backup starts under load
        if load.ok >= 3:
            break
        time.sleep(0.05)
    r = c.ctl(["snapshot", "backup", path], via=nodes, timeout="10s",
              wall=300)
    load.stop_ev.set()
    load.join(60)
    t.require(r.is_outcome("OK", oc.RC_OK), "snapshot backup OK",
              r.describe())
    t.check(load.ok > 0 and load.bad == 0,
            "claims went on during the backup (%d ACCEPTED, %d not)"
            % (load.ok, load.bad))
    t.check(r.get("records", 0) >= N_FILL + N_BEFORE + 3,
            "the backup holds the claims before it (%s records)"
            % r.get("records"))
    t.check(os.path.getsize(path) == r.get("bytes"),
            "FILE is whole: %d bytes" % os.path.getsize(path))
    left = [f for f in os.listdir(os.path.dirname(path)) if ".tmp-" in f]
    t.check(not left, "no temporary file left beside FILE", "%s" % left)
    for n in nodes:
        stale = [f for f in os.listdir(n.dir) if f.startswith("backup-")]
        t.check(not stale, "%s: the leader's copy was removed" % n.name,
                "%s" % stale)
    return r


def after_backup(t, c, nodes, ts):
    """Claims accepted after the backup: the replay window."""
    for args, what in ((["claim", SCOPE, "after-ttl"], "TTL-only nonce"),
                       (["claim", SCOPE, "after-signed", "--ts", ts,
                         "--window", "5m"], "signed nonce"),
                       (["claim", SCOPE, "after-idem", "--idempotent"],
                        "idempotent key")):
        r = c.ctl(args, via=nodes)
        t.require(r.is_outcome("ACCEPTED"),
                  "cluster 1 after the backup: %s ACCEPTED" % what,
                  r.describe())


def verify_copies(t, c, path, b):
    r = c.ctl(["snapshot", "verify", path], via=c.running())
    t.check(r.is_outcome("OK", oc.RC_OK) and
            r.get("records") == b.get("records") and
            r.get("index") == b.get("index") and
            r.get("backup_cluster_id") == b.get("backup_cluster_id"),
            "verify: OK, the backup's records, index and cluster id",
            r.describe())
    with open(path, "rb") as f:
        data = bytearray(f.read())
    # In the second chunk when there is one: the offset must be its start.
    flip = 148 + CHUNK + 4321 if len(data) > 148 + CHUNK + 8192 else \
        len(data) // 2
    chunk_at = 148 + (flip - 148) // CHUNK * CHUNK
    bad = path + ".flipped"
    data2 = bytearray(data)
    data2[flip] ^= 0x40
    with open(bad, "wb") as f:
        f.write(data2)
    r = c.ctl(["snapshot", "verify", bad], via=c.running())
    off = r.get("offset", -1)
    t.check(r.is_outcome("CORRUPT", oc.RC_NO) and off == chunk_at,
            "a flipped byte at %d: CORRUPT at offset %s (its chunk)"
            % (flip, off), r.describe())
    cut = path + ".truncated"
    with open(cut, "wb") as f:
        f.write(data[:len(data) - 1000])
    r = c.ctl(["snapshot", "verify", cut], via=c.running())
    t.check(r.is_outcome("CORRUPT", oc.RC_NO) and
            r.get("offset") == len(data) - 1000,
            "a truncated copy: CORRUPT at offset %d" % (len(data) - 1000),
            r.describe())
    r = c.ctl(["snapshot", "verify", path + ".absent"], via=c.running())
    t.check(r.rc == oc.RC_NOT_APPLIED and r.error == "FAILED_PRECONDITION",
            "verify of a missing file: exit 3", r.describe())


def restore(t, c, nodes, path, accept=False):
    for n in nodes:
        if n.alive():
            rc, killed = n.stop()
            t.check(rc == 0 and not killed, "%s stops (exit 0)" % n.name)
        n.wipe()
    # --bootstrap by hand: the settings flags the harness adds with it are
    # refused with --restore (the settings are the backup's).
    extra = ["--bootstrap", "--restore", path] + (
        ["--accept-replay-window"] if accept else [])
    first = nodes[0]
    first.start(extra=extra)
    c.wait_serving([first], 60)
    c.node_id(first)
    members = [first]
    for n in nodes[1:]:
        c.join(n, members, 60)
        members.append(n)
    return members, extra


def keeps_backup(t, c, nodes, keys, ts, label):
    for n in nodes:
        for k in (keys[0], keys[-1]):
            r = c.claim(SCOPE, k, [n])
            t.check(r.is_outcome("REPLAYED"),
                    "%s via %s: %s REPLAYED" % (label, n.name, k),
                    r.describe())
    bad = [k for k in keys if not c.claim(SCOPE, k, nodes)
           .is_outcome("REPLAYED")]
    t.check(not bad, "%s: every nonce of the backup REPLAYED" % label,
            "%s" % bad)
    r = c.claim(SCOPE, "signed-1", nodes, "--ts", ts, "--window", "5m")
    t.check(r.is_outcome("REPLAYED"), "%s: the signed nonce REPLAYED" % label,
            r.describe())
    r = c.claim(SCOPE, "idem-done", nodes, "--idempotent", "--payload-hash",
                "ab12")
    t.check(r.is_outcome("DUPLICATE") and
            r.get("result_b64") == base64.b64encode(b'{"id":7}').decode(),
            "%s: the completed key DUPLICATE with its result" % label,
            r.describe())
    r = c.claim(SCOPE, "idem-pending", nodes, "--idempotent")
    t.check(r.is_outcome("IN_PROGRESS"),
            "%s: the pending key IN_PROGRESS" % label, r.describe())
    r = c.ctl(["lookup", SCOPE, keys[1]], via=[nodes[-1]])
    t.check(r.is_outcome("FOUND"), "%s: lookup through a joined node FOUND"
            % label, r.describe())


def fenced(t, c, nodes, ts):
    for args, what in ((["claim", SCOPE, "after-ttl"], "TTL-only nonce"),
                       (["claim", SCOPE, "after-idem", "--idempotent"],
                        "idempotent key"),
                       (["claim", SCOPE, "new-ttl-" + oc.rand_hex(3)],
                        "a new TTL-only key")):
        r = c.ctl(args, via=nodes)
        t.check(r.is_outcome("FAILED_PRECONDITION", oc.RC_NO) and
                "replay window open until" in str(r.get("reason")),
                "restored: %s refused (replay window open)" % what,
                r.describe())
    r = c.claim(SCOPE, "after-signed", nodes, "--ts", ts, "--window", "5m")
    t.check(r.is_outcome("STALE"),
            "restored: the signed nonce accepted after the backup is STALE",
            r.describe())


def replicated(t, c, nodes):
    """The fence is replicated state: every node holds the same state, and
    a new leader fences alike."""
    for _ in range(50):
        sts = [c.ctl(["status", "--state-digest"], via=[n], timeout="5s")
               for n in nodes]
        idx = set(r.get("applied_index") for r in sts)
        dig = set(r.get("state_digest") for r in sts)
        if len(idx) == 1 and None not in dig:
            break
        time.sleep(0.2)
    t.check(len(idx) == 1 and len(dig) == 1 and None not in dig,
            "restored: the three nodes hold one state (digest %s at %s)"
            % (dig, idx), " ".join(r.describe() for r in sts))
    r = c.ctl(["transfer", nodes[1].id], via=nodes)
    t.check(r.rc == oc.RC_OK, "leadership moved to %s" % nodes[1].name,
            r.describe())
    c.wait_serving(nodes, 30)
    ld = c.wait_leader(nodes, 30)
    r = c.claim(SCOPE, "after-ttl", nodes)
    t.check(ld is nodes[1] and r.is_outcome("FAILED_PRECONDITION", oc.RC_NO),
            "restored: the new leader %s fences too" % ld.name, r.describe())


M_BACKUP_OPEN = 13


def abandoned(t, c, nodes):
    """BackupOpen by hand, never read: two at once at most, and both are
    removed by the leader after --backup-idle-timeout (2s here)."""
    ld = c.wait_leader(nodes)
    s = raw.connect(ld)
    ids, statuses = [], []
    for i in range(3):
        raw.send_all(s, raw.frame(raw.envelope(100 + i, M_BACKUP_OPEN)))
        e = raw.read_frame(s, 10)
        statuses.append(raw.one(e, raw.F_STATUS) if e else None)
        if e and raw.one(e, raw.F_STATUS) == raw.S_OK:
            ids.append(raw.one(raw.decode(raw.one(e, raw.F_BODY, b"")), 1))
    s.close()
    t.check(statuses == [raw.S_OK, raw.S_OK, raw.S_RESOURCE_EXHAUSTED] and
            len(ids) == 2 and all(ids),
            "BackupOpen: two at once, the third RESOURCE_EXHAUSTED",
            "statuses %s ids %s" % (statuses, ids))
    files = []
    for _ in range(50):
        files = [f for f in os.listdir(ld.dir) if f.startswith("backup-")]
        if len(files) == 2:
            break
        time.sleep(0.1)
    t.check(len(files) == 2, "the leader encodes both into its data "
            "directory", "%s" % files)
    for _ in range(100):
        files = [f for f in os.listdir(ld.dir) if f.startswith("backup-")]
        if not files:
            break
        time.sleep(0.1)
    t.check(not files and "backup abandoned: removed" in ld.log_text(),
            "unread backups are removed after the idle timeout", "%s" % files)


def scenario(t):
    c = oc.Cluster(t, "backup", 9000, settings={"max-skew": "2s"},
                   extra_flags=["--backup-idle-timeout", "2s"])
    if "uv" in c.node_flags:  # ONCE_TEST_STORAGE=uv: --restore refuses it
        i = c.node_flags.index("uv")
        del c.node_flags[i - 1:i + 1]
        t.info("--restore needs the log store: this scenario runs on the "
               "default store, not uv")
    nodes = c.start_cluster(["A", "B", "C"])
    c1 = c.status(nodes[0]).get("cluster_id")
    keys, ts = before_backup(t, c, nodes)
    fill(t, c, nodes)
    path = os.path.join(c.work, "once.backup")
    b = take_backup(t, c, nodes, path)
    t.check(b.get("backup_cluster_id") == c1,
            "the backup names cluster 1 (%s)" % c1, b.describe())
    after_backup(t, c, nodes, oc.now_ms())
    verify_copies(t, c, path, b)
    abandoned(t, c, nodes)

    nodes, extra = restore(t, c, nodes, path)
    st = c.status(nodes[0])
    c2 = st.get("cluster_id")
    t.check(c2 and c2 != c1 and st.get("restored_from") == c1 and
            st.get("replay_window_until_ms", 0) > oc.now_ms(),
            "restored: new cluster id %s, restored_from %s, a replay window"
            % (c2, c1), "%s" % st)
    keeps_backup(t, c, nodes, keys, ts, "restored")
    fenced(t, c, nodes, ts)
    replicated(t, c, nodes)
    r = c.claim(SCOPE, "fresh-" + oc.rand_hex(3), nodes, "--ts",
                oc.now_ms() + 1000, "--window", "5m")
    t.check(r.is_outcome("ACCEPTED"),
            "restored: a fresh signed nonce (ts after the restore) ACCEPTED",
            r.describe())
    r = c.claim(SCOPE, keys[0], nodes, pin=c1)
    text = (str(r.get("error")) + str(r.get("message"))).lower()
    t.check(r.rc == oc.RC_NOT_APPLIED and "mismatch" in text,
            "a client pinned to cluster 1 refuses the restored cluster",
            r.describe())
    r = c.claim(SCOPE, keys[0], nodes, pin=c2)
    t.check(r.is_outcome("REPLAYED"), "re-pinned to %s: served" % c2,
            r.describe())
    rc, _ = nodes[0].stop()
    stale = os.path.join(nodes[0].dir, "backup-00000000000000ff.tmp")
    open(stale, "wb").close()
    nodes[0].start(extra=extra)
    c.wait_serving(nodes, 60)
    t.check(c.status(nodes[0]).get("cluster_id") == c2 and
            "--restore ignored" in nodes[0].log_text(),
            "a restart with the same flags ignores --restore")
    t.check(not os.path.exists(stale),
            "a backup file left by a crash is removed at start")

    nodes, _ = restore(t, c, nodes, path, accept=True)
    st = c.status(nodes[0])
    t.check(st.get("restored_from") == c1 and
            not st.get("replay_window_until_ms"),
            "--accept-replay-window: no replay window in status", "%s" % st)
    r = c.claim(SCOPE, "after-ttl", nodes)
    t.check(r.is_outcome("ACCEPTED"),
            "--accept-replay-window: the TTL-only nonce accepted after the "
            "backup is ACCEPTED again (the accepted replay)", r.describe())
    r = c.claim(SCOPE, "after-signed", nodes, "--ts", ts, "--window", "5m")
    t.check(r.is_outcome("STALE"),
            "--accept-replay-window: the signed nonce still STALE",
            r.describe())
    keeps_backup(t, c, nodes, keys, ts, "accepted window")


if __name__ == "__main__":
    oc.main("backup", scenario)
