'use strict';
// The API's newer features against fake nodes: claimBatch (its checks, its
// body, its per-item answers and errors, the pin), maxUses and sliding
// (their bounds, their fields), and the answer fields uses / usesLeft /
// sliding / servedBy.

const test = require('node:test');
const assert = require('node:assert');
const {
  Client, OnceError, InvalidArgumentError, PermissionDeniedError, NotAppliedError, OutcomeUnknownError,
  ClusterMismatchError,
} = require('../..');
const { fakeNode, accepted, errorAnswer, OTHER_CLUSTER_ID } = require('../helpers');

async function refusedBeforeSending(node, fn, pattern) {
  const before = node.requests.length;
  await assert.rejects(fn, (e) => {
    assert.ok(e instanceof InvalidArgumentError, `want InvalidArgumentError, got ${e && e.name}: ${e && e.message}`);
    assert.strictEqual(e.applied, 'false');
    assert.match(e.message, pattern);
    return true;
  });
  assert.strictEqual(node.requests.length, before, 'a request was sent for a bad argument');
}

// A node that accepts every item of a batch (and every single claim).
function acceptAll(r) {
  if (r.url === '/v1/claims') return { body: r.body.items.map((it) => accepted(it.request_id)) };
  return { body: accepted(r.body.request_id) };
}

test('maxUses and sliding: refused out of their documented bounds, before sending', async () => {
  const node = await fakeNode(acceptAll);
  const c = new Client({ nodes: [node.url] });
  const cases = [
    [() => c.claim('s', 'k', { maxUses: 0 }), /maxUses: 0: must be an integer 1\.\.64/],
    [() => c.claim('s', 'k', { maxUses: 65 }), /maxUses: 65: must be an integer 1\.\.64/],
    [() => c.claim('s', 'k', { maxUses: 2.5 }), /maxUses/],
    [() => c.claim('s', 'k', { maxUses: '2' }), /maxUses: string/],
    [() => c.claim('s', 'k', { maxUses: 2, idempotent: true }), /maxUses: only for nonces/],
    [() => c.claim('s', 'k', { sliding: true }), /sliding: only for idempotent/],
    [() => c.claim('s', 'k', { sliding: 'yes', idempotent: true }), /sliding: must be true or false/],
    [() => c.claim('s', 'k', { sliding: true, idempotent: true, ts: Date.now(), window: '5m' }), /sliding: only with ttl/],
  ];
  for (const [fn, re] of cases) await refusedBeforeSending(node, fn, re);
  await node.close();
});

test('maxUses and sliding become max_uses and sliding in the body', async () => {
  const node = await fakeNode(acceptAll);
  const c = new Client({ nodes: [node.url] });
  await c.claim('s', 'a', { maxUses: 64 });
  await c.claim('s', 'b', { maxUses: 1 });
  await c.claim('s', 'c', { idempotent: true, sliding: true, ttl: '1h' });
  await c.claim('s', 'd', { idempotent: true, sliding: false });
  const [a, b, s1, s2] = node.requests.map((r) => r.body);
  assert.strictEqual(a.max_uses, 64);
  assert.strictEqual(b.max_uses, undefined, 'one use is the default: not sent (a schema-2 cluster takes it)');
  assert.strictEqual(s1.sliding, true);
  assert.strictEqual(s1.ttl, 3600000);
  assert.strictEqual(s2.sliding, undefined);
  await node.close();
});

test('the answer fields of N-use nonces, sliding records and lookups', async () => {
  const node = await fakeNode((r) => {
    if (r.method === 'GET') {
      return { body: { ...accepted('ab'.repeat(16), { outcome: 'FOUND', max_uses: 2, uses: 2, uses_left: 0, served_by: 'bc38860fb16c771b' }), request_id: undefined } };
    }
    return { body: accepted(r.body.request_id, r.body.idempotent ? { kind: 'IDEMPOTENT', state: 'PENDING', sliding: true } : { max_uses: 2, uses: 1, uses_left: 1 }) };
  });
  const c = new Client({ nodes: [node.url] });
  const n = await c.claim('s', 'k', { maxUses: 2 });
  assert.deepStrictEqual([n.maxUses, n.uses, n.usesLeft, n.sliding], [2, 1, 1, false]);
  const i = await c.claim('s', 'i', { idempotent: true, sliding: true });
  assert.strictEqual(i.sliding, true);
  assert.strictEqual(i.maxUses, undefined);
  const l = await c.lookup('s', 'k');
  assert.strictEqual(l.servedBy, 'bc38860fb16c771b');
  assert.deepStrictEqual([l.maxUses, l.uses, l.usesLeft], [2, 2, 0]);
  await node.close();
});

