"""Tests that need no cluster: argument checks before any network call,
decoding of every answer field, the request-id / retry / node / pin rules
against scripted nodes (fakenode.py), the version, the package's install.
"""

import base64
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG))
sys.path.insert(0, PKG)
sys.path.insert(0, HERE)

import once_client as oc  # noqa: E402
from fakenode import (CLUSTER, OTHER, FakeNode, Tripwire,  # noqa: E402
                      decision, error)

HEX32 = re.compile(r"^[0-9a-f]{32}$")


class TestVersion(unittest.TestCase):
    def test_version_is_ac_init(self):
        with open(os.path.join(ROOT, "configure.ac")) as f:
            m = re.search(r"AC_INIT\(\[once\],\s*\[([^\]]+)\]", f.read())
        self.assertIsNotNone(m, "no AC_INIT in configure.ac")
        self.assertEqual(oc.__version__, m.group(1))
        with open(os.path.join(PKG, "pyproject.toml")) as f:
            self.assertIn('version = "%s"' % m.group(1), f.read())


class TestArgumentsRefusedBeforeNetwork(unittest.TestCase):
    def setUp(self):
        self.trip = Tripwire()
        self.c = oc.Client([self.trip.url], timeout=1)

    def tearDown(self):
        self.trip.close()

    def refused(self, fn, *a, **kw):
        with self.assertRaises(oc.InvalidArgumentError) as cm:
            fn(*a, **kw)
        e = cm.exception
        self.assertTrue(e.definite and not e.retryable
                        and not e.outcome_unknown)
        self.assertEqual(e.applied, "false")
        self.assertEqual(e.status, "INVALID_ARGUMENT")
        self.assertIsInstance(e, ValueError)
        return e

    def test_claim(self):
        c = self.c
        bad = [
            ((("", "k")), {}), ((("s" * 129, "k")), {}),
            ((("s", "")), {}), ((("s", "k" * 257)), {}),
            ((("s", "é" * 129)), {}),          # 258 bytes of UTF-8
            ((("s", "a\x00b")), {}), ((("s", 7)), {}), (((None, "k")), {}),
            ((("s", b"\xff\xfe")), {}),        # not UTF-8
            ((("s", "k")), {"ttl": 0}), ((("s", "k")), {"ttl": -1}),
            ((("s", "k")), {"ttl": "30s"}), ((("s", "k")), {"ttl": True}),
            ((("s", "k")), {"ttl": float("nan")}),
            ((("s", "k")), {"ts": 1}), ((("s", "k")), {"window": 60}),
            ((("s", "k")), {"ts": -1, "window": 60}),
            ((("s", "k")), {"ts": True, "window": 60}),
            ((("s", "k")), {"ts": 1.5, "window": 60}),
            ((("s", "k")), {"ts": datetime.datetime(2026, 1, 1),
                            "window": 60}),
            ((("s", "k")), {"ts": 1, "window": 0}),
            ((("s", "k")), {"lease": 30}),
            ((("s", "k")), {"payload_hash": "ab"}),
            ((("s", "k")), {"idempotent": True, "payload_hash": "a" * 130}),
            ((("s", "k")), {"idempotent": True, "payload_hash": "zz"}),
            ((("s", "k")), {"idempotent": True, "payload_hash": 12}),
            ((("s", "k")), {"idempotent": True, "lease": -1}),
            ((("s", "k")), {"idempotent": "yes"}),
            ((("s", "k")), {"execution_id": "e" * 129}),
            ((("s", "k")), {"request_id": "abc"}),
            ((("s", "k")), {"request_id": "g" * 32}),
            ((("s", "k")), {"request_id": b"\x00" * 15}),
            ((("s", "k")), {"timeout": 0}),
            ((("s", "k")), {"timeout": 3601}),
        ]
        for args, kw in bad:
            with self.subTest(args=args, kw=kw):
                self.refused(c.claim, *args, **kw)
        self.assertEqual(self.trip.connections(), 0)

    def test_complete_release_lookup_status(self):
        c = self.c
        for tok in ("1:2", "a:b:c", "", None, 5, "1:2:3:4", "-1:2:3",
                    "4294967296:1:0"):
            with self.subTest(token=tok):
                self.refused(c.complete, "s", "k", tok)
                self.refused(c.release, "s", "k", tok)
        self.refused(c.complete, "s", "k", "1:2:0", b"x" * 65537)
        self.refused(c.complete, "s", "k", "1:2:0", 12)
        self.refused(c.release, "s", "k", "1:2:0", error="boom")
        self.refused(c.release, "s", "k", "1:2:0", terminal=True,
                     error="e" * 1025)
        self.refused(c.release, "s", "k", "1:2:0", terminal="yes")
        self.refused(c.lookup, "", "k")
        self.refused(c.lookup, "s", "k" * 257)
        self.refused(c.status, "http://127.0.0.1:1")
        self.assertEqual(self.trip.connections(), 0)

    def test_client_options(self):
        for nodes in ([], "http://127.0.0.1:7121", ["ftp://127.0.0.1:1"],
                      ["http://127.0.0.1"], ["http://127.0.0.1:1/v1"],
                      ["http://127.0.0.1:1", "http://127.0.0.1:1"], [7121],
                      ["http://127.0.0.1:99999"], ["x"] * 65):
            with self.subTest(nodes=nodes):
                self.refused(oc.Client, nodes)
        self.refused(oc.Client, [self.trip.url], cluster_id="abc")
        self.refused(oc.Client, [self.trip.url], timeout=0)
        self.refused(oc.Client, [self.trip.url], tls="yes")
        self.refused(oc.Client, [self.trip.url],
                     tls=oc.TLS("/nonexistent/ca.pem"))
        self.refused(oc.Once, self.c, "s", "k", wait=-1)
        self.refused(oc.idempotent, self.c, "s", key=5)
        self.assertEqual(self.trip.connections(), 0)

    def test_valid_arguments_do_reach_the_network(self):
        # The tripwire works: a valid call does connect (and then fails).
        with self.assertRaises(oc.OnceError):
            oc.Client([self.trip.url], timeout=0.3).claim("s", "k")
        self.assertGreater(self.trip.connections(), 0)


