'use strict';
// Against a real 3-node cluster (clients/testing/with_cluster.py): every
// outcome, batches, N-use nonces, sliding retention, served_by, the
// idempotent helper, a leader killed mid-call, two processes
// racing on one key, and a cluster re-created empty under a pinned client.
// The tests run in this order; the destructive ones come last.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const {
  Client, Outcome, OnceError, InvalidArgumentError, ClusterMismatchError, OutcomeError, FencedError, InProgressError,
  NotAppliedError,
} = require('../..');
const { clusterEnv, control, uniq, sleep } = require('../helpers');

const env = clusterEnv();
const skip = env === null || env.ca ? 'needs with_cluster.py without --tls (ONCE_TEST_HTTP)' : false;
const S = uniq('node-suite');
const client = skip ? null : new Client({ nodes: env.http, timeoutMs: 10000 });

test('nonces: ACCEPTED, REPLAYED through another node, ACCEPTED retry with the same request id', { skip }, async () => {
  const k = uniq('n');
  const a = await client.claim(S, k, { executionId: 'pod-1' });
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  assert.strictEqual(a.retry, false);
  assert.strictEqual(a.kind, 'NONCE');
  assert.strictEqual(a.state, 'SEEN');
  assert.strictEqual(a.firstRequestId, a.requestId);
  assert.match(a.clusterId, /^[0-9a-f]{32}$/);
  assert.strictEqual(client.clusterId, a.clusterId, 'pinned at the first answer');
  // Through each node: a follower forwards to the leader.
  for (const n of env.http) {
    const other = new Client({ nodes: [n] });
    const r = await other.claim(S, k);
    assert.strictEqual(r.outcome, Outcome.REPLAYED, n);
    assert.strictEqual(r.firstRequestId, a.requestId);
    assert.notStrictEqual(r.requestId, a.requestId);
    assert.strictEqual(r.node, n);
  }
  const again = await client.claim(S, k, { requestId: a.requestId });
  assert.strictEqual(again.outcome, Outcome.ACCEPTED);
  assert.strictEqual(again.retry, true);
  const l = await client.lookup(S, k);
  assert.strictEqual(l.outcome, Outcome.FOUND);
  assert.strictEqual(l.attemptsTotal, 4);
  assert.strictEqual(l.attempts.at(-1).retry, true);
  assert.strictEqual(l.attempts.at(-1).requestId, a.requestId);
});

test('signed timestamps: ACCEPTED in the window, STALE before it, FUTURE after it', { skip }, async () => {
  const now = Date.now();
  const ok = await client.claim(S, uniq('ts'), { ts: now, window: '5m' });
  assert.strictEqual(ok.outcome, Outcome.ACCEPTED);
  assert.ok(ok.expiresMs >= now + 5 * 60000, 'kept at least ts + max_window');
  const stale = await client.claim(S, uniq('ts'), { ts: now - 3600000, window: '5m' });
  assert.strictEqual(stale.outcome, Outcome.STALE);
  assert.ok(stale.reason);
  const future = await client.claim(S, uniq('ts'), { ts: String(now + 3600000), window: 300000 });
  assert.strictEqual(future.outcome, Outcome.FUTURE);
});

