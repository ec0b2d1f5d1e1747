'use strict';
// once-client: the Node.js client of a once cluster, over its HTTP/JSON API
// (docs/http-api.md). CommonJS source; index.mjs is the ESM entry point and
// index.d.ts the TypeScript declarations (kept in step by tests/unit).

const { Client, DEFAULT_TIMEOUT_MS } = require('./lib/client');
const { idempotent } = require('./lib/idempotent');
const { Outcome, Kind, State } = require('./lib/answers');
const errors = require('./lib/errors');
const { newRequestId } = require('./lib/args');

/**
 * Run fn at most once per (scope, key) across every process that shares
 * the cluster: see lib/idempotent.js and the README.
 */
Client.prototype.idempotent = function (scope, key, fn, options) {
  return idempotent(this, scope, key, fn, options);
};

const VERSION = require('./package.json').version;

module.exports = {
  Client,
  Outcome,
  Kind,
  State,
  OnceError: errors.OnceError,
  NotAppliedError: errors.NotAppliedError,
  OutcomeUnknownError: errors.OutcomeUnknownError,
  DefiniteError: errors.DefiniteError,
  InvalidArgumentError: errors.InvalidArgumentError,
  PermissionDeniedError: errors.PermissionDeniedError,
  ClusterMismatchError: errors.ClusterMismatchError,
  OutcomeError: errors.OutcomeError,
  FencedError: errors.FencedError,
  InProgressError: errors.InProgressError,
  newRequestId,
  DEFAULT_TIMEOUT_MS,
  VERSION,
};