class TestDecoding(unittest.TestCase):
    def test_every_answer_field(self):
        o = decision(
            "DUPLICATE", retry=True,
            request_id="00112233445566778899AABBCCDDEEFF",
            first_request_id="29b0dfae662376a416a08607733d0f4b",
            first_index=14, first_time_ms=1796172561545, attempts_total=3,
            attempts=[{"request_id": "030ea8e42714738a47d1e4685bef1267",
                       "execution_id": "pod-1", "index": 24,
                       "time_ms": 1796172561895, "outcome": "DUPLICATE",
                       "retry": False},
                      {"request_id": "030ea8e42714738a47d1e4685bef1268",
                       "execution_id_b64": base64.b64encode(
                           b"\xff\x00").decode(), "index": 25,
                       "time_ms": 1796172561896, "outcome": "ACCEPTED",
                       "retry": True}],
            owner_token="1:18:0", owner_attempt=2,
            result_b64="eyJpZCI6N30=", stored_error_b64=base64.b64encode(
                b"\xfe").decode(), retry_after_ms=29890, reason="why",
            kind="IDEMPOTENT", state="COMPLETED",
            expires_ms="18446744073709551615",  # > 2^63-1: a string
            lease_expires_ms=1796172591604)
        a = oc.Answer.from_json(o, "http://n1")
        self.assertIs(a.outcome, oc.Outcome.DUPLICATE)
        self.assertEqual(a.outcome, "DUPLICATE")
        self.assertTrue(a.retry)
        self.assertEqual(a.log_time_ms, 1796172561545)
        self.assertEqual(a.request_id, "00112233445566778899aabbccddeeff")
        self.assertEqual(a.first_request_id,
                         "29b0dfae662376a416a08607733d0f4b")
        self.assertEqual((a.first_index, a.first_time_ms, a.attempts_total),
                         (14, 1796172561545, 3))
        self.assertEqual(len(a.attempts), 2)
        at = a.attempts[0]
        self.assertEqual((at.request_id, at.execution_id, at.index,
                          at.time_ms, at.outcome, at.retry),
                         ("030ea8e42714738a47d1e4685bef1267", b"pod-1", 24,
                          1796172561895, oc.Outcome.DUPLICATE, False))
        self.assertEqual(a.attempts[1].execution_id, b"\xff\x00")
        self.assertTrue(a.attempts[1].retry)
        self.assertEqual(a.owner_token, oc.OwnerToken(1, 18, 0))
        self.assertEqual(str(a.owner_token), "1:18:0")
        self.assertEqual(a.owner_attempt, 2)
        self.assertEqual(a.result, b'{"id":7}')
        self.assertEqual(a.result_json(), {"id": 7})
        self.assertEqual(a.result_text, '{"id":7}')
        self.assertEqual(a.stored_error, b"\xfe")
        self.assertEqual(a.retry_after_ms, 29890)
        self.assertEqual(a.reason, "why")
        self.assertIs(a.kind, oc.Kind.IDEMPOTENT)
        self.assertIs(a.state, oc.State.COMPLETED)
        self.assertEqual(a.expires_ms, 2 ** 64 - 1)
        self.assertEqual(a.lease_expires_ms, 1796172591604)
        self.assertEqual((a.cluster_id, a.node_id, a.boot_id),
                         (CLUSTER, "0348f626b1e2556a",
                          "e6eae456f00becb8b6152ba7536f4cb0"))
        self.assertEqual(a.node, "http://n1")
        self.assertIs(a.raw, o)
        self.assertFalse(a.accepted)

    def test_docs_examples(self):
        # docs/http-api.md's recorded answers, verbatim.
        a = oc.Answer.from_json({
            "outcome": "ACCEPTED", "retry": False,
            "log_time_ms": 1796172561545,
            "request_id": "29b0dfae662376a416a08607733d0f4b",
            "first_request_id": "29b0dfae662376a416a08607733d0f4b",
            "first_index": 14, "first_time_ms": 1796172561545,
            "attempts_total": 0, "kind": "NONCE", "state": "SEEN",
            "expires_ms": 1796258961545,
            "cluster_id": "718487e3275c028a9e0bca57a7b0efc8",
            "node_id": "0348f626b1e2556a",
            "boot_id": "e6eae456f00becb8b6152ba7536f4cb0"})
        self.assertTrue(a.accepted)
        self.assertIs(a.state, oc.State.SEEN)
        self.assertEqual(a.attempts, [])
        self.assertIsNone(a.result)
        nf = oc.Answer.from_json({"outcome": "NOT_FOUND",
                                  "log_time_ms": 1796172561895,
                                  "cluster_id": "", "node_id": "",
                                  "boot_id": ""})
        self.assertIs(nf.outcome, oc.Outcome.NOT_FOUND)
        self.assertIsNone(nf.cluster_id)
        failed = oc.Answer.from_json(decision("FAILED", stored_error=""))
        self.assertEqual(failed.stored_error, b"")

    def test_status(self):
        o = {"outcome": "OK", "role": "FOLLOWER", "member_role": "VOTER",
             "term": 3, "commit_index": 25, "applied_index": 24,
             "applied_digest": "af55f12c52831bdb", "schema": 2,
             "schema_max": 2, "config_index": 13,
             "config_voters": ["37309f34950cc741", "c1a732c56b486091"],
             "leader": "37309f34950cc741", "leader_addr": "127.0.0.1:7101",
             "store_backend": "uring", "state_digest": "0011223344556677",
             "restored_from": OTHER, "restore_time_ms": 5,
             "replay_window_until_ms": 6, "restore_stale_ts_ms": 7,
             "backups_open": 1, "no_vote_cut_index": 26,
             "members": [{"id": "37309f34950cc741",
                          "raft_addr": "127.0.0.1:7111",
                          "client_addr": "127.0.0.1:7101",
                          "role": "VOTER", "reachable": True},
                         {"id": "c1a732c56b486091",
                          "raft_addr": "127.0.0.1:7112",
                          "client_addr": "127.0.0.1:7102",
                          "role": "STANDBY", "reachable": False}],
             "cluster_id": CLUSTER, "node_id": "c1a732c56b486091",
             "boot_id": "2e92524a792b67b3067a0a57bc35fc51"}
        s = oc.StatusInfo.from_json(o, "http://n2")
        self.assertIs(s.role, oc.RaftRole.FOLLOWER)
        self.assertFalse(s.is_leader)
        self.assertIs(s.member_role, oc.Role.VOTER)
        self.assertEqual((s.term, s.commit_index, s.applied_index,
                          s.config_index, s.schema, s.schema_max),
                         (3, 25, 24, 13, 2, 2))
        self.assertEqual(s.applied_digest, "af55f12c52831bdb")
        self.assertEqual(s.config_voters, ["37309f34950cc741",
                                           "c1a732c56b486091"])
        self.assertEqual((s.leader, s.leader_addr, s.store_backend),
                         ("37309f34950cc741", "127.0.0.1:7101", "uring"))
        self.assertEqual(s.members[1], oc.Member(
            "c1a732c56b486091", "127.0.0.1:7112", "127.0.0.1:7102",
            oc.Role.STANDBY, False))
        self.assertEqual((s.state_digest, s.restored_from,
                          s.restore_time_ms, s.replay_window_until_ms,
                          s.restore_stale_ts_ms, s.backups_open,
                          s.no_vote_cut_index),
                         ("0011223344556677", OTHER, 5, 6, 7, 1, 26))
        self.assertEqual((s.cluster_id, s.node_id, s.node),
                         (CLUSTER, "c1a732c56b486091", "http://n2"))

    def test_malformed(self):
        for o in (decision("MAYBE"), decision(retry="yes"),
                  decision(owner_token="1-2-3"),
                  decision(result_b64="***"), decision(first_index=-1),
                  decision(first_index=1.5), decision(attempts={}),
                  decision(request_id="xyz"), decision(kind="BLOB"),
                  decision(attempts=[{"outcome": "NOPE"}]), [], "text"):
            with self.subTest(o=o):
                with self.assertRaises(oc.ProtocolError):
                    oc.Answer.from_json(o)
        with self.assertRaises(oc.ProtocolError):
            oc.StatusInfo.from_json({"outcome": "OK", "role": "LEADER"})


