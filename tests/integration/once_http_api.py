#!/usr/bin/env python3
"""once_http_api.py: the HTTP/JSON API (docs/http-api.md) on a 3-node
cluster, driven from Python's standard library only (urllib, json), the
way a service in another language would use it.

  * POST /v1/claim: ACCEPTED, then REPLAYED for another request id, and
    ACCEPTED with retry for the same request id; a request id generated
    and returned when none is given;
  * idempotent: claim PENDING with an owner token, complete, the next
    claim DUPLICATE with the stored result (result_b64); release and the
    takeover by the next claim;
  * GET /v1/records/{scope}/{key} (percent-encoded parts, a '/' inside a
    key) and GET /v1/status (the same names as oncectl --json);
  * a claim through a follower (forwarded to the leader);
  * 400 (unknown field named, bad JSON, bad request_id, missing key),
    413 (a body over 256 KiB), 415 (no application/json), 404, 405;
  * a node with TLS: the port is HTTPS; a call without a client
    certificate 403, with the admin's certificate ACCEPTED; plain HTTP
    gets no answer; /healthz served without a certificate;
  * without a quorum (two nodes killed by PID): 504 with applied
    "unknown" for a claim the leader proposed, 503 with Retry-After and
    applied "false" once it stepped down, and the retry of the unknown
    claim with its request id ACCEPTED once the quorum is back.
"""

import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402

BASE = 8200
SCOPE = "httpapi"


def call(addr, path, body=None, method=None, ctype="application/json",
         raw=None, timeout=10, ctx=None):
    """(HTTP status, headers, parsed JSON or text); @ctx: HTTPS with that
    ssl.SSLContext."""
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request("%s://%s%s" % (
        "https" if ctx is not None else "http", addr, path), data=data,
        method=method)
    if data is not None and ctype is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=timeout,
                                    context=ctx) as r:
            st, hdrs, text = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        st, hdrs, text = e.code, dict(e.headers), e.read()
    text = text.decode("utf-8", "replace")
    try:
        return st, hdrs, json.loads(text)
    except ValueError:
        return st, hdrs, text


def claim(addr, key, ctx=None, **kw):
    body = {"scope": SCOPE, "key": key}
    body.update(kw)
    return call(addr, "/v1/claim", body, ctx=ctx)


def check_nonce(t, via):
    key = "n-" + oc.rand_hex(4)
    st, h, a = claim(via, key)
    t.check(st == 200 and a.get("outcome") == "ACCEPTED",
            "claim: 200 ACCEPTED", "%s %r" % (st, a))
    t.check(h.get("Content-Type", "").startswith("application/json"),
            "answer is application/json", str(h))
    rid = a.get("request_id", "")
    t.check(len(rid) == 32 and a.get("retry") is False,
            "a request id generated and returned (32 hex)", repr(a))
    for f in ("first_request_id", "first_index", "kind", "state",
              "cluster_id", "node_id", "boot_id", "log_time_ms"):
        t.check(f in a, "claim answer has %s (oncectl's name)" % f, repr(a))
    st, _, b = claim(via, key)
    t.check(st == 200 and b.get("outcome") == "REPLAYED",
            "second claim: 200 REPLAYED (a denial is a decision)",
            "%s %r" % (st, b))
    t.check(b.get("first_request_id") == rid, "REPLAYED names the first "
            "request id", repr(b))
    st, _, c = claim(via, key, request_id=rid)
    t.check(st == 200 and c.get("outcome") == "ACCEPTED"
            and c.get("retry") is True and c.get("request_id") == rid,
            "retry with the same request_id: ACCEPTED retry=true",
            "%s %r" % (st, c))
    return key


