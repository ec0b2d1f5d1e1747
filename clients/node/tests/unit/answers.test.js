'use strict';
// Every field of the recorded answers (tests/fixtures/answers.json: the
// answers of a real 3-node cluster to each call) is decoded, under a name
// the declarations give it.

const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const answers = require('../../lib/answers');

const recorded = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'answers.json'), 'utf8'));
const dts = fs.readFileSync(path.join(__dirname, '..', '..', 'index.d.ts'), 'utf8');
const byName = Object.fromEntries(recorded.map((r) => [r.name, r.raw]));

function callOf(name) {
  return name.split('_')[0];
}

test('the recorded answers cover every outcome of every call', () => {
  const seen = new Set(recorded.filter((r) => r.raw.outcome && !r.raw.error).map((r) => `${callOf(r.name)}:${r.raw.outcome}`));
  for (const [call, outs] of Object.entries(answers.CALL_OUTCOMES)) {
    for (const o of outs) {
      // complete/release CONFLICT and release NOT_OWNER/NOT_FOUND are the
      // same objects as complete's: one record each is enough.
      if (['complete:CONFLICT', 'release:NOT_OWNER', 'release:NOT_FOUND', 'release:CONFLICT'].includes(`${call}:${o}`)) continue;
      assert.ok(seen.has(`${call}:${o}`), `no recorded answer ${call}:${o}`);
    }
  }
});

test('every JSON field of every recorded answer is decoded', () => {
  const tables = {
    result: answers.RESULT_FIELDS, status: answers.STATUS_FIELDS, attempt: answers.ATTEMPT_FIELDS, member: answers.MEMBER_FIELDS,
  };
  for (const r of recorded) {
    if (r.raw.error) continue;
    const call = callOf(r.name);
    const a = call === 'status' ? answers.decodeStatus(r.raw, 'http://n') : answers.decodeResult(call, r.raw, 'http://n');
    const table = call === 'status' ? tables.status : tables.result;
    for (const [k, v] of Object.entries(r.raw)) {
      assert.ok(table[k], `${r.name}: field ${k} has no name`);
      const name = table[k][0];
      assert.notStrictEqual(a[name], undefined, `${r.name}: ${k} not decoded`);
      if (typeof v !== 'object') assert.strictEqual(a[name], v, `${r.name}: ${k}`);
      // the declarations name it too
      assert.match(dts, new RegExp(`\\b${name}\\??:`), `index.d.ts does not declare ${name}`);
    }
    assert.strictEqual(a.node, 'http://n');
    assert.strictEqual(a.raw, r.raw);
    for (const at of r.raw.attempts || []) {
      for (const k of Object.keys(at)) assert.ok(tables.attempt[k], `attempt field ${k}`);
    }
    for (const m of r.raw.members || []) {
      for (const k of Object.keys(m)) assert.ok(tables.member[k], `member field ${k}`);
    }
  }
  for (const t of Object.values(tables)) {
    for (const [, [name]] of Object.entries(t)) {
      assert.match(dts, new RegExp(`\\b${name}\\??:`), `index.d.ts does not declare ${name}`);
    }
  }
});

test('results, attempts, members and ids decode to their types', () => {
  const dup = answers.decodeResult('claim', byName.claim_duplicate, 'u');
  assert.strictEqual(dup.outcome, 'DUPLICATE');
  assert.ok(Buffer.isBuffer(dup.result));
  assert.strictEqual(dup.result.toString('utf8'), '{"id":7}');
  assert.strictEqual(dup.retry, false);
  assert.match(dup.firstRequestId, /^[0-9a-f]{32}$/);
  const acc = answers.decodeResult('claim', byName.claim_idem_accepted, 'u');
  assert.match(acc.ownerToken, /^\d+:\d+:\d+$/);
  assert.strictEqual(acc.ownerAttempt, 1);
  assert.strictEqual(acc.kind, 'IDEMPOTENT');
  assert.strictEqual(acc.state, 'PENDING');
  assert.ok(acc.leaseExpiresMs > acc.logTimeMs);
  const ip = answers.decodeResult('claim', byName.claim_in_progress, 'u');
  assert.ok(ip.retryAfterMs > 0);
  assert.strictEqual(ip.ownerToken, undefined, 'a denied claimant never sees the token');
  const found = answers.decodeResult('lookup', byName.lookup_found, 'u');
  assert.ok(found.attempts.length >= 1);
  for (const at of found.attempts) {
    assert.match(at.requestId, /^[0-9a-f]{32}$/);
    assert.strictEqual(typeof at.executionId, 'string');
    assert.strictEqual(typeof at.index, 'number');
    assert.strictEqual(typeof at.timeMs, 'number');
    assert.strictEqual(typeof at.retry, 'boolean');
  }
  const failed = answers.decodeResult('claim', byName.claim_failed, 'u');
  assert.strictEqual(failed.storedError, 'declined');
  const st = answers.decodeStatus(byName.status, 'u');
  assert.strictEqual(st.members.length, 3);
  assert.strictEqual(typeof st.members[0].reachable, 'boolean');
  assert.match(st.members[0].clientAddr, /^127\.0\.0\.1:\d+$/);
  assert.strictEqual(st.configVoters.length, 3);
  assert.ok(['LEADER', 'FOLLOWER', 'CANDIDATE', 'UNAVAILABLE'].includes(st.role));
  // a node in no-vote (onced --accept-cut-tail) says so; one that votes does not
  assert.strictEqual(st.noVoteCutIndex, undefined);
  assert.strictEqual(answers.decodeStatus({ ...byName.status, no_vote_cut_index: 26 }, 'u').noVoteCutIndex, 26);
});

