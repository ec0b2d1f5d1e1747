"""The final probes (jepsen/README.md "Final phase, checks, output").

After the heal, one prober per member claims every key of the run through
that member with a fresh request id (:final true) until each key has a
definite (:ok) answer there, or the probes' deadline passes. The checker's
R7 then needs, for every key with an :ok or :info call, a definite probe
through every member, and for every key with an acknowledged ACCEPTED, a
definite answer that shows the record (REPLAYED; for IDEMPOTENT keys
IN_PROGRESS, DUPLICATE, FAILED or a takeover). A deadline reached therefore
fails the run (R7 final-probe-not-definite): an answer that never came is
not a pass.

A key keeps its probe's request id across attempts: an :info probe may have
been applied, and its retry must be the same logical call. A :fail probe
(applied "false") is retried the same way.

Threads: probe_all runs one thread per member; probe_member runs on one of
them with its own Client (one session), so nothing here is shared but the
history (which has its own lock).
"""

import threading
import time

from .common import K, log, rid

# The deadline of all final probes: a base for a cluster that needs a few
# elections after the heal, plus a share per key for the first round (a
# probe takes milliseconds on a healthy cluster; the ASan build and 5
# members on 2 cores are slower).
DEADLINE_BASE_S = 120.0
DEADLINE_PER_KEY_S = 0.05
# The pause between two rounds over the keys still without an answer.
RETRY_GAP_S = 0.5


def deadline_s(nkeys):
    """Seconds the final probes may take for @nkeys keys."""
    return DEADLINE_BASE_S + DEADLINE_PER_KEY_S * nkeys


def probe_member(client, scope, keys, idempotent, deadline,
                 clock=time.monotonic, sleep=time.sleep, probe=None):
    """Claim every key of @keys through @client (bound to one member) until
    each has an :ok answer or clock() reaches @deadline. Returns the keys
    still without a definite answer, in order (empty when all answered).
    @probe(client, key, request_id) -> (type, answer), when given, is the
    workload's own claim (the time workloads probe a key with its own
    signed timestamp or lease), else a plain claim of the key."""
    rids = {k: rid() for k in keys}
    pending = list(keys)
    first = True
    while pending and clock() < deadline:
        if not first:
            sleep(RETRY_GAP_S)
        first = False
        left = []
        for i, k in enumerate(pending):
            if clock() >= deadline:
                left.extend(pending[i:])
                break
            if probe is not None:
                typ, _ = probe(client, k, rids[k])
            else:
                typ, _ = client.claim(scope, k, rids[k], final=True,
                                      idempotent=idempotent)
            if typ != "ok":
                left.append(k)
        pending = left
    return pending


def probe_all(run, keys, members, idempotent, make_client, probe=None):
    """The final phase's probes: a :final-phase event naming @members, one
    prober per member (make_client(addr) gives its Client), then a
    :final-probes event with the keys left without a definite answer per
    member. Returns that count per member address; a prober's exception is
    raised after every prober ended."""
    run.hist.op("info", "nemesis", "final-phase",
                {K("members"): [n.client_addr for n in members]})
    limit = deadline_s(len(keys))
    log("final probes: %d keys x %d members, deadline %.0fs" %
        (len(keys), len(members), limit))
    t0 = time.monotonic()
    deadline = t0 + limit
    errors, left = [], {}

    def prober(n):
        c = make_client(n.client_addr)
        try:
            left[n.client_addr] = probe_member(c, run.scope, keys, idempotent,
                                               deadline, probe=probe)
        except Exception as e:   # noqa: BLE001 -- re-raised below
            errors.append(e)
        finally:
            c.close()

    ts = [threading.Thread(target=prober, args=(n,)) for n in members]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    dt = time.monotonic() - t0
    undefined = {a: len(ks) for a, ks in left.items()}
    run.hist.op("info", "nemesis", "final-probes",
                {K("keys"): len(keys), K("seconds"): round(dt, 1),
                 K("deadline-s"): round(limit, 1),
                 K("undefined"): {a: n for a, n in sorted(undefined.items())}})
    bad = {a: ks for a, ks in left.items() if ks}
    if bad:
        for a, ks in sorted(bad.items()):
            log("final probes: %d keys without a definite answer through %s "
                "after %.0fs (first %s): the checker fails the run (R7)" %
                (len(ks), a, dt, ks[0]))
    else:
        log("final probes done in %.1fs: every key answered through every "
            "member" % dt)
    return undefined
