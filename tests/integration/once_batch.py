#!/usr/bin/env python3
"""once_batch.py: the batch claim (ClaimBatch; once_claim_batch through
`oncectl session`'s "claim batch", and POST /v1/claims with an array) over
real clusters (docs/design.md §5, docs/oncectl.md, docs/http-api.md).

  a. order: a batch with a key twice answers ACCEPTED ... REPLAYED, one
     answer per item in the request's order, the REPLAYED one naming the
     first item's request id; sent through a follower only (forwarded);
  b. per item refusals: an item whose ttl is over the cluster's max_ttl
     is INVALID_ARGUMENT alone, the items around it ACCEPTED;
  c. quotas per item: with `quota set tenant-q* --max-records 2`, a batch
     of four new tenant-q keys and one other key answers ACCEPTED twice,
     RESOURCE_EXHAUSTED twice, and ACCEPTED for the other scope;
  d. request-id retry per item: the same batch sent again with the same
     request ids answers each item ACCEPTED with retry true; an item with
     a new request id for a claimed key is REPLAYED;
  e. bounds: 4,096 items go through in one call; 4,097 are refused whole
     (INVALID_ARGUMENT, exit 2) without a round trip;
  f. HTTP: POST /v1/claims with an array answers 200 with one object per
     item, in order (ACCEPTED, REPLAYED), and a bad item refuses the array;
  h. an answer bigger than a frame: 18 IDEMPOTENT keys completed with 64 KiB
     results, claimed again in one batch, are 18 DUPLICATEs with their
     results (over 1 MiB of answers: the leader answers the items past its
     992 KiB bound UNKNOWN, and libonce sends those again alone with their
     request ids);
  g. with TLS, a tenant's batch through a follower: its own scope's items
     ACCEPTED, the other tenant's scope PERMISSION_DENIED per item (the
     leader authorizes each item as the forwarded caller), and the refused
     item raises once_permission_denied_total by one across the nodes
     (scraped over HTTPS with the monitor's certificate).
"""

import base64
import json
import os
import sys
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oncecluster as oc  # noqa: E402
import oncehttp as oh  # noqa: E402


def item(scope, key, **kw):
    d = {"scope": scope, "key": key, "ttl": "10m"}
    d.update(kw)
    return d


def batch(s, items, timeout="10s"):
    return s.call({"cmd": "claim batch", "items": items, "timeout": timeout},
                  timeout=60)


def outcomes(r):
    return [i.get("outcome") or i.get("error") for i in r.get("items", [])]


def order(t, s):
    p = oc.rand_hex(4)
    r = batch(s, [item("b", p + "-1"), item("b", p + "-2"),
                  item("b", p + "-1"), item("b", p + "-3")])
    got = outcomes(r)
    t.check(got == ["ACCEPTED", "ACCEPTED", "REPLAYED", "ACCEPTED"]
            and r.rc == oc.RC_OK,
            "a: a key twice in one batch: ACCEPTED, then REPLAYED, in order "
            "(through a follower)", "%s %s" % (got, r.describe()))
    items = r.get("items", [])
    t.check(len(items) == 4 and items[2].get("first_request_id")
            == items[0].get("request_id")
            and items[0].get("request_id") != items[2].get("request_id"),
            "a: the REPLAYED item names the first item's request id",
            json.dumps(items)[:600])


def refusals(t, s):
    p = oc.rand_hex(4)
    r = batch(s, [item("b", p + "-1"), item("b", p + "-2", ttl="2h"),
                  item("b", p + "-3")])
    items = r.get("items", [])
    t.check(outcomes(r) == ["ACCEPTED", "INVALID_ARGUMENT", "ACCEPTED"]
            and len(items) == 3 and items[1].get("applied") == "false"
            and "ttl" in json.dumps(items[1])
            and items[1].get("exit") == oc.RC_USAGE,
            "b: an item over max_ttl is INVALID_ARGUMENT alone, the others "
            "ACCEPTED", json.dumps(items)[:800])
    t.check(r.rc == oc.RC_USAGE,
            "b: the batch's exit is the first undecided item's (2)",
            r.describe())


