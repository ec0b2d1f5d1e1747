'use strict';
// Answers: the JSON objects of docs/http-api.md ("Answers"; the fields of
// docs/oncectl.md, "Output") into plain objects with camelCase fields.
// Every field the node sends has a name here (a unit test checks that the
// recorded answers leave nothing out); `raw` keeps the object as it came.

/** The cluster's decisions a call can return (docs/state-machine.md). */
const Outcome = Object.freeze({
  ACCEPTED: 'ACCEPTED',
  REPLAYED: 'REPLAYED',
  DUPLICATE: 'DUPLICATE',
  IN_PROGRESS: 'IN_PROGRESS',
  CONFLICT: 'CONFLICT',
  STALE: 'STALE',
  FUTURE: 'FUTURE',
  FAILED: 'FAILED',
  NOT_OWNER: 'NOT_OWNER',
  NOT_FOUND: 'NOT_FOUND',
  COMPLETED: 'COMPLETED',
  RELEASED: 'RELEASED',
  FOUND: 'FOUND',
  OK: 'OK',
});

const Kind = Object.freeze({ NONCE: 'NONCE', IDEMPOTENT: 'IDEMPOTENT' });

const State = Object.freeze({
  SEEN: 'SEEN',
  PENDING: 'PENDING',
  COMPLETED: 'COMPLETED',
  RELEASED: 'RELEASED',
  FAILED: 'FAILED',
});

// The outcomes each call may return; anything else is a malformed answer.
const CALL_OUTCOMES = {
  claim: ['ACCEPTED', 'REPLAYED', 'DUPLICATE', 'IN_PROGRESS', 'CONFLICT', 'STALE',
    'FUTURE', 'FAILED'],
  complete: ['COMPLETED', 'NOT_OWNER', 'NOT_FOUND', 'CONFLICT'],
  release: ['RELEASED', 'FAILED', 'NOT_OWNER', 'NOT_FOUND', 'CONFLICT'],
  lookup: ['FOUND', 'NOT_FOUND'],
  status: ['OK'],
};

// JSON name -> [field name, type]. Types: s string, n integer, b boolean,
// x the special cases handled by name.
const RESULT_FIELDS = {
  outcome: ['outcome', 's'],
  retry: ['retry', 'b'],
  log_time_ms: ['logTimeMs', 'n'],
  request_id: ['requestId', 's'],
  first_request_id: ['firstRequestId', 's'],
  first_index: ['firstIndex', 'n'],
  first_time_ms: ['firstTimeMs', 'n'],
  attempts_total: ['attemptsTotal', 'n'],
  attempts: ['attempts', 'x'],
  owner_token: ['ownerToken', 's'],
  owner_attempt: ['ownerAttempt', 'n'],
  result_b64: ['resultB64', 's'],
  stored_error: ['storedError', 's'],
  stored_error_b64: ['storedErrorB64', 's'],
  retry_after_ms: ['retryAfterMs', 'n'],
  reason: ['reason', 's'],
  kind: ['kind', 's'],
  state: ['state', 's'],
  expires_ms: ['expiresMs', 'n'],
  lease_expires_ms: ['leaseExpiresMs', 'n'],
  max_uses: ['maxUses', 'n'],
  uses: ['uses', 'n'],
  uses_left: ['usesLeft', 'n'],
  sliding: ['sliding', 'b'],
  served_by: ['servedBy', 's'],
  cluster_id: ['clusterId', 's'],
  node_id: ['nodeId', 's'],
  boot_id: ['bootId', 's'],
};

const ATTEMPT_FIELDS = {
  request_id: ['requestId', 's'],
  execution_id: ['executionId', 's'],
  execution_id_b64: ['executionIdB64', 's'],
  index: ['index', 'n'],
  time_ms: ['timeMs', 'n'],
  outcome: ['outcome', 's'],
  retry: ['retry', 'b'],
};

const STATUS_FIELDS = {
  outcome: ['outcome', 's'],
  role: ['role', 's'],
  member_role: ['memberRole', 's'],
  term: ['term', 'n'],
  commit_index: ['commitIndex', 'n'],
  applied_index: ['appliedIndex', 'n'],
  applied_digest: ['appliedDigest', 's'],
  restored_from: ['restoredFrom', 's'],
  restore_time_ms: ['restoreTimeMs', 'n'],
  replay_window_until_ms: ['replayWindowUntilMs', 'n'],
  restore_stale_ts_ms: ['restoreStaleTsMs', 'n'],
  backups_open: ['backupsOpen', 'n'],
  no_vote_cut_index: ['noVoteCutIndex', 'n'],
  state_digest: ['stateDigest', 's'],
  schema: ['schema', 'n'],
  schema_max: ['schemaMax', 'n'],
  config_index: ['configIndex', 'n'],
  config_voters: ['configVoters', 'x'],
  leader: ['leader', 's'],
  leader_addr: ['leaderAddr', 's'],
  store_backend: ['storeBackend', 's'],
  members: ['members', 'x'],
  cluster_id: ['clusterId', 's'],
  node_id: ['nodeId', 's'],
  boot_id: ['bootId', 's'],
};

