"""The idempotent helper: run a piece of work at most once per key, across
every process and replica of the caller that shares the cluster.

The life cycle (docs/state-machine.md, "Claim", "Complete", "Release"):

  claim (idempotent, with a lease)
    ACCEPTED     this process owns the key: run the work; then complete
                 with its result serialized as JSON; if the work raises,
                 release with the error -- retryable (the next claim takes
                 over at once) or terminal (FAILED for good: every later
                 claim gets FAILED with the error), as the caller decides
                 through `terminal` -- and re-raise;
    DUPLICATE    done before: the stored result, deserialized, without
                 running the work;
    IN_PROGRESS  another owner holds a live lease: wait its retry_after_ms
                 (bounded) and claim again, until `wait` seconds have
                 passed (StillInProgressError); when that owner's lease
                 ends without a complete, the next claim takes over;
    FAILED       FailedError with the stored error; CONFLICT (another
                 payload hash or kind) ConflictError.
  complete answers NOT_OWNER: this process was fenced -- its lease ran
  out and another process took the key over -- so its result is NOT
  stored (the other owner's counts): NotOwnerError.

Nothing renews a lease (the API has no renewal): choose a `lease` longer
than the work takes. A claim or complete whose outcome is unknown is
retried with its same request id, so a lost answer never makes this
process a second owner or loses its result.

Use it as a decorator:

    @idempotent(client, "orders", key=lambda order_id: "charge-%s" % order_id)
    def charge(order_id): ...

or as a context manager:

    with client.once("orders", "charge-42") as run:
        if run.done:
            receipt = run.result     # stored by whoever ran it
        else:
            receipt = charge(42)
            run.result = receipt     # stored at the block's end
"""

import functools
import json
import os
import socket
import time
from typing import (TYPE_CHECKING, Any, Callable, Optional, TypeVar, Union,
                    cast)

from .errors import (ConflictError, FailedError, InvalidArgumentError,
                     NotOwnerError, OnceError, OutcomeUnknownError,
                     StillInProgressError)
from .types import Answer, Outcome, OwnerToken

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client, Duration

__all__ = ["idempotent", "Once"]

F = TypeVar("F", bound=Callable[..., Any])
Terminal = Union[bool, Callable[[BaseException], bool]]

# The wait between two claims of a key in progress: the lease's
# retry_after_ms, but at least this and at most WAIT_MAX_S (so a long lease
# is noticed when its owner releases early).
WAIT_MIN_S = 0.05
WAIT_MAX_S = 1.0
# Retries of a complete / release whose outcome stayed unknown after the
# client's own retries (each with the same request id).
UNKNOWN_RETRIES = 3
RESULT_MAX = 65536


def _default_execution_id() -> str:
    """hostname:pid, as evidence in the record's attempts (<= 128 bytes)."""
    text = "%s:%d" % (socket.gethostname(), os.getpid())
    return text.encode("utf-8")[-128:].decode("utf-8", "ignore")


