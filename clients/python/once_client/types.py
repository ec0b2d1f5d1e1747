"""The answers of a once cluster, as typed values.

Every field of the HTTP/JSON API's answers (docs/http-api.md, "Answers";
docs/oncectl.md, "Output") has a place here; a field the node did not send
is None (or an empty list). The raw JSON object stays available as `raw`.
"""

import base64
import binascii
import enum
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

__all__ = ["Outcome", "Kind", "State", "Role", "RaftRole", "OwnerToken",
           "Attempt", "Answer", "Member", "StatusInfo", "ProtocolError"]


class ProtocolError(ValueError):
    """An answer that is not what the API promises (a field of the wrong
    type, an unknown outcome): the client treats it as no answer."""


class Outcome(str, enum.Enum):
    """The cluster's decision (include/once.h enum once_outcome). A str,
    so `answer.outcome == "ACCEPTED"` also holds."""

    ACCEPTED = "ACCEPTED"
    REPLAYED = "REPLAYED"
    DUPLICATE = "DUPLICATE"
    IN_PROGRESS = "IN_PROGRESS"
    CONFLICT = "CONFLICT"
    STALE = "STALE"
    FUTURE = "FUTURE"
    FAILED = "FAILED"
    NOT_OWNER = "NOT_OWNER"
    NOT_FOUND = "NOT_FOUND"
    COMPLETED = "COMPLETED"
    RELEASED = "RELEASED"
    FOUND = "FOUND"
    FORGOTTEN = "FORGOTTEN"
    OK = "OK"
    # Refusals by the state machine; the client raises them as errors
    # (InvalidArgumentError, ResourceExhaustedError), so an Answer carries
    # them only in an attempt's history.
    OUT_OF_SPACE = "OUT_OF_SPACE"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    REFUSED_ARGUMENT = "REFUSED_ARGUMENT"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNSPECIFIED = "UNSPECIFIED"

    def __str__(self) -> str:
        return self.value


class Kind(str, enum.Enum):
    NONCE = "NONCE"
    IDEMPOTENT = "IDEMPOTENT"


class State(str, enum.Enum):
    SEEN = "SEEN"
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    RELEASED = "RELEASED"
    FAILED = "FAILED"


class Role(str, enum.Enum):
    """A member's role in the member directory."""
    NONE = "NONE"
    VOTER = "VOTER"
    STANDBY = "STANDBY"
    SPARE = "SPARE"


class RaftRole(str, enum.Enum):
    """A node's Raft role (status)."""
    NONE = "NONE"
    FOLLOWER = "FOLLOWER"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"
    UNAVAILABLE = "UNAVAILABLE"


_TOKEN_RE = re.compile(r"^([0-9]{1,10}):([0-9]{1,20}):([0-9]{1,10})$")


@dataclass(frozen=True)
class OwnerToken:
    """The owner's fencing token (group id, log index, slot), "G:I:S"."""

    group_id: int
    index: int
    slot: int

    @classmethod
    def parse(cls, text: str) -> "OwnerToken":
        m = _TOKEN_RE.match(text) if isinstance(text, str) else None
        if m is None:
            raise ValueError("owner_token: want GROUP:INDEX:SLOT, got %r"
                             % (text,))
        g, i, s = (int(x) for x in m.groups())
        if g >= 1 << 32 or s >= 1 << 32 or i >= 1 << 64:
            raise ValueError("owner_token: a part is out of range: %r"
                             % (text,))
        return cls(g, i, s)

    def __str__(self) -> str:
        return "%d:%d:%d" % (self.group_id, self.index, self.slot)


@dataclass(frozen=True)
class Attempt:
    """One claim of a record, kept as evidence (the first and the last 4)."""

    request_id: str
    execution_id: bytes
    index: int
    time_ms: int
    outcome: Outcome
    retry: bool


