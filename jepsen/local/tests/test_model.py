"""model.step, rule by rule of docs/state-machine.md.

Each test walks a short sequential history through model.step (every
successor kept: an :info call both takes effect and not) and asserts that
the legal answer has a successor and that a changed answer has none, so
each rule's test fails if the model stops enforcing it.
"""
import unittest

from tests.util import dumps  # (tests.util also sets sys.path)
from oncecheck import model
from oncecheck.history import read_ops, pair

SETTINGS = '{:type :info, :process :nemesis, :f :time-settings, ' \
           ':value {:max-window-ms 4000 :max-skew-ms 1000}}'


def _edn(d):
    return "{" + " ".join(":%s %s" % (k, dumps(v)) for k, v in d.items()) + "}"


def history(ops, settings=True):
    """ops: (f, inv fields, type, answer fields) in real-time order, one
    after the other; scope "s", key "k" unless given."""
    lines = [SETTINGS] if settings else []
    for p, (f, inv, typ, ret) in enumerate(ops):
        iv = {"scope": "s", "key": "k"}
        iv.update(inv)
        lines.append("{:type :invoke, :f :%s, :process %d, :value %s}" % (f, p, _edn(iv)))
        if typ is not None:
            lines.append("{:type :%s, :f :%s, :process %d, :value %s}" % (typ, f, p, _edn(ret)))
    return "\n".join(lines) + "\n"


def walk(ops, settings=True):
    """The states after every call of OPS took effect in order ('may' calls:
    or not); [] when some 'must' call cannot."""
    calls, events = pair(read_ops(history(ops, settings)))
    keys = model.key_ops(calls, events)
    assert len(keys) == 1, keys
    (key, cs), = keys.items()
    states = [model.initial(key, cs)]
    for c in cs:
        r = model.role(c)
        if r == model.NEVER:
            continue
        nxt = []
        for s in states:
            nxt += model.step(s, c)
        if r == model.MAY:
            nxt += states
        states = list(dict.fromkeys(nxt))
        if not states:
            return []
    return states


def claim(rid, typ="ok", kind="NONCE", **kw):
    """A claim and its answer: keyword arguments ending in _ are sent (the
    invocation), the others answered."""
    inv = {"request-id": rid, "kind": kind}
    ret = {}
    for k, v in kw.items():
        k = k.replace("_", "-")
        if k.endswith("-"):
            inv[k[:-1]] = v
        else:
            ret[k] = v
    return ("claim", inv, typ, ret)


def idem(rid, typ="ok", **kw):
    kw.setdefault("lease_ms_", 3000)
    return claim(rid, typ, kind="IDEMPOTENT", **kw)


def complete(rid, token, result="eA==", typ="ok", **ret):
    return ("complete", {"request-id": rid, "owner-token": token, "result-b64": result}, typ,
            {k.replace("_", "-"): v for k, v in ret.items()})


def release(rid, token, terminal=False, typ="ok", **ret):
    inv = {"request-id": rid, "owner-token": token, "terminal": terminal}
    if terminal:
        inv["error"] = "declined"
    return ("release", inv, typ, {k.replace("_", "-"): v for k, v in ret.items()})


def acc(rid, lt=1000, tok="1:10:0", **kw):
    """An IDEMPOTENT first acceptance at log time LT (lease 3 s)."""
    return idem(rid, outcome="ACCEPTED", retry=False, log_time_ms=lt, owner_token=tok,
                owner_attempt=1, first_request_id=rid, first_time_ms=lt,
                lease_expires_ms=lt + 3000, **kw)