test('idempotency keys: ACCEPTED, IN_PROGRESS, CONFLICT, COMPLETED, DUPLICATE, FOUND', { skip }, async () => {
  const k = uniq('o');
  const a = await client.claim(S, k, { idempotent: true, payloadHash: 'ab12', lease: '30s', executionId: 'job-1' });
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  assert.match(a.ownerToken, /^\d+:\d+:\d+$/);
  assert.strictEqual(a.ownerAttempt, 1);
  assert.strictEqual(a.state, 'PENDING');
  assert.ok(a.leaseExpiresMs - a.logTimeMs > 29000);
  const ip = await client.claim(S, k, { idempotent: true, payloadHash: 'AB12' });
  assert.strictEqual(ip.outcome, Outcome.IN_PROGRESS);
  assert.ok(ip.retryAfterMs > 0 && ip.retryAfterMs <= 30000);
  assert.strictEqual(ip.ownerToken, undefined);
  const cf = await client.claim(S, k, { idempotent: true, payloadHash: 'ffff' });
  assert.strictEqual(cf.outcome, Outcome.CONFLICT);
  const nonce = await client.claim(S, k);
  assert.strictEqual(nonce.outcome, Outcome.CONFLICT, 'another kind');
  const result = Buffer.from([0x7b, 0x00, 0xff, 0x7d]);
  const c = await client.complete(S, k, a.ownerToken, { result });
  assert.strictEqual(c.outcome, Outcome.COMPLETED);
  assert.strictEqual(c.retry, false);
  assert.ok(c.result.equals(result));
  const c2 = await client.complete(S, k, a.ownerToken, { result: 'ignored' });
  assert.strictEqual(c2.outcome, Outcome.COMPLETED);
  assert.strictEqual(c2.retry, true);
  assert.ok(c2.result.equals(result), 'the stored result is kept');
  const d = await client.claim(S, k, { idempotent: true, payloadHash: 'ab12' });
  assert.strictEqual(d.outcome, Outcome.DUPLICATE);
  assert.ok(d.result.equals(result));
  const l = await client.lookup(S, k);
  assert.strictEqual(l.outcome, Outcome.FOUND);
  assert.strictEqual(l.state, 'COMPLETED');
  assert.ok(l.result.equals(result));
  assert.strictEqual(l.attempts[0].executionId, '');
  const nf = await client.lookup(S, uniq('absent'));
  assert.strictEqual(nf.outcome, Outcome.NOT_FOUND);
  // Percent-encoded parts: a key with a slash and a space.
  const odd = `a/b ${uniq('c')}%`;
  await client.claim(S, odd);
  assert.strictEqual((await client.lookup(S, odd)).outcome, Outcome.FOUND);
});

test('release: RELEASED then a takeover; the old token gets NOT_OWNER; FAILED for good', { skip }, async () => {
  const k = uniq('r');
  const a = await client.claim(S, k, { idempotent: true });
  const r = await client.release(S, k, a.ownerToken);
  assert.strictEqual(r.outcome, Outcome.RELEASED);
  assert.strictEqual(r.state, 'RELEASED');
  const r2 = await client.release(S, k, a.ownerToken);
  assert.strictEqual(r2.outcome, Outcome.RELEASED);
  assert.strictEqual(r2.retry, true);
  const b = await client.claim(S, k, { idempotent: true });
  assert.strictEqual(b.outcome, Outcome.ACCEPTED);
  assert.strictEqual(b.ownerAttempt, 2);
  assert.notStrictEqual(b.ownerToken, a.ownerToken);
  const no = await client.complete(S, k, a.ownerToken, { result: 'late' });
  assert.strictEqual(no.outcome, Outcome.NOT_OWNER);
  const rn = await client.release(S, k, a.ownerToken);
  assert.strictEqual(rn.outcome, Outcome.NOT_OWNER);
  const f = await client.release(S, k, b.ownerToken, { terminal: true, error: 'card declined' });
  assert.strictEqual(f.outcome, Outcome.FAILED);
  assert.strictEqual(f.storedError, 'card declined');
  const fc = await client.claim(S, k, { idempotent: true });
  assert.strictEqual(fc.outcome, Outcome.FAILED);
  assert.strictEqual(fc.storedError, 'card declined');
  const cc = await client.complete(S, k, b.ownerToken, { result: 'x' });
  assert.strictEqual(cc.outcome, Outcome.CONFLICT);
  const gone = await client.complete(S, uniq('absent'), b.ownerToken);
  assert.strictEqual(gone.outcome, Outcome.NOT_FOUND);
  const gone2 = await client.release(S, uniq('absent'), b.ownerToken);
  assert.strictEqual(gone2.outcome, Outcome.NOT_FOUND);
});