def check_idempotent(t, via):
    key = "i-" + oc.rand_hex(4)
    st, _, a = claim(via, key, idempotent=True, payload_hash="ab12",
                     lease="30s")
    tok = a.get("owner_token", "") if isinstance(a, dict) else ""
    t.require(st == 200 and a.get("outcome") == "ACCEPTED" and tok,
              "idempotent claim: ACCEPTED with an owner token",
              "%s %r" % (st, a))
    st, _, b = claim(via, key, idempotent=True, payload_hash="ab12")
    t.check(st == 200 and b.get("outcome") == "IN_PROGRESS"
            and "retry_after_ms" in b, "claim while pending: IN_PROGRESS",
            "%s %r" % (st, b))
    st, _, c = call(via, "/v1/complete", {"scope": SCOPE, "key": key,
                                          "owner_token": tok,
                                          "result": '{"id":7}'})
    t.check(st == 200 and c.get("outcome") == "COMPLETED",
            "complete: COMPLETED", "%s %r" % (st, c))
    st, _, d = claim(via, key, idempotent=True, payload_hash="ab12")
    t.check(st == 200 and d.get("outcome") == "DUPLICATE"
            and d.get("result_b64") == "eyJpZCI6N30=",
            "claim after complete: DUPLICATE with the stored result",
            "%s %r" % (st, d))
    # release, and the next claim takes over with a new token
    key2 = "r-" + oc.rand_hex(4)
    st, _, e = claim(via, key2, idempotent=True)
    tok2 = e.get("owner_token", "")
    st, _, f = call(via, "/v1/release", {"scope": SCOPE, "key": key2,
                                         "owner_token": tok2})
    t.check(st == 200 and f.get("outcome") == "RELEASED",
            "release: RELEASED", "%s %r" % (st, f))
    st, _, g = call(via, "/v1/release", {"scope": SCOPE, "key": key2,
                                         "owner_token": tok2})
    t.check(st == 200 and g.get("outcome") == "RELEASED"
            and g.get("retry") is True,
            "release repeated: RELEASED, retry", "%s %r" % (st, g))
    st, _, h = claim(via, key2, idempotent=True)
    t.check(st == 200 and h.get("outcome") == "ACCEPTED"
            and h.get("owner_token") not in ("", tok2),
            "claim after release: ACCEPTED with a new token",
            "%s %r" % (st, h))
    st, _, i = call(via, "/v1/complete", {"scope": SCOPE, "key": key2,
                                          "owner_token": tok2,
                                          "result_b64": "aGk="})
    t.check(st == 200 and i.get("outcome") == "NOT_OWNER",
            "complete with the released token: 200 NOT_OWNER",
            "%s %r" % (st, i))
    return key


def check_lookup_status(t, via, nonce_key, idem_key):
    st, _, a = call(via, "/v1/records/%s/%s" % (SCOPE, nonce_key))
    t.check(st == 200 and a.get("outcome") == "FOUND"
            and a.get("state") == "SEEN" and "attempts" in a,
            "lookup: FOUND, state SEEN, attempts", "%s %r" % (st, a))
    st, _, b = call(via, "/v1/records/%s/%s" % (SCOPE, idem_key))
    t.check(st == 200 and b.get("state") == "COMPLETED"
            and b.get("result_b64") == "eyJpZCI6N30=",
            "lookup of a completed record: its result", "%s %r" % (st, b))
    # percent-decoding: a '/' and a space inside the key
    odd = "a/b c-" + oc.rand_hex(3)
    st, _, c = claim(via, odd)
    t.check(st == 200 and c.get("outcome") == "ACCEPTED",
            "claim of a key with '/' and ' '", "%s %r" % (st, c))
    path = "/v1/records/%s/%s" % (
        SCOPE, urllib.request.quote(odd, safe=""))
    st, _, d = call(via, path)
    t.check(st == 200 and d.get("outcome") == "FOUND",
            "lookup with a percent-encoded key (%2F)", "%s %r" % (st, d))
    st, _, e = call(via, "/v1/records/%s/never-%s" % (SCOPE, oc.rand_hex(3)))
    t.check(st == 200 and e.get("outcome") == "NOT_FOUND",
            "lookup of an unknown key: 200 NOT_FOUND", "%s %r" % (st, e))
    st, _, f = call(via, "/v1/records/%s/%s" % (SCOPE, "k" * 257))
    t.check(st == 400 and "key" in f.get("message", ""),
            "lookup of a 257-byte key: 400 naming key", "%s %r" % (st, f))
    st, _, g = call(via, "/v1/records/%s/bad%%zz" % SCOPE)
    t.check(st == 400 and f.get("applied") == "false",
            "bad percent-encoding: 400", "%s %r" % (st, g))
    st, _, s = call(via, "/v1/status")
    t.check(st == 200 and s.get("outcome") == "OK"
            and s.get("role") in ("LEADER", "FOLLOWER")
            and len(s.get("members", [])) == 3
            and "applied_index" in s and "config_voters" in s,
            "status: role, indexes, 3 members", "%s %r" % (st, s))


