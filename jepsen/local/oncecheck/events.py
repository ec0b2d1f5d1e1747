"""R7-R10: the service-level checks over the history's events.

Events are ops whose :process is not an integer (jepsen/README.md):
  {:type :info :process :nemesis :f :final-phase :value {:members ["127.0.1.1:7101" ...]}}
  {:type :info :process :status :f :status :value {:node "127.0.1.1:7101" :node-id "..."
     :role "LEADER" :term 5 :commit-index 90 :applied-index 90 :config-index 12
     :members [{:id "..." :role "voter" :client-addr "127.0.1.1:7101"} ...]}}
  {:type :info :process :checker :f :dump :value {:node ... :applied-index 900 :digest "..."}}
  {:type :info :process :nemesis :f :log-scan :value {:node ... :file ... :matches ["..."]}}
  {:type :info :process :nemesis :f :core-dump :value {:node ... :file ...}}
"""

import re

from .claims import Anomaly, workload
from .history import norm_value, _s, _int
from .edn import dumps

CRASH_RE = re.compile(r"Assertion|AddressSanitizer|runtime error|raft_start\(\)|Segmentation")


def _v(e):
    return norm_value(e.value) or {}


def _time(e):
    return e.time if isinstance(e.time, (int, float)) and not isinstance(e.time, bool) else None


# What a definite final probe (a claim with a fresh request id) of a key that
# had an acknowledged ACCEPTED must answer: the record is there. IDEMPOTENT:
# still owned (IN_PROGRESS), completed (DUPLICATE), failed (FAILED), or taken
# over after a release or the lease's expiry (ACCEPTED with owner_attempt > 1);
# an owner_attempt 1 ACCEPTED is a fresh record. NONCE: REPLAYED (or STALE
# for a windowed claim, whose record may have been pruned).
IDEM_RECORD = ("IN_PROGRESS", "DUPLICATE", "FAILED")


def _keeps_record(p, idempotent, windowed):
    if idempotent:
        return p.outcome in IDEM_RECORD or (
            p.outcome == "ACCEPTED" and p.attempt is not None and p.attempt > 1)
    return p.outcome == "REPLAYED" or (windowed and p.outcome == "STALE")


def check_r7(calls, events, res):
    """R7: after the final phase, every key with an :ok or :info call got a
    definite (:ok) final probe (a claim with :final true) through every
    member listed, and every key with an acknowledged ACCEPTED claim is
    still there in every definite probe's answer (no lost acknowledgement)."""
    fin = [e for e in events if e.f == "final-phase"]
    if not fin:
        res.skip("R7", "no :final-phase event in the history")
        return []
    e = fin[-1]
    members = [_s(m) for m in (_v(e).get("members") or [])]
    keys, accepted, probes, bykey = {}, {}, {}, {}
    for c in calls:
        bykey.setdefault(c.kkey, []).append(c)
        if c.final:
            if c.f == "claim":
                probes.setdefault(c.kkey, {}).setdefault(c.node, []).append(c)
            continue
        if c.type in ("ok", "info"):
            keys.setdefault(c.kkey, c)
        if c.f == "claim" and c.type == "ok" and c.outcome == "ACCEPTED":
            accepted.setdefault(c.kkey, c)
    missing, vague, out = [], [], []
    for k in sorted(keys, key=str):
        got = probes.get(k, {})
        lack = [m for m in members if m not in got]
        if lack:
            missing.append((k, lack))
        unanswered = [m for m in members if m in got and
                      not any(p.type == "ok" for p in got[m])]
        if unanswered:
            vague.append((k, unanswered))
        if k not in accepted:
            continue
        idem = workload(bykey[k]) == "idempotent"
        windowed = any(c.windowed for c in bykey[k])
        bad = [p for ps in got.values() for p in ps
               if p.type == "ok" and not _keeps_record(p, idem, windowed)]
        if bad:
            out.append(Anomaly("R7", "lost-ack", k,
                               "an ACCEPTED claim was acknowledged, but %d definite final "
                               "probes answer %s (%s expected): the acknowledged record is "
                               "gone" % (len(bad), ", ".join(sorted({p.outcome or "?" for p in bad})),
                                         "IN_PROGRESS, DUPLICATE, FAILED or a takeover"
                                         if idem else "REPLAYED"),
                               [accepted[k]] + bad[:3]))
    if missing:
        k, lack = missing[0]
        out.append(Anomaly("R7", "missing-final-probe", None,
                           "%d keys lack a final probe through some member; first: %s "
                           "lacks %s" % (len(missing), dumps(list(k)), ", ".join(lack)),
                           [keys[k]], [e]))
    if vague:
        k, lack = vague[0]
        ps = [p for m in lack for p in probes[k][m]]
        out.append(Anomaly("R7", "final-probe-not-definite", None,
                           "%d keys have no definite (:ok) final probe through some member "
                           "(the probes' deadline passed); first: %s through %s" %
                           (len(vague), dumps(list(k)), ", ".join(lack)),
                           [keys[k]] + ps[:3], [e]))
    return out


