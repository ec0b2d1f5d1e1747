'use strict';
// Bad arguments are refused before any network call, and good ones become
// the request bodies of docs/http-api.md.

const test = require('node:test');
const assert = require('node:assert');
const { Client, InvalidArgumentError } = require('../..');
const { fakeNode, accepted, CLUSTER_ID } = require('../helpers');

let fake;
let client;

// Plain top-level tests share one fake node (no hooks: Node 18's root-level
// hooks are not to be relied on). The fake's sockets do not keep the
// process alive.
test('setup: a fake node', async () => {
  fake = await fakeNode((r) => {
    if (r.method === 'GET') return { body: { outcome: 'NOT_FOUND', log_time_ms: 1, cluster_id: CLUSTER_ID, node_id: '01', boot_id: '02' } };
    if (r.url === '/v1/complete') return { body: { ...accepted(r.body.request_id), outcome: 'COMPLETED', result_b64: r.body.result_b64 } };
    if (r.url === '/v1/release') return { body: { ...accepted(r.body.request_id), outcome: 'RELEASED' } };
    return { body: accepted(r.body.request_id) };
  });
  client = new Client({ nodes: [fake.url], timeoutMs: 2000 });
});

async function refused(fn, pattern) {
  const before = fake.requests.length;
  await assert.rejects(fn, (e) => {
    assert.ok(e instanceof InvalidArgumentError, `want InvalidArgumentError, got ${e && e.name}: ${e && e.message}`);
    assert.strictEqual(e.applied, 'false');
    assert.strictEqual(e.code, 'INVALID_ARGUMENT');
    if (pattern) assert.match(e.message, pattern);
    return true;
  });
  assert.strictEqual(fake.requests.length, before, 'a request was sent for a bad argument');
}

test('the constructor refuses bad options', () => {
  const bad = [
    undefined, {}, { nodes: [] }, { nodes: 'http://127.0.0.1:1' },
    { nodes: Array.from({ length: 65 }, (_, i) => `127.0.0.1:${7000 + i}`) },
    { nodes: ['ftp://127.0.0.1:1'] }, { nodes: ['http://127.0.0.1'] },
    { nodes: ['http://127.0.0.1:7121/v1'] }, { nodes: ['not a url at all'] }, { nodes: [''] },
    { nodes: ['127.0.0.1:7121'], clusterId: 'abc' }, { nodes: ['127.0.0.1:7121'], timeoutMs: 0 },
    { nodes: ['127.0.0.1:7121'], timeoutMs: '2h' }, { nodes: ['127.0.0.1:7121'], colour: 'blue' },
    { nodes: ['http://127.0.0.1:7121'], tls: { ca: 'x' } }, { nodes: ['127.0.0.1:7121'], tls: 'yes' },
    { nodes: ['https://127.0.0.1:7121'], tls: { cert: 'only a cert' } },
    { nodes: ['https://127.0.0.1:7121'], tls: { caFile: '/nonexistent/ca.pem' } },
  ];
  for (const o of bad) {
    assert.throws(() => new Client(o), InvalidArgumentError, JSON.stringify(o));
  }
  const c = new Client({ nodes: ['127.0.0.1:7121', 'http://127.0.0.1:7122/'], clusterId: CLUSTER_ID.toUpperCase(), timeoutMs: '3s' });
  assert.deepStrictEqual(c.nodes, ['http://127.0.0.1:7121', 'http://127.0.0.1:7122']);
  assert.strictEqual(c.clusterId, CLUSTER_ID);
});