test('a lapsed lease: the next claim takes over, the late owner is fenced', { skip }, async () => {
  const k = uniq('lease');
  const a = await client.claim(S, k, { idempotent: true, lease: '300ms' });
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  await sleep(600);
  const b = await client.claim(S, k, { idempotent: true });
  assert.strictEqual(b.outcome, Outcome.ACCEPTED);
  assert.strictEqual(b.ownerAttempt, 2);
  const late = await client.complete(S, k, a.ownerToken, { result: 'late' });
  assert.strictEqual(late.outcome, Outcome.NOT_OWNER);
  const l = await client.lookup(S, k);
  assert.strictEqual(l.state, 'PENDING', 'nothing was overwritten');
});

test('status: one node\'s view; the cluster refuses a bound with INVALID_ARGUMENT', { skip }, async () => {
  for (const n of env.http) {
    const st = await client.status({ node: n });
    assert.strictEqual(st.outcome, Outcome.OK);
    assert.strictEqual(st.node, n);
    assert.strictEqual(st.members.length, 3);
    assert.strictEqual(st.clusterId, client.clusterId);
    assert.ok(['LEADER', 'FOLLOWER'].includes(st.role), st.role);
  }
  await assert.rejects(client.claim(S, uniq('big'), { ttl: '8000h' }), (e) => {
    assert.ok(e instanceof InvalidArgumentError);
    assert.strictEqual(e.httpStatus, 400);
    assert.strictEqual(e.applied, 'false');
    assert.match(e.message, /ttl/);
    return true;
  });
});

test('batch: a key twice is ACCEPTED then REPLAYED, in order; an item over a bound is refused alone', { skip }, async () => {
  const k = uniq('b');
  const o = uniq('bo');
  const big = uniq('big');
  const res = await client.claimBatch([
    { scope: S, key: k, executionId: 'batch-1' },
    { scope: S, key: k },
    { scope: S, key: o, idempotent: true, lease: '30s' },
    { scope: S, key: big, ttl: '8000h' },
    { scope: S, key: o, idempotent: true },
  ]);
  assert.strictEqual(res.length, 5);
  assert.strictEqual(res[0].outcome, Outcome.ACCEPTED);
  assert.strictEqual(res[0].retry, false);
  assert.strictEqual(res[1].outcome, Outcome.REPLAYED);
  assert.strictEqual(res[1].firstRequestId, res[0].requestId);
  assert.notStrictEqual(res[1].requestId, res[0].requestId);
  assert.strictEqual(res[2].outcome, Outcome.ACCEPTED);
  assert.match(res[2].ownerToken, /^\d+:\d+:\d+$/);
  assert.ok(res[3] instanceof InvalidArgumentError, `${res[3].name}: ${res[3].message}`);
  assert.ok(res[3] instanceof OnceError);
  assert.strictEqual(res[3].index, 3);
  assert.strictEqual(res[3].applied, 'false');
  assert.match(res[3].message, /ttl/);
  assert.match(res[3].requestId, /^[0-9a-f]{32}$/);
  assert.strictEqual(res[4].outcome, Outcome.IN_PROGRESS, 'the item after it saw the owner of item 2');
  for (const a of [res[0], res[1], res[2], res[4]]) assert.strictEqual(a.clusterId, client.clusterId);
  // The batch's decisions are the cluster's: single calls see them.
  const single = await client.claim(S, k);
  assert.strictEqual(single.outcome, Outcome.REPLAYED);
  assert.strictEqual(single.firstRequestId, res[0].requestId);
  assert.strictEqual((await client.lookup(S, big)).outcome, Outcome.NOT_FOUND, 'the refused item left nothing');
  // The same item again with its request id: a retry, ACCEPTED retry=true.
  const again = await client.claimBatch([{ scope: S, key: k, requestId: res[0].requestId }]);
  assert.strictEqual(again[0].outcome, Outcome.ACCEPTED);
  assert.strictEqual(again[0].retry, true);
  // Through each node (a follower forwards the whole batch to the leader).
  for (const n of env.http) {
    const kn = uniq('bn');
    const r = await new Client({ nodes: [n] }).claimBatch([{ scope: S, key: kn }, { scope: S, key: kn }]);
    assert.deepStrictEqual(r.map((a) => a.outcome), [Outcome.ACCEPTED, Outcome.REPLAYED], n);
    assert.strictEqual(r[0].node, n);
  }
});

