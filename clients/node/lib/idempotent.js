'use strict';
// client.idempotent(scope, key, fn, options): run fn at most once per key
// across every process that shares the cluster (issue 28, item 3).
//
//   claim (IDEMPOTENT) ->
//     ACCEPTED     run fn (a fresh owner, or a takeover after a lapsed lease
//                  or a release); then complete with its JSON-serialized
//                  result and return the result; if fn throws, release
//                  (terminal or not: options.terminal decides) and rethrow;
//     DUPLICATE    the stored result, decoded; fn is not run;
//     IN_PROGRESS  another owner holds the key: wait (at most its lease's
//                  retry_after_ms, at most options.pollMs) and claim again
//                  with a new request id, until options.waitMs has passed
//                  (then InProgressError);
//     FAILED       the key failed for good (a terminal release): OutcomeError
//                  with the stored error; fn is not run;
//     CONFLICT     another payload hash for this key: OutcomeError.
//   complete -> NOT_OWNER: fenced (the lease lapsed and another process took
//   over): FencedError; nothing was overwritten.
//
// Nothing is renewed: the cluster has no lease renewal, so fn must end
// within its lease; ctx.signal aborts when the lease (as the claim's answer
// gave it) has run out, and ctx.leaseExpiresMs says when in log time.

const args = require('./args');
const errors = require('./errors');
const { Outcome } = require('./answers');

const DEFAULT_WAIT_MS = 30000;
const DEFAULT_POLL_MS = 1000;

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(t);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    }
    if (signal) signal.addEventListener('abort', done, { once: true });
  });
}