class Scripted(unittest.TestCase):
    """Clients against scripted nodes."""

    def setUp(self):
        self.nodes = []

    def tearDown(self):
        for n in self.nodes:
            n.close()

    def node(self, *script):
        n = FakeNode(script)
        self.nodes.append(n)
        return n

    def rids(self, *nodes):
        return [b.get("request_id") for n in nodes for b in n.bodies()
                if b is not None]


class TestRequestIds(Scripted):
    def test_fresh_per_call(self):
        a = self.node((200, decision()))
        c = oc.Client([a.url])
        r1 = c.claim("s", "k1")
        r2 = c.claim("s", "k2")
        c.complete("s", "k", "1:2:0", "r")
        c.release("s", "k", "1:2:0")
        ids = self.rids(a)
        self.assertEqual(len(ids), 4)
        self.assertTrue(all(HEX32.match(i) for i in ids), ids)
        self.assertEqual(len(set(ids)), 4)
        # The answer's request id is the node's (here a canned one); the
        # call's own is what was sent.
        self.assertIsNone(r1.request_id)
        self.assertIs(r2.outcome, oc.Outcome.ACCEPTED)

    def test_given_request_id_is_sent(self):
        a = self.node((200, decision()))
        c = oc.Client([a.url])
        c.claim("s", "k", request_id="00112233445566778899AABBCCDDEEFF")
        c.claim("s", "k", request_id=bytes(range(16)))
        self.assertEqual(self.rids(a), ["00112233445566778899aabbccddeeff",
                                        bytes(range(16)).hex()])

    def test_unknown_outcome_moves_on_with_same_id(self):
        # libonce's rule (src/client/op.c): unknown or not applied, the
        # retry goes to the next node, with the same request id.
        a = self.node((504, error("UNKNOWN", "unknown")),
                      (200, decision()))
        b = self.node((200, decision(retry=True)))
        c = oc.Client([a.url, b.url], timeout=5)
        self.assertTrue(c.claim("s", "k").retry)
        self.assertEqual(len(a.bodies()), 1)
        self.assertEqual(len(b.bodies()), 1)
        self.assertEqual(len(set(self.rids(a, b))), 1)

    def test_lost_connection_moves_on_with_same_id(self):
        a = self.node("close")
        b = self.node((200, decision(retry=True)))
        c = oc.Client([a.url, b.url], timeout=5)
        r = c.claim("s", "k")
        self.assertTrue(r.retry)
        self.assertEqual(len(a.bodies()), 1)
        self.assertEqual(self.rids(a), self.rids(b))

    def test_not_applied_moves_to_next_node(self):
        a = self.node((503, error("UNAVAILABLE")))
        b = self.node((200, decision()))
        c = oc.Client([a.url, b.url], timeout=5)
        self.assertTrue(c.claim("s", "k").accepted)
        self.assertEqual(len(a.bodies()), 1)
        self.assertEqual(len(b.bodies()), 1)
        self.assertEqual(self.rids(a), self.rids(b))
        # The node that answered is preferred by the next call.
        c.claim("s", "k2")
        self.assertEqual(len(a.bodies()), 1)
        self.assertEqual(len(b.bodies()), 2)

    def test_unreachable_node_skipped(self):
        trip = Tripwire()
        trip.close()  # nothing listens there any more: refused
        b = self.node((200, decision()))
        c = oc.Client([trip.url, b.url], timeout=5)
        self.assertTrue(c.claim("s", "k").accepted)

    def test_unknown_is_sticky_and_deadline_bounds_the_call(self):
        a = self.node((504, error("UNKNOWN", "unknown")),
                      (503, error("UNAVAILABLE")))
        c = oc.Client([a.url], timeout=0.6)
        t0 = time.monotonic()
        with self.assertRaises(oc.OutcomeUnknownError) as cm:
            c.claim("s", "k")
        took = time.monotonic() - t0
        e = cm.exception
        self.assertTrue(e.outcome_unknown and not e.retryable
                        and not e.definite)
        self.assertEqual(e.applied, "unknown")
        self.assertLess(took, 1.5)
        ids = set(self.rids(a))
        self.assertEqual(ids, {e.request_id})
        self.assertGreater(len(a.bodies()), 2)
        # The caller's retry with that id sends it again.
        a.script = [(200, decision(retry=True))]
        self.assertTrue(c.claim("s", "k", request_id=e.request_id).retry)
        self.assertEqual(a.bodies()[-1]["request_id"], e.request_id)

    def test_not_applied_until_deadline_is_retryable(self):
        a = self.node((503, error("UNAVAILABLE")))
        b = self.node((503, error("RESOURCE_EXHAUSTED")))
        c = oc.Client([a.url, b.url], timeout=0.5)
        with self.assertRaises(oc.RetryableError) as cm:
            c.claim("s", "k")
        self.assertEqual(cm.exception.applied, "false")
        self.assertFalse(cm.exception.outcome_unknown)
        self.assertGreater(len(a.bodies()), 1)
        self.assertGreater(len(b.bodies()), 1)

    def test_final_errors_are_not_retried(self):
        for status, name, cls in (
                (400, "INVALID_ARGUMENT", oc.InvalidArgumentError),
                (403, "PERMISSION_DENIED", oc.PermissionDeniedError),
                (503, "FAILED_PRECONDITION", oc.FailedPreconditionError)):
            with self.subTest(name=name):
                a = self.node((status, error(name)))
                b = self.node((200, decision()))
                c = oc.Client([a.url, b.url], timeout=5)
                with self.assertRaises(cls) as cm:
                    c.claim("s", "k")
                self.assertTrue(cm.exception.definite)
                self.assertEqual(cm.exception.status, name)
                self.assertEqual(cm.exception.http_status, status)
                self.assertEqual(len(a.bodies()), 1)
                self.assertEqual(b.bodies(), [])

    def test_state_machine_refusal_with_outcome_is_an_error(self):
        a = self.node((400, decision("INVALID_ARGUMENT",
                                     error="INVALID_ARGUMENT",
                                     applied="false", message="ttl: ...")))
        with self.assertRaises(oc.InvalidArgumentError):
            oc.Client([a.url]).claim("s", "k")

    def test_malformed_answer_to_a_write_is_unknown(self):
        a = self.node((200, decision("MAYBE")))
        c = oc.Client([a.url], timeout=0.4)
        with self.assertRaises(oc.OutcomeUnknownError):
            c.claim("s", "k")
        with self.assertRaises(oc.RetryableError):
            c.lookup("s", "k")

    def test_swallowing_node_gets_half_the_deadline(self):
        a = self.node(("hang", 10))
        b = self.node((200, decision(retry=True)))
        c = oc.Client([a.url, b.url], timeout=4)
        t0 = time.monotonic()
        r = c.claim("s", "k")
        took = time.monotonic() - t0
        self.assertTrue(r.retry)
        self.assertGreater(took, 1.5)
        self.assertLess(took, 3.0)
        self.assertEqual(self.rids(a), self.rids(b))
        # Each attempt told the node its share of the deadline.
        self.assertLessEqual(a.bodies()[0]["timeout"], 2000)
        self.assertGreater(a.bodies()[0]["timeout"], 1000)

    def test_pin_first_answer_and_refuse_another_cluster(self):
        a = self.node((200, decision()), (200, decision(cluster=OTHER)))
        b = self.node((200, decision()))
        c = oc.Client([a.url, b.url], timeout=5)
        self.assertIsNone(c.cluster_id)
        c.claim("s", "k1")
        self.assertEqual(c.cluster_id, CLUSTER)
        with self.assertRaises(oc.ClusterMismatchError) as cm:
            c.claim("s", "k2")
        e = cm.exception
        self.assertIsInstance(e, oc.FailedPreconditionError)
        self.assertTrue(e.definite)
        self.assertEqual((e.pinned, e.answered), (CLUSTER, OTHER))
        self.assertIn("cluster id mismatch", str(e))
        self.assertEqual(b.bodies(), [], "never retried elsewhere")
        self.assertEqual(c.cluster_id, CLUSTER)

    def test_given_pin(self):
        a = self.node((200, decision()))
        with self.assertRaises(oc.ClusterMismatchError):
            oc.Client([a.url], cluster_id=OTHER).lookup("s", "k")
        c = oc.Client([a.url], cluster_id=CLUSTER.upper())
        self.assertEqual(c.lookup("s", "k").outcome, "ACCEPTED")
        # An error answer of another cluster is refused as well.
        z = self.node((503, error("UNAVAILABLE", cluster=OTHER)))
        with self.assertRaises(oc.ClusterMismatchError):
            oc.Client([z.url], cluster_id=CLUSTER, timeout=2).claim("s", "k")

    def test_pinned_write_carries_the_pin(self):
        a = self.node((200, decision()))
        c = oc.Client([a.url])
        c.claim("s", "k1")
        c.claim("s", "k2")
        c.complete("s", "k", "1:2:0", "r")
        c.release("s", "k", "1:2:0")
        self.assertEqual([b.get("cluster_id") for b in a.bodies()],
                         [None, CLUSTER, CLUSTER, CLUSTER],
                         "pinned at the first answer, sent from then on")
        oc.Client([a.url], cluster_id=CLUSTER).claim("s", "k")
        self.assertEqual(a.bodies()[-1]["cluster_id"], CLUSTER)
        self.assertFalse(any(r[1] == "/v1/status" for r in a.requests),
                         "no status call before a write")

    def test_refused_pin_is_a_mismatch_not_applied(self):
        a = self.node((503, error("FAILED_PRECONDITION", cluster="",
                                  message="cluster id mismatch: x")))
        b = self.node((200, decision()))
        c = oc.Client([a.url, b.url], cluster_id=CLUSTER, timeout=5)
        with self.assertRaises(oc.ClusterMismatchError) as cm:
            c.claim("s", "k")
        self.assertEqual(cm.exception.applied, "false")
        self.assertTrue(cm.exception.definite)
        self.assertEqual(a.bodies()[0]["cluster_id"], CLUSTER)
        self.assertEqual(b.bodies(), [], "never retried elsewhere")

    def test_status_asks_one_node(self):
        st = {"outcome": "OK", "role": "LEADER", "member_role": "VOTER",
              "term": 1, "commit_index": 1, "applied_index": 1,
              "config_index": 1, "cluster_id": CLUSTER}
        a = self.node((503, error("UNAVAILABLE")))
        b = self.node((200, st))
        c = oc.Client([a.url, b.url], timeout=2)
        with self.assertRaises(oc.RetryableError):
            c.status(a.url)
        self.assertEqual(len(b.bodies()), 0)
        self.assertTrue(c.status(b.url).is_leader)
        self.assertTrue(c.status().is_leader)

    def test_lookup_path_is_percent_encoded(self):
        a = self.node((200, decision("NOT_FOUND")))
        oc.Client([a.url]).lookup("a/b c", "k%y")
        self.assertEqual(a.requests[0][1], "/v1/records/a%2Fb%20c/k%25y")


