// Type declarations of once-client (written by hand; tests/unit/dts.test.js
// checks that they declare every export and every answer field).

/// <reference types="node" />

/** The cluster's decisions (docs/state-machine.md). */
export declare const Outcome: {
  readonly ACCEPTED: 'ACCEPTED';
  readonly REPLAYED: 'REPLAYED';
  readonly DUPLICATE: 'DUPLICATE';
  readonly IN_PROGRESS: 'IN_PROGRESS';
  readonly CONFLICT: 'CONFLICT';
  readonly STALE: 'STALE';
  readonly FUTURE: 'FUTURE';
  readonly FAILED: 'FAILED';
  readonly NOT_OWNER: 'NOT_OWNER';
  readonly NOT_FOUND: 'NOT_FOUND';
  readonly COMPLETED: 'COMPLETED';
  readonly RELEASED: 'RELEASED';
  readonly FOUND: 'FOUND';
  readonly OK: 'OK';
};
export type Outcome = (typeof Outcome)[keyof typeof Outcome];

export type ClaimOutcome = 'ACCEPTED' | 'REPLAYED' | 'DUPLICATE' | 'IN_PROGRESS' | 'CONFLICT' | 'STALE' | 'FUTURE' | 'FAILED';
export type CompleteOutcome = 'COMPLETED' | 'NOT_OWNER' | 'NOT_FOUND' | 'CONFLICT';
export type ReleaseOutcome = 'RELEASED' | 'FAILED' | 'NOT_OWNER' | 'NOT_FOUND' | 'CONFLICT';
export type LookupOutcome = 'FOUND' | 'NOT_FOUND';

export declare const Kind: { readonly NONCE: 'NONCE'; readonly IDEMPOTENT: 'IDEMPOTENT' };
export type Kind = (typeof Kind)[keyof typeof Kind];

export declare const State: {
  readonly SEEN: 'SEEN';
  readonly PENDING: 'PENDING';
  readonly COMPLETED: 'COMPLETED';
  readonly RELEASED: 'RELEASED';
  readonly FAILED: 'FAILED';
};
export type State = (typeof State)[keyof typeof State];

/** "250ms", "30s", "10m", "24h", or integer milliseconds. */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h'}`;
/** An integer as the node sends it: a number, or a bigint above 2^53. */
export type Integer = number | bigint;

export interface TlsOptions {
  /** PEM content of the CA bundle the nodes' certificates chain to. */
  ca?: string | Buffer;
  /** PEM content of this client's certificate chain (with key). */
  cert?: string | Buffer;
  /** PEM content of its private key (with cert). */
  key?: string | Buffer;
  /** The same three as file paths, read once by the constructor. */
  caFile?: string;
  certFile?: string;
  keyFile?: string;
}

export interface ClientOptions {
  /** Base URLs of the nodes' HTTP listeners (1..64): "http://127.0.0.1:7121",
   * or "IP:PORT" (http; https when tls is given). */
  nodes: string[];
  /** 32 hex digits: accept this cluster only. Default: pin the first that answers. */
  clusterId?: string;
  /** The default deadline of a call (default 5000 ms; at most 1 h). */
  timeoutMs?: Duration;
  /** HTTPS with a client certificate. */
  tls?: TlsOptions;
}

export interface CallOptions {
  /** This call's deadline (default: the client's). */
  timeoutMs?: Duration;
  /** Ends the call early (then CANCELLED: NotAppliedError or OutcomeUnknownError). */
  signal?: AbortSignal;
}

export interface ClaimOptions extends CallOptions {
  /** Retention (default 24h when neither ttl nor ts is given). */
  ttl?: Duration;
  /** The signed timestamp (unix ms); requires window. */
  ts?: number | bigint | string | Date;
  /** The signature window, with ts. */
  window?: Duration;
  /** An IDEMPOTENT record (owner token, lease, stored result). */
  idempotent?: boolean;
  /** IDEMPOTENT only: 0..64 bytes, hex or bytes. */
  payloadHash?: string | Uint8Array;
  /** IDEMPOTENT only: the owner's lease (0 or absent: the cluster's default). */
  lease?: Duration;
  /** 0..128 bytes of evidence kept with the attempt (a pod name, a job id). */
  executionId?: string;
  /** 32 hex digits: only to retry a call whose outcome was unknown. */
  requestId?: string;
  /** NONCE only: an integer 1..64 (default 1), the number of request ids
   * the nonce takes before REPLAYED; the first claim fixes it, another
   * value is CONFLICT. Needs a cluster at log schema 3. */
  maxUses?: number;
  /** IDEMPOTENT only, kept by ttl (not ts): each DUPLICATE, IN_PROGRESS or
   * FAILED answer moves the expiry to its log time + ttl, never past the
   * cluster's max_ttl from the first claim. Needs log schema 3. */
  sliding?: boolean;
}

/** One item of claimBatch: a claim's arguments and options (without
 * timeoutMs and signal, which are the batch's). */
export interface BatchClaim extends Omit<ClaimOptions, 'timeoutMs' | 'signal'> {
  scope: string;
  key: string;
}