def quotas(t, c, s, via):
    r = c.ctl(["quota", "set", "tenant-q*", "--max-records", "2"], via=via)
    t.require(r.is_outcome("OK"), "c: quota set tenant-q* --max-records 2",
              r.describe())
    p = oc.rand_hex(4)
    r = batch(s, [item("tenant-q", p + "-%d" % i) for i in range(4)]
              + [item("other", p)])
    got = [i.get("outcome") for i in r.get("items", [])]
    t.check(got == ["ACCEPTED", "ACCEPTED", "RESOURCE_EXHAUSTED",
                    "RESOURCE_EXHAUSTED", "ACCEPTED"],
            "c: a quota of 2 records: items 3 and 4 RESOURCE_EXHAUSTED, "
            "another scope's item ACCEPTED", "%s %s" % (got, r.describe()))


def retries(t, s):
    p = oc.rand_hex(4)
    rids = [oc.rand_hex(16) for _ in range(3)]
    items = [item("b", p + "-%d" % i, request_id=rids[i]) for i in range(3)]
    r1 = batch(s, items)
    r2 = batch(s, items)
    t.check(outcomes(r1) == ["ACCEPTED"] * 3
            and all(i.get("retry") is False for i in r1.get("items", [])),
            "d: first send: ACCEPTED x3, retry false", r1.describe())
    t.check(outcomes(r2) == ["ACCEPTED"] * 3
            and all(i.get("retry") is True for i in r2.get("items", []))
            and [i.get("request_id") for i in r2.get("items", [])] == rids,
            "d: the same items with the same request ids: ACCEPTED, retry "
            "true, each", r2.describe())
    r3 = batch(s, [item("b", p + "-0"), items[1]])
    t.check(outcomes(r3) == ["REPLAYED", "ACCEPTED"]
            and r3.get("items")[1].get("retry") is True,
            "d: a new request id for a claimed key REPLAYED beside a retried "
            "item", r3.describe())


def bounds(t, s):
    p = oc.rand_hex(4)
    r = batch(s, [item("b", "%s-%d" % (p, i)) for i in range(4096)],
              timeout="30s")
    got = outcomes(r)
    t.check(len(got) == 4096 and got.count("ACCEPTED") == 4096,
            "e: 4,096 items in one call: 4,096 ACCEPTED",
            "%d answers, %d ACCEPTED" % (len(got), got.count("ACCEPTED")))
    r = batch(s, [item("b", "%s-x%d" % (p, i)) for i in range(4097)])
    t.check(r.rc == oc.RC_USAGE and r.error == "INVALID_ARGUMENT"
            and "4096" in json.dumps(r.obj),
            "e: 4,097 items: INVALID_ARGUMENT, exit 2", r.describe()[:400])