class Once:
    """One idempotent run of (scope, key): a context manager.

    On entry it claims the key (waiting out IN_PROGRESS up to `wait`
    seconds). `done` is True when the work was done before (DUPLICATE):
    `result` is then the stored result. Otherwise this process owns the
    key (`owner_token`, `answer`): do the work and set `result`; at a
    normal exit the result is completed (JSON-serialized with `serialize`;
    no result set: null), and at an exception the key is released with its
    text (terminal when `terminal` says so: a bool, or a function of the
    exception) and the exception propagates."""

    def __init__(self, client: "Client", scope: str, key: str, *,
                 lease: "Optional[Duration]" = None,
                 payload_hash: Union[bytes, str, None] = None,
                 wait: float = 30.0, terminal: Terminal = False,
                 execution_id: Optional[str] = None,
                 serialize: Callable[[Any], Union[str, bytes]] = json.dumps,
                 deserialize: Callable[[bytes], Any] = json.loads) -> None:
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) \
                or wait < 0:
            raise InvalidArgumentError("wait: want seconds >= 0")
        if not (isinstance(terminal, bool) or callable(terminal)):
            raise InvalidArgumentError("terminal: want a bool or a function "
                                       "of the exception")
        self.client = client
        self.scope = scope
        self.key = key
        self.lease = lease
        self.payload_hash = payload_hash
        self.wait = float(wait)
        self.terminal = terminal
        self.execution_id = execution_id or _default_execution_id()
        self.serialize = serialize
        self.deserialize = deserialize
        self.done = False
        self.answer: Optional[Answer] = None
        self.owner_token: Optional[OwnerToken] = None
        self.completed: Optional[Answer] = None
        self._result: Any = None
        self._entered = False

    @property
    def result(self) -> Any:
        return self._result

    @result.setter
    def result(self, value: Any) -> None:
        if self.done:
            raise InvalidArgumentError("result: the work was done before; "
                                       "its stored result stands")
        self._result = value

    # -- the life cycle ---------------------------------------------------------

    def claim(self) -> "Once":
        """Claim until ACCEPTED or DUPLICATE (or raise)."""
        deadline = time.monotonic() + self.wait
        rid: Optional[str] = None
        while True:
            try:
                a = self.client.claim(
                    self.scope, self.key, idempotent=True, lease=self.lease,
                    payload_hash=self.payload_hash,
                    execution_id=self.execution_id, request_id=rid)
            except OutcomeUnknownError as e:
                # Perhaps we own it: only the same request id can tell.
                if time.monotonic() >= deadline:
                    raise
                rid = e.request_id
                continue
            rid = None
            if a.outcome is Outcome.ACCEPTED:
                self.answer = a
                self.owner_token = a.owner_token
                if a.owner_token is None:
                    raise OutcomeUnknownError(
                        "an ACCEPTED idempotent claim without an owner "
                        "token", status="UNKNOWN", request_id=a.request_id,
                        node=a.node)
                return self
            if a.outcome is Outcome.DUPLICATE:
                self.answer = a
                self.done = True
                self._result = self.deserialize(a.result or b"")
                return self
            if a.outcome is Outcome.IN_PROGRESS:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StillInProgressError(
                        "%s/%s: still in progress by another owner after "
                        "%gs" % (self.scope, self.key, self.wait),
                        request_id=a.request_id, node=a.node,
                        answer=a.raw)
                pause = (a.retry_after_ms or 0) / 1000.0
                time.sleep(min(max(pause, WAIT_MIN_S), WAIT_MAX_S, left))
                continue
            if a.outcome is Outcome.FAILED:
                raise FailedError(
                    "%s/%s failed terminally: %s" % (
                        self.scope, self.key,
                        (a.stored_error or b"").decode("utf-8", "replace")),
                    stored_error=a.stored_error or b"",
                    request_id=a.request_id, node=a.node, answer=a.raw)
            if a.outcome is Outcome.CONFLICT:
                raise ConflictError(
                    "%s/%s is held with another kind or payload hash"
                    % (self.scope, self.key), request_id=a.request_id,
                    node=a.node, answer=a.raw)
            raise ConflictError("%s/%s: unexpected claim outcome %s"
                                % (self.scope, self.key, a.outcome),
                                status=str(a.outcome),
                                request_id=a.request_id, node=a.node,
                                answer=a.raw)

    def _retry_unknown(self, call: Callable[[Optional[str]], Answer]
                       ) -> Answer:
        rid: Optional[str] = None
        for n in range(UNKNOWN_RETRIES + 1):
            try:
                return call(rid)
            except OutcomeUnknownError as e:
                if n == UNKNOWN_RETRIES:
                    raise
                rid = e.request_id
        raise AssertionError("unreachable")  # pragma: no cover

    def _serialized(self) -> bytes:
        data = self.serialize(self._result)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, bytes):
            raise TypeError("serialize returned %s, not str or bytes"
                            % type(data).__name__)
        if len(data) > RESULT_MAX:
            raise ValueError("%d bytes serialized, over 64 KiB" % len(data))
        return data

    def complete(self, data: Optional[bytes] = None) -> Answer:
        """Store the result (serialized now unless @data is given); raise
        NotOwnerError when fenced."""
        assert self.owner_token is not None
        if data is None:
            data = self._serialized()
        token = self.owner_token
        a = self._retry_unknown(lambda rid: self.client.complete(
            self.scope, self.key, token, data, request_id=rid))
        if a.outcome is Outcome.COMPLETED:
            self.completed = a
            return a
        if a.outcome is Outcome.NOT_OWNER:
            raise NotOwnerError(
                "%s/%s: fenced: another process took the key over (our "
                "lease ran out); our result was not stored"
                % (self.scope, self.key), request_id=a.request_id,
                node=a.node, answer=a.raw)
        raise ConflictError("%s/%s: complete answered %s" % (
            self.scope, self.key, a.outcome), status=str(a.outcome),
            request_id=a.request_id, node=a.node, answer=a.raw)

    def release(self, exc: BaseException) -> Optional[Answer]:
        """Give the key up after @exc (terminal as `terminal` decides).
        Returns the answer; None when the release itself failed (the
        lease then frees the key)."""
        assert self.owner_token is not None
        terminal = self.terminal(exc) if callable(self.terminal) \
            else self.terminal
        text = ("%s: %s" % (type(exc).__name__, exc)).encode("utf-8")
        text = text[:1024].decode("utf-8", "ignore")
        token = self.owner_token
        try:
            return self._retry_unknown(lambda rid: self.client.release(
                self.scope, self.key, token, terminal=bool(terminal),
                error=text if terminal else None, request_id=rid))
        except OnceError:
            return None

    # -- context manager -------------------------------------------------------

    def __enter__(self) -> "Once":
        if self._entered:
            raise InvalidArgumentError("a Once runs once")
        self._entered = True
        return self.claim()

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        if self.done:
            return False
        if ev is not None:
            self.release(ev)
            return False
        try:
            data = self._serialized()
        except (TypeError, ValueError) as e:
            # Not storable: give the key up (retryable) rather than hold it
            # until the lease ends.
            err = InvalidArgumentError("result: cannot be stored: %s" % e)
            self.release(err)
            raise err
        self.complete(data)
        return False