def same_names(t, what, http_answer, ctl_answer, but=()):
    """The HTTP answer has exactly the field names oncectl --json gives
    (but those of @but)."""
    hk = set(http_answer) if isinstance(http_answer, dict) else set()
    ck = set(ctl_answer.obj or {})
    hk -= set(but)
    ck -= set(but)
    t.check(hk == ck and hk, "%s: the same field names as oncectl --json"
            % what, "only HTTP %s, only oncectl %s"
            % (sorted(hk - ck), sorted(ck - hk)))


def check_same_as_oncectl(t, c, n):
    """One answer of each kind from both, on the same records."""
    key = "same-" + oc.rand_hex(4)
    st, _, a = claim(n.http_addr, key)
    r = c.claim(SCOPE, key, [n])
    same_names(t, "REPLAYED claim", claim(n.http_addr, key)[2], r)
    ikey = "same-i-" + oc.rand_hex(4)
    st, _, a = claim(n.http_addr, ikey, idempotent=True)
    r = c.claim(SCOPE, ikey, [n], "--idempotent")
    same_names(t, "IN_PROGRESS claim",
               claim(n.http_addr, ikey, idempotent=True)[2], r)
    r = c.ctl(["lookup", SCOPE, ikey], via=[n])
    same_names(t, "lookup",
               call(n.http_addr, "/v1/records/%s/%s" % (SCOPE, ikey))[2], r)
    r = c.ctl(["complete", SCOPE, ikey, "--owner-token", a["owner_token"],
               "--result", "r"], via=[n])
    same_names(t, "complete (a retry of it, COMPLETED)",
               call(n.http_addr, "/v1/complete",
                    {"scope": SCOPE, "key": ikey,
                     "owner_token": a["owner_token"], "result": "r"})[2], r)
    r = c.ctl(["status"], via=[n])
    same_names(t, "status", call(n.http_addr, "/v1/status")[2], r)
    r = c.claim(SCOPE, "k" * 300, [n])
    # oncectl refuses the key before sending (no request id yet); the
    # node's refusal names the request id it made, as for any error.
    same_names(t, "an INVALID_ARGUMENT error",
               claim(n.http_addr, "k" * 300)[2], r, but=("request_id",))


def check_refusals(t, via):
    st, _, a = claim(via, "x", colour="blue")
    t.check(st == 400 and a.get("error") == "INVALID_ARGUMENT"
            and "colour" in a.get("message", "")
            and a.get("applied") == "false",
            "unknown field: 400 naming it", "%s %r" % (st, a))
    st, _, b = call(via, "/v1/claim", raw=b"{not json")
    t.check(st == 400, "bad JSON: 400", "%s %r" % (st, b))
    st, _, c = claim(via, "x", request_id="abc")
    t.check(st == 400 and "request_id" in c.get("message", ""),
            "bad request_id: 400 naming it", "%s %r" % (st, c))
    st, _, d = call(via, "/v1/claim", {"scope": SCOPE})
    t.check(st == 400 and "key" in d.get("message", ""),
            "missing key: 400", "%s %r" % (st, d))
    st, _, e = claim(via, "x" * 300)
    t.check(st == 400 and "key" in e.get("message", ""),
            "a 300-byte key: 400 from the RPC's own check", "%s %r" % (st, e))
    st, _, f = call(via, "/v1/claim", {"scope": SCOPE, "key": "big",
                                       "execution_id": "e" * (256 << 10)})
    t.check(st == 413, "a body over 256 KiB: 413", "%s %r" % (st, f))
    st, _, g = call(via, "/v1/claim", {"scope": SCOPE, "key": "x"},
                    ctype="text/plain")
    t.check(st == 415, "text/plain body: 415", "%s %r" % (st, g))
    st, _, h = call(via, "/v1/claim", {"scope": SCOPE, "key": "x"},
                    ctype=None)
    t.check(st == 415, "no Content-Type: 415", "%s %r" % (st, h))
    st, _, i = call(via, "/v1/nothing")
    t.check(st == 404, "unknown path: 404", "%s %r" % (st, i))
    st, hd, j = call(via, "/v1/claim")
    t.check(st == 405 and hd.get("Allow") == "POST",
            "GET /v1/claim: 405 with Allow: POST", "%s %r %r" % (st, hd, j))
    st, hd, k = call(via, "/v1/status", {"x": 1})
    t.check(st == 405 and hd.get("Allow") == "GET",
            "POST /v1/status: 405 with Allow: GET", "%s %r" % (st, hd))


