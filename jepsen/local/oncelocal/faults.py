"""Proof that a fault took effect (jepsen/README.md "Every fault verified").

A nemesis step that does not do what it says would let a broken system pass,
so every fault and every heal is checked from inside the namespace before
it counts:

  partition  a probe TCP connect from the cut node's address to the other
             side's Raft port times out (the SYN is dropped); after the heal
             the same probe connects or is refused (packets flow again)
  loss       the statistic DROP rules' kernel counters show dropped packets
  kill       the PID is gone and the exit status is SIGKILL's
  pause      /proc/PID/stat shows state T; after SIGCONT it does not
  clock      the node's own log timestamps (ts=, CLOCK_REALTIME) are off by
             the offset; after the reset they are true again
  disk       a write to the filled file system failed with ENOSPC; after the
             free, space is available again
  corrupt    the file's SHA-256 changed
  membership the step's result is True (a failed step is no fault failure:
             steps may fail under partitions; it just does not count)

The Tally counts, per kind, the faults that took effect and those that did
not; faults.edn in the run's directory holds it, and jepsen/local/ci fails a
run that asked for a kind with no effective fault of it (missing()).

ONCE_JEPSEN_NOOP_FAULT=KIND[,KIND] (test-only, hidden from --help) makes
those kinds do nothing while still being recorded as applied: the run must
then fail with fault-not-effective. KIND "heal" skips the iptables flush of
a heal (heal-not-effective). It proves the verification can fail.

Everything here except probe(), proc_state() and file_sha256() is pure.
"""

import calendar
import errno
import hashlib
import os
import re
import socket
import threading

NOOP_ENV = "ONCE_JEPSEN_NOOP_FAULT"
CUT_PROBE_S = 0.5       # a dropped SYN is retransmitted after 1 s: no answer
OPEN_PROBE_S = 3.0      # a healed link answers at once, even under load
CLOCK_TOLERANCE_S = 60  # the skew's own error (start-up time, load)
TRUE_CLOCK_S = 30       # a node on the true clock is within this of ours


class FaultError(Exception):
    """A fault or heal did not take effect (already recorded as an
    assertion by the cluster); the nemesis step stops."""


def noop(kind):
    """True when the test-only switch makes @kind a no-op."""
    v = os.environ.get(NOOP_ENV, "")
    return kind in [x.strip() for x in v.split(",") if x.strip()]


# -- the network ----------------------------------------------------------------

def probe(src_ip, dst_ip, port, timeout):
    """One TCP connect from @src_ip to @dst_ip:@port. "open" (connected),
    "refused" (an RST came back), "timeout" (no answer: dropped) or
    "error: ..." (anything else, e.g. the bind failed)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.bind((src_ip, 0))
        s.connect((dst_ip, port))
        return "open"
    except socket.timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"
    except OSError as e:
        return "error: %s" % e
    finally:
        s.close()


def probe_all(pairs, port, timeout):
    """probe() of every (src_ip, dst_ip) in @pairs at once; {pair: result}."""
    out = {}

    def one(p):
        out[p] = probe(p[0], p[1], port, timeout)
    ts = [threading.Thread(target=one, args=(p,)) for p in pairs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def cut_failures(results):
    """The probes of links that must be cut but were not: [(pair, result)]."""
    return sorted((p, r) for p, r in results.items() if r != "timeout")


def open_failures(results):
    """The probes of links that must carry traffic again but do not."""
    return sorted((p, r) for p, r in results.items()
                  if r not in ("open", "refused"))


def parse_counters(text):
    """`iptables -L INPUT -v -x -n` output -> [(packets, source, dest,
    statistic?)] of its DROP rules."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 9 or not f[0].isdigit() or f[2] != "DROP":
            continue
        out.append((int(f[0]), f[7], f[8], "statistic" in line))
    return out


# -- processes ----------------------------------------------------------------

def stat_state(text):
    """The state field of a /proc/PID/stat line (the comm may hold spaces
    and parentheses: the state follows the last ')')."""
    i = text.rfind(")")
    if i < 0:
        return None
    rest = text[i + 1:].split()
    return rest[0] if rest else None


def proc_state(pid):
    """The state letter of process @pid, or None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return stat_state(f.read())
    except OSError:
        return None


def stopped(state):
    return state in ("T", "t")


# -- clocks -------------------------------------------------------------------

TS_RE = re.compile(r"\bts=(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?Z")


def parse_ts(line):
    """The epoch seconds of a log line's ts=...Z field, or None."""
    m = TS_RE.search(line)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) for x in m.groups()[:6])
    frac = m.group(7) or "0"
    return calendar.timegm((y, mo, d, h, mi, s)) + int(frac) / 10.0 ** len(frac)


def offset_seconds(off):
    """A FAKETIME relative offset ("+5m", "-301s", "+1h", "+2d") in seconds."""
    m = re.fullmatch(r"([+-])(\d+(?:\.\d+)?)([smhdy]?)", off)
    if not m:
        raise ValueError("not a relative FAKETIME offset: %r" % off)
    mult = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31536000}
    v = float(m.group(2)) * mult[m.group(3)]
    return v if m.group(1) == "+" else -v


def skew_of(lines, now):
    """(first ts of @lines) - @now, or None when no line has a ts."""
    for line in lines:
        t = parse_ts(line)
        if t is not None:
            return t - now
    return None


def skew_ok(skew, want):
    """Whether a measured @skew (s) is that of the offset @want (s): within
    CLOCK_TOLERANCE_S of it, and with true time (want 0) within
    TRUE_CLOCK_S."""
    if skew is None:
        return False
    if want == 0:
        return abs(skew) <= TRUE_CLOCK_S
    return abs(skew - want) <= CLOCK_TOLERANCE_S and abs(skew) > abs(want) / 2