class TestHelperScripted(Scripted):
    def test_in_progress_waits_then_duplicate(self):
        a = self.node((200, decision("IN_PROGRESS", retry_after_ms=50)),
                      (200, decision("IN_PROGRESS", retry_after_ms=50)),
                      (200, decision("DUPLICATE", result_b64=base64.b64encode(
                          b'{"v": 1}').decode())))
        calls = []

        @oc.idempotent(oc.Client([a.url]), "s", key="k")
        def work():
            calls.append(1)
        self.assertEqual(work(), {"v": 1})
        self.assertEqual(calls, [])
        self.assertEqual(len(a.bodies()), 3)
        ids = self.rids(a)
        self.assertEqual(len(set(ids)), 3, "each claim is a new call")

    def test_in_progress_until_wait(self):
        a = self.node((200, decision("IN_PROGRESS", retry_after_ms=30000)))
        with self.assertRaises(oc.StillInProgressError) as cm:
            with oc.Client([a.url]).once("s", "k", wait=0.3):
                self.fail("ran")
        self.assertTrue(cm.exception.retryable)

    def test_unknown_claim_retried_with_same_id(self):
        a = self.node((504, error("UNKNOWN", "unknown")),
                      (200, decision(owner_token="1:5:0", retry=True)),
                      (200, decision("COMPLETED")))
        c = oc.Client([a.url], timeout=0.3)
        with c.once("s", "k", wait=10) as run:
            self.assertFalse(run.done)
            run.result = [1]
        ids = self.rids(a)
        self.assertEqual(ids[0], ids[-2])
        self.assertEqual(a.bodies()[-1]["result_b64"],
                         base64.b64encode(b"[1]").decode())

    def test_not_owner_on_complete_is_fenced(self):
        a = self.node((200, decision(owner_token="1:5:0")),
                      (200, decision("NOT_OWNER")))
        with self.assertRaises(oc.NotOwnerError) as cm:
            with oc.Client([a.url]).once("s", "k") as run:
                run.result = "late"
        self.assertTrue(cm.exception.definite)

    def test_exception_releases(self):
        a = self.node((200, decision(owner_token="1:5:0")),
                      (200, decision("RELEASED")))
        c = oc.Client([a.url])
        with self.assertRaises(KeyError):
            with c.once("s", "k"):
                raise KeyError("x")
        rel = a.bodies()[-1]
        self.assertEqual(rel["owner_token"], "1:5:0")
        self.assertNotIn("terminal", rel)
        a.script = [(200, decision(owner_token="1:6:0")),
                    (200, decision("FAILED"))]
        with self.assertRaises(KeyError):
            with c.once("s", "k2", terminal=lambda e: True):
                raise KeyError("bad card")
        rel = a.bodies()[-1]
        self.assertTrue(rel["terminal"])
        self.assertIn("bad card", rel["error"])

    def test_result_not_storable_releases(self):
        for value in ({1, 2}, "x" * 70000):
            with self.subTest(value=str(value)[:20]):
                a = self.node((200, decision(owner_token="1:5:0")),
                              (200, decision("RELEASED")))
                with self.assertRaises(oc.InvalidArgumentError):
                    with oc.Client([a.url]).once("s", "k") as run:
                        run.result = value
                self.assertEqual(a.bodies()[-1]["owner_token"], "1:5:0")
                self.assertNotIn("result_b64", a.bodies()[-1])
                self.assertEqual(a.requests[-1][1], "/v1/release")

    def test_failed_and_conflict(self):
        a = self.node((200, decision("FAILED", stored_error="declined")))
        with self.assertRaises(oc.FailedError) as cm:
            with oc.Client([a.url]).once("s", "k"):
                pass
        self.assertEqual(cm.exception.stored_error, b"declined")
        b = self.node((200, decision("CONFLICT")))
        with self.assertRaises(oc.ConflictError):
            with oc.Client([b.url]).once("s", "k"):
                pass

    def test_key_from_arguments(self):
        a = self.node((200, decision(owner_token="1:5:0")),
                      (200, decision("COMPLETED")))
        c = oc.Client([a.url])

        @oc.idempotent(c, "s", key=lambda x, y=0: "k-%s-%s" % (x, y))
        def f(x, y=0):
            return x + y
        self.assertEqual(f(2, y=3), 5)
        self.assertEqual(a.bodies()[0]["key"], "k-2-3")

        @oc.idempotent(c, "s")
        def g(x):
            return x
        a.script = [(200, decision(owner_token="1:6:0")),
                    (200, decision("COMPLETED"))]
        self.assertEqual(g(4, idempotency_key="given"), 4)
        self.assertEqual(a.bodies()[-2]["key"], "given")
        with self.assertRaises(oc.InvalidArgumentError):
            g(4)


