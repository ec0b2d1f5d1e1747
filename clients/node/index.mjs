// once-client, ESM entry point: the CommonJS module's exports (index.js).
import cjs from './index.js';

export const {
  Client,
  Outcome,
  Kind,
  State,
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
  newRequestId,
  DEFAULT_TIMEOUT_MS,
  VERSION,
} = cjs;
export default cjs;