# -- disk and files -------------------------------------------------------------

def at_enospc(fd):
    """Whether one more byte written to @fd fails with ENOSPC."""
    try:
        os.write(fd, b"\0")
    except OSError as e:
        return e.errno == errno.ENOSPC
    return False


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


ENOSPC_RE = re.compile(r"ENOSPC|No space left|no space|disk full", re.I)


def logged_enospc(lines):
    return sum(1 for line in lines if ENOSPC_RE.search(line))


# -- the tally ------------------------------------------------------------------

KINDS = ("partition", "loss", "kill", "pause", "membership", "clock", "disk",
         "corrupt")


class Tally:
    """Per kind: faults that took effect, faults that did not, heals that
    did not; nemesis errors. Thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.effective = {}
        self.ineffective = {}
        self.heal_failed = {}
        self.errors = 0

    def _add(self, d, kind):
        with self.lock:
            d[kind] = d.get(kind, 0) + 1

    def took_effect(self, kind):
        self._add(self.effective, kind)

    def did_not(self, kind):
        self._add(self.ineffective, kind)

    def heal_did_not(self, kind):
        self._add(self.heal_failed, kind)

    def error(self):
        with self.lock:
            self.errors += 1

    def summary(self):
        with self.lock:
            return {"effective": dict(self.effective),
                    "not-effective": dict(self.ineffective),
                    "heal-failed": dict(self.heal_failed),
                    "nemesis-errors": self.errors}


def summary_line(summary, asked):
    """One line for the log: effective faults by kind, and what failed."""
    eff = summary.get("effective", {})
    parts = ["%s=%d" % (k, eff.get(k, 0)) for k in asked]
    parts += ["%s=%d" % (k, v) for k, v in sorted(eff.items()) if k not in asked]
    line = "faults effective: " + (" ".join(parts) or "none")
    bad = []
    for what in ("not-effective", "heal-failed"):
        for k, v in sorted(summary.get(what, {}).items()):
            bad.append("%s %s=%d" % (what, k, v))
    if summary.get("nemesis-errors"):
        bad.append("nemesis-errors=%d" % summary["nemesis-errors"])
    return line + ("; " + ", ".join(bad) if bad else "")


def missing(asked, summary):
    """The kinds in @asked with no effective fault in @summary."""
    eff = summary.get("effective", {})
    return [k for k in asked if eff.get(k, 0) <= 0]


def problems(asked, summary):
    """Why a run's faults make it fail (jepsen/local/ci): a kind asked for
    and never effective, a fault or heal that did not take effect, a
    nemesis error. [] when none."""
    out = ["no effective %s fault" % k for k in missing(asked, summary)]
    for k, v in sorted(summary.get("not-effective", {}).items()):
        out.append("%d %s fault(s) did not take effect" % (v, k))
    for k, v in sorted(summary.get("heal-failed", {}).items()):
        out.append("%d %s heal(s) did not take effect" % (v, k))
    if summary.get("nemesis-errors"):
        out.append("%d nemesis error(s)" % summary["nemesis-errors"])
    return out


def to_edn(summary, asked):
    """faults.edn's map (keyword keys)."""
    from .common import K

    def kw(d):
        return {K(k): v for k, v in sorted(d.items())}
    return {K("asked"): [K(k) for k in asked],
            K("effective"): kw(summary["effective"]),
            K("not-effective"): kw(summary["not-effective"]),
            K("heal-failed"): kw(summary["heal-failed"]),
            K("nemesis-errors"): summary["nemesis-errors"]}


def from_edn(text):
    """(asked, summary) from faults.edn's text; ValueError if it is not one."""
    from oncecheck.edn import loads_all, EDNError
    try:
        forms = loads_all(text)
    except EDNError as e:
        raise ValueError("faults.edn: %s" % e)
    if len(forms) != 1 or not isinstance(forms[0][0], dict):
        raise ValueError("faults.edn: not one map")
    m = {k.name if hasattr(k, "name") else k: v for k, v in forms[0][0].items()}

    def names(d):
        if not isinstance(d, dict):
            raise ValueError("faults.edn: not a map of counts: %r" % (d,))
        return {(k.name if hasattr(k, "name") else str(k)): int(v)
                for k, v in d.items()}
    asked = [k.name if hasattr(k, "name") else str(k) for k in m.get("asked", [])]
    summary = {"effective": names(m.get("effective", {})),
               "not-effective": names(m.get("not-effective", {})),
               "heal-failed": names(m.get("heal-failed", {})),
               "nemesis-errors": int(m.get("nemesis-errors", 0))}
    return asked, summary


# -- schedules ------------------------------------------------------------------

def rounds(rng, kinds, done=None):
    """Endless kinds in seeded rounds: each round is a permutation of
    @kinds, so a run with time for len(kinds) steps has every kind at least
    once (a uniform pick leaves a kind out of a short run too often). With
    @done (a callable: the kinds that took effect so far), each round
    starts with the kinds that have not, in their seeded order: a
    membership step that failed under a partition is tried again first."""
    while True:
        r = list(kinds)
        rng.shuffle(r)
        if done is not None:
            have = done()
            r.sort(key=lambda k: k in have)
        for k in r:
            yield k


def ring_drops(n):
    """majorities-ring on @n nodes (by ring position): each node hears
    itself and its (n//2)//2 neighbours each side, a majority; the links it
    does not hear, [(src, dst)] to drop. Symmetric; the nemesis uses it with
    5 nodes (each hears 3: every node has a majority, no two the same)."""
    side = (n // 2) // 2
    out = []
    for i in range(n):
        near = {(i + d) % n for d in range(-side, side + 1)}
        for j in range(n):
            if j not in near:
                out.append((j, i))
    return out
