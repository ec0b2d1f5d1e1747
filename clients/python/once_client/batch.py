"""Batch claims (POST /v1/claims): the items a caller gives and the
result of each (docs/http-api.md, "POST /v1/claims: a batch").

A batch is applied in order, as consecutive claims after one consensus
round, so each item's answer is exactly what Client.claim would have
answered at that point (a key twice: ACCEPTED, then REPLAYED). An item may
also be refused alone (a bound, a scope the certificate lacks, a quota, or
UNKNOWN when its answer did not fit the call's): its BatchResult carries
the error instead of an answer, and the other items stand.

Every item carries its own request id (the caller's or a fresh one), sent
again, byte for byte, by every retry of the whole call: a retried batch
cannot apply an item twice, and an item whose outcome is unknown is retried
alone with Client.claim(..., request_id=result.request_id).
"""

import datetime
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

from .errors import (DefiniteError, FailedPreconditionError,
                     InvalidArgumentError, OnceError, OutcomeUnknownError,
                     PermissionDeniedError, ResourceExhaustedError,
                     UnavailableError)
from .types import Answer, Outcome, ProtocolError

__all__ = ["ClaimRequest", "BatchResult", "BATCH_MAX"]

BATCH_MAX = 4096            # items in one call (the RPC's ClaimBatch)
BATCH_BODY_MAX = 1 << 20    # the listener's ceiling for /v1/claims

_Duration = Union[int, float, datetime.timedelta]


@dataclass(frozen=True)
class ClaimRequest:
    """One claim of a batch: the arguments of Client.claim (scope, key and
    the keyword arguments but `timeout`, which is the whole call's).
    Checked, like Client.claim's, before any network call; `request_id`
    only to retry an item whose outcome was unknown."""

    scope: Union[str, bytes]
    key: Union[str, bytes]
    ttl: Optional[_Duration] = None
    ts: Any = None
    window: Optional[_Duration] = None
    idempotent: bool = False
    lease: Optional[_Duration] = None
    payload_hash: Union[bytes, str, None] = None
    execution_id: Union[str, bytes, None] = None
    request_id: Union[str, bytes, None] = None
    max_uses: Optional[int] = None
    sliding: bool = False


@dataclass(frozen=True)
class BatchResult:
    """The result of one item, in the items' order: exactly one of
    `answer` (a decision: ACCEPTED, REPLAYED, DUPLICATE, ...) and `error`
    (the item refused alone; `error.applied` says whether it may have
    applied). `request_id` is the item's, what a retry of it gives."""

    index: int
    request_id: str
    answer: Optional[Answer] = None
    error: Optional[OnceError] = None

    @property
    def ok(self) -> bool:
        """True when the item got a decision (a denial too)."""
        return self.answer is not None

    @property
    def outcome(self) -> Optional[Outcome]:
        return None if self.answer is None else self.answer.outcome

    def unwrap(self) -> Answer:
        """The answer, or raise the item's error."""
        if self.answer is None:
            assert self.error is not None
            raise self.error
        return self.answer


_ITEM_ERRORS = {
    "INVALID_ARGUMENT": InvalidArgumentError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "FAILED_PRECONDITION": FailedPreconditionError,
    "RESOURCE_EXHAUSTED": ResourceExhaustedError,
    "UNAVAILABLE": UnavailableError,
}


def item_result(i: int, rid: str, o: Any,
                node: Optional[str]) -> BatchResult:
    """Item @i's object of a batch answer as a BatchResult (ProtocolError
    when it is not what the API promises)."""
    if not isinstance(o, dict):
        raise ProtocolError("items[%d]: want an object, got %r" % (i, o))
    got = o.get("request_id")
    if got is not None and (not isinstance(got, str) or got.lower() != rid):
        raise ProtocolError("items[%d]: request_id %r, sent %s"
                            % (i, got, rid))
    err = o.get("error")
    if err is None:
        return BatchResult(i, rid, answer=Answer.from_json(o, node))
    if not isinstance(err, str):
        raise ProtocolError("items[%d].error: want a string" % i)
    msg = o.get("message")
    text = "items[%d]: %s" % (i, msg if isinstance(msg, str) else err)
    kw: Dict[str, Any] = dict(status=err, request_id=rid, node=node,
                              http_status=200, answer=o)
    if o.get("applied") == "unknown" or err in ("UNKNOWN",
                                                "DEADLINE_EXCEEDED"):
        e: OnceError = OutcomeUnknownError(text, **kw)
    else:
        e = _ITEM_ERRORS.get(err, DefiniteError)(text, **kw)
    return BatchResult(i, rid, error=e)


def sticky(r: BatchResult) -> BatchResult:
    """@r after an earlier attempt of its call may have applied the batch:
    an item refused now may have applied then, so its error is "unknown"
    (once unknown, never back to false: the client's rule). A decision
    stands: a retried item is answered from its request id."""
    e = r.error
    if e is None or e.outcome_unknown:
        return r
    return BatchResult(r.index, r.request_id, error=OutcomeUnknownError(
        e.message, status=e.status, request_id=e.request_id, node=e.node,
        http_status=e.http_status, answer=e.answer))
