"""Helpers for the checker tests: build histories from call specs."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LOCAL = os.path.dirname(HERE)
if LOCAL not in sys.path:
    sys.path.insert(0, LOCAL)

from oncecheck.edn import Keyword as K, dumps  # noqa: E402
from oncecheck.history import read_ops, pair  # noqa: E402
from oncecheck import claims  # noqa: E402

INF = float("inf")


def edn_value(d):
    return {K(k): v for k, v in d.items() if v is not None}


def history_text(specs):
    """specs: dicts with p, f, inv, ret (time; INF for an :info without a
    completion line), type, args (invocation fields), res (completion fields).
    Returns EDN text, one op per line, in time order. A completion carries
    res only, as the runner writes it (oncectl's answer): an answer does not
    echo what was sent (a NOT_OWNER that showed the complete's token would
    break the contract: a denied caller never sees the owner token)."""
    evs = []
    for s in specs:
        args = dict(s.get("args", {}))
        evs.append((s["inv"], 0, {K("type"): K("invoke"), K("process"): s["p"],
                                  K("f"): K(s["f"]), K("value"): edn_value(args)}))
        if s["ret"] != INF or s["type"] != "info":
            res = dict(s.get("res", {}))
            evs.append((s["ret"], 1, {K("type"): K(s["type"]), K("process"): s["p"],
                                      K("f"): K(s["f"]), K("value"): edn_value(res)}))
    evs.sort(key=lambda e: (e[0], e[1]))
    lines = []
    for i, (t, _, m) in enumerate(evs):
        m2 = {K("index"): i, K("time"): int(t * 1000) if t != INF else 10**9}
        m2.update(m)
        lines.append(dumps(m2))
    return "\n".join(lines) + "\n"


def calls_of(text):
    calls, events = pair(read_ops(text))
    return calls, events


def by_key(calls):
    out = {}
    for c in calls:
        out.setdefault(c.kkey, []).append(c)
    return out


def rules_valid(cs):
    wl = claims.workload(cs)
    found = claims.check_nonce(cs[0].kkey, cs) if wl == "nonce" else \
        claims.check_idempotent(cs[0].kkey, cs)
    return not any(a.fatal for a in found), found
