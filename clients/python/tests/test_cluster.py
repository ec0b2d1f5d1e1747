"""Against the real 3-node cluster of clients/testing/with_cluster.py
(skipped without it): every outcome; batch claims, N-use nonces,
sliding retention and the lookup's served_by; a leader killed mid-call
and a leader paused mid-call; the idempotent helper (two processes racing on one key,
fencing, waiting, release); TLS with the tenant's certificate; and, last,
a cluster re-created empty on the same addresses refused by the pin.

On a TLS cluster (with_cluster.py --tls) every call is the tenant's
(scopes tenant-a and tenant-a/*), except where a test says otherwise.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import clusterenv as ce  # noqa: E402
import once_client as oc  # noqa: E402
from once_client import Outcome  # noqa: E402


@ce.need_cluster
class TestOutcomes(unittest.TestCase):
    def setUp(self):
        self.c = ce.client()
        self.s = ce.scope("outcomes")

    def tearDown(self):
        self.c.close()

    def test_nonce(self):
        c, s = self.c, self.s
        a = c.claim(s, "n1", ttl=60, execution_id="pod-1")
        self.assertIs(a.outcome, Outcome.ACCEPTED)
        self.assertFalse(a.retry)
        self.assertEqual(a.first_request_id, a.request_id)
        self.assertIs(a.kind, oc.Kind.NONCE)
        self.assertIs(a.state, oc.State.SEEN)
        self.assertGreater(a.expires_ms, a.log_time_ms)
        self.assertEqual(a.cluster_id, c.cluster_id)
        # Through another node first: a follower forwards.
        other = ce.client(ce.URLS[1:] + ce.URLS[:1])
        r = other.claim(s, "n1", ttl=60)
        self.assertIs(r.outcome, Outcome.REPLAYED)
        self.assertEqual(r.first_request_id, a.request_id)
        self.assertNotEqual(r.request_id, a.request_id)
        self.assertEqual(r.attempts_total, 1)
        # The same call again (its request id): ACCEPTED, retry.
        again = other.claim(s, "n1", ttl=60, request_id=a.request_id)
        self.assertIs(again.outcome, Outcome.ACCEPTED)
        self.assertTrue(again.retry)
        # A signed timestamp and its window.
        now = int(time.time() * 1000)
        self.assertIs(c.claim(s, "t1", ts=now, window=300).outcome,
                      Outcome.ACCEPTED)
        self.assertIs(c.claim(s, "t1", ts=now, window=300).outcome,
                      Outcome.REPLAYED)
        self.assertIs(c.claim(s, "t2", ts=now - 600000, window=60).outcome,
                      Outcome.STALE)
        self.assertIs(c.claim(s, "t3", ts=now + 600000, window=60).outcome,
                      Outcome.FUTURE)
        # Another kind on a live record.
        self.assertIs(c.claim(s, "n1", idempotent=True).outcome,
                      Outcome.CONFLICT)
        other.close()

    def test_idempotent_life_cycle(self):
        c, s = self.c, self.s
        a = c.claim(s, "o1", idempotent=True, payload_hash=b"\xab\x12",
                    lease=30)
        self.assertIs(a.outcome, Outcome.ACCEPTED)
        self.assertIsInstance(a.owner_token, oc.OwnerToken)
        self.assertEqual(a.owner_attempt, 1)
        self.assertIs(a.state, oc.State.PENDING)
        self.assertGreater(a.lease_expires_ms, a.log_time_ms)
        b = c.claim(s, "o1", idempotent=True, payload_hash="ab12")
        self.assertIs(b.outcome, Outcome.IN_PROGRESS)
        self.assertGreater(b.retry_after_ms, 0)
        self.assertIsNone(b.owner_token, "a denied claimant never sees it")
        self.assertIs(c.claim(s, "o1", idempotent=True,
                              payload_hash="ffff").outcome, Outcome.CONFLICT)
        done = c.complete(s, "o1", a.owner_token, b'{"id": 7}')
        self.assertIs(done.outcome, Outcome.COMPLETED)
        self.assertFalse(done.retry)
        self.assertIs(done.state, oc.State.COMPLETED)
        again = c.complete(s, "o1", str(a.owner_token), b'{"id": 7}')
        self.assertIs(again.outcome, Outcome.COMPLETED)
        self.assertTrue(again.retry)
        d = c.claim(s, "o1", idempotent=True, payload_hash="ab12")
        self.assertIs(d.outcome, Outcome.DUPLICATE)
        self.assertEqual(d.result_json(), {"id": 7})
        f = c.lookup(s, "o1")
        self.assertIs(f.outcome, Outcome.FOUND)
        self.assertEqual(f.result, b'{"id": 7}')
        self.assertEqual(f.owner_token, a.owner_token)
        self.assertEqual([x.outcome for x in f.attempts],
                         [Outcome.IN_PROGRESS, Outcome.CONFLICT,
                          Outcome.DUPLICATE])
        self.assertEqual(f.attempts_total, 3)
        self.assertIs(c.lookup(s, "nothing").outcome, Outcome.NOT_FOUND)

    def test_release_takeover_not_owner_failed(self):
        c, s = self.c, self.s
        a = c.claim(s, "r1", idempotent=True)
        r = c.release(s, "r1", a.owner_token)
        self.assertIs(r.outcome, Outcome.RELEASED)
        self.assertIs(r.state, oc.State.RELEASED)
        b = c.claim(s, "r1", idempotent=True)
        self.assertIs(b.outcome, Outcome.ACCEPTED)
        self.assertEqual(b.owner_attempt, 2, "a takeover")
        self.assertNotEqual(b.owner_token, a.owner_token)
        self.assertIs(c.complete(s, "r1", a.owner_token, "late").outcome,
                      Outcome.NOT_OWNER)
        self.assertIs(c.release(s, "r1", a.owner_token).outcome,
                      Outcome.NOT_OWNER)
        t = c.release(s, "r1", b.owner_token, terminal=True,
                      error="card declined")
        self.assertIs(t.outcome, Outcome.FAILED)
        ff = c.claim(s, "r1", idempotent=True)
        self.assertIs(ff.outcome, Outcome.FAILED)
        self.assertEqual(ff.stored_error, b"card declined")
        tok = "1:999999:0"
        self.assertIs(c.complete(s, "absent", tok).outcome,
                      Outcome.NOT_FOUND)
        self.assertIs(c.release(s, "absent", tok).outcome,
                      Outcome.NOT_FOUND)
        c.claim(s, "nonce", ttl=60)
        self.assertIs(c.complete(s, "nonce", tok).outcome, Outcome.CONFLICT)

    def test_node_refusal_is_invalid_argument(self):
        # A bound the client does not know (the cluster's max_ttl): the
        # node refuses, applied false, not retried.
        with self.assertRaises(oc.InvalidArgumentError) as cm:
            self.c.claim(self.s, "k", ttl=10 ** 8)
        self.assertEqual(cm.exception.http_status, 400)
        self.assertEqual(cm.exception.applied, "false")

    def test_status(self):
        infos = [self.c.status(u) for u in ce.URLS]
        self.assertEqual(sum(i.is_leader for i in infos), 1)
        self.assertEqual({i.cluster_id for i in infos}, {self.c.cluster_id})
        self.assertEqual(len({i.node_id for i in infos}), 3)
        for i in infos:
            self.assertEqual(len(i.members), 3)
            self.assertEqual(len(i.config_voters), 3)
            self.assertTrue(i.leader)


@ce.need_cluster
class TestNewFeatures(unittest.TestCase):
    """Batch claims, N-use nonces, sliding retention, served_by."""

    def setUp(self):
        self.c = ce.client()
        self.s = ce.scope("new")

    def tearDown(self):
        self.c.close()

    def test_batch_in_order(self):
        c, s = self.c, self.s
        R = oc.ClaimRequest
        items = [R(s, "b1", ttl=60), R(s, "b1", ttl=60),
                 {"scope": s, "key": "b2", "max_uses": 2},
                 R(s, "b2", max_uses=2), R(s, "b2", max_uses=2),
                 R(s, "i1", idempotent=True, lease=30)]
        res = c.claim_batch(items)
        self.assertEqual([r.outcome for r in res], [
            Outcome.ACCEPTED, Outcome.REPLAYED, Outcome.ACCEPTED,
            Outcome.ACCEPTED, Outcome.REPLAYED, Outcome.ACCEPTED],
            [r.error for r in res])
        a = [r.answer for r in res]
        # Each is what a single claim answers at that point.
        self.assertEqual(a[1].first_request_id, res[0].request_id)
        self.assertEqual(a[0].request_id, res[0].request_id)
        self.assertEqual((a[2].uses, a[2].uses_left), (1, 1))
        self.assertEqual((a[3].uses, a[3].uses_left), (2, 0))
        self.assertEqual(a[4].uses_left, 0)
        self.assertIsInstance(a[5].owner_token, oc.OwnerToken)
        self.assertEqual({x.cluster_id for x in a}, {c.cluster_id})
        # After the batch, a single claim sees what the batch recorded.
        self.assertIs(c.claim(s, "b1", ttl=60).outcome, Outcome.REPLAYED)
        # The same items again with their request ids: retries, not new
        # claims (what the client's own retry of the call sends).
        again = c.claim_batch([R(s, "b1", ttl=60,
                                 request_id=res[0].request_id)])
        self.assertIs(again[0].outcome, Outcome.ACCEPTED)
        self.assertTrue(again[0].answer.retry)

    def test_batch_item_refused_alone(self):
        # A bound only the cluster knows (its max_ttl, 7 days by default;
        # 10 days passes the API's own 365-day bound): item 1 is refused
        # alone, items 0 and 2 are decided.
        R = oc.ClaimRequest
        res = self.c.claim_batch([R(self.s, "r0"),
                                  R(self.s, "r1", ttl=10 * 86400),
                                  R(self.s, "r0")])
        self.assertIs(res[0].outcome, Outcome.ACCEPTED)
        self.assertFalse(res[1].ok)
        self.assertIsInstance(res[1].error, oc.InvalidArgumentError)
        self.assertEqual(res[1].error.applied, "false")
        self.assertEqual(res[1].error.request_id, res[1].request_id)
        self.assertIs(res[2].outcome, Outcome.REPLAYED)
        self.assertIs(self.c.lookup(self.s, "r1").outcome,
                      Outcome.NOT_FOUND)

    def test_two_use_nonce(self):
        c, s = self.c, self.s
        a1 = c.claim(s, "n2", ttl=60, max_uses=2)
        self.assertIs(a1.outcome, Outcome.ACCEPTED)
        self.assertEqual((a1.max_uses, a1.uses, a1.uses_left), (2, 1, 1))
        # Through another node: the same record.
        other = ce.client(ce.URLS[1:] + ce.URLS[:1])
        self.addCleanup(other.close)
        a2 = other.claim(s, "n2", ttl=60, max_uses=2)
        self.assertIs(a2.outcome, Outcome.ACCEPTED)
        self.assertEqual((a2.uses, a2.uses_left), (2, 0))
        a3 = c.claim(s, "n2", ttl=60, max_uses=2)
        self.assertIs(a3.outcome, Outcome.REPLAYED)
        self.assertEqual(a3.uses_left, 0)
        # A retry of the second use is that use again, not a third.
        r = c.claim(s, "n2", ttl=60, max_uses=2, request_id=a2.request_id)
        self.assertIs(r.outcome, Outcome.ACCEPTED)
        self.assertTrue(r.retry)
        # The first claim fixed max_uses: another value is CONFLICT.
        self.assertIs(c.claim(s, "n2", ttl=60, max_uses=3).outcome,
                      Outcome.CONFLICT)
        f = c.lookup(s, "n2")
        self.assertEqual((f.max_uses, f.uses, f.uses_left), (2, 2, 0))

    def test_bad_max_uses_refused_client_side(self):
        c, s = self.c, self.s
        for bad in (0, 65, -1, True, 1.5):
            with self.subTest(max_uses=bad):
                with self.assertRaises(oc.InvalidArgumentError) as cm:
                    c.claim(s, "bad", max_uses=bad)
                self.assertIsNone(cm.exception.http_status,
                                  "refused before any network call")
        with self.assertRaises(oc.InvalidArgumentError):
            c.claim(s, "bad", idempotent=True, max_uses=2)
        with self.assertRaises(oc.InvalidArgumentError):
            c.claim_batch([oc.ClaimRequest(s, "bad", max_uses=65)])
        self.assertIs(c.lookup(s, "bad").outcome, Outcome.NOT_FOUND)

    def test_sliding_retention(self):
        c, s = self.c, self.s
        a = c.claim(s, "sl", idempotent=True, ttl=600, sliding=True)
        self.assertIs(a.outcome, Outcome.ACCEPTED)
        self.assertTrue(a.sliding)
        self.assertIs(c.complete(s, "sl", a.owner_token, b"r").outcome,
                      Outcome.COMPLETED)
        plain = c.claim(s, "fixed", idempotent=True, ttl=600)
        self.assertFalse(plain.sliding)
        c.complete(s, "fixed", plain.owner_token, b"r")
        time.sleep(0.3)
        d = c.claim(s, "sl", idempotent=True, ttl=600, sliding=True)
        self.assertIs(d.outcome, Outcome.DUPLICATE)
        self.assertTrue(d.sliding)
        # The DUPLICATE moved the expiry to its log time + ttl.
        self.assertEqual(d.expires_ms, d.log_time_ms + 600000)
        self.assertGreater(d.expires_ms, a.expires_ms)
        f = c.lookup(s, "sl")
        self.assertTrue(f.sliding)
        self.assertEqual(f.expires_ms, d.expires_ms)
        # Without sliding the DUPLICATE leaves the expiry where it was.
        p = c.claim(s, "fixed", idempotent=True, ttl=600)
        self.assertIs(p.outcome, Outcome.DUPLICATE)
        self.assertFalse(p.sliding)
        self.assertEqual(p.expires_ms, plain.expires_ms)

    def test_lookup_served_by_a_member(self):
        c, s = self.c, self.s
        c.claim(s, "lk", ttl=60)
        members = {m.id for m in c.status().members}
        self.assertEqual(len(members), 3)
        seen = set()
        for u in ce.URLS:
            one = ce.client([u])
            f = one.lookup(s, "lk")
            one.close()
            self.assertIs(f.outcome, Outcome.FOUND)
            self.assertIn(f.served_by, members)
            # The HTTP API reads on the node that received the request.
            self.assertEqual(f.served_by, f.node_id)
            seen.add(f.served_by)
        self.assertEqual(seen, members)


@ce.need_cluster
class TestFailover(unittest.TestCase):
    def setUp(self):
        self.ctl = ce.Control()
        self.down = []

    def tearDown(self):
        for op, url in self.down:
            self.ctl(op, node=url)
        self.ctl("wait_leader")
        self.ctl.close()

    def test_leader_killed_mid_call(self):
        """The leader decides the claim, its answer is lost (held by a
        proxy) and the leader is killed: the client's retry, with the same
        request id, through another node, answers ACCEPTED retry=true."""
        info = self.ctl("info")
        leader = info["leader"]
        others = [u for u in ce.URLS if u != leader]
        proxy = ce.HoldingProxy(leader)
        c = ce.client([proxy.url] + others, timeout=20)
        s = ce.scope("kill")
        try:
            # The connection through the proxy is open and idle (a TLS
            # handshake done): what comes back after arm() is the answer.
            self.assertTrue(c.status(proxy.url).is_leader)
            proxy.arm()
            out = []
            th = threading.Thread(target=lambda: out.append(
                _catch(c.claim, s, "k1")))
            th.start()
            self.assertTrue(proxy.held.wait(10), "no answer from the leader")
            self.ctl("kill", node=leader)
            self.down.append(("start", leader))
            proxy.cut()
            th.join(30)
            self.assertFalse(th.is_alive())
            a = out[0]
            self.assertIsInstance(a, oc.Answer, repr(a))
            self.assertIs(a.outcome, Outcome.ACCEPTED)
            self.assertTrue(a.retry, "the retry carried the same request id")
            self.assertEqual(a.request_id, a.first_request_id)
            self.assertIn(a.node, others)
            # A fresh call is a new request id: REPLAYED.
            self.assertIs(c.claim(s, "k1").outcome, Outcome.REPLAYED)
        finally:
            proxy.close()
            c.close()

    def test_leader_paused_mid_call(self):
        """A paused leader swallows the call: the attempt gets half the
        deadline, then the call moves on (same request id) and is
        ACCEPTED by the new leader within the deadline."""
        leader = self.ctl("info")["leader"]
        others = [u for u in ce.URLS if u != leader]
        c = ce.client([leader] + others, timeout=4)
        s = ce.scope("pause")
        c.status(leader)  # pin, and a pooled connection to the leader
        self.ctl("pause", node=leader)
        self.down.append(("resume", leader))
        t0 = time.monotonic()
        a = c.claim(s, "k1")
        took = time.monotonic() - t0
        self.assertIs(a.outcome, Outcome.ACCEPTED)
        self.assertIn(a.node, others)
        self.assertGreater(took, 1.5, "the first attempt went to the "
                           "paused leader")
        self.assertLess(took, 4.0)
        c.close()


def _catch(fn, *a, **kw):
    try:
        return fn(*a, **kw)
    except Exception as e:  # the test shows it
        return e


@ce.need_cluster
class TestHelper(unittest.TestCase):
    def setUp(self):
        self.c = ce.client()
        self.s = ce.scope("helper")

    def tearDown(self):
        self.c.close()

    def test_runs_once_and_returns_stored_result(self):
        runs = []

        @oc.idempotent(self.c, self.s, key=lambda n: "job-%d" % n)
        def job(n):
            runs.append(n)
            return {"n": n, "squared": n * n}
        self.assertEqual(job(3), {"n": 3, "squared": 9})
        self.assertEqual(job(3), {"n": 3, "squared": 9})
        self.assertEqual(job(4), {"n": 4, "squared": 16})
        self.assertEqual(runs, [3, 4])
        f = self.c.lookup(self.s, "job-3")
        self.assertIs(f.state, oc.State.COMPLETED)
        self.assertEqual(json.loads(f.result), {"n": 3, "squared": 9})

    def test_release_on_error_retryable_then_terminal(self):
        calls = []

        @oc.idempotent(self.c, self.s, key="flaky")
        def flaky():
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("downstream down")
            return "ok"
        with self.assertRaises(ConnectionError):
            flaky()
        self.assertIs(self.c.lookup(self.s, "flaky").state,
                      oc.State.RELEASED)
        self.assertEqual(flaky(), "ok")
        self.assertEqual(len(calls), 2)

        @oc.idempotent(self.c, self.s, key="doomed",
                       terminal=lambda e: isinstance(e, ValueError))
        def doomed():
            calls.append(2)
            raise ValueError("card declined")
        with self.assertRaises(ValueError):
            doomed()
        with self.assertRaises(oc.FailedError) as cm:
            doomed()
        self.assertIn(b"card declined", cm.exception.stored_error)
        self.assertEqual(calls.count(2), 1, "a FAILED key does not run")

    def test_context_manager_and_in_progress_wait(self):
        holder = self.c.once(self.s, "cm", lease=30)
        holder.__enter__()
        self.assertFalse(holder.done)
        with self.assertRaises(oc.StillInProgressError):
            with self.c.once(self.s, "cm", wait=0.5):
                self.fail("ran while another owner holds the key")
        t = threading.Timer(0.8, lambda: (setattr(holder, "result", "R"),
                                          holder.__exit__(None, None, None)))
        t.start()
        with self.c.once(self.s, "cm", wait=10) as run:
            self.assertTrue(run.done, "waited for the owner, then DUPLICATE")
            self.assertEqual(run.result, "R")
        t.join()

    def test_fenced_owner_does_not_overwrite(self):
        late = self.c.once(self.s, "fence", lease=1)
        late.__enter__()
        time.sleep(1.3)  # its lease runs out
        with ce.client().once(self.s, "fence", lease=30) as other:
            self.assertFalse(other.done)
            self.assertEqual(other.answer.owner_attempt, 2)
            other.result = "other's"
        late.result = "late's"
        with self.assertRaises(oc.NotOwnerError):
            late.__exit__(None, None, None)
        self.assertEqual(self.c.lookup(self.s, "fence").result_json(),
                         "other's")

    def test_two_processes_race_on_one_key(self):
        d = tempfile.mkdtemp(prefix="once-py-race.")
        self.addCleanup(shutil.rmtree, d, True)
        worklog = os.path.join(d, "work.log")
        start_at = "%.3f" % (time.time() + 1.5)
        procs = [subprocess.Popen(
            [sys.executable, os.path.join(HERE, "race_worker.py"), self.s,
             "race", worklog, start_at, str(i)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for i in range(2)]
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err.decode()[-2000:])
            outs.append(json.loads(out))
        with open(worklog) as f:
            ran = f.read().split()
        self.assertEqual(len(ran), 1, "exactly one process ran the work: "
                         "%s" % ran)
        self.assertEqual(outs[0], outs[1], "both return the one result")
        self.assertEqual(outs[0], {"by": int(ran[0])})
        self.assertIn(int(ran[0]), [p.pid for p in procs])


@ce.need_cluster
class TestTLS(unittest.TestCase):
    def setUp(self):
        if not ce.TLS_ON:
            self.skipTest("a plain cluster (the --tls run checks this)")

    def test_tenant_scope_allowed_other_denied(self):
        c = ce.client(tls=ce.tls("TENANT"))
        self.assertTrue(c.nodes[0].startswith("https://"))
        self.assertIs(c.claim("tenant-a", ce.scope("x")[-8:]).outcome,
                      Outcome.ACCEPTED)
        with self.assertRaises(oc.PermissionDeniedError) as cm:
            c.claim("tenant-b", "k1")
        e = cm.exception
        self.assertTrue(e.definite)
        self.assertEqual((e.applied, e.http_status), ("false", 403))
        self.assertIn("tenant-b", e.message)
        with self.assertRaises(oc.PermissionDeniedError):
            c.lookup("tenant-b", "k1")
        # In a batch, the item of the other tenant is refused alone.
        res = c.claim_batch([oc.ClaimRequest("tenant-b", "k1"),
                             oc.ClaimRequest(ce.scope("b"), "k1")])
        self.assertIsInstance(res[0].error, oc.PermissionDeniedError)
        self.assertEqual(res[0].error.applied, "false")
        self.assertIs(res[1].outcome, Outcome.ACCEPTED)
        admin = ce.client(tls=ce.tls("ADMIN"))
        self.assertIs(admin.claim("tenant-b", ce.scope("y")[-8:]).outcome,
                      Outcome.ACCEPTED)
        c.close()
        admin.close()

    def test_no_client_certificate_denied(self):
        c = ce.client(tls=oc.TLS(os.environ["ONCE_TEST_CA"]))
        with self.assertRaises(oc.PermissionDeniedError):
            c.claim("tenant-a", "k1")
        c.close()

    def test_server_not_trusted(self):
        # The tenant's own certificate as the CA bundle: the nodes'
        # certificates do not chain to it, so no node is reached.
        c = ce.client(tls=oc.TLS(os.environ["ONCE_TEST_TENANT_CERT"],
                                 os.environ["ONCE_TEST_TENANT_CERT"],
                                 os.environ["ONCE_TEST_TENANT_KEY"]),
                      timeout=1)
        with self.assertRaises(oc.RetryableError) as cm:
            c.claim("tenant-a", "k1")
        self.assertIn("CERTIFICATE_VERIFY_FAILED", str(cm.exception))
        c.close()


@ce.need_cluster
class TestZRecreatedCluster(unittest.TestCase):
    """Last (it replaces the cluster): the pin refuses an amnesiac one."""

    def test_pin_refuses_recreated_cluster(self):
        ctl = ce.Control()
        try:
            c = ce.client()
            s = ce.scope("pin")
            self.assertIs(c.claim(s, "k1").outcome, Outcome.ACCEPTED)
            old = c.cluster_id
            self.assertEqual(old, ctl("info")["cluster_id"])
            given = ce.client(cluster_id=old)
            new = ctl("recreate")["cluster_id"]
            self.assertNotEqual(new, old)
            for cl in (c, given):
                with self.assertRaises(oc.ClusterMismatchError) as cm:
                    cl.claim(s, "k1")
                e = cm.exception
                self.assertEqual((e.pinned, e.answered), (old, new))
                self.assertTrue(e.definite)
                self.assertEqual(cl.cluster_id, old)
                with self.assertRaises(oc.ClusterMismatchError):
                    cl.lookup(s, "k1")
                self.assertEqual(e.applied, "false")
            # A new client pins the new cluster, which has forgotten k1 --
            # and never saw the refused claims: they carried the pin, and
            # the new cluster refused them before proposing.
            fresh = ce.client()
            self.assertIs(fresh.lookup(s, "k1").outcome, Outcome.NOT_FOUND)
            self.assertEqual(fresh.cluster_id, new)
            for cl in (c, given, fresh):
                cl.close()
        finally:
            ctl.close()


if __name__ == "__main__":
    unittest.main()