class TestNewClaimFields(Scripted):
    """max_uses, sliding, the new answer fields (docs/http-api.md)."""

    def refused(self, fn, *a, **kw):
        with self.assertRaises(oc.InvalidArgumentError) as cm:
            fn(*a, **kw)
        self.assertEqual(cm.exception.applied, "false")
        return cm.exception

    def test_bounds_refused_before_network(self):
        trip = Tripwire()
        self.addCleanup(trip.close)
        c = oc.Client([trip.url], timeout=1)
        for kw in ({"max_uses": 0}, {"max_uses": 65}, {"max_uses": -1},
                   {"max_uses": True}, {"max_uses": 2.0},
                   {"max_uses": "2"},
                   {"max_uses": 2, "idempotent": True},
                   {"sliding": True}, {"sliding": True, "ttl": 60},
                   {"sliding": True, "idempotent": True},
                   {"sliding": True, "idempotent": True, "ts": 1,
                    "window": 60},
                   {"sliding": 1, "idempotent": True, "ttl": 60}):
            with self.subTest(kw=kw):
                e = self.refused(c.claim, "s", "k", **kw)
                self.assertTrue(str(e.message).startswith(
                    "max_uses" if "max_uses" in kw else "sliding"), e)
        self.assertEqual(trip.connections(), 0)

    def test_sent_as_documented(self):
        a = self.node((200, decision()))
        c = oc.Client([a.url])
        c.claim("s", "k", max_uses=64)
        c.claim("s", "k", max_uses=1)
        c.claim("s", "k", idempotent=True, sliding=True, ttl=90)
        c.claim("s", "k")
        b = a.bodies()
        self.assertEqual([x.get("max_uses") for x in b],
                         [64, 1, None, None])
        self.assertEqual([x.get("sliding") for x in b],
                         [None, None, True, None])
        self.assertEqual(b[2]["ttl"], 90000)

    def test_answer_fields(self):
        a = oc.Answer.from_json(decision(
            kind="NONCE", max_uses=2, uses=1, uses_left=1,
            served_by="e28a6a524fc638fa"))
        self.assertEqual(
            (a.max_uses, a.uses, a.uses_left, a.sliding, a.served_by),
            (2, 1, 1, False, "e28a6a524fc638fa"))
        b = oc.Answer.from_json(decision(kind="IDEMPOTENT", sliding=True))
        self.assertTrue(b.sliding)
        self.assertIsNone(b.max_uses)
        for bad in ({"uses_left": -1}, {"sliding": "yes"},
                    {"served_by": "xyz"}, {"max_uses": "two"}):
            with self.subTest(bad=bad):
                with self.assertRaises(oc.ProtocolError):
                    oc.Answer.from_json(decision(**bad))