const MEMBER_FIELDS = {
  id: ['id', 's'],
  raft_addr: ['raftAddr', 's'],
  client_addr: ['clientAddr', 's'],
  role: ['role', 's'],
  reachable: ['reachable', 'b'],
};

// Error answers (docs/http-api.md): the fields an error object carries.
const ERROR_FIELDS = ['error', 'applied', 'leader_hint', 'message', 'request_id',
  'cluster_id', 'node_id', 'boot_id'];

class MalformedAnswer extends Error {}

/** An integer as the node writes it: a JSON number, or a decimal string
 * above 2^63-1 (then a bigint; JavaScript numbers are exact to 2^53). */
function integer(name, v) {
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v;
  if (typeof v === 'string' && /^[0-9]{1,20}$/.test(v)) {
    const b = BigInt(v);
    return b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b;
  }
  throw new MalformedAnswer(`${name}: want a non-negative integer, got ${JSON.stringify(v)}`);
}

function convert(table, obj, where, special) {
  const out = {};
  for (const [jname, v] of Object.entries(obj)) {
    const f = table[jname];
    if (f === undefined) continue; // a field of a newer node: kept in raw
    const [name, type] = f;
    if (v === null) continue;
    if (type === 's') {
      if (typeof v !== 'string') throw new MalformedAnswer(`${where}${jname}: want a string`);
      out[name] = v;
    } else if (type === 'n') {
      out[name] = integer(where + jname, v);
    } else if (type === 'b') {
      if (typeof v !== 'boolean') throw new MalformedAnswer(`${where}${jname}: want true or false`);
      out[name] = v;
    } else {
      out[name] = special(jname, v);
    }
  }
  return out;
}

function decodeAttempts(v) {
  if (!Array.isArray(v)) throw new MalformedAnswer('attempts: want an array');
  return v.map((a, i) => {
    if (a === null || typeof a !== 'object' || Array.isArray(a)) {
      throw new MalformedAnswer(`attempts[${i}]: want an object`);
    }
    return convert(ATTEMPT_FIELDS, a, `attempts[${i}].`);
  });
}

/**
 * A claim / complete / release / lookup answer (HTTP 200) as an Answer:
 * camelCase fields as they apply, `result` (a Buffer) decoded from
 * result_b64, `node` (the base URL asked) and `raw`.
 */
function decodeResult(call, obj, node) {
  const a = convert(RESULT_FIELDS, obj, '', (name, v) => decodeAttempts(v));
  if (typeof a.outcome !== 'string') throw new MalformedAnswer('outcome: missing');
  if (!CALL_OUTCOMES[call].includes(a.outcome)) {
    throw new MalformedAnswer(`outcome: ${a.outcome} is not an answer to ${call}`);
  }
  if (a.resultB64 !== undefined) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(a.resultB64) || a.resultB64.length % 4 !== 0) {
      throw new MalformedAnswer('result_b64: not standard base64');
    }
    a.result = Buffer.from(a.resultB64, 'base64');
  }
  if (a.storedErrorB64 !== undefined && a.storedError === undefined) {
    a.storedError = Buffer.from(a.storedErrorB64, 'base64').toString('utf8');
  }
  if (a.retry === undefined) a.retry = false;
  // The node sends `sliding` only when true.
  if (a.sliding === undefined) a.sliding = false;
  a.node = node;
  a.raw = obj;
  return a;
}

/** A /v1/status answer as a StatusAnswer. */
function decodeStatus(obj, node) {
  const a = convert(STATUS_FIELDS, obj, '', (name, v) => {
    if (!Array.isArray(v)) throw new MalformedAnswer(`${name}: want an array`);
    if (name === 'config_voters') {
      return v.map((x, i) => {
        if (typeof x !== 'string') throw new MalformedAnswer(`config_voters[${i}]: want a string`);
        return x;
      });
    }
    return v.map((m, i) => {
      if (m === null || typeof m !== 'object' || Array.isArray(m)) {
        throw new MalformedAnswer(`members[${i}]: want an object`);
      }
      return convert(MEMBER_FIELDS, m, `members[${i}].`);
    });
  });
  if (a.outcome !== 'OK') throw new MalformedAnswer('outcome: want OK for status');
  a.node = node;
  a.raw = obj;
  return a;
}

module.exports = {
  Outcome,
  Kind,
  State,
  CALL_OUTCOMES,
  RESULT_FIELDS,
  ATTEMPT_FIELDS,
  STATUS_FIELDS,
  MEMBER_FIELDS,
  ERROR_FIELDS,
  MalformedAnswer,
  decodeResult,
  decodeStatus,
};
