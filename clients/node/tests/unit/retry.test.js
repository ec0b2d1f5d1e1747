'use strict';
// Request ids, node selection, the cluster-id pin and deadlines, against
// fake nodes that answer as onced does (docs/http-api.md, "HTTP status by
// class") or fail on purpose.

const test = require('node:test');
const assert = require('node:assert');
const {
  Client, NotAppliedError, OutcomeUnknownError, DefiniteError, InvalidArgumentError, PermissionDeniedError,
  ClusterMismatchError, newRequestId,
} = require('../..');
const { fakeNode, deadUrl, accepted, errorAnswer, CLUSTER_ID, OTHER_CLUSTER_ID } = require('../helpers');

// The fakes' sockets do not keep the process alive (helpers.js).
function fake(handler) {
  return fakeNode(handler);
}

test('newRequestId: 128 random bits, fresh each time', () => {
  const ids = new Set();
  for (let i = 0; i < 1000; i++) {
    const id = newRequestId();
    assert.match(id, /^[0-9a-f]{32}$/);
    ids.add(id);
  }
  assert.strictEqual(ids.size, 1000);
});

test('a fresh request id per call', async () => {
  const a = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [a.url] });
  const x = await c.claim('s', 'k1');
  const y = await c.claim('s', 'k1');
  assert.notStrictEqual(x.requestId, y.requestId);
  assert.strictEqual(a.requests[0].body.request_id, x.requestId);
  assert.strictEqual(a.requests[1].body.request_id, y.requestId);
});

test('not applied (503): the same call moves to the next node with the same request id', async () => {
  const a = await fake((r) => ({ status: 503, body: errorAnswer('UNAVAILABLE', 'false', r.body.request_id) }));
  const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [a.url, b.url], timeoutMs: 3000 });
  const ans = await c.claim('s', 'k');
  assert.strictEqual(ans.outcome, 'ACCEPTED');
  assert.strictEqual(a.requests.length, 1);
  assert.strictEqual(b.requests.length, 1);
  assert.strictEqual(a.requests[0].body.request_id, b.requests[0].body.request_id);
  assert.strictEqual(ans.node, b.url);
  // The node that answered is where the next call starts.
  await c.claim('s', 'k2');
  assert.strictEqual(a.requests.length, 1);
  assert.strictEqual(b.requests.length, 2);
});

test('a refused connection is not applied: the next node, same request id', async () => {
  const dead = await deadUrl();
  const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [dead, b.url] });
  const ans = await c.claim('s', 'k', { requestId: 'ab'.repeat(16) });
  assert.strictEqual(ans.requestId, 'ab'.repeat(16));
  assert.strictEqual(b.requests[0].body.request_id, 'ab'.repeat(16));
});

test('outcome unknown (504, a cut connection): retried with the same request id only', async () => {
  let n = 0;
  const a = await fake((r) => {
    n++;
    if (n === 1) return { status: 504, body: errorAnswer('UNKNOWN', 'unknown', r.body.request_id) };
    if (n === 2) return { destroy: true };
    return { body: accepted(r.body.request_id, { retry: true }) };
  });
  const c = new Client({ nodes: [a.url], timeoutMs: 3000 });
  const ans = await c.claim('s', 'k');
  assert.strictEqual(ans.retry, true);
  assert.strictEqual(a.requests.length, 3);
  const ids = new Set(a.requests.map((r) => r.body.request_id));
  assert.strictEqual(ids.size, 1, 'every retry carries the same request id');
});

test('once unknown, the final error stays unknown and names the request id', async () => {
  let n = 0;
  const a = await fake((r) => {
    n++;
    if (n === 1) return { status: 504, body: errorAnswer('UNKNOWN', 'unknown', r.body.request_id) };
    return { status: 503, body: errorAnswer('UNAVAILABLE', 'false', r.body.request_id) };
  });
  const c = new Client({ nodes: [a.url], timeoutMs: 400 });
  const t0 = Date.now();
  await assert.rejects(c.claim('s', 'k'), (e) => {
    assert.ok(e instanceof OutcomeUnknownError, e.name);
    assert.strictEqual(e.applied, 'unknown');
    assert.strictEqual(e.requestId, a.requests[0].body.request_id);
    assert.match(e.message, /deadline of 400 ms/);
    return true;
  });
  const took = Date.now() - t0;
  assert.ok(took >= 300 && took < 1500, `the deadline was kept: ${took} ms`);
  assert.ok(a.requests.length >= 2);
  assert.strictEqual(new Set(a.requests.map((r) => r.body.request_id)).size, 1);
});