test('claimBatch refuses bad batches and bad items before sending, naming the item', async () => {
  const node = await fakeNode(acceptAll);
  const c = new Client({ nodes: [node.url] });
  const ok = { scope: 's', key: 'k' };
  const cases = [
    [() => c.claimBatch([]), /items: 0 claims, must be 1\.\.4096/],
    [() => c.claimBatch(new Array(4097).fill(ok)), /items: 4097 claims/],
    [() => c.claimBatch(ok), /items: must be an array/],
    [() => c.claimBatch([ok, 'k']), /items\[1\]: must be an object/],
    [() => c.claimBatch([ok, { scope: 's', key: '' }]), /items\[1\]: key: 0 bytes/],
    [() => c.claimBatch([ok, ok, { ...ok, maxUses: 65 }]), /items\[2\]: maxUses: 65/],
    [() => c.claimBatch([{ ...ok, timeoutMs: 5 }]), /items\[0\]: claim: unknown option "timeoutMs"/],
    [() => c.claimBatch([{ ...ok, colour: 'blue' }]), /items\[0\]: claim: unknown option "colour"/],
    [() => c.claimBatch([ok], { ttl: '1h' }), /claimBatch: unknown option "ttl"/],
    // 4,096 keys of 256 bytes: more than the listener's 1 MiB.
    [() => c.claimBatch(Array.from({ length: 4096 }, (_, i) => ({ scope: 's', key: `${i}`.padEnd(256, 'k') }))),
      /at most 1048576 \(split the batch\)/],
  ];
  for (const [fn, re] of cases) await refusedBeforeSending(node, fn, re);
  await node.close();
});

test('claimBatch: one body with every item, one request id each; answers in order', async () => {
  const node = await fakeNode(acceptAll);
  const c = new Client({ nodes: [node.url], timeoutMs: 2000 });
  const rid = 'CD'.repeat(16);
  const res = await c.claimBatch([
    { scope: 's', key: 'a', ttl: '1m' },
    { scope: 's', key: 'b', maxUses: 3, requestId: rid },
    { scope: 's', key: 'c', idempotent: true, sliding: true, lease: '30s', payloadHash: 'AB' },
  ]);
  assert.strictEqual(node.requests.length, 1);
  const { url, body } = node.requests[0];
  assert.strictEqual(url, '/v1/claims');
  assert.deepStrictEqual(Object.keys(body).sort(), ['items', 'timeout']);
  assert.ok(body.timeout > 0 && body.timeout <= 2000);
  assert.deepStrictEqual(body.items.map((it) => it.key), ['a', 'b', 'c']);
  assert.strictEqual(body.items[0].ttl, 60000);
  assert.strictEqual(body.items[1].request_id, rid.toLowerCase());
  assert.strictEqual(body.items[1].max_uses, 3);
  assert.deepStrictEqual([body.items[2].idempotent, body.items[2].sliding, body.items[2].lease, body.items[2].payload_hash], [true, true, 30000, 'ab']);
  assert.strictEqual(new Set(body.items.map((it) => it.request_id)).size, 3);
  assert.strictEqual(res.length, 3);
  res.forEach((a, i) => {
    assert.ok(!(a instanceof OnceError));
    assert.strictEqual(a.outcome, 'ACCEPTED');
    assert.strictEqual(a.requestId, body.items[i].request_id);
    assert.strictEqual(a.node, node.url);
  });
  // Pinned by the answer: the next batch carries the pin.
  await c.claimBatch([{ scope: 's', key: 'd' }]);
  assert.strictEqual(node.requests[1].body.cluster_id, c.clusterId);
  await node.close();
});

test('claimBatch: an item refused alone is an error entry of its class, the others answers', async () => {
  const node = await fakeNode((r) => ({
    body: r.body.items.map((it, i) => {
      if (i === 1) return errorAnswer('PERMISSION_DENIED', 'false', it.request_id);
      if (i === 2) return errorAnswer('RESOURCE_EXHAUSTED', 'false', it.request_id);
      if (i === 3) return errorAnswer('UNKNOWN', 'unknown', it.request_id);
      if (i === 4) return errorAnswer('INVALID_ARGUMENT', 'false', it.request_id);
      return accepted(it.request_id);
    }),
  }));
  const c = new Client({ nodes: [node.url] });
  const res = await c.claimBatch(['a', 'b', 'c', 'd', 'e', 'f'].map((key) => ({ scope: 's', key })));
  const ids = node.requests[0].body.items.map((it) => it.request_id);
  assert.strictEqual(res[0].outcome, 'ACCEPTED');
  assert.ok(res[1] instanceof PermissionDeniedError);
  assert.ok(res[2] instanceof NotAppliedError);
  assert.strictEqual(res[2].code, 'RESOURCE_EXHAUSTED');
  assert.ok(res[3] instanceof OutcomeUnknownError);
  assert.ok(res[4] instanceof InvalidArgumentError);
  assert.strictEqual(res[5].outcome, 'ACCEPTED');
  for (const i of [1, 2, 3, 4]) {
    assert.strictEqual(res[i].index, i);
    assert.strictEqual(res[i].requestId, ids[i]);
    assert.strictEqual(res[i].applied, i === 3 ? 'unknown' : 'false');
    assert.match(res[i].message, new RegExp(`^items\\[${i}\\]: `));
  }
  assert.strictEqual(node.requests.length, 1, 'an item error is not a reason to retry the batch');
  await node.close();
});