function defaultDecode(buf) {
  const text = buf.toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

function defaultEncode(value) {
  const text = JSON.stringify(value);
  return text === undefined ? '' : text; // undefined (or a function) stores nothing
}

/** Cut @s to at most @max UTF-8 bytes without splitting a character. */
function truncateUtf8(s, max) {
  const b = Buffer.from(s, 'utf8');
  if (b.length <= max) return s;
  let end = max;
  while (end > 0 && (b[end] & 0xc0) === 0x80) end--;
  return b.subarray(0, end).toString('utf8');
}

function errorText(e) {
  let s;
  if (e instanceof Error) s = `${e.name}: ${e.message}`;
  else {
    try {
      s = typeof e === 'string' ? e : JSON.stringify(e);
    } catch {
      s = String(e);
    }
  }
  return truncateUtf8(String(s).replace(/\0/g, ''), args.ERROR_MAX);
}

const OPTIONS = ['lease', 'payloadHash', 'executionId', 'waitMs', 'pollMs', 'terminal',
  'encode', 'decode', 'timeoutMs', 'signal'];

async function idempotent(client, scope, key, fn, options) {
  args.checkScopeKey(scope, key);
  if (typeof fn !== 'function') throw new errors.InvalidArgumentError('fn: must be a function');
  const o = args.checkOptions('idempotent', options, OPTIONS);
  const waitMs = o.waitMs === undefined || o.waitMs === null ? DEFAULT_WAIT_MS : args.parseDuration('waitMs', o.waitMs);
  const pollMs = o.pollMs === undefined || o.pollMs === null ? DEFAULT_POLL_MS : args.parseDuration('pollMs', o.pollMs);
  if (pollMs === 0) throw new errors.InvalidArgumentError('pollMs: must be > 0');
  const terminal = o.terminal === undefined || o.terminal === null ? false : o.terminal;
  if (typeof terminal !== 'boolean' && typeof terminal !== 'function') {
    throw new errors.InvalidArgumentError('terminal: must be true, false or a function (error) => boolean');
  }
  const encode = o.encode || defaultEncode;
  const decode = o.decode || defaultDecode;
  if (typeof encode !== 'function' || typeof decode !== 'function') {
    throw new errors.InvalidArgumentError('encode/decode: must be functions');
  }
  const signal = args.checkSignal(o.signal);
  const call = { timeoutMs: o.timeoutMs, signal };
  const claimOptions = { idempotent: true, lease: o.lease, payloadHash: o.payloadHash, executionId: o.executionId, ...call };
  // Check every argument before the first call (the client checks again).
  args.claimRequest(scope, key, claimOptions, 1000);
  const waitUntil = Date.now() + waitMs;

  for (;;) {
    const a = await client.claim(scope, key, claimOptions);
    switch (a.outcome) {
      case Outcome.ACCEPTED:
        return runOwned(client, scope, key, fn, a, { encode, decode, terminal, call });
      case Outcome.DUPLICATE:
        return decode(a.result || Buffer.alloc(0));
      case Outcome.IN_PROGRESS: {
        const left = waitUntil - Date.now();
        if (left <= 0 || (signal && signal.aborted)) {
          throw new errors.InProgressError(
            `${scope}/${key}: IN_PROGRESS (another owner) after waiting ${waitMs} ms`,
            { retryAfterMs: a.retryAfterMs, answer: a, node: a.node, requestId: a.requestId },
          );
        }
        const after = a.retryAfterMs === undefined ? pollMs : Math.max(a.retryAfterMs, 1);
        // A little jitter, so that waiters do not claim in lockstep.
        await sleep(Math.min(after, pollMs, left) + Math.floor(Math.random() * 20), signal);
        continue;
      }
      case Outcome.FAILED:
        throw new errors.OutcomeError(`${scope}/${key}: FAILED for good: ${a.storedError || ''}`, {
          outcome: a.outcome, storedError: a.storedError || '', answer: a, node: a.node, requestId: a.requestId,
        });
      default:
        throw new errors.OutcomeError(`${scope}/${key}: ${a.outcome}${a.reason ? `: ${a.reason}` : ''}`, {
          outcome: a.outcome, answer: a, node: a.node, requestId: a.requestId,
        });
    }
  }
}

async function runOwned(client, scope, key, fn, claim, { encode, decode, terminal, call }) {
  const token = claim.ownerToken;
  if (typeof token !== 'string') {
    throw new errors.OutcomeError(`${scope}/${key}: ACCEPTED without an owner token`, { outcome: claim.outcome, answer: claim });
  }
  // The lease as the cluster gave it, measured from now on our clock.
  const leaseMs = claim.leaseExpiresMs !== undefined && claim.logTimeMs !== undefined
    ? Math.max(0, claim.leaseExpiresMs - claim.logTimeMs) : undefined;
  const leaseAc = new AbortController();
  const leaseTimer = leaseMs !== undefined ? setTimeout(() => leaseAc.abort(new Error('the lease ran out')), leaseMs) : null;
  const ctx = {
    ownerToken: token,
    ownerAttempt: claim.ownerAttempt,
    leaseExpiresMs: claim.leaseExpiresMs,
    signal: leaseAc.signal,
    claim,
  };
  let value;
  let stored;
  try {
    value = await fn(ctx);
    const text = encode(value);
    stored = typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text);
    if (stored.length > args.RESULT_MAX) {
      throw new errors.InvalidArgumentError(`result: ${stored.length} bytes serialized, at most ${args.RESULT_MAX}`);
    }
  } catch (e) {
    clearTimeout(leaseTimer);
    const isTerminal = typeof terminal === 'function' ? Boolean(terminal(e)) : terminal;
    const rel = isTerminal ? { terminal: true, error: errorText(e), ...call } : { ...call };
    try {
      // NOT_OWNER here: someone took over meanwhile, nothing of ours to give up.
      await client.release(scope, key, token, rel);
    } catch {
      // The work's error is what the caller needs; an unreleased key is
      // taken over when its lease runs out.
    }
    throw e;
  }
  clearTimeout(leaseTimer);
  const c = await client.complete(scope, key, token, { result: stored, ...call });
  if (c.outcome === Outcome.COMPLETED) return decode(stored);
  if (c.outcome === Outcome.NOT_OWNER) {
    throw new errors.FencedError(
      `${scope}/${key}: NOT_OWNER on complete: the lease ran out and another owner took over; ` +
      'the result was not stored',
      { answer: c, node: c.node, requestId: c.requestId },
    );
  }
  throw new errors.OutcomeError(`${scope}/${key}: complete answered ${c.outcome}`, {
    outcome: c.outcome, answer: c, node: c.node, requestId: c.requestId,
  });
}

module.exports = { idempotent, DEFAULT_WAIT_MS, DEFAULT_POLL_MS };