test('a 2-use nonce: ACCEPTED (uses 1, left 1), ACCEPTED (uses 2, left 0), then REPLAYED', { skip }, async () => {
  const k = uniq('m');
  const a1 = await client.claim(S, k, { maxUses: 2 });
  assert.strictEqual(a1.outcome, Outcome.ACCEPTED);
  assert.deepStrictEqual([a1.maxUses, a1.uses, a1.usesLeft], [2, 1, 1]);
  const a2 = await client.claim(S, k, { maxUses: 2 });
  assert.strictEqual(a2.outcome, Outcome.ACCEPTED);
  assert.deepStrictEqual([a2.maxUses, a2.uses, a2.usesLeft], [2, 2, 0]);
  assert.notStrictEqual(a2.requestId, a1.requestId);
  const r = await client.claim(S, k, { maxUses: 2 });
  assert.strictEqual(r.outcome, Outcome.REPLAYED);
  assert.strictEqual(r.usesLeft, 0);
  // A retry of the second use is that use again, not a third.
  const retry = await client.claim(S, k, { maxUses: 2, requestId: a2.requestId });
  assert.strictEqual(retry.outcome, Outcome.ACCEPTED);
  assert.strictEqual(retry.retry, true);
  const l = await client.lookup(S, k);
  assert.deepStrictEqual([l.outcome, l.maxUses, l.uses, l.usesLeft], [Outcome.FOUND, 2, 2, 0]);
  // The first claim fixed it: another value is CONFLICT.
  const k2 = uniq('m');
  assert.strictEqual((await client.claim(S, k2, { maxUses: 3 })).outcome, Outcome.ACCEPTED);
  assert.strictEqual((await client.claim(S, k2, { maxUses: 2 })).outcome, Outcome.CONFLICT);
  // In one batch: the same three answers, in order.
  const k3 = uniq('m');
  const b = await client.claimBatch([1, 2, 3].map(() => ({ scope: S, key: k3, maxUses: 2 })));
  assert.deepStrictEqual(b.map((a) => [a.outcome, a.uses, a.usesLeft]),
    [[Outcome.ACCEPTED, 1, 1], [Outcome.ACCEPTED, 2, 0], [Outcome.REPLAYED, 2, 0]]);
  // Out of the documented bounds: refused by the client, nothing sent.
  for (const bad of [0, 65, 1.5]) {
    await assert.rejects(client.claim(S, uniq('m'), { maxUses: bad }), (e) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match(e.message, /maxUses: .*must be an integer 1\.\.64/);
      assert.strictEqual(e.httpStatus, undefined, 'refused before any request');
      return true;
    });
  }
  await assert.rejects(client.claim(S, uniq('m'), { maxUses: 2, idempotent: true }), /maxUses: only for nonces/);
});

test('sliding retention: the answers say so, and a DUPLICATE moves the expiry', { skip }, async () => {
  const k = uniq('sl');
  const a = await client.claim(S, k, { idempotent: true, sliding: true, ttl: '1h' });
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
  assert.strictEqual(a.sliding, true);
  assert.strictEqual((await client.complete(S, k, a.ownerToken, { result: 'r' })).outcome, Outcome.COMPLETED);
  await sleep(50);
  const d = await client.claim(S, k, { idempotent: true, sliding: true, ttl: '1h' });
  assert.strictEqual(d.outcome, Outcome.DUPLICATE);
  assert.strictEqual(d.sliding, true);
  assert.ok(d.logTimeMs > a.logTimeMs);
  assert.strictEqual(d.expiresMs, d.logTimeMs + 3600000, 'moved to the DUPLICATE\'s log time + ttl');
  assert.ok(d.expiresMs > a.expiresMs);
  const l = await client.lookup(S, k);
  assert.strictEqual(l.sliding, true);
  assert.strictEqual(l.expiresMs, d.expiresMs);
  const plain = await client.claim(S, uniq('sl'), { idempotent: true, ttl: '1h' });
  assert.strictEqual(plain.sliding, false);
  await assert.rejects(client.claim(S, uniq('sl'), { sliding: true, ttl: '1h' }), /sliding: only for idempotent/);
});