test('N-use nonces, sliding records and served_by, as a real cluster sent them', () => {
  const m1 = answers.decodeResult('claim', byName.claim_multi_accepted, 'u');
  assert.deepStrictEqual([m1.outcome, m1.maxUses, m1.uses, m1.usesLeft, m1.sliding], ['ACCEPTED', 2, 1, 1, false]);
  const m3 = answers.decodeResult('claim', byName.claim_multi_replayed, 'u');
  assert.deepStrictEqual([m3.outcome, m3.uses, m3.usesLeft], ['REPLAYED', 2, 0]);
  const l = answers.decodeResult('lookup', byName.lookup_multi_served_by, 'u');
  assert.match(l.servedBy, /^[0-9a-f]{16}$/);
  assert.strictEqual(l.usesLeft, 0);
  const s1 = answers.decodeResult('claim', byName.claim_sliding_accepted, 'u');
  const s2 = answers.decodeResult('claim', byName.claim_sliding_duplicate, 'u');
  assert.strictEqual(s1.sliding, true);
  assert.strictEqual(s2.outcome, 'DUPLICATE');
  assert.strictEqual(s2.expiresMs, s2.logTimeMs + 3600000);
  const b = [byName.claim_batch_accepted, byName.claim_batch_replayed].map((r) => answers.decodeResult('claim', r, 'u'));
  assert.strictEqual(b[1].firstRequestId, b[0].requestId);
  const e = byName.error_batch_item_invalid;
  assert.deepStrictEqual([e.error, e.applied], ['INVALID_ARGUMENT', 'false']);
  assert.match(e.request_id, /^[0-9a-f]{32}$/);
  for (const k of Object.keys(e)) assert.ok(answers.ERROR_FIELDS.includes(k), `error field ${k}`);
});

test('non-UTF-8 text, big integers and newer fields', () => {
  const raw = {
    ...byName.lookup_failed, stored_error: undefined, stored_error_b64: Buffer.from('bad').toString('base64'),
    first_index: '18446744073709551615', some_future_field: 1,
    attempts: [{ request_id: '0'.repeat(32), execution_id_b64: '/w==', index: 1, time_ms: 2, outcome: 'FAILED', retry: false }],
  };
  delete raw.stored_error;
  const a = answers.decodeResult('lookup', raw, 'u');
  assert.strictEqual(a.storedError, 'bad');
  assert.strictEqual(a.storedErrorB64, 'YmFk');
  assert.strictEqual(a.firstIndex, 18446744073709551615n);
  assert.strictEqual(a.attempts[0].executionIdB64, '/w==');
  assert.strictEqual(a.raw.some_future_field, 1);
});

test('malformed answers are refused', () => {
  const bad = [
    ['claim', { ...byName.claim_accepted, outcome: 'FOUND' }],
    ['claim', { ...byName.claim_accepted, outcome: 'MAYBE' }],
    ['claim', { ...byName.claim_accepted, outcome: undefined }],
    ['claim', { ...byName.claim_accepted, first_index: -1 }],
    ['claim', { ...byName.claim_accepted, retry: 'no' }],
    ['claim', { ...byName.claim_duplicate, result_b64: 'not base64!' }],
    ['lookup', { ...byName.lookup_found, attempts: {} }],
    ['lookup', { ...byName.lookup_found, attempts: [7] }],
    ['complete', { ...byName.claim_accepted }],
  ];
  for (const [call, raw] of bad) {
    assert.throws(() => answers.decodeResult(call, raw, 'u'), answers.MalformedAnswer, JSON.stringify(raw).slice(0, 80));
  }
  assert.throws(() => answers.decodeStatus({ ...byName.status, outcome: 'FOUND' }, 'u'), answers.MalformedAnswer);
  assert.throws(() => answers.decodeStatus({ ...byName.status, members: [1] }, 'u'), answers.MalformedAnswer);
});