test('claimBatch: a whole-call failure is retried with the same ids, then rejects with them', async () => {
  let n = 0;
  const node = await fakeNode((r) => {
    n++;
    if (n === 1) return { status: 504, body: errorAnswer('DEADLINE_EXCEEDED', 'unknown') };
    return { body: r.body.items.map((it) => accepted(it.request_id, { retry: true })) };
  });
  const c = new Client({ nodes: [node.url], timeoutMs: 3000 });
  const res = await c.claimBatch([{ scope: 's', key: 'a' }, { scope: 's', key: 'b' }]);
  assert.strictEqual(node.requests.length, 2);
  assert.deepStrictEqual(node.requests[0].body.items, node.requests[1].body.items);
  assert.ok(res.every((a) => a.retry === true));
  await node.close();

  const down = await fakeNode(() => ({ status: 503, body: errorAnswer('UNAVAILABLE', 'false') }));
  const d = new Client({ nodes: [down.url], timeoutMs: 300 });
  await assert.rejects(d.claimBatch([{ scope: 's', key: 'a' }]), (e) => {
    assert.ok(e instanceof NotAppliedError, e.name);
    assert.deepStrictEqual(e.requestIds, [down.requests[0].body.items[0].request_id]);
    return true;
  });
  await down.close();
});

test('claimBatch: an answer of the wrong length is perhaps applied and retried, never used', async () => {
  let n = 0;
  const node = await fakeNode((r) => {
    n++;
    const all = r.body.items.map((it) => accepted(it.request_id));
    return { body: n === 1 ? all.slice(1) : all };
  });
  const c = new Client({ nodes: [node.url], timeoutMs: 3000 });
  const res = await c.claimBatch([{ scope: 's', key: 'a' }, { scope: 's', key: 'b' }]);
  assert.strictEqual(res.length, 2);
  assert.strictEqual(node.requests.length, 2);
  assert.deepStrictEqual(node.requests[0].body.items, node.requests[1].body.items);
  await node.close();
});

test('claimBatch: another cluster\'s answer is ClusterMismatchError', async () => {
  const node = await fakeNode((r) => ({
    body: r.body.items.map((it) => accepted(it.request_id, { cluster_id: OTHER_CLUSTER_ID })),
  }));
  const c = new Client({ nodes: [node.url], clusterId: 'ab'.repeat(16) });
  await assert.rejects(c.claimBatch([{ scope: 's', key: 'a' }]), (e) => {
    assert.ok(e instanceof ClusterMismatchError, e.name);
    assert.strictEqual(e.actual, OTHER_CLUSTER_ID);
    assert.strictEqual(e.applied, 'false');
    return true;
  });
  assert.strictEqual(node.requests[0].body.cluster_id, 'ab'.repeat(16));
  assert.strictEqual(node.requests.length, 1);
  await node.close();
});

test('claimBatch: the items a real cluster answered decode to answers and an error entry', async () => {
  const rec = JSON.parse(require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'fixtures', 'answers.json'), 'utf8'));
  const by = Object.fromEntries(rec.map((r) => [r.name, r.raw]));
  const items = [by.claim_batch_accepted, by.claim_batch_replayed, by.error_batch_item_invalid];
  const node = await fakeNode((r) => ({ body: items.map((o, i) => ({ ...o, request_id: r.body.items[i].request_id })) }));
  const c = new Client({ nodes: [node.url] });
  const res = await c.claimBatch([{ scope: 's', key: 'a' }, { scope: 's', key: 'a' }, { scope: 's', key: 'b', ttl: '8000h' }]);
  assert.deepStrictEqual(res.slice(0, 2).map((a) => a.outcome), ['ACCEPTED', 'REPLAYED']);
  assert.ok(res[2] instanceof InvalidArgumentError);
  assert.strictEqual(res[2].index, 2);
  assert.match(res[2].message, /items\[2\]: INVALID_ARGUMENT \(applied false\).*ttl/);
  assert.strictEqual(c.clusterId, by.claim_batch_accepted.cluster_id);
  await node.close();
});

test('claimBatch: a decision object instead of the array is malformed: retried, never used', async () => {
  let n = 0;
  const node = await fakeNode((r) => {
    n++;
    if (n === 1) return { body: accepted(r.body.items[0].request_id) };
    return { body: r.body.items.map((it) => accepted(it.request_id)) };
  });
  const c = new Client({ nodes: [node.url], timeoutMs: 3000 });
  const res = await c.claimBatch([{ scope: 's', key: 'a' }]);
  assert.ok(Array.isArray(res));
  assert.strictEqual(res[0].outcome, 'ACCEPTED');
  assert.strictEqual(node.requests.length, 2);
  await node.close();
});