test('lookups are served by the node asked: servedBy is that member\'s id', { skip }, async () => {
  const k = uniq('sb');
  await client.claim(S, k);
  const st = await client.status();
  const ids = st.members.map((m) => m.id);
  const seen = new Set();
  for (const n of env.http) {
    const l = await new Client({ nodes: [n] }).lookup(S, k);
    assert.strictEqual(l.outcome, Outcome.FOUND);
    assert.match(l.servedBy, /^[0-9a-f]{16}$/);
    assert.ok(ids.includes(l.servedBy), `${l.servedBy} is not a member (${ids})`);
    assert.strictEqual(l.servedBy, l.nodeId, 'read by the node that received it');
    seen.add(l.servedBy);
  }
  assert.strictEqual(seen.size, env.http.length, 'each node served its own lookup');
});

test('idempotent helper: runs once, DUPLICATE returns the stored result without running', { skip }, async () => {
  const k = uniq('h');
  let runs = 0;
  const work = async (ctx) => {
    runs++;
    assert.match(ctx.ownerToken, /^\d+:\d+:\d+$/);
    assert.strictEqual(ctx.signal.aborted, false);
    return { id: 7, at: new Date(0) };
  };
  const first = await client.idempotent(S, k, work, { payloadHash: 'aa' });
  const second = await client.idempotent(S, k, work, { payloadHash: 'aa' });
  assert.strictEqual(runs, 1);
  assert.deepStrictEqual(first, { id: 7, at: '1970-01-01T00:00:00.000Z' }, 'the result as stored (JSON)');
  assert.deepStrictEqual(second, first);
  const l = await client.lookup(S, k);
  assert.strictEqual(l.result.toString(), JSON.stringify(first));
  await assert.rejects(client.idempotent(S, k, work, { payloadHash: 'bb' }), (e) => e instanceof OutcomeError && e.outcome === 'CONFLICT');
  assert.strictEqual(runs, 1);
});

test('idempotent helper: a throwing fn releases (retryable) or fails the key (terminal)', { skip }, async () => {
  const k = uniq('h');
  let runs = 0;
  await assert.rejects(client.idempotent(S, k, () => {
    runs++;
    throw new Error('flaky');
  }), /flaky/);
  assert.strictEqual((await client.lookup(S, k)).state, 'RELEASED');
  const v = await client.idempotent(S, k, () => {
    runs++;
    return 'second try';
  });
  assert.strictEqual(v, 'second try');
  assert.strictEqual(runs, 2);
  const k2 = uniq('h');
  class Declined extends Error {}
  await assert.rejects(client.idempotent(S, k2, () => {
    throw new Declined('card declined');
  }, { terminal: (e) => e instanceof Declined }), Declined);
  const l = await client.lookup(S, k2);
  assert.strictEqual(l.state, 'FAILED');
  assert.match(l.storedError, /card declined/);
  await assert.rejects(client.idempotent(S, k2, () => assert.fail('ran on a FAILED key')), (e) => {
    assert.ok(e instanceof OutcomeError);
    assert.strictEqual(e.outcome, 'FAILED');
    assert.match(e.storedError, /card declined/);
    return true;
  });
});

