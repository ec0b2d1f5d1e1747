"""Errors: what a call that got no decision tells its caller.

Every error is an OnceError, and is exactly one of three kinds, which say
what the caller may do next (include/once.h, "Results"; docs/design.md §5):

  RetryableError       the call certainly did not apply (applied "false":
                       no leader, no quorum, a full table, a node that
                       could not be reached). Safe to retry, anywhere, with
                       a new request id or the same one.
  OutcomeUnknownError  the call may have applied (applied "unknown": the
                       deadline passed after the command was proposed, the
                       connection was lost after the request was sent).
                       Retry the SAME call with its `request_id` (the
                       attribute): an accepted claim then answers ACCEPTED
                       with retry true, never a second acceptance.
  DefiniteError        final: retrying the same call cannot succeed
                       (INVALID_ARGUMENT, PERMISSION_DENIED,
                       FAILED_PRECONDITION, an answer of another cluster
                       than the pinned one, the idempotent helper's
                       fencing and refusals).

The client itself already retried within the call's deadline as libonce
does; these reach the caller when the deadline is spent or the error is
final.
"""

from typing import Any, Dict, List, Optional

__all__ = ["OnceError", "RetryableError", "OutcomeUnknownError",
           "DefiniteError", "UnavailableError", "ResourceExhaustedError",
           "DeadlineExceededError", "InvalidArgumentError",
           "PermissionDeniedError", "FailedPreconditionError",
           "ClusterMismatchError", "NotOwnerError", "ConflictError",
           "FailedError", "StillInProgressError"]


class OnceError(Exception):
    """A call without a decision. Attributes:

    status      the status name (UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN,
                INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION,
                RESOURCE_EXHAUSTED; or the helper's NOT_OWNER, CONFLICT,
                FAILED, IN_PROGRESS)
    applied     "false" (certainly not applied) or "unknown"
    message     the text (the node's, or the client's)
    request_id  the call's request id (hex), when it had one: what a retry
                of an OutcomeUnknownError must give again
    leader_hint the leader's client RPC address when a node named it
    node        the base URL of the node whose answer this was, if any
    http_status the HTTP status of that answer, if any
    answer      the JSON object of that answer, if any
    request_ids a batch's (Client.claim_batch): its items' request ids, in
                order, what a retry of the same items gives again
    """

    retryable = False
    outcome_unknown = False
    definite = False

    def __init__(self, message: str, *, status: str = "UNKNOWN",
                 applied: str = "false", request_id: Optional[str] = None,
                 leader_hint: Optional[str] = None,
                 node: Optional[str] = None,
                 http_status: Optional[int] = None,
                 answer: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.applied = applied
        self.request_id = request_id
        self.leader_hint = leader_hint or None
        self.node = node
        self.http_status = http_status
        self.answer = answer
        self.request_ids: Optional[List[str]] = None

    def __str__(self) -> str:
        s = "%s (applied %s): %s" % (self.status, self.applied, self.message)
        if self.request_id:
            s += " [request_id %s]" % self.request_id
        return s


class RetryableError(OnceError):
    """Certainly not applied: safe to retry anywhere."""
    retryable = True


class OutcomeUnknownError(OnceError):
    """Perhaps applied: retry the same call with `request_id`."""
    outcome_unknown = True

    def __init__(self, message: str, **kw: Any) -> None:
        kw["applied"] = "unknown"
        super().__init__(message, **kw)


class DefiniteError(OnceError):
    """Final: the same call cannot succeed."""
    definite = True


class UnavailableError(RetryableError):
    """No leader, no quorum, a node that could not be reached."""


class ResourceExhaustedError(RetryableError):
    """The cluster's table (or the scope's quota) is full; nothing stored."""


class DeadlineExceededError(RetryableError):
    """The deadline passed before any attempt could be made."""


class InvalidArgumentError(DefiniteError, ValueError):
    """A bad argument: refused by the client before any network call, or by
    the node (a bound of docs/design.md §3)."""

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("status", "INVALID_ARGUMENT")
        super().__init__(message, **kw)


class PermissionDeniedError(DefiniteError):
    """The caller's certificate lacks the right (docs/server.md,
    "Authorization"), or no certificate was given to a TLS node."""


class FailedPreconditionError(DefiniteError):
    """The cluster refuses the call in its present state (a restored
    cluster's replay window...)."""


class ClusterMismatchError(FailedPreconditionError):
    """An answer came from another cluster than the pinned one: the
    addresses now reach a cluster that may have forgotten what the pinned
    one saw (re-created empty, restored). Nothing is retried; the client
    stays pinned. `pinned` and `answered` are the two cluster ids."""

    def __init__(self, message: str, *, pinned: str, answered: str,
                 **kw: Any) -> None:
        kw.setdefault("status", "FAILED_PRECONDITION")
        super().__init__(message, **kw)
        self.pinned = pinned
        self.answered = answered


# --- the idempotent helper's errors -----------------------------------------

class NotOwnerError(DefiniteError):
    """Fenced: another process took the key over (our lease expired), so
    our result was NOT stored (complete answered NOT_OWNER); the work may
    have run twice, and the other owner's result is the one that counts."""

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("status", "NOT_OWNER")
        super().__init__(message, **kw)


class ConflictError(DefiniteError):
    """The key is held with another kind or payload hash (CONFLICT)."""

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("status", "CONFLICT")
        super().__init__(message, **kw)


class FailedError(DefiniteError):
    """The key failed terminally (FAILED): `stored_error` is what its owner
    stored, as bytes."""

    def __init__(self, message: str, *, stored_error: bytes = b"",
                 **kw: Any) -> None:
        kw.setdefault("status", "FAILED")
        super().__init__(message, **kw)
        self.stored_error = stored_error


class StillInProgressError(RetryableError):
    """Another owner still held the key (IN_PROGRESS) when the helper's wait
    ended: nothing of ours applied; try again later."""

    def __init__(self, message: str, **kw: Any) -> None:
        kw.setdefault("status", "IN_PROGRESS")
        super().__init__(message, **kw)