def idempotent(client: "Client", scope: str,
               key: Union[str, Callable[..., str], None] = None, *,
               lease: "Optional[Duration]" = None,
               payload_hash: Union[bytes, str, None] = None,
               wait: float = 30.0, terminal: Terminal = False,
               execution_id: Optional[str] = None,
               serialize: Callable[[Any], Union[str, bytes]] = json.dumps,
               deserialize: Callable[[bytes], Any] = json.loads
               ) -> Callable[[F], F]:
    """Decorator: the function runs at most once per key; a call for a key
    done before returns the stored result without running it.

    `key`: a str (one key for every call), a function of the call's
    arguments returning the key, or None: the call's keyword argument
    `idempotency_key` (removed before the function is called). Other
    arguments as Once."""
    if not (key is None or isinstance(key, str) or callable(key)):
        raise InvalidArgumentError("key: want a str, a function of the "
                                   "arguments, or None")

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            if key is None:
                if "idempotency_key" not in kwargs:
                    raise InvalidArgumentError(
                        "%s: pass idempotency_key=..." % fn.__name__)
                k = kwargs.pop("idempotency_key")
            elif isinstance(key, str):
                k = key
            else:
                k = key(*args, **kwargs)
            with Once(client, scope, k, lease=lease,
                      payload_hash=payload_hash, wait=wait,
                      terminal=terminal, execution_id=execution_id,
                      serialize=serialize, deserialize=deserialize) as op:
                if op.done:
                    return op.result
                op.result = fn(*args, **kwargs)
            return op.result
        return cast(F, run)
    return wrap