def post(url, body):
    req = urllib.request.Request(url, data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def http(t, F):
    p = oc.rand_hex(4)
    url = "http://%s/v1/claims" % F.http_addr
    st, obj = post(url, json.dumps([
        {"scope": "h", "key": p + "-1", "ttl": "10m"},
        {"scope": "h", "key": p + "-1", "ttl": "10m"},
        {"scope": "h", "key": p + "-2", "ttl": "2h"}]))
    got = [o.get("outcome") or o.get("error") for o in obj] \
        if isinstance(obj, list) else obj
    t.check(st == 200 and got == ["ACCEPTED", "REPLAYED", "INVALID_ARGUMENT"],
            "f: POST /v1/claims [3 items] on a follower: 200, ACCEPTED, "
            "REPLAYED, INVALID_ARGUMENT", "%s %s" % (st, obj))
    st, obj = post(url, json.dumps([{"scope": "h", "key": p + "-3",
                                     "ttl": "10m"}, {"scope": "h"}]))
    t.check(st == 400 and isinstance(obj, dict)
            and obj.get("error") == "INVALID_ARGUMENT"
            and "[1]" in obj.get("message", ""),
            "f: an array with a bad item: 400 naming item [1]",
            "%s %s" % (st, obj))
    st, obj = post(url, "[]")
    t.check(st == 400, "f: an empty array: 400", "%s %s" % (st, obj))


def big_answers(t, s, F):
    p = oc.rand_hex(4)
    big = base64.b64encode(os.urandom(65536)).decode()
    keys = ["%s-%d" % (p, i) for i in range(18)]
    r = batch(s, [item("big", k, idempotent=True, lease="30s") for k in keys])
    toks = [i.get("owner_token") for i in r.get("items", [])]
    t.require(outcomes(r) == ["ACCEPTED"] * 18 and all(toks),
              "h: 18 idempotent keys ACCEPTED with owner tokens", r.describe())
    for k, tok in zip(keys, toks):
        c = s.call({"cmd": "complete", "scope": "big", "key": k,
                    "owner_token": tok, "result_b64": big})
        t.require(c.is_outcome("COMPLETED"), "h: complete %s with 64 KiB" % k,
                  c.describe()[:300])
    r = batch(s, [item("big", k, idempotent=True, lease="30s") for k in keys],
              timeout="20s")
    items = r.get("items", [])
    t.check(outcomes(r) == ["DUPLICATE"] * 18
            and all(i.get("result_b64") == big for i in items),
            "h: the same 18 keys in one batch: 18 DUPLICATEs with their 64 KiB "
            "results (over a frame: the last ones answered in a second call)",
            "%s" % outcomes(r))
    # The HTTP API does not retry: the node's own bound shows there.
    st, obj = post("http://%s/v1/claims" % F.http_addr, json.dumps(
        [{"scope": "big", "key": k, "idempotent": True, "lease": "30s",
          "ttl": "10m"}
         for k in keys]))
    got = [o.get("outcome") or o.get("error") for o in obj] \
        if isinstance(obj, list) else obj
    ndup = got.count("DUPLICATE") if isinstance(got, list) else 0
    t.check(st == 200 and isinstance(got, list) and len(got) == 18
            and 12 <= ndup < 18 and got[:ndup] == ["DUPLICATE"] * ndup
            and all(o.get("error") == "UNKNOWN" and o.get("applied") ==
                    "unknown" for o in obj[ndup:]),
            "h: POST /v1/claims of the 18: the items past the answer's bound "
            "UNKNOWN (applied unknown), the first %d DUPLICATE" % ndup,
            "%s %s" % (st, got))


def plain(t):
    c = oc.Cluster(t, "batch", 9750, settings={"max-ttl": "1h"}, http=True)
    nodes = c.start_cluster(["a", "b", "c"])
    L = c.wait_leader(nodes)
    F = [n for n in nodes if n is not L]
    s = c.session(F)
    order(t, s)
    refusals(t, s)
    quotas(t, c, s, [L])
    retries(t, s)
    bounds(t, s)
    big_answers(t, s, F[0])
    http(t, F[0])
    s.close()


def tls(t):
    d = os.path.join(t.work, "certs")
    oc.make_certs(d, oc.TENANT_CERTS)
    with open(os.path.join(d, "access.json"), "w") as f:
        json.dump(oc.tenant_access(), f)
    c = oc.Cluster(t, "batchtls", 9750, http=True)
    c.node_extra = lambda n: [
        "--tls-cert", os.path.join(d, n.name + ".pem"),
        "--tls-key", os.path.join(d, n.name + ".key"),
        "--tls-ca", os.path.join(d, "ca.pem"),
        "--access", os.path.join(d, "access.json")]
    c.ctl_flags = ["--tls-ca", os.path.join(d, "ca.pem"),
                   "--tls-cert", os.path.join(d, "ops.pem"),
                   "--tls-key", os.path.join(d, "ops.key")]
    nodes = c.start_cluster(["a", "b"])
    L = c.wait_leader(nodes)
    F = [n for n in nodes if n is not L]
    keep = t.child_env
    t.child_env = dict(keep)
    t.child_env.update({
        "ONCE_TLS_CA": os.path.join(d, "ca.pem"),
        "ONCE_TLS_CERT": os.path.join(d, "tenant-a.pem"),
        "ONCE_TLS_KEY": os.path.join(d, "tenant-a.key")})
    try:
        s = c.session(F)
    finally:
        t.child_env = keep
    def denied():
        total = 0.0
        for n in nodes:
            m = oh.scrape(n.http_addr, oh.tls_context(d, "prom"))
            if m is None:
                return None
            total += m.get("once_permission_denied_total", 0)
        return total

    p = oc.rand_hex(4)
    before = denied()
    r = batch(s, [item("tenant-a", p), item("tenant-b", p),
                  item("tenant-a/x", p)])
    items = r.get("items", [])
    t.check(outcomes(r) == ["ACCEPTED", "PERMISSION_DENIED", "ACCEPTED"]
            and len(items) == 3 and items[1].get("applied") == "false"
            and "tenant-b" in json.dumps(items[1]),
            "g: tenant A's batch through a follower: its scopes ACCEPTED, "
            "tenant-b's item PERMISSION_DENIED alone", json.dumps(items)[:800])
    after = denied()
    t.check(before is not None and after == before + 1,
            "g: the refused item counts once in once_permission_denied_total",
            "before %r after %r" % (before, after))
    s.close()


def scenario(t):
    plain(t)
    tls(t)


if __name__ == "__main__":
    oc.main("once-batch", scenario)