@dataclass(frozen=True)
class Answer:
    """The cluster's answer to claim, complete, release or lookup.

    `outcome` is the decision; the other fields are set as they apply
    (docs/oncectl.md, "Output"). `result` is the stored result's bytes
    (DUPLICATE, COMPLETED, lookup of a COMPLETED record), `stored_error`
    the stored error's bytes (FAILED). `cluster_id`, `node_id`, `boot_id`
    say who answered; `node` is the base URL the answer came from.
    A NONCE record's answer has `max_uses`, `uses` (the request ids it
    took) and `uses_left`; `sliding` is true for an IDEMPOTENT record whose
    expiry slides; a lookup's `served_by` is the id of the node that read
    its table (a member's id, the answering node with the HTTP API)."""

    outcome: Outcome
    retry: bool = False
    log_time_ms: Optional[int] = None
    request_id: Optional[str] = None
    first_request_id: Optional[str] = None
    first_index: Optional[int] = None
    first_time_ms: Optional[int] = None
    attempts_total: Optional[int] = None
    attempts: List[Attempt] = field(default_factory=list)
    owner_token: Optional[OwnerToken] = None
    owner_attempt: Optional[int] = None
    result: Optional[bytes] = None
    stored_error: Optional[bytes] = None
    retry_after_ms: Optional[int] = None
    reason: Optional[str] = None
    kind: Optional[Kind] = None
    state: Optional[State] = None
    expires_ms: Optional[int] = None
    lease_expires_ms: Optional[int] = None
    max_uses: Optional[int] = None
    uses: Optional[int] = None
    uses_left: Optional[int] = None
    sliding: bool = False
    served_by: Optional[str] = None
    cluster_id: Optional[str] = None
    node_id: Optional[str] = None
    boot_id: Optional[str] = None
    node: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False,
                                compare=False)

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED

    @property
    def result_text(self) -> Optional[str]:
        return None if self.result is None else self.result.decode("utf-8")

    def result_json(self) -> Any:
        """The stored result parsed as JSON (what the idempotent helper
        stores); None when there is no result."""
        return None if self.result is None else json.loads(self.result)

    @classmethod
    def from_json(cls, o: Dict[str, Any], node: Optional[str] = None
                  ) -> "Answer":
        if not isinstance(o, dict):
            raise ProtocolError("an answer is not a JSON object")
        tok = _opt_str(o, "owner_token")
        return cls(
            outcome=_enum(Outcome, o.get("outcome"), "outcome"),
            retry=_opt_bool(o, "retry") or False,
            log_time_ms=_opt_int(o, "log_time_ms"),
            request_id=_opt_hex(o, "request_id", 32),
            first_request_id=_opt_hex(o, "first_request_id", 32),
            first_index=_opt_int(o, "first_index"),
            first_time_ms=_opt_int(o, "first_time_ms"),
            attempts_total=_opt_int(o, "attempts_total"),
            attempts=[_attempt(a) for a in _opt_list(o, "attempts")],
            owner_token=_token(tok) if tok is not None else None,
            owner_attempt=_opt_int(o, "owner_attempt"),
            result=_opt_b64(o, "result_b64"),
            stored_error=_text_bytes(o, "stored_error"),
            retry_after_ms=_opt_int(o, "retry_after_ms"),
            reason=_opt_str(o, "reason"),
            kind=_opt_enum(Kind, o, "kind"),
            state=_opt_enum(State, o, "state"),
            expires_ms=_opt_int(o, "expires_ms"),
            lease_expires_ms=_opt_int(o, "lease_expires_ms"),
            max_uses=_opt_int(o, "max_uses"),
            uses=_opt_int(o, "uses"),
            uses_left=_opt_int(o, "uses_left"),
            sliding=_opt_bool(o, "sliding") or False,
            served_by=_opt_hex(o, "served_by", 16),
            cluster_id=_opt_str(o, "cluster_id") or None,
            node_id=_opt_str(o, "node_id") or None,
            boot_id=_opt_str(o, "boot_id") or None,
            node=node, raw=o)


@dataclass(frozen=True)
class Member:
    """One entry of the member directory."""

    id: str
    raft_addr: str
    client_addr: str
    role: Role
    reachable: bool


@dataclass(frozen=True)
class StatusInfo:
    """One node's own view (GET /v1/status; docs/oncectl.md, "status")."""

    outcome: Outcome
    role: RaftRole
    member_role: Role
    term: int
    commit_index: int
    applied_index: int
    applied_digest: str
    config_index: int
    config_voters: List[str]
    leader: str
    leader_addr: str
    store_backend: str
    members: List[Member]
    schema: Optional[int] = None
    schema_max: Optional[int] = None
    state_digest: Optional[str] = None
    restored_from: Optional[str] = None
    restore_time_ms: Optional[int] = None
    replay_window_until_ms: Optional[int] = None
    restore_stale_ts_ms: Optional[int] = None
    backups_open: Optional[int] = None
    # Set while the node neither votes nor campaigns: its store cut a torn
    # tail at this index (onced --accept-cut-tail is the way out).
    no_vote_cut_index: Optional[int] = None
    cluster_id: Optional[str] = None
    node_id: Optional[str] = None
    boot_id: Optional[str] = None
    node: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False,
                                compare=False)

    @property
    def is_leader(self) -> bool:
        return self.role is RaftRole.LEADER

    @classmethod
    def from_json(cls, o: Dict[str, Any], node: Optional[str] = None
                  ) -> "StatusInfo":
        if not isinstance(o, dict):
            raise ProtocolError("a status answer is not a JSON object")
        return cls(
            outcome=_enum(Outcome, o.get("outcome"), "outcome"),
            role=_enum(RaftRole, o.get("role"), "role"),
            member_role=_enum(Role, o.get("member_role"), "member_role"),
            term=_req_int(o, "term"),
            commit_index=_req_int(o, "commit_index"),
            applied_index=_req_int(o, "applied_index"),
            applied_digest=_opt_str(o, "applied_digest") or "",
            config_index=_req_int(o, "config_index"),
            config_voters=[_str(v, "config_voters[]")
                           for v in _opt_list(o, "config_voters")],
            leader=_opt_str(o, "leader") or "",
            leader_addr=_opt_str(o, "leader_addr") or "",
            store_backend=_opt_str(o, "store_backend") or "",
            members=[_member(m) for m in _opt_list(o, "members")],
            schema=_opt_int(o, "schema"),
            schema_max=_opt_int(o, "schema_max"),
            state_digest=_opt_str(o, "state_digest"),
            restored_from=_opt_str(o, "restored_from"),
            restore_time_ms=_opt_int(o, "restore_time_ms"),
            replay_window_until_ms=_opt_int(o, "replay_window_until_ms"),
            restore_stale_ts_ms=_opt_int(o, "restore_stale_ts_ms"),
            backups_open=_opt_int(o, "backups_open"),
            no_vote_cut_index=_opt_int(o, "no_vote_cut_index"),
            cluster_id=_opt_str(o, "cluster_id") or None,
            node_id=_opt_str(o, "node_id") or None,
            boot_id=_opt_str(o, "boot_id") or None,
            node=node, raw=o)