class TestBatch(Scripted):
    def test_refused_before_network(self):
        trip = Tripwire()
        self.addCleanup(trip.close)
        c = oc.Client([trip.url], timeout=1)
        R = oc.ClaimRequest
        for items, what in (([], "items: 0 given"),
                            ([R("s", "k")] * 4097, "items: 4097 given"),
                            (R("s", "k"), "items: want a list"),
                            ({"scope": "s", "key": "k"}, "items: want"),
                            ([R("s", "k"), 7], "items[1]: want"),
                            ([{"scope": "s", "kye": "k"}], "items[0]: "),
                            ([R("s", "k"), R("s", "k", max_uses=65)],
                             "items[1]: max_uses"),
                            ([R("s", "")], "items[0]: key"),
                            ([R("s", "k", request_id="abc")],
                             "items[0]: request_id"),
                            ([R("s", "k" * 256)] * 4000,
                             "bytes of JSON")):
            with self.subTest(what=what):
                e = self.refused(c.claim_batch, items)
                self.assertIn(what, e.message)
        self.assertEqual(trip.connections(), 0)

    refused = TestNewClaimFields.refused

    def test_one_result_per_item_in_order(self):
        rid3 = "00112233445566778899aabbccddeeff"
        a = self.node((200, [
            decision(),
            decision("REPLAYED"),
            error("RESOURCE_EXHAUSTED", message="quota", request_id=None),
            error("UNKNOWN", "unknown", request_id=rid3)]),
            (200, [decision()]))
        c = oc.Client([a.url])
        res = c.claim_batch([
            oc.ClaimRequest("s", "k", ttl=60),
            {"scope": "s", "key": "k", "ttl": 60},
            oc.ClaimRequest("s", "q", max_uses=3),
            oc.ClaimRequest("s", "u", request_id=rid3.upper())])
        self.assertEqual([r.index for r in res], [0, 1, 2, 3])
        self.assertEqual([r.outcome for r in res],
                         [oc.Outcome.ACCEPTED, oc.Outcome.REPLAYED, None,
                          None])
        self.assertTrue(res[0].ok and res[1].ok)
        self.assertFalse(res[2].ok)
        self.assertIsInstance(res[2].error, oc.ResourceExhaustedError)
        self.assertEqual(res[2].error.applied, "false")
        self.assertIsInstance(res[3].error, oc.OutcomeUnknownError)
        with self.assertRaises(oc.OutcomeUnknownError):
            res[3].unwrap()
        self.assertIs(res[0].unwrap(), res[0].answer)
        body = a.bodies()[0]
        self.assertEqual(a.requests[0][1], "/v1/claims")
        self.assertEqual(set(body), {"items", "timeout"})
        sent = [i["request_id"] for i in body["items"]]
        self.assertEqual([r.request_id for r in res], sent)
        self.assertEqual(res[2].error.request_id, sent[2])
        self.assertTrue(all(HEX32.match(i) for i in sent))
        self.assertEqual(len(set(sent)), 4)
        self.assertEqual(sent[3], rid3)
        self.assertEqual(body["items"][2]["max_uses"], 3)
        self.assertEqual(body["items"][0]["ttl"], 60000)
        # Pinned by the answer: the next batch carries the pin.
        c.claim_batch([oc.ClaimRequest("s", "k2")])
        self.assertEqual(a.bodies()[1]["cluster_id"], CLUSTER)

    def test_retry_keeps_item_ids_and_unknown_sticks(self):
        a = self.node((504, error("UNKNOWN", "unknown")))
        b = self.node((200, [decision(retry=True),
                             error("RESOURCE_EXHAUSTED")]))
        c = oc.Client([a.url, b.url], timeout=5)
        res = c.claim_batch([oc.ClaimRequest("s", "k1"),
                             oc.ClaimRequest("s", "k2")])
        self.assertTrue(res[0].answer.retry)
        # The first attempt may have applied item 1: not "false" now.
        self.assertIsInstance(res[1].error, oc.OutcomeUnknownError)
        self.assertEqual(res[1].error.applied, "unknown")
        ids = [[i["request_id"] for i in n.bodies()[0]["items"]]
               for n in (a, b)]
        self.assertEqual(ids[0], ids[1])

    def test_whole_call_errors(self):
        a = self.node((503, error("UNAVAILABLE")))
        b = self.node((200, [decision()]))
        c = oc.Client([a.url, b.url], timeout=5)
        self.assertTrue(c.claim_batch([oc.ClaimRequest("s", "k")])[0].ok)
        z = self.node((400, error("INVALID_ARGUMENT",
                                  message="items[0]: key: missing")))
        with self.assertRaises(oc.InvalidArgumentError):
            oc.Client([z.url]).claim_batch([oc.ClaimRequest("s", "k")])
        # An answer with too few items is no answer: perhaps applied.
        w = self.node((200, [decision()]))
        with self.assertRaises(oc.OutcomeUnknownError):
            oc.Client([w.url], timeout=0.4).claim_batch(
                [oc.ClaimRequest("s", "k"), oc.ClaimRequest("s", "j")])

    def test_whole_call_unknown_names_the_items_request_ids(self):
        a = self.node((504, error("UNKNOWN", "unknown")))
        c = oc.Client([a.url], timeout=0.5)
        items = [oc.ClaimRequest("s", "k1"), oc.ClaimRequest("s", "k2")]
        with self.assertRaises(oc.OutcomeUnknownError) as cm:
            c.claim_batch(items)
        ids = cm.exception.request_ids
        self.assertEqual(ids, [i["request_id"]
                               for i in a.bodies()[0]["items"]])
        # The retry the error asks for: the same items, the same ids.
        a.script = [(200, [decision(retry=True), decision(retry=True)])]
        res = c.claim_batch([oc.ClaimRequest("s", "k1", request_id=ids[0]),
                             oc.ClaimRequest("s", "k2", request_id=ids[1])])
        self.assertEqual([r.request_id for r in res], ids)
        self.assertEqual([i["request_id"] for i in a.bodies()[-1]["items"]],
                         ids)

    def test_an_item_of_another_cluster_refuses_the_answer(self):
        a = self.node((200, [decision(), decision(cluster=OTHER)]))
        b = self.node((200, [decision(), decision()]))
        c = oc.Client([a.url, b.url], cluster_id=CLUSTER, timeout=5)
        with self.assertRaises(oc.ClusterMismatchError) as cm:
            c.claim_batch([oc.ClaimRequest("s", "k"),
                           oc.ClaimRequest("s", "j")])
        self.assertEqual(cm.exception.answered, OTHER)
        self.assertEqual(b.bodies(), [], "never retried elsewhere")