def check_pin(t, nodes, cid):
    """`cluster_id` in a POST body is the caller's pin: a node of another
    cluster refuses the call before proposing it, on the leader and through
    a follower, so nothing lands in a cluster its client would refuse."""
    t.require(len(cid) == 32, "answers carry the cluster id", repr(cid))
    other = "00" * 16 if cid != "00" * 16 else "11" * 16
    for n in nodes:
        key = "p-" + oc.rand_hex(4)
        st, _, a = claim(n.http_addr, key, cluster_id=other)
        t.check(st == 503 and a.get("error") == "FAILED_PRECONDITION"
                and a.get("applied") == "false"
                and "cluster id mismatch" in a.get("message", ""),
                "claim pinned to another cluster via %s: refused, not "
                "applied" % n.name, "%s %r" % (st, a))
        st, _, b = call(n.http_addr, "/v1/records/%s/%s" % (SCOPE, key))
        t.check(st == 200 and b.get("outcome") == "NOT_FOUND",
                "the refused claim left no record", "%s %r" % (st, b))
        st, _, c = claim(n.http_addr, key, cluster_id=cid.upper())
        t.check(st == 200 and c.get("outcome") == "ACCEPTED",
                "the same claim pinned to this cluster via %s: ACCEPTED"
                % n.name, "%s %r" % (st, c))


def scenario(t):
    # A longer election timeout than the harness's: the 504 case needs a
    # leader that still leads for a while after losing its quorum.
    os.environ["ONCE_TEST_ELECTION"] = "1500ms"
    c = oc.Cluster(t, "c", BASE, http=True)
    nodes = c.start_cluster(["n1", "n2", "n3"])
    leader = c.wait_leader(nodes)
    followers = [n for n in nodes if n is not leader]
    t.info("leader %s" % leader.name)

    nonce_key = check_nonce(t, leader.http_addr)
    idem_key = check_idempotent(t, leader.http_addr)
    check_lookup_status(t, leader.http_addr, nonce_key, idem_key)
    check_refusals(t, leader.http_addr)
    check_same_as_oncectl(t, c, leader)

    # through a follower: forwarded like the RPC
    f = followers[0]
    st, _, a = claim(f.http_addr, nonce_key)
    t.check(st == 200 and a.get("outcome") == "REPLAYED",
            "claim through follower %s: REPLAYED" % f.name, "%s %r" % (st, a))
    key = "f-" + oc.rand_hex(4)
    st, _, b = claim(f.http_addr, key)
    t.check(st == 200 and b.get("outcome") == "ACCEPTED",
            "new key through a follower: ACCEPTED", "%s %r" % (st, b))
    st, _, b2 = call(f.http_addr, "/v1/records/%s/%s" % (SCOPE, key))
    t.check(st == 200 and b2.get("outcome") == "FOUND",
            "lookup through a follower: FOUND", "%s %r" % (st, b2))
    check_pin(t, [leader, f], b.get("cluster_id", ""))

    # No quorum: the two followers killed by PID. The leader still leads
    # for an election timeout (1.5 s here): a claim it proposes cannot
    # commit, and its deadline makes the outcome unknown (504).
    for n in followers:
        n.kill9()
    ukey = "u-" + oc.rand_hex(4)
    st, h, u = claim(leader.http_addr, ukey, timeout="300ms")
    t.check(st == 504 and u.get("applied") == "unknown"
            and u.get("error") == "DEADLINE_EXCEEDED",
            "proposed without a quorum: 504, applied unknown",
            "%s %r" % (st, u))
    urid = u.get("request_id", "") if isinstance(u, dict) else ""
    t.check(len(urid) == 32, "the 504 names the request id for a retry",
            repr(u))
    # Once it stepped down: not applied, 503 with Retry-After.
    end = oc.time.time() + 15
    while oc.time.time() < end:
        st, _, s_ = call(leader.http_addr, "/v1/status")
        if st == 200 and s_.get("role") != "LEADER":
            break
        oc.time.sleep(0.1)
    t.check(st == 200 and s_.get("role") in ("FOLLOWER", "CANDIDATE"),
            "status answers without a quorum: no longer leader",
            "%s %r" % (st, s_))
    st, h, q = claim(leader.http_addr, "q-" + oc.rand_hex(4),
                     timeout="1500ms")
    t.check(st == 503 and h.get("Retry-After") == "1"
            and q.get("applied") == "false",
            "no leader: 503 with Retry-After, applied false",
            "%s %r %r" % (st, h, q))

    for n in followers:
        n.start()
    c.wait_leader(nodes)
    ok = None
    for _ in range(60):
        st, _, ok = claim(followers[0].http_addr, ukey, request_id=urid)
        if st == 200:
            break
        oc.time.sleep(0.25)
    t.check(st == 200 and ok.get("outcome") == "ACCEPTED"
            and ok.get("request_id") == urid,
            "quorum back: the retry of the unknown claim with its request "
            "id is ACCEPTED", "%s %r" % (st, ok))
    check_tls_node(t, nodes)


