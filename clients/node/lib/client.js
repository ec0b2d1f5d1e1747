'use strict';
// The client: the calls of docs/http-api.md with libonce's guarantees
// (docs/design.md §1.6, §1.11, §5; include/once.h, "Model"):
//
//   - request ids: a fresh 128-bit id per call (or the caller's), sent with
//     every attempt of that call and never with another call;
//   - node selection: a call starts at the node that last answered; it moves
//     to the next node after an attempt that certainly did not apply
//     (connection refused, UNAVAILABLE...), with a short backoff. After an
//     attempt whose outcome is unknown (504, the connection lost after
//     sending, no answer in time) it is retried only with the same request
//     id, which the state machine recognizes (ACCEPTED `retry`); any node
//     forwards to the leader, so that retry may go to the next node too, as
//     libonce's does (src/client/op.c). From then on the call's `applied`
//     stays "unknown" whatever later attempts say;
//   - INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION are final;
//   - the cluster id is pinned at the first decision (or given), and an
//     answer of another cluster ends the call with ClusterMismatchError;
//   - every call has a deadline (timeoutMs, else the client's) and may take
//     an AbortSignal; one attempt waits at most half of what remains (at
//     least 1 s) so that a node that swallows requests cannot take it all.

const args = require('./args');
const answers = require('./answers');
const errors = require('./errors');
const { Transport, TransportError } = require('./transport');

const DEFAULT_TIMEOUT_MS = 5000;
const BACKOFF_FIRST_MS = 20;
const BACKOFF_MAX_MS = 200;
const ATTEMPT_MIN_MS = 1000;
// The node's own deadline is set a little before ours, so that its answer
// (504 with the request id, or 503) arrives before we give up on it.
const NODE_DEADLINE_MARGIN_MS = 50;

// Statuses after which the call is over (libonce's client_decide).
const FINAL_STATUSES = new Set(['INVALID_ARGUMENT', 'PERMISSION_DENIED', 'FAILED_PRECONDITION']);
// Statuses that may have applied whatever `applied` says: a forwarding node
// answers its own deadline although the leader may have had the call.
const MAYBE_APPLIED_STATUSES = new Set(['UNKNOWN', 'DEADLINE_EXCEEDED']);

function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (ms <= 0) {
      resolve();
      return;
    }
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      if (signal) signal.removeEventListener('abort', done);
      resolve();
    }
    if (signal) signal.addEventListener('abort', done, { once: true });
  });
}

function backoffNext(prev) {
  if (prev === 0) return BACKOFF_FIRST_MS;
  return Math.min(prev * 2, BACKOFF_MAX_MS);
}

function attemptBudget(remaining, split) {
  if (!split || remaining <= 2 * ATTEMPT_MIN_MS) return remaining;
  return Math.max(Math.floor(remaining / 2), ATTEMPT_MIN_MS);
}

