'use strict';
// Errors of the once client. Every error the client throws is a OnceError;
// its class says what the caller may do next (docs/design.md §5, "Every
// error says whether the call was applied"):
//
//   NotAppliedError      the call certainly did not apply (applied "false"):
//                        retrying it anywhere, even as a new call, is safe.
//   OutcomeUnknownError  the call may have applied (applied "unknown"):
//                        retry it only with the same request id
//                        (err.requestId), which the cluster recognizes.
//   DefiniteError        final: repeating the call gets the same refusal
//                        (INVALID_ARGUMENT, PERMISSION_DENIED,
//                        FAILED_PRECONDITION, another cluster's answer).
//
// A decision of the cluster (REPLAYED, DUPLICATE, NOT_OWNER, ...) is not an
// error of the client: the calls return it as an answer. Only the
// idempotent helper turns the outcomes it cannot use into OutcomeError.

const APPLIED_FALSE = 'false';
const APPLIED_UNKNOWN = 'unknown';

class OnceError extends Error {
  /**
   * @param {string} message
   * @param {object} [info] code (the status name, e.g. "UNAVAILABLE"),
   *   applied ("false" | "unknown"), requestId, leaderHint, httpStatus,
   *   node (the base URL that answered), answer (the JSON object), cause.
   */
  constructor(message, info = {}) {
    super(message, info.cause !== undefined ? { cause: info.cause } : undefined);
    this.name = new.target.name;
    this.code = info.code || 'UNKNOWN';
    this.applied = info.applied === APPLIED_UNKNOWN ? APPLIED_UNKNOWN : APPLIED_FALSE;
    this.requestId = info.requestId;
    this.leaderHint = info.leaderHint || '';
    this.httpStatus = info.httpStatus;
    this.node = info.node;
    this.answer = info.answer;
  }
}

/** Certainly not applied: safe to retry anywhere (a new call included). */
class NotAppliedError extends OnceError {}

/** Perhaps applied: retry with the same request id (err.requestId) only. */
class OutcomeUnknownError extends OnceError {
  constructor(message, info = {}) {
    super(message, { ...info, applied: APPLIED_UNKNOWN });
  }
}

/** Final: the same call gets the same refusal. */
class DefiniteError extends OnceError {}

/** A bad argument (found by the client before any network call, or by the
 * cluster: HTTP 400). */
class InvalidArgumentError extends DefiniteError {
  constructor(message, info = {}) {
    super(message, { code: 'INVALID_ARGUMENT', ...info });
  }
}

/** The caller's certificate lacks the right (HTTP 403). */
class PermissionDeniedError extends DefiniteError {
  constructor(message, info = {}) {
    super(message, { code: 'PERMISSION_DENIED', ...info });
  }
}

/** An answer from another cluster than the pinned one: an amnesiac or
 * re-created authority, or a wrong address. Never retried elsewhere.
 * applied is "unknown" when an earlier attempt of the call may have
 * applied on the pinned cluster. */
class ClusterMismatchError extends DefiniteError {
  constructor(message, info = {}) {
    super(message, { code: 'FAILED_PRECONDITION', ...info });
    this.expected = info.expected;
    this.actual = info.actual;
  }
}

/** The idempotent helper got an answer it cannot turn into a result:
 * CONFLICT (another payload hash), FAILED (the key failed for good; its
 * stored error in storedError), NOT_FOUND, ... outcome and answer say which. */
class OutcomeError extends DefiniteError {
  constructor(message, info = {}) {
    super(message, { code: info.outcome, ...info });
    this.outcome = info.outcome;
    this.storedError = info.storedError;
  }
}

/** The idempotent helper's complete (or release) answered NOT_OWNER: the
 * lease ran out and another process took the key over. The result was NOT
 * stored and nothing was overwritten. */
class FencedError extends OutcomeError {
  constructor(message, info = {}) {
    super(message, { outcome: 'NOT_OWNER', ...info });
  }
}

/** The idempotent helper saw IN_PROGRESS (another owner holds the key)
 * until its wait ran out. Nothing was applied by this process: retry later.
 * retryAfterMs: the last answer's time to the owner's lease expiry. */
class InProgressError extends NotAppliedError {
  constructor(message, info = {}) {
    super(message, { code: 'IN_PROGRESS', ...info });
    this.retryAfterMs = info.retryAfterMs;
  }
}

module.exports = {
  APPLIED_FALSE,
  APPLIED_UNKNOWN,
  OnceError,
  NotAppliedError,
  OutcomeUnknownError,
  DefiniteError,
  InvalidArgumentError,
  PermissionDeniedError,
  ClusterMismatchError,
  OutcomeError,
  FencedError,
  InProgressError,
};