/** An item the cluster refused alone (a bound, a missing right, a quota,
 * UNKNOWN for an answer that did not fit): returned, not thrown. */
export type BatchItemError = OnceError & { index: number };

/** One entry of claimBatch's answer: the item's ClaimAnswer or its error
 * (tell them apart with `instanceof OnceError`). */
export type BatchResult = ClaimAnswer | BatchItemError;

export interface CompleteOptions extends CallOptions {
  /** The result to store, 0..64 KiB (a string is stored as UTF-8). */
  result?: string | Uint8Array;
  requestId?: string;
}

export interface ReleaseOptions extends CallOptions {
  /** true: FAILED for good, with error stored. */
  terminal?: boolean;
  /** 0..1024 bytes, only with terminal. */
  error?: string;
  requestId?: string;
}

export interface StatusOptions extends CallOptions {
  /** One of the client's nodes (default: the first that answers). */
  node?: string;
}

/** One kept claim of a record (the first and the last 4). */
export interface Attempt {
  requestId: string;
  executionId?: string;
  /** When the execution id is not UTF-8: its bytes in base64. */
  executionIdB64?: string;
  index: Integer;
  timeMs: Integer;
  outcome: Outcome;
  retry: boolean;
}

/** Who answered: every answer carries it. */
export interface Origin {
  clusterId: string;
  nodeId: string;
  bootId: string;
  /** The base URL the client asked. */
  node: string;
  /** The JSON object as it came. */
  raw: Record<string, unknown>;
}

/** The answer to claim, complete, release and lookup: fields as they apply. */
export interface Answer<O extends Outcome = Outcome> extends Origin {
  outcome: O;
  retry: boolean;
  /** The cluster's log time (unix ms) of the decision. */
  logTimeMs?: Integer;
  /** This call's request id. */
  requestId?: string;
  firstRequestId?: string;
  firstIndex?: Integer;
  firstTimeMs?: Integer;
  attemptsTotal?: Integer;
  /** lookup (and whenever the cluster sends some). */
  attempts?: Attempt[];
  /** "GROUP:INDEX:SLOT", only to the owner. */
  ownerToken?: string;
  ownerAttempt?: Integer;
  /** The stored result (DUPLICATE, COMPLETED, lookup of a COMPLETED record). */
  result?: Buffer;
  resultB64?: string;
  /** The stored error of a FAILED record. */
  storedError?: string;
  storedErrorB64?: string;
  /** IN_PROGRESS: the time to the owner's lease expiry. */
  retryAfterMs?: Integer;
  reason?: string;
  kind?: Kind;
  state?: State;
  expiresMs?: Integer;
  leaseExpiresMs?: Integer;
  /** NONCE records of maxUses > 1: the uses it takes, has had, has left. */
  maxUses?: Integer;
  uses?: Integer;
  usesLeft?: Integer;
  /** true: an IDEMPOTENT record whose retention slides (false when the
   * node does not say so). */
  sliding: boolean;
  /** lookup: the id of the node that read its table (16 hex digits). */
  servedBy?: string;
}

export type ClaimAnswer = Answer<ClaimOutcome>;
export type CompleteAnswer = Answer<CompleteOutcome>;
export type ReleaseAnswer = Answer<ReleaseOutcome>;
export type LookupAnswer = Answer<LookupOutcome>;

export interface Member {
  id: string;
  raftAddr: string;
  clientAddr: string;
  role: 'VOTER' | 'STANDBY' | 'SPARE' | string;
  reachable: boolean;
}

/** One node's own view (GET /v1/status). */
export interface StatusAnswer extends Origin {
  outcome: 'OK';
  role: 'LEADER' | 'FOLLOWER' | 'CANDIDATE' | 'UNAVAILABLE' | string;
  memberRole: string;
  term: Integer;
  commitIndex: Integer;
  appliedIndex: Integer;
  appliedDigest: string;
  restoredFrom?: string;
  restoreTimeMs?: Integer;
  replayWindowUntilMs?: Integer;
  restoreStaleTsMs?: Integer;
  backupsOpen?: Integer;
  /** Set while the node neither votes nor campaigns: its store cut a torn
   * tail at this index (onced --accept-cut-tail is the way out). */
  noVoteCutIndex?: Integer;
  stateDigest?: string;
  schema: Integer;
  schemaMax: Integer;
  configIndex: Integer;
  configVoters: string[];
  leader: string;
  leaderAddr: string;
  storeBackend: string;
  members: Member[];
}

/** What fn gets from client.idempotent once this process owns the key. */
export interface IdempotentContext {
  ownerToken: string;
  ownerAttempt: Integer | undefined;
  leaseExpiresMs: Integer | undefined;
  /** Aborts when the lease (as the claim's answer gave it) has run out. */
  signal: AbortSignal;
  claim: ClaimAnswer;
}