test('idempotent helper: IN_PROGRESS waits for the owner, or gives up with InProgressError', { skip }, async () => {
  const k = uniq('h');
  const owner = await client.claim(S, k, { idempotent: true, lease: '20s' });
  setTimeout(() => client.complete(S, k, owner.ownerToken, { result: '{"done":1}' }), 400);
  let ran = false;
  const t0 = Date.now();
  const v = await client.idempotent(S, k, () => { ran = true; }, { pollMs: 100 });
  assert.deepStrictEqual(v, { done: 1 });
  assert.strictEqual(ran, false);
  assert.ok(Date.now() - t0 >= 300);
  const k2 = uniq('h');
  await client.claim(S, k2, { idempotent: true, lease: '20s' });
  await assert.rejects(client.idempotent(S, k2, () => { ran = true; }, { waitMs: 300, pollMs: 100 }), (e) => {
    assert.ok(e instanceof InProgressError);
    assert.ok(e instanceof NotAppliedError);
    assert.ok(e.retryAfterMs > 0);
    return true;
  });
  assert.strictEqual(ran, false);
});

test('idempotent helper: fenced when the lease ran out and another took over', { skip }, async () => {
  const k = uniq('h');
  let leaseSignal;
  await assert.rejects(client.idempotent(S, k, async (ctx) => {
    leaseSignal = ctx.signal;
    await sleep(500);
    // Meanwhile another process takes the key over and completes it.
    const other = await client.claim(S, k, { idempotent: true });
    assert.strictEqual(other.outcome, Outcome.ACCEPTED);
    await client.complete(S, k, other.ownerToken, { result: '"theirs"' });
    return 'mine';
  }, { lease: '300ms' }), (e) => {
    assert.ok(e instanceof FencedError, `${e.name}: ${e.message}`);
    assert.strictEqual(e.outcome, 'NOT_OWNER');
    return true;
  });
  assert.strictEqual(leaseSignal.aborted, true, 'ctx.signal told fn its lease ran out');
  const l = await client.lookup(S, k);
  assert.strictEqual(l.result.toString(), '"theirs"', 'the late owner did not overwrite');
});

test('two processes race on one key: exactly one runs the work', { skip }, async () => {
  const k = uniq('race');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'once-node-race-'));
  const out = path.join(dir, 'ran');
  fs.writeFileSync(out, '');
  const startAt = Date.now() + 700;
  const run = (name) => new Promise((resolve) => {
    const p = spawn(process.execPath, [path.join(__dirname, 'race-child.js'), env.http.join(','), S, k, out, String(startAt), name],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '';
    let se = '';
    p.stdout.on('data', (d) => { so += d; });
    p.stderr.on('data', (d) => { se += d; });
    p.on('close', (code) => resolve({ code, so, se }));
  });
  const [a, b] = await Promise.all([run('p1'), run('p2')]);
  assert.strictEqual(a.code, 0, a.se);
  assert.strictEqual(b.code, 0, b.se);
  const ran = fs.readFileSync(out, 'utf8').trim().split('\n').filter(Boolean);
  assert.strictEqual(ran.length, 1, `the work ran ${ran.length} times: ${ran}`);
  const ra = JSON.parse(a.so).result;
  const rb = JSON.parse(b.so).result;
  assert.deepStrictEqual(ra, { ranBy: ran[0], n: 42 });
  assert.deepStrictEqual(rb, ra, 'both got the one result');
  const l = await client.lookup(S, k);
  assert.strictEqual(l.state, 'COMPLETED');
  assert.strictEqual(l.ownerAttempt, 1);
  assert.ok(l.attemptsTotal >= 1, 'the loser claimed too');
  fs.rmSync(dir, { recursive: true, force: true });
});

test('the README example runs (scripts/run\'s addresses swapped for this cluster\'s)', { skip }, async () => {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8');
  const m = /## Ten lines[^]*?```js\n([^]*?)```/.exec(readme);
  assert.ok(m, 'the example is in README.md');
  const lines = m[1].trim().split('\n');
  assert.ok(lines.length <= 10, `${lines.length} lines`);
  const runAddrs = "['127.0.0.1:7121', '127.0.0.1:7122', '127.0.0.1:7123']";
  assert.ok(m[1].includes(runAddrs), 'the example uses scripts/run\'s HTTP ports');
  const code = m[1].replace(runAddrs, JSON.stringify(env.http))
    .replace("require('once-client')", `require(${JSON.stringify(path.join(__dirname, '..', '..'))})`);
  const out = await new Promise((resolve) => {
    const p = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '';
    let se = '';
    p.stdout.on('data', (d) => { so += d; });
    p.stderr.on('data', (d) => { se += d; });
    p.on('close', (rc) => resolve({ rc, so, se }));
  });
  assert.strictEqual(out.rc, 0, out.se);
  const got = out.so.trim().split('\n');
  assert.strictEqual(got[0], 'ACCEPTED');
  assert.strictEqual(got[1], 'REPLAYED');
  assert.match(got[2], /^\{ charged: 1999 \} [0-9a-f]{32}$/);
});