# --- decoding helpers: strict, so that a wrong answer is noticed -------------

def _str(v: Any, name: str) -> str:
    if not isinstance(v, str):
        raise ProtocolError("%s: want a string, got %r" % (name, v))
    return v


def _opt_str(o: Dict[str, Any], k: str) -> Optional[str]:
    v = o.get(k)
    return None if v is None else _str(v, k)


def _int(v: Any, name: str) -> int:
    # Integers above 2^63-1 arrive as decimal strings (docs/oncectl.md).
    if isinstance(v, bool):
        raise ProtocolError("%s: want an integer, got %r" % (name, v))
    if isinstance(v, int) and v >= 0:
        return v
    if isinstance(v, str) and v.isdigit():
        return int(v)
    raise ProtocolError("%s: want an integer >= 0, got %r" % (name, v))


def _opt_int(o: Dict[str, Any], k: str) -> Optional[int]:
    v = o.get(k)
    return None if v is None else _int(v, k)


def _req_int(o: Dict[str, Any], k: str) -> int:
    if o.get(k) is None:
        raise ProtocolError("%s: missing" % k)
    return _int(o[k], k)


def _opt_bool(o: Dict[str, Any], k: str) -> Optional[bool]:
    v = o.get(k)
    if v is None:
        return None
    if not isinstance(v, bool):
        raise ProtocolError("%s: want true or false, got %r" % (k, v))
    return v


def _opt_hex(o: Dict[str, Any], k: str, n: int) -> Optional[str]:
    v = _opt_str(o, k)
    if v is None:
        return None
    if len(v) != n or not all(c in "0123456789abcdefABCDEF" for c in v):
        raise ProtocolError("%s: want %d hex digits, got %r" % (k, n, v))
    return v.lower()


def _opt_list(o: Dict[str, Any], k: str) -> List[Any]:
    v = o.get(k)
    if v is None:
        return []
    if not isinstance(v, list):
        raise ProtocolError("%s: want a list, got %r" % (k, v))
    return v


def _b64(v: Any, name: str) -> bytes:
    try:
        return base64.b64decode(_str(v, name), validate=True)
    except (binascii.Error, ValueError) as e:
        raise ProtocolError("%s: not base64: %s" % (name, e))


def _opt_b64(o: Dict[str, Any], k: str) -> Optional[bytes]:
    v = o.get(k)
    return None if v is None else _b64(v, k)


def _text_bytes(o: Dict[str, Any], k: str) -> Optional[bytes]:
    """Bytes the node sends as text when they are UTF-8, else as K_b64."""
    if o.get(k + "_b64") is not None:
        return _b64(o[k + "_b64"], k + "_b64")
    v = _opt_str(o, k)
    return None if v is None else v.encode("utf-8")


def _enum(cls: Any, v: Any, name: str) -> Any:
    try:
        return cls(v)
    except ValueError:
        raise ProtocolError("%s: unknown value %r" % (name, v))


def _opt_enum(cls: Any, o: Dict[str, Any], k: str) -> Any:
    v = o.get(k)
    return None if v is None else _enum(cls, v, k)


def _token(text: str) -> OwnerToken:
    try:
        return OwnerToken.parse(text)
    except ValueError as e:
        raise ProtocolError(str(e))


def _attempt(a: Any) -> Attempt:
    if not isinstance(a, dict):
        raise ProtocolError("attempts[]: want an object, got %r" % (a,))
    return Attempt(
        request_id=_opt_hex(a, "request_id", 32) or "",
        execution_id=_text_bytes(a, "execution_id") or b"",
        index=_opt_int(a, "index") or 0,
        time_ms=_opt_int(a, "time_ms") or 0,
        outcome=_enum(Outcome, a.get("outcome"), "attempts[].outcome"),
        retry=_opt_bool(a, "retry") or False)


def _member(m: Any) -> Member:
    if not isinstance(m, dict):
        raise ProtocolError("members[]: want an object, got %r" % (m,))
    return Member(id=_opt_str(m, "id") or "",
                  raft_addr=_opt_str(m, "raft_addr") or "",
                  client_addr=_opt_str(m, "client_addr") or "",
                  role=_enum(Role, m.get("role"), "members[].role"),
                  reachable=_opt_bool(m, "reachable") or False)