export interface IdempotentOptions extends CallOptions {
  lease?: Duration;
  payloadHash?: string | Uint8Array;
  executionId?: string;
  /** How long to wait while another owner holds the key (default 30 s). */
  waitMs?: Duration;
  /** The longest pause between two claims while waiting (default 1 s). */
  pollMs?: Duration;
  /** When fn throws: release terminally (FAILED for good, with the error
   * stored) or not (another attempt may take over). Default false. */
  terminal?: boolean | ((error: unknown) => boolean);
  /** The result into the stored text (default JSON.stringify). */
  encode?: (value: any) => string | Uint8Array;
  /** The stored bytes back into a result (default JSON.parse of UTF-8). */
  decode?: (stored: Buffer) => any;
}

export declare class Client {
  constructor(options: ClientOptions);
  /** The nodes' base URLs as the client uses them. */
  readonly nodes: string[];
  /** The pinned cluster id, or null before the first answer. */
  readonly clusterId: string | null;
  claim(scope: string, key: string, options?: ClaimOptions): Promise<ClaimAnswer>;
  /** 1..4096 claims in one call, applied in order: one entry per item, in
   * order. Rejects only when the whole call fails (then the error carries
   * `requestIds`, the items' ids, for a retry). */
  claimBatch(items: BatchClaim[], options?: CallOptions): Promise<BatchResult[]>;
  complete(scope: string, key: string, ownerToken: string, options?: CompleteOptions): Promise<CompleteAnswer>;
  release(scope: string, key: string, ownerToken: string, options?: ReleaseOptions): Promise<ReleaseAnswer>;
  lookup(scope: string, key: string, options?: CallOptions): Promise<LookupAnswer>;
  status(options?: StatusOptions): Promise<StatusAnswer>;
  /** Run fn at most once per (scope, key) across every process: see README.
   * Resolves to the result as stored: decode(encode(value)), by default a
   * JSON round trip (a Date comes back as its string), the same for the run
   * that did the work and for every DUPLICATE. */
  idempotent<T>(
    scope: string,
    key: string,
    fn: (ctx: IdempotentContext) => T | Promise<T>,
    options?: IdempotentOptions,
  ): Promise<T>;
  /** Close kept-alive HTTPS connections (the client stays usable). */
  close(): void;
}

export type Applied = 'false' | 'unknown';

export interface OnceErrorInfo {
  code?: string;
  applied?: Applied;
  requestId?: string;
  leaderHint?: string;
  httpStatus?: number;
  node?: string;
  answer?: unknown;
  cause?: unknown;
}

/** Every error of the client. */
export declare class OnceError extends Error {
  constructor(message: string, info?: OnceErrorInfo);
  /** The status name: UNAVAILABLE, UNKNOWN, DEADLINE_EXCEEDED, CANCELLED,
   * INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION,
   * RESOURCE_EXHAUSTED; the outcome for OutcomeError. */
  code: string;
  /** "false": certainly not applied; "unknown": perhaps. */
  applied: Applied;
  /** The call's request id (a retry after an unknown outcome needs it). */
  requestId: string | undefined;
  leaderHint: string;
  httpStatus: number | undefined;
  /** The node whose answer (or silence) ended the call. */
  node: string | undefined;
  /** The JSON error object, or the answer that made it. */
  answer: unknown;
  /** claimBatch: the item's position (an entry of its answer). */
  index?: number;
  /** claimBatch: the items' request ids (an error of the whole call). */
  requestIds?: string[];
}
/** Certainly not applied: safe to retry anywhere. */
export declare class NotAppliedError extends OnceError {}
/** Perhaps applied: retry only with the same requestId. */
export declare class OutcomeUnknownError extends OnceError {
  applied: 'unknown';
}
/** Final: the same call gets the same refusal. */
export declare class DefiniteError extends OnceError {}
export declare class InvalidArgumentError extends DefiniteError {}
export declare class PermissionDeniedError extends DefiniteError {}
/** An answer of another cluster than the pinned one. */
export declare class ClusterMismatchError extends DefiniteError {
  constructor(message: string, info?: OnceErrorInfo & { expected?: string; actual?: string });
  expected: string;
  actual: string;
}
/** The idempotent helper got CONFLICT, FAILED (storedError), NOT_FOUND, ... */
export declare class OutcomeError extends DefiniteError {
  constructor(message: string, info?: OnceErrorInfo & { outcome?: Outcome; storedError?: string });
  outcome: Outcome;
  storedError: string | undefined;
}
/** NOT_OWNER on the helper's complete: another process took over; nothing
 * was overwritten. */
export declare class FencedError extends OutcomeError {}
/** The helper saw IN_PROGRESS until its wait ran out. */
export declare class InProgressError extends NotAppliedError {
  constructor(message: string, info?: OnceErrorInfo & { retryAfterMs?: Integer });
  retryAfterMs: Integer | undefined;
}

/** A fresh request id: 128 random bits, 32 hex digits. */
export declare function newRequestId(): string;
/** The default deadline of a call, in ms (5000). */
export declare const DEFAULT_TIMEOUT_MS: number;
/** This package's version (the repository's, configure.ac). */
export declare const VERSION: string;
