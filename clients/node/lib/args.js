'use strict';
// Argument checks and request bodies. Every bound of docs/http-api.md
// ("Requests") and of libonce's checks (src/client/wire.c) is checked here,
// before any network call: a bad argument is an InvalidArgumentError
// (applied "false") and nothing is sent.

const crypto = require('node:crypto');
const { InvalidArgumentError } = require('./errors');

const SCOPE_MAX = 128;
const KEY_MAX = 256;
const EXECUTION_ID_MAX = 128;
const PAYLOAD_HASH_MAX = 64;
const RESULT_MAX = 65536;
const ERROR_MAX = 1024;
const NODES_MAX = 64;
// N-use nonces: the state machine's FSM_MAX_USES (docs/http-api.md).
const MAX_USES_MAX = 64;
// A batch: RPC_CLAIM_BATCH_MAX items, a body of at most the listener's
// HTTPAPI_BATCH_BODY_MAX (1 MiB) as sent.
const BATCH_ITEMS_MAX = 4096;
const BATCH_BODY_MAX = 1 << 20;
// The node's parser bounds every duration to 365 days (httpapi_parse.c).
const DURATION_MAX_MS = 365 * 24 * 3600 * 1000;
// A call's deadline: libonce's bound (RPC_DEADLINE_MAX, one hour).
const TIMEOUT_MAX_MS = 3600 * 1000;
// One HTTP attempt's `timeout` field: the node takes 1 ms..60 s.
const ATTEMPT_TIMEOUT_MAX_MS = 60 * 1000;
const UINT32_MAX = 0xffffffffn;
const UINT64_MAX = 0xffffffffffffffffn;

function bad(message) {
  return new InvalidArgumentError(message);
}

/** A fresh request id: 128 random bits as 32 lowercase hex digits. */
function newRequestId() {
  return crypto.randomBytes(16).toString('hex');
}

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Refuse option names the call does not take: a typo never passes. */
function checkOptions(name, opts, allowed) {
  if (opts === undefined || opts === null) return {};
  if (!isPlainObject(opts)) throw bad(`${name}: options must be an object`);
  for (const k of Object.keys(opts)) {
    if (!allowed.includes(k)) throw bad(`${name}: unknown option "${k}"`);
  }
  return opts;
}

/** A string's UTF-8 bytes within min..max, without NUL. */
function checkText(name, v, min, max) {
  if (typeof v !== 'string') throw bad(`${name}: must be a string`);
  const n = Buffer.byteLength(v, 'utf8');
  if (n < min || n > max) throw bad(`${name}: ${n} bytes, must be ${min}..${max}`);
  if (v.includes('\0')) throw bad(`${name}: contains a NUL character`);
  // A lone surrogate has no UTF-8 form: it would be sent as U+FFFD.
  if (Buffer.from(v, 'utf8').toString('utf8') !== v) {
    throw bad(`${name}: not valid Unicode (a lone surrogate)`);
  }
  return v;
}

function checkScopeKey(scope, key) {
  checkText('scope', scope, 1, SCOPE_MAX);
  checkText('key', key, 1, KEY_MAX);
}

function checkRequestId(v) {
  if (v === undefined || v === null) return newRequestId();
  if (typeof v !== 'string' || !/^[0-9a-fA-F]{32}$/.test(v)) {
    throw bad('requestId: must be 32 hex digits (16 bytes)');
  }
  return v.toLowerCase();
}

/**
 * A duration: integer milliseconds, or a string as oncectl takes it
 * ("250ms", "30s", "10m", "24h"). Returns milliseconds.
 */
function parseDuration(name, v) {
  let ms;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw bad(`${name}: must be a non-negative integer of milliseconds`);
    }
    ms = v;
  } else if (typeof v === 'string') {
    const m = /^([0-9]{1,20})(ms|s|m|h)$/.exec(v);
    if (m === null) {
      throw bad(`${name}: "${v}" is not a duration ("250ms", "30s", "10m", "24h")`);
    }
    const unit = { ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
    ms = Number(m[1]) * unit;
  } else {
    throw bad(`${name}: must be a duration ("30s") or integer milliseconds`);
  }
  if (ms > DURATION_MAX_MS) throw bad(`${name}: over 365 days`);
  return ms;
}