class Model(unittest.TestCase):
    def ok(self, ops, settings=True):
        self.assertTrue(walk(ops, settings), history(ops, settings))

    def bad(self, ops, settings=True):
        self.assertEqual(walk(ops, settings), [], history(ops, settings))

    # -- Time --------------------------------------------------------------

    def test_log_time_never_goes_back(self):
        a = claim("a", outcome="ACCEPTED", retry=False, log_time_ms=5000, first_time_ms=5000)
        self.ok([a, claim("b", outcome="REPLAYED", log_time_ms=5000, first_request_id="a")])
        self.bad([a, claim("b", outcome="REPLAYED", log_time_ms=4999, first_request_id="a")])

    def test_info_time_bounded_by_later_answers(self):
        # an :info acceptance's time is a variable: the REPLAYED that shows
        # first_time_ms pins it, and it cannot be after that REPLAYED's time
        i = claim("a", typ="info")
        self.ok([i, claim("b", outcome="REPLAYED", log_time_ms=700, first_request_id="a",
                          first_time_ms=600)])
        self.bad([i, claim("b", outcome="REPLAYED", log_time_ms=700, first_request_id="a",
                           first_time_ms=701)])
        # log time of a call before it bounds it from below
        x = claim("x", outcome="STALE", ts_=1, window_ms_=10, log_time_ms=800)
        self.bad([x, i, claim("b", outcome="REPLAYED", log_time_ms=900, first_request_id="a",
                              first_time_ms=799)])

    def test_live_while_expires_after_now(self):
        a = claim("a", outcome="ACCEPTED", retry=False, log_time_ms=100000, ts_=100000,
                  window_ms_=2000, expires_ms=105000)
        self.ok([a, claim("b", outcome="REPLAYED", log_time_ms=104999, first_request_id="a",
                          ts_=100000, window_ms_=4000)])
        self.bad([a, claim("b", outcome="REPLAYED", log_time_ms=105000, first_request_id="a",
                           ts_=100000, window_ms_=4000)])
        # expired: absent, and the same ts is outside every window (STALE)
        self.ok([a, claim("b", outcome="STALE", log_time_ms=105000, ts_=100000,
                          window_ms_=4000)])
        self.bad([a, claim("b", outcome="STALE", log_time_ms=104999, ts_=100000,
                           window_ms_=4000)])

    def test_retention_latest_of_ttl_ts_lease(self):
        # ts + max_window + max_skew = 100000 + 4000 + 1000
        self.ok([claim("a", outcome="ACCEPTED", retry=False, log_time_ms=100000, ts_=100000,
                       window_ms_=10, expires_ms=105000)])
        self.bad([claim("a", outcome="ACCEPTED", retry=False, log_time_ms=100000, ts_=100000,
                        window_ms_=10, expires_ms=104999)])
        # now + ttl when later
        self.ok([claim("a", outcome="ACCEPTED", retry=False, log_time_ms=100000, ts_=100000,
                       window_ms_=10, ttl_ms_=9000, expires_ms=109000)])
        # the lease expiry for IDEMPOTENT when later
        self.ok([acc("a", lt=100000, ttl_ms_=1000, expires_ms=103000)])
        self.bad([acc("a", lt=100000, ttl_ms_=1000, expires_ms=101000)])
        # never before now + 1: ts + max_window + max_skew = 5000 at log time
        # 5000 is accepted (window 4000, the past edge) and lives one ms
        self.ok([claim("a", outcome="ACCEPTED", retry=False, log_time_ms=5000, ts_=0,
                       window_ms_=5000, expires_ms=5001)])
        self.bad([claim("a", outcome="ACCEPTED", retry=False, log_time_ms=5000, ts_=0,
                        window_ms_=5000, expires_ms=5000)])

    def test_untold_retention_outlives_the_history(self):
        # no ttl, no ts in the history: the runner's limit (a TTL longer
        # than the run) holds, a second acceptance is a lost record
        a = claim("a", outcome="ACCEPTED", retry=False)
        self.bad([a, claim("b", outcome="ACCEPTED", retry=False)])
        # a told ttl lets it expire, and the key is then accepted anew
        a = claim("a", outcome="ACCEPTED", retry=False, ttl_ms_=1000, log_time_ms=10)
        self.ok([a, claim("b", outcome="ACCEPTED", retry=False, log_time_ms=1010)])
        self.bad([a, claim("b", outcome="ACCEPTED", retry=False, log_time_ms=1009)])

    # -- Claim of an absent record --------------------------------------------

    def test_window_edges(self):
        # now - window <= ts <= now + max_skew (both edges accept)
        mk = lambda lt, ts, out: claim("a", outcome=out, retry=False, log_time_ms=lt, ts_=ts,
                                       window_ms_=2000)
        self.ok([mk(102000, 100000, "ACCEPTED")])
        self.bad([mk(102001, 100000, "ACCEPTED")])
        self.ok([mk(102001, 100000, "STALE")])
        self.bad([mk(102000, 100000, "STALE")])
        self.ok([mk(99000, 100000, "ACCEPTED")])
        self.bad([mk(98999, 100000, "ACCEPTED")])
        self.ok([mk(98999, 100000, "FUTURE")])
        self.bad([mk(99000, 100000, "FUTURE")])

    def test_fresh_acceptance_facts(self):
        self.ok([acc("a", lt=1000)])
        for k, v in (("first_time_ms", 999), ("owner_attempt", 2), ("lease_expires_ms", 3999),
                     ("first_request_id", "z"), ("log_time_ms", 1001)):
            with self.subTest(field=k):
                op = acc("a", lt=1000)
                op[3][k.replace("_", "-")] = v
                self.bad([op])

    def test_first_index_is_the_token_index(self):
        self.ok([acc("a", first_index=10)])
        self.bad([acc("a", first_index=11)])

    # -- Claim of a live record ---------------------------------------------------

    def test_retry_only_where_the_table_says(self):
        a = claim("a", outcome="ACCEPTED", retry=False)
        self.ok([a, claim("b", outcome="REPLAYED", retry=False, first_request_id="a")])
        self.bad([a, claim("b", outcome="REPLAYED", retry=True, first_request_id="a")])
        i = acc("a")
        self.ok([i, idem("b", outcome="IN_PROGRESS", retry=False, log_time_ms=1001)])
        self.bad([i, idem("b", outcome="IN_PROGRESS", retry=True, log_time_ms=1001)])
        self.bad([i, complete("c", "1:99:0", outcome="NOT_OWNER", retry=True)])

    def test_other_kind_conflict(self):
        a = claim("a", outcome="ACCEPTED", retry=False)
        self.ok([a, idem("b", outcome="CONFLICT", retry=False)])
        self.bad([a, idem("b", outcome="ACCEPTED", retry=False, owner_token="1:20:0")])

    def test_payload_hash_conflict(self):
        a = acc("a", payload_hash_="ab")
        self.ok([a, idem("b", outcome="CONFLICT", payload_hash_="cd", log_time_ms=1001)])
        self.bad([a, idem("b", outcome="IN_PROGRESS", payload_hash_="cd", log_time_ms=1001,
                          retry_after_ms=2999)])
        self.ok([a, idem("b", outcome="IN_PROGRESS", payload_hash_="ab", log_time_ms=1001,
                         retry_after_ms=2999)])
        # none is not some
        self.ok([a, idem("b", outcome="CONFLICT", log_time_ms=1001)])

    def test_nonce_retry_and_replay(self):
        a = claim("a", outcome="ACCEPTED", retry=False)
        self.ok([a, claim("a", outcome="ACCEPTED", retry=True, first_request_id="a")])
        self.bad([a, claim("a", outcome="ACCEPTED", retry=False, first_request_id="a")])
        self.ok([a, claim("b", outcome="REPLAYED", first_request_id="a")])
        self.bad([a, claim("b", outcome="REPLAYED", first_request_id="b")])
        self.bad([a, claim("a", outcome="REPLAYED", first_request_id="a")])

    def test_owner_retry_same_token_same_lease(self):
        a = acc("a")
        r = lambda **kw: idem("a", outcome="ACCEPTED", retry=True, log_time_ms=2000,
                              first_request_id="a", **kw)
        self.ok([a, r(owner_token="1:10:0", owner_attempt=1, lease_expires_ms=4000)])
        self.bad([a, r(owner_token="1:11:0")])
        self.bad([a, r(lease_expires_ms=5000)])
        # the owner's retry, even after its lease expired
        self.ok([a, idem("a", outcome="ACCEPTED", retry=True, log_time_ms=9000,
                         owner_token="1:10:0")])

    def test_in_progress_while_lease_lives(self):
        a = acc("a")
        self.ok([a, idem("b", outcome="IN_PROGRESS", log_time_ms=3999, retry_after_ms=1,
                         owner_attempt=1, lease_expires_ms=4000, first_request_id="a")])
        self.bad([a, idem("b", outcome="IN_PROGRESS", log_time_ms=3999, retry_after_ms=2)])
        self.bad([a, idem("b", outcome="IN_PROGRESS", log_time_ms=4000)])
        self.bad([a, idem("b", outcome="ACCEPTED", retry=False, log_time_ms=3999,
                          owner_token="1:20:0", owner_attempt=2)])

    def test_takeover_after_lease(self):
        a = acc("a")
        t = lambda **kw: idem("b", outcome="ACCEPTED", retry=False, **kw)
        good = dict(log_time_ms=4000, owner_token="1:20:0", owner_attempt=2,
                    lease_expires_ms=7000, first_request_id="a", first_time_ms=1000)
        self.ok([a, t(**good)])
        for k, v in (("owner_attempt", 1), ("first_request_id", "b"), ("first_time_ms", 4000),
                     ("lease_expires_ms", 6999), ("owner_token", "1:10:0"),
                     ("owner_token", "1:9:0")):
            with self.subTest(field=k, value=v):
                bad = dict(good)
                bad[k] = v
                self.bad([a, t(**bad)])
        # the old token is fenced after it
        self.ok([a, t(**good), complete("c", "1:10:0", outcome="NOT_OWNER")])
        self.bad([a, t(**good), complete("c", "1:10:0", outcome="COMPLETED")])

    def test_takeover_of_released(self):
        a = acc("a")
        rel = release("r", "1:10:0", outcome="RELEASED", log_time_ms=1100)
        self.ok([a, rel, idem("b", outcome="ACCEPTED", log_time_ms=1200, owner_token="1:20:0",
                              owner_attempt=2)])
        # before its lease ran out: only because it was released
        self.bad([a, idem("b", outcome="ACCEPTED", log_time_ms=1200, owner_token="1:20:0",
                          owner_attempt=2)])

    def test_takeover_window_check(self):
        a = acc("a")
        self.ok([a, idem("b", outcome="STALE", log_time_ms=5000, ts_=1000, window_ms_=100)])
        # a takeover refused as STALE changes nothing: the next is IN_PROGRESS? no,
        # the lease still expired; a fresh takeover by c works
        self.ok([a, idem("b", outcome="STALE", log_time_ms=5000, ts_=1000, window_ms_=100),
                 idem("c", outcome="ACCEPTED", log_time_ms=5001, owner_token="1:20:0",
                      owner_attempt=2)])
        self.bad([a, idem("b", outcome="ACCEPTED", log_time_ms=5000, ts_=1000, window_ms_=100,
                          owner_token="1:20:0", owner_attempt=2)])

    def test_duplicate_with_stored_result(self):
        a = acc("a")
        c = complete("c", "1:10:0", result="eA==", outcome="COMPLETED", result_b64="eA==")
        self.ok([a, c, idem("b", outcome="DUPLICATE", result_b64="eA==")])
        self.bad([a, c, idem("b", outcome="DUPLICATE", result_b64="eQ==")])
        self.bad([a, idem("b", outcome="DUPLICATE", result_b64="eA==")])

    def test_failed_with_stored_error(self):
        a = acc("a")
        f = release("r", "1:10:0", terminal=True, outcome="FAILED")
        self.ok([a, f, idem("b", outcome="FAILED", stored_error="declined")])
        self.bad([a, f, idem("b", outcome="FAILED", stored_error="other")])
        self.bad([a, f, idem("b", outcome="ACCEPTED", owner_token="1:20:0", owner_attempt=2)])

    def test_denied_claimant_never_sees_the_token(self):
        a = acc("a")
        self.ok([a, idem("b", outcome="IN_PROGRESS", log_time_ms=1001)])
        self.bad([a, idem("b", outcome="IN_PROGRESS", log_time_ms=1001, owner_token="1:10:0")])

    # -- Complete -----------------------------------------------------------------

    def test_complete(self):
        a = acc("a")
        self.ok([complete("c", "1:10:0", outcome="NOT_FOUND")])
        self.bad([a, complete("c", "1:10:0", outcome="NOT_FOUND")])
        self.ok([claim("a", outcome="ACCEPTED"), complete("c", "1:10:0", outcome="CONFLICT")])
        self.ok([a, complete("c", "1:99:0", outcome="NOT_OWNER")])
        self.bad([a, complete("c", "1:10:0", outcome="NOT_OWNER")])
        # PENDING -> COMPLETED, also after the lease expired
        self.ok([a, complete("c", "1:10:0", outcome="COMPLETED", log_time_ms=9000,
                             result_b64="eA==")])
        self.bad([a, complete("c", "1:10:0", outcome="COMPLETED", result_b64="eQ==")])
        done = complete("c", "1:10:0", outcome="COMPLETED", result="eA==")
        self.ok([a, done, complete("d", "1:10:0", result="eQ==", outcome="COMPLETED", retry=True,
                                   result_b64="eA==")])
        self.bad([a, done, complete("d", "1:10:0", result="eQ==", outcome="COMPLETED",
                                    retry=False)])
        rel = release("r", "1:10:0", outcome="RELEASED")
        self.ok([a, rel, complete("c", "1:10:0", outcome="CONFLICT")])
        self.bad([a, rel, complete("c", "1:10:0", outcome="COMPLETED")])

    # -- Release ------------------------------------------------------------------

    def test_release(self):
        a = acc("a")
        self.ok([release("r", "1:10:0", outcome="NOT_FOUND")])
        self.ok([a, release("r", "1:99:0", outcome="NOT_OWNER")])
        self.ok([a, release("r", "1:10:0", outcome="RELEASED")])
        self.bad([a, release("r", "1:10:0", outcome="FAILED")])
        self.ok([a, release("r", "1:10:0", terminal=True, outcome="FAILED")])
        rel = release("r", "1:10:0", outcome="RELEASED")
        self.ok([a, rel, release("s", "1:10:0", outcome="RELEASED", retry=True)])
        self.bad([a, rel, release("s", "1:10:0", outcome="RELEASED", retry=False)])
        self.ok([a, rel, release("s", "1:10:0", terminal=True, outcome="FAILED")])
        fail = release("r", "1:10:0", terminal=True, outcome="FAILED")
        self.ok([a, fail, release("s", "1:10:0", terminal=True, outcome="FAILED", retry=True)])
        done = complete("c", "1:10:0", outcome="COMPLETED")
        self.ok([a, done, release("r", "1:10:0", outcome="CONFLICT")])
        self.bad([a, done, release("r", "1:10:0", outcome="RELEASED")])

    # -- Lookup and Forget ----------------------------------------------------------

    def test_lookup_and_forget(self):
        a = claim("a", outcome="ACCEPTED")
        self.ok([("lookup", {}, "ok", {"outcome": "NOT_FOUND"})])
        self.ok([a, ("lookup", {}, "ok", {"outcome": "FOUND", "first-request-id": "a"})])
        self.bad([a, ("lookup", {}, "ok", {"outcome": "FOUND", "first-request-id": "b"})])
        self.bad([a, ("lookup", {}, "ok", {"outcome": "NOT_FOUND"})])
        f = ("forget", {}, "ok", {"outcome": "FORGOTTEN"})
        # forget reopens the key
        self.ok([a, f, claim("b", outcome="ACCEPTED", retry=False)])
        self.bad([a, claim("b", outcome="ACCEPTED", retry=False)])

    # -- What the history does not know -----------------------------------------------

    def test_info_may_take_effect_or_not(self):
        i = claim("a", typ="info")
        self.ok([i, claim("b", outcome="REPLAYED", first_request_id="a")])
        self.ok([i, claim("b", outcome="ACCEPTED", retry=False)])
        self.bad([i, claim("b", outcome="REPLAYED", first_request_id="c")])

    def test_fail_never_takes_effect(self):
        f = claim("a", typ="fail", error="UNAVAILABLE", applied="false")
        self.bad([f, claim("b", outcome="REPLAYED", first_request_id="a")])

    def test_hidden_first_application_before_a_retry_answer(self):
        # libonce's first application, reply lost, then its own retry
        self.ok([claim("a", outcome="ACCEPTED", retry=True, first_request_id="a")])
        op = acc("a")
        op[3]["retry"] = True
        self.ok([op])
        # a hidden takeover's token is still a new one (the log only grows)
        rel = release("r", "1:10:0", outcome="RELEASED")
        t = lambda tok: idem("b", outcome="ACCEPTED", retry=True, owner_token=tok,
                             owner_attempt=2)
        self.ok([acc("a"), rel, t("1:20:0")])
        self.bad([acc("a"), rel, t("1:9:0")])
        self.ok([acc("a"), complete("c", "1:10:0", outcome="COMPLETED", retry=True)])

    def test_info_takeover_token_matches_its_own_answers_only(self):
        a = acc("a")
        i = idem("b", typ="info")
        # b's token is known from its later retry; a complete with it works
        self.ok([a, ("claim", {"request-id": "x"}, None, {}), i,
                 idem("b", outcome="ACCEPTED", retry=True, log_time_ms=5000,
                      owner_token="1:20:0", owner_attempt=2),
                 complete("c", "1:20:0", outcome="COMPLETED")])
        # only an ACCEPTED answer gives a token: one shown by an answer
        # outside the model (or a denial) does not make it b's
        for out in ("RESOURCE_EXHAUSTED", "IN_PROGRESS"):
            self.bad([i, idem("b", outcome=out, owner_token="1:20:0"),
                      complete("c", "1:20:0", outcome="COMPLETED")])
        self.ok([i, idem("b", outcome="ACCEPTED", retry=True, owner_token="1:20:0",
                         owner_attempt=1),
                 complete("c", "1:20:0", outcome="COMPLETED")])

    def test_lookup_shows_the_token_of_an_unanswered_takeover(self):
        # b's takeover (after a's lease) got no answer, so no client knows
        # its token; a Lookup shows it all the same (CI, seed 667428)
        a = acc("a")
        i = idem("b", typ="info")
        look = lambda tok, att=2: ("lookup", {}, "ok", {
            "outcome": "FOUND", "first-request-id": "a", "owner-token": tok,
            "owner-attempt": att, "state": "PENDING"})
        self.ok([a, i, look("1:20:1")])
        # not the first owner's token once b took over, nor an older one
        self.bad([a, i, look("1:10:0")])
        self.bad([a, i, look("1:9:0")])
        # a token a NOT_OWNER ruled out is not b's either
        self.bad([a, i, complete("c", "1:20:1", outcome="NOT_OWNER", owner_attempt=2),
                  look("1:20:1")])
        # a client still presents only tokens it learned from an ACCEPTED
        self.bad([a, i, complete("c", "1:20:1", outcome="COMPLETED")])

    def test_roles(self):
        calls, events = pair(read_ops(history([
            claim("a", outcome="ACCEPTED"), claim("b", typ="info"),
            claim("c", typ="fail", applied="false"), claim("d", outcome="RESOURCE_EXHAUSTED")])))
        cs = model.key_ops(calls, events)[("s", "k")]
        self.assertEqual([model.role(c) for c in cs],
                         [model.MUST, model.MAY, model.NEVER, model.NEVER])
        self.assertEqual([model.unmodeled(c) for c in cs], [False, False, False, True])


if __name__ == "__main__":
    unittest.main()