test('claim refuses bad arguments before any network call', async () => {
  const cases = [
    [() => client.claim('', 'k'), /scope: 0 bytes/],
    [() => client.claim('s'.repeat(129), 'k'), /scope: 129 bytes/],
    [() => client.claim('a\0b', 'k'), /scope: contains a NUL/],
    [() => client.claim(7, 'k'), /scope: must be a string/],
    [() => client.claim('s', ''), /key: 0 bytes/],
    [() => client.claim('s', 'k'.repeat(257)), /key: 257 bytes/],
    [() => client.claim('s', 'é'.repeat(129)), /key: 258 bytes/],
    [() => client.claim('s', '\ud800'), /lone surrogate/],
    [() => client.claim('s', 'k', { requestId: 'xyz' }), /requestId/],
    [() => client.claim('s', 'k', { requestId: '0'.repeat(31) }), /requestId/],
    [() => client.claim('s', 'k', { ttl: 0 }), /ttl: must be > 0/],
    [() => client.claim('s', 'k', { ttl: '5x' }), /ttl/],
    [() => client.claim('s', 'k', { ttl: -1 }), /ttl/],
    [() => client.claim('s', 'k', { ttl: 1.5 }), /ttl/],
    [() => client.claim('s', 'k', { ttl: '366000h' }), /ttl: over 365 days/],
    [() => client.claim('s', 'k', { ts: Date.now() }), /ts and window/],
    [() => client.claim('s', 'k', { window: '5m' }), /ts and window/],
    [() => client.claim('s', 'k', { ts: Date.now(), window: 0 }), /window: must be > 0/],
    [() => client.claim('s', 'k', { ts: -5, window: '5m' }), /ts/],
    [() => client.claim('s', 'k', { ts: '12a', window: '5m' }), /ts/],
    [() => client.claim('s', 'k', { payloadHash: 'ab' }), /only for idempotent/],
    [() => client.claim('s', 'k', { lease: '30s' }), /only for idempotent/],
    [() => client.claim('s', 'k', { idempotent: true, payloadHash: 'abc' }), /payloadHash/],
    [() => client.claim('s', 'k', { idempotent: true, payloadHash: 'zz' }), /payloadHash/],
    [() => client.claim('s', 'k', { idempotent: true, payloadHash: 'ab'.repeat(65) }), /65 bytes/],
    [() => client.claim('s', 'k', { idempotent: true, lease: 'soon' }), /lease/],
    [() => client.claim('s', 'k', { executionId: 'e'.repeat(129) }), /executionId: 129 bytes/],
    [() => client.claim('s', 'k', { idempotent: 'yes' }), /idempotent/],
    [() => client.claim('s', 'k', { colour: 'blue' }), /unknown option "colour"/],
    [() => client.claim('s', 'k', 'opts'), /options must be an object/],
    [() => client.claim('s', 'k', { timeoutMs: 0 }), /timeoutMs/],
    [() => client.claim('s', 'k', { timeoutMs: 3600001 }), /timeoutMs/],
    [() => client.claim('s', 'k', { signal: {} }), /signal/],
  ];
  for (const [fn, re] of cases) await refused(fn, re);
});