function checkTimeout(v, dflt) {
  if (v === undefined || v === null) return dflt;
  const ms = parseDuration('timeoutMs', v);
  if (ms < 1 || ms > TIMEOUT_MAX_MS) throw bad('timeoutMs: must be 1 ms..1 h');
  return ms;
}

function checkSignal(v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || typeof v.aborted !== 'boolean' ||
      typeof v.addEventListener !== 'function') {
    throw bad('signal: must be an AbortSignal');
  }
  return v;
}

/** ts: unix milliseconds as a non-negative integer, bigint or decimal
 * string; sent as a JSON number when exact, else as a decimal string. */
function checkTs(v) {
  let b;
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) throw bad('ts: must be non-negative integer unix milliseconds');
    return v;
  }
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v)) b = BigInt(v);
  else if (v instanceof Date && !Number.isNaN(v.getTime()) && v.getTime() >= 0) return v.getTime();
  else throw bad('ts: must be unix milliseconds (integer, bigint, decimal string or Date)');
  if (b < 0n || b > UINT64_MAX) throw bad('ts: out of range');
  return b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b.toString();
}

/** payload hash: hex (an even number of digits) or bytes, 0..64 bytes. */
function checkPayloadHash(v) {
  let hex;
  if (typeof v === 'string') {
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(v)) throw bad('payloadHash: must be hex with an even number of digits');
    hex = v.toLowerCase();
  } else if (v instanceof Uint8Array) {
    hex = Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
  } else {
    throw bad('payloadHash: must be a hex string or bytes');
  }
  if (hex.length / 2 > PAYLOAD_HASH_MAX) throw bad(`payloadHash: ${hex.length / 2} bytes, at most ${PAYLOAD_HASH_MAX}`);
  return hex;
}

const TOKEN_RE = /^([0-9]{1,10}):([0-9]{1,20}):([0-9]{1,10})$/;

/** owner token "GROUP:INDEX:SLOT" (decimal), as the ACCEPTED claim gave it. */
function checkOwnerToken(v) {
  if (typeof v !== 'string') throw bad('ownerToken: must be a string "GROUP:INDEX:SLOT"');
  const m = TOKEN_RE.exec(v);
  if (m === null || BigInt(m[1]) > UINT32_MAX || BigInt(m[2]) > UINT64_MAX ||
      BigInt(m[3]) > UINT32_MAX) {
    throw bad(`ownerToken: "${v}" is not GROUP:INDEX:SLOT in decimal`);
  }
  return v;
}

/** Bytes of a result: a string (UTF-8) or a Uint8Array / Buffer. */
function toBytes(name, v, max) {
  let b;
  if (typeof v === 'string') {
    b = Buffer.from(v, 'utf8');
  } else if (v instanceof Uint8Array) {
    b = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  } else {
    throw bad(`${name}: must be a string or bytes`);
  }
  if (b.length > max) throw bad(`${name}: ${b.length} bytes, at most ${max}`);
  return b;
}

const CALL_OPTIONS = ['timeoutMs', 'signal'];
const CLAIM_FIELDS = ['ttl', 'ts', 'window', 'idempotent', 'payloadHash', 'lease',
  'executionId', 'requestId', 'maxUses', 'sliding'];
const CLAIM_OPTIONS = [...CLAIM_FIELDS, ...CALL_OPTIONS];

/** maxUses: an integer 1..64 (NONCE only); sent only above 1, the
 * default, as libonce does (src/client/wire.c). */
function checkMaxUses(v, idempotent, body) {
  if (v === undefined || v === null) return;
  if (!Number.isSafeInteger(v) || v < 1 || v > MAX_USES_MAX) {
    throw bad(`maxUses: ${typeof v === 'number' ? v : typeof v}: must be an integer 1..${MAX_USES_MAX}`);
  }
  if (idempotent) throw bad('maxUses: only for nonces (not with idempotent)');
  if (v > 1) body.max_uses = v;
}

