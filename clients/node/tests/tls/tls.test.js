'use strict';
// Against a 3-node cluster with TLS (clients/testing/with_cluster.py
// --tls): HTTPS with client certificates; a tenant's certificate is
// allowed its scopes only (docs/server.md, "Authorization").

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const {
  Client, Outcome, PermissionDeniedError, DefiniteError, NotAppliedError, InvalidArgumentError,
} = require('../..');
const { clusterEnv, uniq } = require('../helpers');

const env = clusterEnv();
const skip = env === null || !env.ca ? 'needs with_cluster.py --tls (ONCE_TEST_CA)' : false;
// PEM files for one, PEM content for the other: both forms of tls.
const tenant = skip ? null : new Client({ nodes: env.http, tls: { caFile: env.ca, certFile: env.tenantCert, keyFile: env.tenantKey } });
const admin = skip ? null : new Client({
  nodes: env.http,
  tls: { ca: fs.readFileSync(env.ca), cert: fs.readFileSync(env.adminCert, 'utf8'), key: fs.readFileSync(env.adminKey) },
});

test('the nodes are https', { skip }, () => {
  for (const n of env.http) assert.match(n, /^https:\/\//);
});

test('a tenant certificate: its scope is allowed through every node', { skip }, async () => {
  const k = uniq('t');
  const a = await tenant.claim('tenant-a', k, { idempotent: true, payloadHash: '01' });
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  assert.match(tenant.clusterId, /^[0-9a-f]{32}$/);
  const c = await tenant.complete('tenant-a', k, a.ownerToken, { result: 'ok' });
  assert.strictEqual(c.outcome, Outcome.COMPLETED);
  for (const n of env.http) {
    const one = new Client({ nodes: [n], tls: { caFile: env.ca, certFile: env.tenantCert, keyFile: env.tenantKey } });
    const d = await one.claim('tenant-a', k, { idempotent: true, payloadHash: '01' });
    assert.strictEqual(d.outcome, Outcome.DUPLICATE, n);
    assert.strictEqual(d.result.toString(), 'ok');
    one.close();
  }
  const l = await tenant.lookup('tenant-a', k);
  assert.strictEqual(l.outcome, Outcome.FOUND);
  const sub = await tenant.claim('tenant-a/orders', uniq('t'));
  assert.strictEqual(sub.outcome, Outcome.ACCEPTED);
  const v = await tenant.idempotent('tenant-a', uniq('h'), () => ({ paid: true }));
  assert.deepStrictEqual(v, { paid: true });
});

test('a tenant certificate: another scope is PERMISSION_DENIED, not retried', { skip }, async () => {
  for (const call of [
    () => tenant.claim('tenant-b', uniq('t')),
    () => tenant.lookup('tenant-b', 'k'),
    () => tenant.complete('tenant-b', 'k', '1:2:0', { result: 'x' }),
    () => tenant.claim('tenant-ab', uniq('t')),
  ]) {
    const t0 = Date.now();
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof PermissionDeniedError, `${e.name}: ${e.message}`);
      assert.ok(e instanceof DefiniteError);
      assert.strictEqual(e.code, 'PERMISSION_DENIED');
      assert.strictEqual(e.applied, 'false');
      assert.strictEqual(e.httpStatus, 403);
      assert.match(e.message, /tenant-/);
      return true;
    });
    assert.ok(Date.now() - t0 < 2000, 'final at once');
  }
});

test('a tenant\'s batch: another scope\'s item alone is PERMISSION_DENIED', { skip }, async () => {
  const k = uniq('t');
  const res = await tenant.claimBatch([
    { scope: 'tenant-a', key: k },
    { scope: 'tenant-b', key: k },
    { scope: 'tenant-a', key: k },
  ]);
  assert.strictEqual(res[0].outcome, Outcome.ACCEPTED);
  assert.ok(res[1] instanceof PermissionDeniedError, `${res[1].name}: ${res[1].message}`);
  assert.strictEqual(res[1].index, 1);
  assert.strictEqual(res[1].applied, 'false');
  assert.strictEqual(res[2].outcome, Outcome.REPLAYED);
  assert.strictEqual((await admin.lookup('tenant-b', k)).outcome, Outcome.NOT_FOUND, 'the denied item left nothing');
});

test('an admin certificate: any scope and status', { skip }, async () => {
  const a = await admin.claim('tenant-b', uniq('t'));
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  const st = await admin.status({ node: env.http[1] });
  assert.strictEqual(st.outcome, Outcome.OK);
  assert.strictEqual(st.members.length, 3);
});

test('no client certificate: PERMISSION_DENIED', { skip }, async () => {
  const anon = new Client({ nodes: env.http, tls: { caFile: env.ca } });
  await assert.rejects(anon.claim('tenant-a', uniq('t')), PermissionDeniedError);
  anon.close();
});

test('a node certificate that does not chain to the CA: refused before anything is sent', { skip }, async () => {
  // The tenant's certificate as the only CA: the nodes' do not chain to it.
  const wrong = new Client({ nodes: env.http, timeoutMs: 500, tls: { caFile: env.tenantCert, certFile: env.tenantCert, keyFile: env.tenantKey } });
  await assert.rejects(wrong.claim('tenant-a', uniq('t')), (e) => {
    assert.ok(e instanceof NotAppliedError, `${e.name}: ${e.message}`);
    assert.strictEqual(e.applied, 'false');
    return true;
  });
  wrong.close();
  assert.throws(() => new Client({ nodes: ['http://127.0.0.1:1'], tls: { caFile: env.ca } }), InvalidArgumentError);
});