def tls_ctx(d, who=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(os.path.join(d, "ca.pem"))
    if who is not None:
        ctx.load_cert_chain(os.path.join(d, who + ".pem"),
                            os.path.join(d, who + ".key"))
    return ctx


def check_tls_node(t, nodes):
    """A node with TLS: the listener is HTTPS; /v1/ needs a certificate
    with the right (once_https.py has the rest), the health paths need
    none."""
    for n in nodes:
        n.stop()
    d = os.path.join(t.work, "certs")
    os.makedirs(d, exist_ok=True)
    script = os.path.join(os.environ.get("top_srcdir", "."), "scripts",
                          "make-certs.sh")
    for args in (["ca", d], ["client", d, "ops"],
                 ["node", d, "a", "127.0.0.1"]):
        subprocess.run(["sh", script] + args, check=True,
                       capture_output=True)
    # With TLS every caller needs a role (the access file): the node is a
    # member, ops (oncectl below) is admin.
    access = os.path.join(d, "access.json")
    with open(access, "w") as f:
        json.dump({"identities": [{"match": "dns:*.once.test", "role": "member"},
                                  {"match": "dns:ops", "role": "admin"}]}, f)
    c = oc.Cluster(t, "tls", BASE, http=True)
    c.node_extra = lambda n: [
        "--tls-cert", os.path.join(d, n.name + ".pem"),
        "--tls-key", os.path.join(d, n.name + ".key"),
        "--tls-ca", os.path.join(d, "ca.pem"), "--access", access]
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, "ops.pem"),
                   "--tls-key", os.path.join(d, "ops.key")]
    (a,) = c.start_cluster(["a"])
    st, _, r = claim(a.http_addr, "tls-" + oc.rand_hex(3), ctx=tls_ctx(d))
    t.check(st == 403 and r.get("error") == "PERMISSION_DENIED"
            and r.get("applied") == "false",
            "TLS node: POST /v1/claim without a client certificate 403, "
            "applied false", "%s %r" % (st, r))
    st, _, r = claim(a.http_addr, "tls-" + oc.rand_hex(3),
                     ctx=tls_ctx(d, "ops"))
    t.check(st == 200 and r.get("outcome") == "ACCEPTED",
            "TLS node: POST /v1/claim with the admin's certificate ACCEPTED",
            "%s %r" % (st, r))
    st, _, r = call(a.http_addr, "/v1/status", ctx=tls_ctx(d))
    t.check(st == 403, "TLS node: GET /v1/status without a certificate 403",
            "%s %r" % (st, r))
    try:
        st, _, r = call(a.http_addr, "/healthz", timeout=5)
    except OSError as e:
        st, r = None, str(e)
    t.check(st is None, "TLS node: plain HTTP gets no answer", "%s %r"
            % (st, r))
    st, _, r = call(a.http_addr, "/healthz", ctx=tls_ctx(d))
    t.check(st == 200, "TLS node: HTTPS /healthz without a certificate 200",
            "%s %r" % (st, r))
    r = c.claim(SCOPE, "tls-" + oc.rand_hex(3), [a])
    t.check(r.accepted, "TLS node: the client port serves with a "
            "certificate", r.describe())


if __name__ == "__main__":
    oc.main("once-http-api", scenario)