/** sliding: true only for an idempotent claim kept by ttl (not ts). */
function checkSliding(v, idempotent, hasTs, body) {
  if (v === undefined || v === null || v === false) return;
  if (v !== true) throw bad('sliding: must be true or false');
  if (!idempotent) throw bad('sliding: only for idempotent claims');
  if (hasTs) throw bad('sliding: only with ttl, not with ts and window');
  body.sliding = true;
}

/** The JSON body of one claim, every field checked (claim, batch items). */
function claimBody(scope, key, o) {
  checkScopeKey(scope, key);
  const body = { scope, key, request_id: checkRequestId(o.requestId) };
  const idempotent = o.idempotent === undefined || o.idempotent === null ? false : o.idempotent;
  if (typeof idempotent !== 'boolean') throw bad('idempotent: must be true or false');
  if (idempotent) body.idempotent = true;
  if (o.executionId !== undefined && o.executionId !== null) {
    body.execution_id = checkText('executionId', o.executionId, 0, EXECUTION_ID_MAX);
  }
  const hasTs = o.ts !== undefined && o.ts !== null;
  const hasWindow = o.window !== undefined && o.window !== null;
  if (o.ttl !== undefined && o.ttl !== null) {
    const ttl = parseDuration('ttl', o.ttl);
    if (ttl === 0) throw bad('ttl: must be > 0');
    body.ttl = ttl;
  }
  if (hasTs !== hasWindow) throw bad('ts and window: give both or neither');
  if (hasTs) {
    body.ts = checkTs(o.ts);
    const w = parseDuration('window', o.window);
    if (w === 0) throw bad('window: must be > 0');
    body.window = w;
  }
  if (o.payloadHash !== undefined && o.payloadHash !== null) {
    if (!idempotent) throw bad('payloadHash: only for idempotent claims');
    body.payload_hash = checkPayloadHash(o.payloadHash);
  }
  if (o.lease !== undefined && o.lease !== null) {
    if (!idempotent) throw bad('lease: only for idempotent claims');
    body.lease = parseDuration('lease', o.lease);
  }
  checkMaxUses(o.maxUses, idempotent, body);
  checkSliding(o.sliding, idempotent, hasTs, body);
  return body;
}

/** Check a claim; returns { body, timeoutMs, signal }. */
function claimRequest(scope, key, opts, dfltTimeout) {
  const o = checkOptions('claim', opts, CLAIM_OPTIONS);
  const body = claimBody(scope, key, o);
  return { body, timeoutMs: checkTimeout(o.timeoutMs, dfltTimeout), signal: checkSignal(o.signal) };
}

/**
 * Check a batch: @items 1..4096 objects { scope, key, ...claim options but
 * timeoutMs and signal }. Returns { body: { items }, timeoutMs, signal };
 * each item gets its own request id (given or fresh). A bad item names
 * its index ("items[3]: key: ...").
 */
function claimBatchRequest(items, opts, dfltTimeout) {
  if (!Array.isArray(items)) throw bad('items: must be an array of claims');
  if (items.length < 1 || items.length > BATCH_ITEMS_MAX) {
    throw bad(`items: ${items.length} claims, must be 1..${BATCH_ITEMS_MAX}`);
  }
  const o = checkOptions('claimBatch', opts, CALL_OPTIONS);
  const body = items.map((it, i) => {
    try {
      if (!isPlainObject(it)) throw bad('must be an object { scope, key, ...options }');
      checkOptions('claim', it, ['scope', 'key', ...CLAIM_FIELDS]);
      return claimBody(it.scope, it.key, it);
    } catch (e) {
      if (!(e instanceof InvalidArgumentError)) throw e;
      throw bad(`items[${i}]: ${e.message}`);
    }
  });
  // The node refuses a body over 1 MiB (413): say so before sending. The
  // client adds cluster_id and timeout (under 100 bytes) to what is here.
  const size = Buffer.byteLength(JSON.stringify({ items: body }), 'utf8') + 100;
  if (size > BATCH_BODY_MAX) {
    throw bad(`items: about ${size} bytes of JSON, at most ${BATCH_BODY_MAX} (split the batch)`);
  }
  return { body: { items: body }, timeoutMs: checkTimeout(o.timeoutMs, dfltTimeout), signal: checkSignal(o.signal) };
}