test('only not-applied attempts: NotAppliedError at the deadline', async () => {
  const a = await fake((r) => ({ status: 503, body: errorAnswer('UNAVAILABLE', 'false', r.body.request_id) }));
  const c = new Client({ nodes: [a.url], timeoutMs: 300 });
  await assert.rejects(c.claim('s', 'k'), (e) => e instanceof NotAppliedError && e.applied === 'false' && e.code === 'UNAVAILABLE');
});

test('a node that swallows the request: the attempt ends at half the deadline, unknown', async () => {
  const a = await fake(() => ({ hang: true }));
  const b = await fake((r) => ({ body: accepted(r.body.request_id, { retry: true }) }));
  const c = new Client({ nodes: [a.url, b.url], timeoutMs: 4000 });
  const t0 = Date.now();
  const ans = await c.claim('s', 'k');
  const took = Date.now() - t0;
  assert.ok(took >= 1800 && took < 3500, `${took} ms`);
  assert.strictEqual(ans.node, b.url);
  assert.strictEqual(a.requests[0].body.request_id, b.requests[0].body.request_id);
  // The node was told to answer before we stop waiting.
  assert.ok(a.requests[0].body.timeout < 2000);
});

test('definite errors are final: no retry', async () => {
  for (const [status, err, cls] of [[400, 'INVALID_ARGUMENT', InvalidArgumentError], [403, 'PERMISSION_DENIED', PermissionDeniedError],
    [503, 'FAILED_PRECONDITION', DefiniteError]]) {
    const a = await fake((r) => ({ status, body: errorAnswer(err, 'false', r.body.request_id) }));
    const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
    const c = new Client({ nodes: [a.url, b.url] });
    await assert.rejects(c.claim('s', 'k'), (e) => e instanceof cls && e instanceof DefiniteError && e.code === err && e.httpStatus === status);
    assert.strictEqual(a.requests.length, 1);
    assert.strictEqual(b.requests.length, 0, `${err} was retried elsewhere`);
  }
});

test('the state machine refusing a full table is not retried', async () => {
  const a = await fake((r) => ({ status: 503, body: { ...errorAnswer('RESOURCE_EXHAUSTED', 'false', r.body.request_id), outcome: 'RESOURCE_EXHAUSTED' } }));
  const c = new Client({ nodes: [a.url] });
  await assert.rejects(c.claim('s', 'k'), (e) => e instanceof NotAppliedError && e.code === 'RESOURCE_EXHAUSTED');
  assert.strictEqual(a.requests.length, 1);
});

test('the cluster id is pinned at the first answer; another cluster is refused', async () => {
  let cid = CLUSTER_ID;
  const a = await fake((r) => ({ body: accepted(r.body.request_id, { cluster_id: cid }) }));
  const c = new Client({ nodes: [a.url] });
  assert.strictEqual(c.clusterId, null);
  await c.claim('s', 'k');
  assert.strictEqual(c.clusterId, CLUSTER_ID);
  cid = OTHER_CLUSTER_ID;
  await assert.rejects(c.claim('s', 'k2'), (e) => {
    assert.ok(e instanceof ClusterMismatchError);
    assert.ok(e instanceof DefiniteError);
    assert.strictEqual(e.expected, CLUSTER_ID);
    assert.strictEqual(e.actual, OTHER_CLUSTER_ID);
    assert.match(e.message, /cluster id mismatch/);
    return true;
  });
  assert.strictEqual(a.requests.length, 2, 'a mismatch is never retried');
  assert.strictEqual(c.clusterId, CLUSTER_ID, 'the pin does not move');
  assert.strictEqual(a.requests[0].body.cluster_id, undefined, 'an unpinned write carries no pin');
  assert.strictEqual(a.requests[1].body.cluster_id, CLUSTER_ID, 'a pinned write carries the pin');
});