class Client {
  /**
   * @param {object} options
   * @param {string[]} options.nodes base URLs of the nodes' HTTP listeners
   *   ("http://127.0.0.1:7121"; "IP:PORT" means http, or https with tls)
   * @param {string} [options.clusterId] 32 hex digits: accept this cluster
   *   only (default: pin the first that answers)
   * @param {number|string} [options.timeoutMs] default deadline of a call
   *   (5000)
   * @param {object} [options.tls] { ca, cert, key } (PEM content) or
   *   { caFile, certFile, keyFile }: HTTPS with a client certificate
   */
  constructor(options) {
    if (!args.isPlainObject(options)) throw new errors.InvalidArgumentError('Client: options must be an object');
    args.checkOptions('Client', options, ['nodes', 'clusterId', 'timeoutMs', 'tls']);
    const { nodes, tls } = options;
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new errors.InvalidArgumentError('nodes: give 1..64 node URLs');
    }
    if (nodes.length > args.NODES_MAX) {
      throw new errors.InvalidArgumentError(`nodes: ${nodes.length} given, at most ${args.NODES_MAX}`);
    }
    if (tls !== undefined && tls !== null && !args.isPlainObject(tls)) {
      throw new errors.InvalidArgumentError('tls: must be an object');
    }
    if (tls) args.checkOptions('tls', tls, ['ca', 'cert', 'key', 'caFile', 'certFile', 'keyFile']);
    this._nodes = nodes.map((n, i) => args.checkNode(i, n, Boolean(tls)));
    this._timeoutMs = args.checkTimeout(options.timeoutMs, DEFAULT_TIMEOUT_MS);
    this._clusterId = args.checkClusterId(options.clusterId);
    try {
      this._transport = new Transport(tls || undefined);
    } catch (e) {
      throw new errors.InvalidArgumentError(e.message, { cause: e });
    }
    this._preferred = 0;
  }

  /** The base URLs of the nodes, as the client uses them. */
  get nodes() {
    return this._nodes.slice();
  }

  /** The pinned cluster id (32 hex digits), or null before the first answer. */
  get clusterId() {
    return this._clusterId;
  }

  /** Close kept-alive HTTPS connections. The client stays usable. */
  close() {
    this._transport.close();
  }

  /**
   * Claim (scope, key): a NONCE by default (with ttl, or ts and window), an
   * IDEMPOTENT record with `idempotent: true` (lease, payloadHash).
   * Resolves to the cluster's decision; rejects with a OnceError.
   */
  claim(scope, key, options) {
    return this._run('claim', () => {
      const r = args.claimRequest(scope, key, options, this._timeoutMs);
      return { ...r, method: 'POST', path: '/v1/claim', write: true };
    });
  }

  /**
   * Claim 1..4096 items in one call (POST /v1/claims): each item is
   * { scope, key, ...the options of claim but timeoutMs and signal }. The
   * cluster applies them in order after one consensus round. Resolves to
   * one entry per item, in order: the ClaimAnswer a single claim would
   * have had at that point (a key twice: ACCEPTED, then REPLAYED), or, for
   * an item refused alone, a OnceError (not thrown) with `index`, `code`,
   * `applied` and the item's `requestId`. A failure of the whole call (no
   * leader, its deadline) rejects, as for claim; the call is retried with
   * the same request ids, so an item already applied answers ACCEPTED
   * `retry: true`; its error carries them (`requestIds`) for a retry by
   * the caller.
   */
  claimBatch(items, options) {
    let ids = [];
    return this._run('claimBatch', () => {
      const r = args.claimBatchRequest(items, options, this._timeoutMs);
      ids = r.body.items.map((it) => it.request_id);
      return { ...r, method: 'POST', path: '/v1/claims', write: true };
    }).catch((e) => {
      // The items' ids: a retry after an unknown outcome gives them again.
      if (e instanceof errors.OnceError && ids.length > 0) e.requestIds = ids;
      throw e;
    });
  }

  /** The owner stores its result (a string or bytes, 0..64 KiB). */
  complete(scope, key, ownerToken, options) {
    return this._run('complete', () => {
      const r = args.completeRequest(scope, key, ownerToken, options, this._timeoutMs);
      return { ...r, method: 'POST', path: '/v1/complete', write: true };
    });
  }

  /** The owner gives the key up; with terminal: true it fails it for good
   * (FAILED, with `error` stored). */
  release(scope, key, ownerToken, options) {
    return this._run('release', () => {
      const r = args.releaseRequest(scope, key, ownerToken, options, this._timeoutMs);
      return { ...r, method: 'POST', path: '/v1/release', write: true };
    });
  }

  /** The record and its attempts (linearizable): FOUND or NOT_FOUND. */
  lookup(scope, key, options) {
    return this._run('lookup', () => {
      const r = args.lookupRequest(scope, key, options, this._timeoutMs);
      return { ...r, method: 'GET', write: false };
    });
  }

  /** One node's own view (never forwarded): options.node (one of the
   * client's nodes), else the first that answers. */
  status(options) {
    return this._run('status', () => {
      const o = args.checkOptions('status', options, ['node', 'timeoutMs', 'signal']);
      let only;
      if (o.node !== undefined && o.node !== null) {
        const n = args.checkNode(0, o.node, this._nodes[0].startsWith('https:'));
        only = this._nodes.indexOf(n);
        if (only < 0) throw new errors.InvalidArgumentError(`node: ${o.node} is not one of the client's nodes`);
      }
      return {
        method: 'GET',
        path: '/v1/status',
        write: false,
        only,
        timeoutMs: args.checkTimeout(o.timeoutMs, this._timeoutMs),
        signal: args.checkSignal(o.signal),
      };
    });
  }

  // Argument errors reject the promise (never throw synchronously), before
  // anything is sent.
  async _run(call, prepare) {
    const req = prepare();
    return this._call(call, req);
  }

  async _call(call, req) {
    const start = Date.now();
    const deadline = start + req.timeoutMs;
    const requestId = req.body ? req.body.request_id : undefined;
    let node = req.only !== undefined ? req.only : this._preferred;
    let maybeApplied = false;
    let backoff = 0;
    let attempts = 0;
    let last = null; // the last attempt's error (a OnceError)

    const finalError = (e) => {
      // Once unknown, never back to false (a write only).
      if (req.write && maybeApplied && !(e instanceof errors.OutcomeUnknownError) &&
          !(e instanceof errors.DefiniteError)) {
        return new errors.OutcomeUnknownError(e.message, { ...e, cause: e.cause, requestId });
      }
      if (req.write && maybeApplied && e instanceof errors.DefiniteError) e.applied = errors.APPLIED_UNKNOWN;
      return e;
    };

    const cancelled = () => {
      const info = { code: 'CANCELLED', requestId, node: last ? last.node : undefined, cause: req.signal.reason };
      const msg = last === null ? 'aborted by the caller before sending'
        : `aborted by the caller after ${attempts} attempts; last error: ${last.message}`;
      return maybeApplied ? new errors.OutcomeUnknownError(msg, info) : new errors.NotAppliedError(msg, info);
    };

    for (;;) {
      if (req.signal && req.signal.aborted) throw cancelled();
      const now = Date.now();
      const remaining = deadline - now;
      const url = this._nodes[node] + req.path;
      const budget = attemptBudget(remaining, req.only === undefined && this._nodes.length > 1);
      attempts++;
      let body;
      if (req.body) {
        // The node's deadline for this attempt: what we wait, a little less.
        const t = Math.min(Math.max(budget - NODE_DEADLINE_MARGIN_MS, 1), args.ATTEMPT_TIMEOUT_MAX_MS);
        // A pinned client's write carries the pin: a node of another
        // cluster refuses it before proposing (503 FAILED_PRECONDITION,
        // applied "false"), so it never lands in a cluster we refuse.
        const pin = this._clusterId !== null ? { cluster_id: this._clusterId } : {};
        body = JSON.stringify({ ...req.body, ...pin, timeout: t });
      }
      let err;
      try {
        const res = await this._transport.request(url, req.method, body, budget, req.signal);
        const out = this._answer(call, req, res, this._nodes[node], requestId, maybeApplied);
        if (out.answer) {
          if (req.only === undefined) this._preferred = node;
          return out.answer;
        }
        err = out.error;
        if (out.final) throw finalError(err);
        if (out.maybeApplied && req.write) maybeApplied = true;
      } catch (e) {
        if (!(e instanceof TransportError)) throw e;
        const sent = e.sent && req.write;
        if (sent) maybeApplied = true;
        const info = { code: e.timedOut ? 'DEADLINE_EXCEEDED' : (sent ? 'UNKNOWN' : 'UNAVAILABLE'), requestId, node: this._nodes[node], cause: e.cause || e };
        err = sent ? new errors.OutcomeUnknownError(`${this._nodes[node]}: ${e.message}`, info)
          : new errors.NotAppliedError(`${this._nodes[node]}: ${e.message}`, info);
        if (req.only === undefined && this._preferred === node) {
          // Later calls should not start at a node that just failed.
          this._preferred = (node + 1) % this._nodes.length;
        }
      }
      last = err;
      if (req.signal && req.signal.aborted) throw cancelled();
      if (req.only !== undefined) throw finalError(last);
      node = (node + 1) % this._nodes.length;
      backoff = backoffNext(backoff);
      let delay = backoff;
      const left = deadline - Date.now();
      if (delay >= left) {
        // Keep trying into the deadline's last moments (a leader may just
        // have been elected), but not with a sliver of time.
        if (left < 2 * BACKOFF_FIRST_MS) {
          const msg = `deadline of ${req.timeoutMs} ms: ${attempts} attempts, no decision; last error: ${last.message}`;
          const info = { code: last.code, requestId, node: last.node, leaderHint: last.leaderHint, httpStatus: last.httpStatus, answer: last.answer, cause: last };
          throw maybeApplied ? new errors.OutcomeUnknownError(msg, info) : new errors.NotAppliedError(msg, info);
        }
        delay = Math.floor(left / 2);
      }
      await sleep(delay, req.signal);
    }
  }

  /**
   * One HTTP answer: { answer } (a decision), or { error, final,
   * maybeApplied }.
   */
  _answer(call, req, res, node, requestId, earlierMaybe) {
    let obj;
    try {
      obj = JSON.parse(res.text);
    } catch {
      obj = undefined;
    }
    if (call === 'claimBatch' && Array.isArray(obj)) {
      return this._batchAnswer(req, obj, res.status, node, earlierMaybe);
    }
    const isObj = args.isPlainObject(obj);
    if (!isObj) {
      // 404/405: a node without this API (another program, an older node):
      // nothing was done there. Anything else that is not our JSON is a
      // malformed answer: perhaps applied for a write.
      const nothing = res.status === 404 || res.status === 405;
      const msg = `${node}: HTTP ${res.status}, not a JSON answer: ${res.text.slice(0, 200)}`;
      const maybe = req.write && !nothing;
      const info = { code: nothing ? 'UNAVAILABLE' : 'UNKNOWN', requestId, node, httpStatus: res.status };
      return {
        error: maybe ? new errors.OutcomeUnknownError(msg, info) : new errors.NotAppliedError(msg, info),
        final: false,
        maybeApplied: maybe,
      };
    }
    // The pin comes first, errors included: another cluster never decides.
    const cid = typeof obj.cluster_id === 'string' ? obj.cluster_id.toLowerCase() : '';
    if (cid !== '' && this._clusterId !== null && cid !== this._clusterId) {
      return {
        error: new errors.ClusterMismatchError(
          `cluster id mismatch: pinned ${this._clusterId}, answered ${cid} by ${node}` +
          ' (a re-created, restored or other cluster: refused)',
          { requestId, node, httpStatus: res.status, answer: obj, expected: this._clusterId, actual: cid,
            applied: earlierMaybe && req.write ? errors.APPLIED_UNKNOWN : errors.APPLIED_FALSE },
        ),
        final: true,
      };
    }
    if (typeof obj.error === 'string') return this._errorAnswer(obj, res.status, node, requestId, req);
    if (res.status !== 200) {
      const msg = `${node}: HTTP ${res.status} without an error field`;
      const info = { code: 'UNKNOWN', requestId, node, httpStatus: res.status, answer: obj };
      return {
        error: req.write ? new errors.OutcomeUnknownError(msg, info) : new errors.NotAppliedError(msg, info),
        final: false,
        maybeApplied: req.write,
      };
    }
    try {
      if (!/^[0-9a-f]{32}$/.test(cid)) throw new answers.MalformedAnswer('cluster_id: missing from a decision');
      if (call === 'claimBatch') throw new answers.MalformedAnswer('an object, not the array of a batch\'s answers');
      const a = call === 'status' ? answers.decodeStatus(obj, node) : answers.decodeResult(call, obj, node);
      if (requestId !== undefined && a.requestId !== undefined && a.requestId !== requestId) {
        throw new answers.MalformedAnswer(`request_id: ${a.requestId}, not this call's ${requestId}`);
      }
      if (this._clusterId === null) this._clusterId = cid;
      return { answer: a };
    } catch (e) {
      if (!(e instanceof answers.MalformedAnswer)) throw e;
      const msg = `malformed answer from ${node}: ${e.message}`;
      const info = { code: req.write ? 'UNKNOWN' : 'UNAVAILABLE', requestId, node, httpStatus: res.status, answer: obj };
      return {
        error: req.write ? new errors.OutcomeUnknownError(msg, info) : new errors.NotAppliedError(msg, info),
        final: false,
        maybeApplied: req.write,
      };
    }
  }

  /**
   * A batch's 200 answer: one object per item, in order. { answer: the
   * entries } or, for an answer that does not fit the request, the error
   * a malformed answer is (perhaps applied: retried with the same ids).
   */
  _batchAnswer(req, arr, httpStatus, node, earlierMaybe) {
    const sent = req.body.items;
    try {
      if (httpStatus !== 200) throw new answers.MalformedAnswer(`HTTP ${httpStatus} with an array`);
      if (arr.length !== sent.length) {
        throw new answers.MalformedAnswer(`${arr.length} answers to ${sent.length} items`);
      }
      let cid = null;
      for (const [i, o] of arr.entries()) {
        if (!args.isPlainObject(o)) throw new answers.MalformedAnswer(`[${i}]: want an object`);
        const c = typeof o.cluster_id === 'string' ? o.cluster_id.toLowerCase() : '';
        if (!/^[0-9a-f]{32}$/.test(c)) throw new answers.MalformedAnswer(`[${i}].cluster_id: missing`);
        if (cid !== null && c !== cid) throw new answers.MalformedAnswer(`[${i}].cluster_id: ${c}, not ${cid}`);
        cid = c;
      }
      // The pin first: another cluster's answer decides nothing.
      if (this._clusterId !== null && cid !== this._clusterId) {
        return {
          error: new errors.ClusterMismatchError(
            `cluster id mismatch: pinned ${this._clusterId}, answered ${cid} by ${node}` +
            ' (a re-created, restored or other cluster: refused)',
            { node, httpStatus, answer: arr, expected: this._clusterId, actual: cid,
              applied: earlierMaybe ? errors.APPLIED_UNKNOWN : errors.APPLIED_FALSE },
          ),
          final: true,
        };
      }
      const out = arr.map((o, i) => {
        const rid = sent[i].request_id;
        if (typeof o.error === 'string') return this._batchItemError(o, i, rid, node, earlierMaybe);
        const a = answers.decodeResult('claim', o, node);
        if (a.requestId !== rid) {
          throw new answers.MalformedAnswer(`[${i}].request_id: ${a.requestId}, not the item's ${rid}`);
        }
        return a;
      });
      if (this._clusterId === null) this._clusterId = cid;
      return { answer: out };
    } catch (e) {
      if (!(e instanceof answers.MalformedAnswer)) throw e;
      const msg = `malformed batch answer from ${node}: ${e.message}`;
      return {
        error: new errors.OutcomeUnknownError(msg, { code: 'UNKNOWN', node, httpStatus, answer: arr }),
        final: false,
        maybeApplied: true,
      };
    }
  }

  /** An item refused alone, as the OnceError its status and `applied`
   * say (not thrown: an entry of the batch's answer). */
  _batchItemError(obj, index, sentRid, node, earlierMaybe) {
    const code = obj.error;
    const maybe = earlierMaybe || obj.applied !== 'false' || MAYBE_APPLIED_STATUSES.has(code);
    const text = typeof obj.message === 'string' ? obj.message : '';
    const message = `items[${index}]: ${code} (applied ${maybe ? 'unknown' : 'false'}) from ${node}: ${text}`;
    const info = {
      code,
      requestId: typeof obj.request_id === 'string' ? obj.request_id : sentRid,
      node,
      httpStatus: 200,
      answer: obj,
    };
    let e;
    if (code === 'INVALID_ARGUMENT') e = new errors.InvalidArgumentError(message, info);
    else if (code === 'PERMISSION_DENIED') e = new errors.PermissionDeniedError(message, info);
    else if (FINAL_STATUSES.has(code)) e = new errors.DefiniteError(message, info);
    else if (maybe) e = new errors.OutcomeUnknownError(message, info);
    else e = new errors.NotAppliedError(message, info);
    if (maybe) e.applied = errors.APPLIED_UNKNOWN;
    e.index = index;
    return e;
  }

  _errorAnswer(obj, httpStatus, node, requestId, req) {
    const code = obj.error;
    const message = `${code} (applied ${obj.applied === 'unknown' ? 'unknown' : 'false'}) from ${node}: ${typeof obj.message === 'string' ? obj.message : ''}`;
    const info = {
      code,
      requestId: typeof obj.request_id === 'string' ? obj.request_id : requestId,
      leaderHint: typeof obj.leader_hint === 'string' ? obj.leader_hint : '',
      node,
      httpStatus,
      answer: obj,
    };
    // Anything but an explicit "false" may have applied.
    const maybe = req.write && (obj.applied !== 'false' || MAYBE_APPLIED_STATUSES.has(code));
    if (FINAL_STATUSES.has(code)) {
      let e;
      if (code === 'INVALID_ARGUMENT') e = new errors.InvalidArgumentError(message, info);
      else if (code === 'FAILED_PRECONDITION' && typeof obj.message === 'string' &&
               obj.message.includes('cluster id mismatch')) {
        // The node refused our pin (an answer without its own cluster id,
        // else the pin check in _answer had caught it).
        e = new errors.ClusterMismatchError(message, { ...info, expected: this._clusterId });
      }
      else if (code === 'PERMISSION_DENIED') e = new errors.PermissionDeniedError(message, info);
      else e = new errors.DefiniteError(message, info);
      if (maybe) e.applied = errors.APPLIED_UNKNOWN;
      return { error: e, final: true, maybeApplied: maybe };
    }
    // The state machine's own refusal of a full table (an `outcome` beside
    // the error): decided, not applied; repeating it now gets the same.
    if (code === 'RESOURCE_EXHAUSTED' && typeof obj.outcome === 'string') {
      return { error: new errors.NotAppliedError(message, info), final: true, maybeApplied: false };
    }
    if (maybe) return { error: new errors.OutcomeUnknownError(message, info), final: false, maybeApplied: true };
    return { error: new errors.NotAppliedError(message, info), final: false, maybeApplied: false };
  }
}

module.exports = { Client, DEFAULT_TIMEOUT_MS };