test('complete, release, lookup, status refuse bad arguments before any network call', async () => {
  const cases = [
    [() => client.complete('s', 'k', 'x'), /ownerToken/],
    [() => client.complete('s', 'k', '1:2'), /ownerToken/],
    [() => client.complete('s', 'k', '4294967296:1:0'), /ownerToken/],
    [() => client.complete('s', 'k', '1:18446744073709551616:0'), /ownerToken/],
    [() => client.complete('s', 'k', 7), /ownerToken/],
    [() => client.complete('s', 'k', '1:2:0', { result: Buffer.alloc(65537) }), /result: 65537 bytes/],
    [() => client.complete('s', 'k', '1:2:0', { result: 42 }), /result/],
    [() => client.complete('', 'k', '1:2:0'), /scope/],
    [() => client.complete('s', 'k', '1:2:0', { terminal: true }), /unknown option "terminal"/],
    [() => client.release('s', 'k', '1:2:0', { error: 'no' }), /only with terminal/],
    [() => client.release('s', 'k', '1:2:0', { terminal: true, error: 'e'.repeat(1025) }), /error: 1025 bytes/],
    [() => client.release('s', 'k', '1:2:0', { terminal: 'true' }), /terminal/],
    [() => client.release('s', 'k', 'token'), /ownerToken/],
    [() => client.lookup('s', ''), /key/],
    [() => client.lookup('s', 'k', { ttl: '1s' }), /unknown option "ttl"/],
    [() => client.status({ node: 'http://127.0.0.1:1' }), /not one of the client's nodes/],
    [() => client.status({ timeoutMs: -1 }), /timeoutMs/],
    [() => client.idempotent('s', 'k', 'not a function'), /fn: must be a function/],
    [() => client.idempotent('s', 'k', () => 1, { waitMs: 'long' }), /waitMs/],
    [() => client.idempotent('s', 'k', () => 1, { lease: 'x' }), /lease/],
    [() => client.idempotent('s', 'k', () => 1, { payloadHash: 'q' }), /payloadHash/],
    [() => client.idempotent('s', 'k', () => 1, { terminal: 'maybe' }), /terminal/],
    [() => client.idempotent('', 'k', () => 1), /scope/],
    [() => client.idempotent('s', 'k', () => 1, { ttl: '1s' }), /unknown option "ttl"/],
  ];
  for (const [fn, re] of cases) await refused(fn, re);
});

test('the calls never throw synchronously: a bad argument is a rejection', () => {
  const p = client.claim('', '');
  assert.ok(p instanceof Promise);
  return assert.rejects(p, InvalidArgumentError);
});

test('good arguments become the documented request bodies', async () => {
  const n0 = fake.requests.length;
  const rid = 'AABBCCDDEEFF00112233445566778899';
  await client.claim('pay', 'o/1 x', {
    idempotent: true, payloadHash: 'ABCD', lease: '30s', executionId: 'pod-7', requestId: rid, ttl: '10m',
  });
  await client.claim('pay', 'n', { ts: 1796620721235, window: '5m' });
  await client.claim('pay', 'n2', { ts: 18446744073709551615n, window: 1000 });
  await client.complete('pay', 'o', '1:18:0', { result: 'héllo' });
  await client.complete('pay', 'o', '1:18:0', { result: Buffer.from([0, 255, 1]) });
  await client.release('pay', 'o', '1:18:0', { terminal: true, error: 'declined' });
  await client.release('pay', 'o', '1:18:0');
  await client.lookup('pay/x', 'a/b c%');
  const [c1, c2, c3, co1, co2, r1, r2, l] = fake.requests.slice(n0);
  assert.strictEqual(c1.url, '/v1/claim');
  assert.strictEqual(c1.contentType, 'application/json');
  assert.deepStrictEqual({ ...c1.body, timeout: undefined }, {
    scope: 'pay', key: 'o/1 x', request_id: rid.toLowerCase(), idempotent: true, execution_id: 'pod-7',
    ttl: 600000, payload_hash: 'abcd', lease: 30000, timeout: undefined,
  });
  assert.ok(Number.isInteger(c1.body.timeout) && c1.body.timeout > 0 && c1.body.timeout <= 2000);
  assert.match(c2.body.request_id, /^[0-9a-f]{32}$/);
  assert.strictEqual(c2.body.ts, 1796620721235);
  assert.strictEqual(c2.body.window, 300000);
  assert.strictEqual(c2.body.idempotent, undefined);
  assert.strictEqual(c3.body.ts, '18446744073709551615');
  assert.strictEqual(co1.url, '/v1/complete');
  assert.strictEqual(co1.body.owner_token, '1:18:0');
  assert.strictEqual(Buffer.from(co1.body.result_b64, 'base64').toString('utf8'), 'héllo');
  assert.deepStrictEqual([...Buffer.from(co2.body.result_b64, 'base64')], [0, 255, 1]);
  assert.strictEqual(r1.url, '/v1/release');
  assert.strictEqual(r1.body.terminal, true);
  assert.strictEqual(r1.body.error, 'declined');
  assert.strictEqual(r2.body.terminal, undefined);
  assert.strictEqual(l.method, 'GET');
  assert.strictEqual(l.url, '/v1/records/pay%2Fx/a%2Fb%20c%25');
});