function completeRequest(scope, key, ownerToken, opts, dfltTimeout) {
  checkScopeKey(scope, key);
  checkOwnerToken(ownerToken);
  const o = checkOptions('complete', opts, ['result', 'requestId', ...CALL_OPTIONS]);
  const body = { scope, key, request_id: checkRequestId(o.requestId), owner_token: ownerToken };
  const result = o.result === undefined || o.result === null ? Buffer.alloc(0)
    : toBytes('result', o.result, RESULT_MAX);
  // Always as base64: the exact bytes, whatever they are.
  body.result_b64 = result.toString('base64');
  return { body, timeoutMs: checkTimeout(o.timeoutMs, dfltTimeout), signal: checkSignal(o.signal) };
}

function releaseRequest(scope, key, ownerToken, opts, dfltTimeout) {
  checkScopeKey(scope, key);
  checkOwnerToken(ownerToken);
  const o = checkOptions('release', opts, ['terminal', 'error', 'requestId', ...CALL_OPTIONS]);
  const body = { scope, key, request_id: checkRequestId(o.requestId), owner_token: ownerToken };
  const terminal = o.terminal === undefined || o.terminal === null ? false : o.terminal;
  if (typeof terminal !== 'boolean') throw bad('terminal: must be true or false');
  if (terminal) body.terminal = true;
  if (o.error !== undefined && o.error !== null) {
    if (!terminal) throw bad('error: only with terminal (a plain release keeps no error)');
    body.error = checkText('error', o.error, 0, ERROR_MAX);
  }
  return { body, timeoutMs: checkTimeout(o.timeoutMs, dfltTimeout), signal: checkSignal(o.signal) };
}

function lookupRequest(scope, key, opts, dfltTimeout) {
  checkScopeKey(scope, key);
  const o = checkOptions('lookup', opts, CALL_OPTIONS);
  const path = `/v1/records/${encodeURIComponent(scope)}/${encodeURIComponent(key)}`;
  return { path, timeoutMs: checkTimeout(o.timeoutMs, dfltTimeout), signal: checkSignal(o.signal) };
}

/** A node's base URL: "http://IP:PORT", "https://IP:PORT" or "IP:PORT"
 * (then http, or https when the client has TLS options). */
function checkNode(i, v, tls) {
  if (typeof v !== 'string' || v.length === 0) throw bad(`nodes[${i}]: must be a non-empty string`);
  const s = /^[a-z][a-z0-9+.-]*:\/\//i.test(v) ? v : `${tls ? 'https' : 'http'}://${v}`;
  let u;
  try {
    u = new URL(s);
  } catch {
    throw bad(`nodes[${i}]: "${v}" is not a URL or HOST:PORT`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw bad(`nodes[${i}]: "${v}": only http and https`);
  if (u.protocol === 'http:' && tls) throw bad(`nodes[${i}]: "${v}" is http but tls options are given`);
  if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username || u.password) {
    throw bad(`nodes[${i}]: "${v}": give only scheme://host:port`);
  }
  if (u.port === '') throw bad(`nodes[${i}]: "${v}": the port is required`);
  return `${u.protocol}//${u.host}`;
}

function checkClusterId(v) {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || !/^[0-9a-fA-F]{32}$/.test(v)) {
    throw bad('clusterId: must be 32 hex digits');
  }
  return v.toLowerCase();
}

module.exports = {
  SCOPE_MAX,
  KEY_MAX,
  EXECUTION_ID_MAX,
  PAYLOAD_HASH_MAX,
  RESULT_MAX,
  ERROR_MAX,
  NODES_MAX,
  MAX_USES_MAX,
  BATCH_ITEMS_MAX,
  BATCH_BODY_MAX,
  TIMEOUT_MAX_MS,
  ATTEMPT_TIMEOUT_MAX_MS,
  newRequestId,
  checkOptions,
  checkText,
  checkScopeKey,
  checkTimeout,
  checkSignal,
  parseDuration,
  claimRequest,
  claimBatchRequest,
  completeRequest,
  releaseRequest,
  lookupRequest,
  checkNode,
  checkClusterId,
  isPlainObject,
};