class TestInstall(unittest.TestCase):
    """pip install of the package, offline, into a fresh venv."""

    def test_offline_install(self):
        if os.environ.get("ONCE_TEST_CA"):
            self.skipTest("checked in the plain run")
        d = tempfile.mkdtemp(prefix="once-py-venv.")
        try:
            venv = os.path.join(d, "venv")
            # The system's Python, which scripts/deps.sh equips (python3-venv,
            # python3-pip with setuptools and wheel), where there is one.
            system = "/usr/bin/python3"
            base = system if os.access(system, os.X_OK) else sys.executable
            r = subprocess.run([base, "-m", "venv",
                                "--system-site-packages", "--without-pip", venv],
                               capture_output=True)
            if r.returncode != 0:
                self.skipTest("no venv module: %s" % r.stderr[-200:])
            py = os.path.join(venv, "bin", "python")
            # setuptools before 70.1 builds wheels with the wheel package
            # (Debian's python3-pip brings python3-wheel).
            r = subprocess.run([py, "-c", "import setuptools, sys\n"
                                "v = tuple(int(x) for x in "
                                "setuptools.__version__.split('.')[:2])\n"
                                "if v < (70, 1): import wheel"],
                               capture_output=True)
            if r.returncode != 0:
                self.skipTest("no setuptools (or wheel) for the venv: %s"
                              % r.stderr.decode()[-200:])
            # From a copy: setuptools leaves build/ and *.egg-info beside
            # the sources it builds.
            src = os.path.join(d, "src")
            shutil.copytree(PKG, src, ignore=shutil.ignore_patterns(
                "tests", "__pycache__", "build", "*.egg-info"))
            r = subprocess.run([py, "-m", "pip", "install", "--no-index",
                                "--no-build-isolation", "-q", src],
                               capture_output=True, cwd=d,
                               env=dict(os.environ, PIP_NO_INPUT="1"))
            self.assertEqual(r.returncode, 0, r.stderr.decode()[-2000:])
            r = subprocess.run(
                [py, "-c", "import once_client, os;"
                 "print(once_client.__version__);"
                 "print(os.path.isfile(os.path.join(os.path.dirname("
                 "once_client.__file__), 'py.typed')))"],
                capture_output=True, cwd=d)
            self.assertEqual(r.stdout.decode().split(), ["0.1.0", "True"],
                             r.stderr.decode())
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