def check_r8(calls, events, res, log_files=(), leader_within_s=30.0):
    out = []
    fin = [e for e in events if e.f == "final-phase"]
    status = [e for e in events if e.f == "status"]
    # crash scans
    for e in events:
        v = _v(e)
        if e.f == "log-scan" and v.get("matches"):
            out.append(Anomaly("R8", "crash-in-log", None,
                               "node %s log %s matches: %s" % (
                                   _s(v.get("node")), _s(v.get("file")),
                                   "; ".join(_s(m) for m in list(v["matches"])[:3])),
                               events=[e]))
        if e.f == "core-dump":
            out.append(Anomaly("R8", "core-dump", None, "core dump of node %s: %s" %
                               (_s(v.get("node")), _s(v.get("file"))), events=[e]))
    for path in log_files:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    if CRASH_RE.search(line):
                        out.append(Anomaly("R8", "crash-in-log", None,
                                           "%s:%d: %s" % (path, n, line.strip()[:200])))
                        break
        except OSError as err:
            out.append(Anomaly("R8", "crash-in-log", None,
                               "cannot read log %s: %s" % (path, err.strerror)))
    if not fin:
        res.skip("R8", "no :final-phase event: only the log scans were checked")
        return out
    e = fin[-1]
    t0 = _time(e)
    members = [_s(m) for m in (_v(e).get("members") or [])]
    def _after(s):
        if t0 is not None and _time(s) is not None:
            return _time(s) >= t0
        return s.pos > e.pos
    after = [s for s in status if _after(s)]
    if not status:
        res.skip("R8", "no status samples: leader and voter checks skipped")
    else:
        leaders = [s for s in after if (_s(_v(s).get("role")) or "").upper() == "LEADER"]
        first = leaders[0] if leaders else None
        if first is None or (t0 is not None and _time(first) is not None
                             and _time(first) - t0 > leader_within_s * 1e9):
            out.append(Anomaly("R8", "no-leader", None,
                               "no leader within %g s after the final phase began" %
                               leader_within_s, events=[e] + ([first] if first else [])))
        if leaders and members:
            last = leaders[-1]
            voters = set()
            for m in _v(last).get("members") or []:
                mv = norm_value(m) or {}
                if (_s(mv.get("role")) or "").lower() == "voter":
                    voters.add(_s(mv.get("client-addr")))
            lack = [m for m in members if m not in voters]
            if lack:
                out.append(Anomaly("R8", "member-not-voter", None,
                                   "intended members not voters in the last leader sample: "
                                   + ", ".join(lack), events=[e, last]))
    return out


def check_r9(events, res):
    dumps = [e for e in events if e.f == "dump"]
    if not dumps:
        res.skip("R9", "no :dump events")
        return []
    # :digest chains the applied entries (the same log); :state-digest,
    # when present, hashes the state machine itself (the same state: apply
    # was deterministic). Both must agree at one applied index.
    by_idx, by_state = {}, {}
    for e in dumps:
        v = _v(e)
        idx = _int(v.get("applied-index"))
        by_idx.setdefault(idx, {}).setdefault(_s(v.get("digest")), e)
        if v.get("state-digest") is not None:
            by_state.setdefault(idx, {}).setdefault(_s(v.get("state-digest")), e)
    out = []
    for idx, dg in sorted(by_idx.items(), key=lambda x: (x[0] is None, x[0])):
        if idx is not None and len(dg) > 1:
            out.append(Anomaly("R9", "replica-divergence", None,
                               "%d different digests at applied index %d" % (len(dg), idx),
                               events=list(dg.values())))
    for idx, dg in sorted(by_state.items(), key=lambda x: (x[0] is None, x[0])):
        if idx is not None and len(dg) > 1:
            out.append(Anomaly("R9", "state-divergence", None,
                               "%d different state-machine digests at applied index %d"
                               % (len(dg), idx), events=list(dg.values())))
    return out


def check_r10(events, res):
    st = [e for e in events if e.f == "status"]
    if not st:
        res.skip("R10", "no :status samples")
        return []
    out = []
    leaders = {}
    configs = {}
    for e in st:
        v = _v(e)
        node = _s(v.get("node-id")) or _s(v.get("node"))
        term = _int(v.get("term"))
        if (_s(v.get("role")) or "").upper() == "LEADER" and term is not None:
            leaders.setdefault(term, {}).setdefault(node, e)
        ci, cm = _int(v.get("config-index")), _int(v.get("commit-index"))
        # The Raft configuration's voters (:config-voters, once's status
        # since it has them) are what must agree at one configuration
        # index. Without them the directory (:members) stands in: it is the
        # state machine's copy, which the Clojure suite and older runs give.
        if ci is None or cm is None or ci > cm:
            continue
        if v.get("config-voters") is not None:
            voters = frozenset(_s(x) for x in v["config-voters"])
        elif v.get("members") is not None:
            voters = frozenset(_s((norm_value(m) or {}).get("id")) for m in v["members"]
                               if (_s((norm_value(m) or {}).get("role")) or "").lower() == "voter")
        else:
            continue
        configs.setdefault(ci, {}).setdefault(voters, e)
    for term, nodes in sorted(leaders.items()):
        if len(nodes) > 1:
            out.append(Anomaly("R10", "two-leaders", None,
                               "%d leaders in term %d: %s" % (len(nodes), term,
                                                              ", ".join(sorted(nodes))),
                               events=list(nodes.values())))
    for ci, vs in sorted(configs.items()):
        if len(vs) > 1:
            out.append(Anomaly("R10", "config-disagreement", None,
                               "%d voter sets for committed configuration index %d" %
                               (len(vs), ci), events=list(vs.values())))
    seq = [(ci, next(iter(vs))) for ci, vs in sorted(configs.items())]
    for (i1, a), (i2, b) in zip(seq, seq[1:]):
        if len(a ^ b) > 1:
            out.append(Anomaly("R10", "multi-voter-change", None,
                               "observed committed configurations %d -> %d differ by %d "
                               "voters (advisory: sampling may have missed one between)"
                               % (i1, i2, len(a ^ b)),
                               events=[configs[i1][a], configs[i2][b]], fatal=False))
    return out