test('the leader killed mid-call: the retry with the same request id is ACCEPTED retry=true', { skip }, async () => {
  const info = await control({ op: 'info' });
  const leader = info.leader;
  assert.ok(leader);
  const followers = info.http.filter((u) => u !== leader);
  // The leader first, so that the call goes there.
  const c = new Client({ nodes: [leader, ...followers], timeoutMs: 20000 });
  await c.status(); // pinned, connected
  const k = uniq('kill');
  // Followers stopped: the leader appends the claim and sends it to them
  // (it waits in their sockets), but cannot commit it, so no answer.
  for (const f of followers) await control({ op: 'pause', node: f });
  let killed = false;
  try {
    let pending;
    try {
      pending = c.claim(S, k);
      pending.catch(() => {});
      await sleep(200);
      await control({ op: 'kill', node: leader });
      killed = true;
    } finally {
      for (const f of followers) await control({ op: 'resume', node: f });
    }
    // The followers read the entry, elect a leader that commits it; the
    // client's retry (same request id) is recognized.
    const a = await pending;
    assert.strictEqual(a.outcome, Outcome.ACCEPTED);
    assert.strictEqual(a.retry, true, 'the retry found the first attempt applied');
    assert.notStrictEqual(a.node, leader);
    const l = await c.lookup(S, k);
    assert.strictEqual(l.firstRequestId, a.requestId, 'one request id for the call and its retries');
    assert.ok(l.attempts.some((x) => x.requestId === a.requestId && x.retry));
  } finally {
    // The next tests get three nodes again, whatever happened here.
    if (killed) await control({ op: 'start', node: leader });
    await control({ op: 'wait_leader' });
  }
});

test('a cluster re-created empty on the same addresses is refused by the pin', { skip }, async () => {
  const pinnedId = client.clusterId;
  assert.match(pinnedId, /^[0-9a-f]{32}$/);
  const k = uniq('pin');
  assert.strictEqual((await client.claim(S, k)).outcome, Outcome.ACCEPTED);
  const given = new Client({ nodes: env.http, clusterId: pinnedId });
  const fresh = await control({ op: 'recreate' }, 120000);
  assert.notStrictEqual(fresh.cluster_id, pinnedId);
  // The amnesiac cluster would say ACCEPTED for the key: refused instead,
  // before it proposed the claim (the write carried the pin).
  for (const c of [client, given]) {
    await assert.rejects(c.claim(S, k), (e) => {
      assert.ok(e instanceof ClusterMismatchError, `${e.name}: ${e.message}`);
      assert.strictEqual(e.expected, pinnedId);
      assert.strictEqual(e.actual, fresh.cluster_id);
      assert.strictEqual(e.applied, 'false');
      assert.match(e.message, /cluster id mismatch/);
      return true;
    });
    await assert.rejects(c.lookup(S, k), ClusterMismatchError);
  }
  assert.strictEqual(client.clusterId, pinnedId);
  // A new client pins the new cluster, which has no record of the key:
  // the refused claims were not applied there.
  const next = new Client({ nodes: env.http });
  const l = await next.lookup(S, k);
  assert.strictEqual(l.outcome, Outcome.NOT_FOUND);
  assert.strictEqual(next.clusterId, fresh.cluster_id);
  const a = await next.claim(S, uniq('pin'));
  assert.strictEqual(a.outcome, Outcome.ACCEPTED);
});