test('a node that refuses the pin is a cluster mismatch, not applied, never retried', async () => {
  const a = await fake((r) => ({ status: 503, body: errorAnswer('FAILED_PRECONDITION', 'false', r.body.request_id,
    { cluster_id: '', message: 'cluster id mismatch: pinned x' }) }));
  const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [a.url, b.url], clusterId: CLUSTER_ID });
  await assert.rejects(c.claim('s', 'k'), (e) => {
    assert.ok(e instanceof ClusterMismatchError, `${e.name}: ${e.message}`);
    assert.strictEqual(e.applied, 'false');
    return true;
  });
  assert.strictEqual(a.requests[0].body.cluster_id, CLUSTER_ID);
  assert.strictEqual(b.requests.length, 0);
});

test('a given cluster id is pinned from the start, errors and other nodes too', async () => {
  const a = await fake((r) => ({ status: 503, body: errorAnswer('UNAVAILABLE', 'false', r.body && r.body.request_id) }));
  const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [a.url, b.url], clusterId: OTHER_CLUSTER_ID });
  await assert.rejects(c.claim('s', 'k'), ClusterMismatchError);
  assert.strictEqual(b.requests.length, 0);
  await assert.rejects(c.lookup('s', 'k'), ClusterMismatchError);
});

test('a decision without a cluster id, or of another request id, is malformed', async () => {
  let n = 0;
  const a = await fake((r) => {
    n++;
    if (n === 1) return { body: { ...accepted(r.body.request_id), cluster_id: '' } };
    if (n === 2) return { body: accepted('ff'.repeat(16)) };
    return { body: accepted(r.body.request_id) };
  });
  const c = new Client({ nodes: [a.url] });
  const ans = await c.claim('s', 'k');
  assert.strictEqual(a.requests.length, 3);
  assert.strictEqual(ans.requestId, a.requests[0].body.request_id);
});

test('an AbortSignal ends the call; before sending it is not applied', async () => {
  const a = await fake(() => ({ hang: true }));
  const c = new Client({ nodes: [a.url], timeoutMs: 10000 });
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 150);
  const t0 = Date.now();
  await assert.rejects(c.claim('s', 'k', { signal: ac.signal }), (e) => e instanceof OutcomeUnknownError && e.code === 'CANCELLED');
  assert.ok(Date.now() - t0 < 2000);
  const done = new AbortController();
  done.abort();
  await assert.rejects(c.claim('s', 'k', { signal: done.signal }), (e) => e instanceof NotAppliedError && e.code === 'CANCELLED');
  assert.strictEqual(a.requests.length, 1);
});

test('reads are never unknown; status of one node does not move', async () => {
  const a = await fake(() => ({ destroy: true }));
  const c = new Client({ nodes: [a.url], timeoutMs: 300 });
  await assert.rejects(c.lookup('s', 'k'), (e) => e instanceof NotAppliedError);
  const b = await fake(() => ({ body: { outcome: 'OK', role: 'LEADER', members: [], config_voters: [], cluster_id: CLUSTER_ID } }));
  const c2 = new Client({ nodes: [a.url, b.url], timeoutMs: 2000 });
  const before = a.requests.length;
  await assert.rejects(c2.status({ node: a.url }), NotAppliedError);
  assert.strictEqual(a.requests.length, before + 1, 'status of one node: one attempt');
  assert.strictEqual(b.requests.length, 0);
  const st = await c2.status();
  assert.strictEqual(st.role, 'LEADER');
});

test('a node without the API (404 text) is skipped; not applied', async () => {
  const a = await fake(() => ({ status: 404, body: 'not found\n' }));
  const b = await fake((r) => ({ body: accepted(r.body.request_id) }));
  const c = new Client({ nodes: [a.url, b.url] });
  await c.claim('s', 'k');
  const c2 = new Client({ nodes: [a.url], timeoutMs: 200 });
  await assert.rejects(c2.claim('s', 'k'), (e) => e instanceof NotAppliedError && e.httpStatus === 404);
});

test('an AbortSignal during the backoff between attempts ends the call there', async () => {
  const ac = new AbortController();
  // 10 ms after the second answer the client sleeps its 40 ms backoff.
  const a = await fake((r, n) => {
    if (n === 2) setTimeout(() => ac.abort(), 10);
    return { status: 503, body: errorAnswer('UNAVAILABLE', 'false', r.body.request_id) };
  });
  const c = new Client({ nodes: [a.url], timeoutMs: 10000 });
  await assert.rejects(c.claim('s', 'k', { signal: ac.signal }), (e) => e instanceof NotAppliedError && e.code === 'CANCELLED');
  assert.strictEqual(a.requests.length, 2, 'nothing sent after the abort');
});
