"""The client: libonce's call rules over the HTTP/JSON API.

What it does for every call (docs/design.md §1.6, §1.11, §5; include/once.h,
"Model"), so that its caller does not have to:

  * request ids: a fresh 128-bit id (secrets.token_hex) per claim,
    complete and release, or the caller's; every retry of that call sends
    the same id, byte for byte, so the state machine answers a retry of an
    accepted call ACCEPTED with retry true instead of deciding twice;
  * retries within the call's deadline (the client's `timeout`, or the
    call's), as src/client/op.c does them: an attempt that certainly did
    not apply (the node could not be reached, UNAVAILABLE,
    RESOURCE_EXHAUSTED) and one whose outcome is unknown (504,
    DEADLINE_EXCEEDED, the connection lost after the request went out)
    alike move to the next node after a backoff (20 ms doubling to
    200 ms), the unknown one with the same request id; a node that gave no
    answer at all stops being where later calls start (the answer's
    leader_hint is an RPC address, not one of ours: any node forwards to
    the leader); INVALID_ARGUMENT, PERMISSION_DENIED and
    FAILED_PRECONDITION are final. Once an attempt
    of a call was "unknown", the call stays "unknown" whatever later
    attempts say. An attempt never takes more than half of what remains
    (at least 1 s) when another node could answer, so a node that swallows
    requests cannot eat the whole deadline; each attempt tells the node
    its share as the body's `timeout`;
  * the cluster id: pinned at the first well-formed answer (or given);
    every write of a pinned client carries it as the body's `cluster_id`,
    which a node of another cluster refuses before proposing (503
    FAILED_PRECONDITION, applied false, "cluster id mismatch"), and every
    answer of another cluster is refused with ClusterMismatchError, never
    retried elsewhere: a cluster re-created empty on the same addresses
    neither records the write nor answers ACCEPTED for keys the old one
    saw;
  * bad arguments are refused with InvalidArgumentError before any network
    call (the bounds of docs/http-api.md, "Requests");
  * a batch (claim_batch, POST /v1/claims) is one call under these rules,
    each item with its own request id, the same on every retry of the
    call; its answer is one result per item (once_client.batch).

Thread safety: a Client may be shared by threads (connections are pooled
per node under a lock; the pin is set once under a lock).
"""

import base64
import datetime
import http.client
import json
import os
import secrets
import select
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, Mapping,
                    Optional, Sequence, Tuple, TypeVar, Union)

from .batch import (BATCH_BODY_MAX, BATCH_MAX, BatchResult, ClaimRequest,
                    item_result, sticky)

from .errors import (ClusterMismatchError, DeadlineExceededError,
                     DefiniteError, FailedPreconditionError,
                     InvalidArgumentError, OnceError, OutcomeUnknownError,
                     PermissionDeniedError, ResourceExhaustedError,
                     UnavailableError)
from .types import Answer, OwnerToken, ProtocolError, StatusInfo

if TYPE_CHECKING:  # pragma: no cover
    from .idempotent import Once

__all__ = ["Client", "TLS", "Duration"]

T = TypeVar("T")

# Bounds (docs/http-api.md, "Requests"; include/once.h).
SCOPE_MAX = 128
KEY_MAX = 256
EXECUTION_ID_MAX = 128
PAYLOAD_HASH_MAX = 64
RESULT_MAX = 65536
ERROR_MAX = 1024
MAX_USES_MAX = 64            # an N-use nonce's uses (docs/state-machine.md)
NODES_MAX = 64
TIMEOUT_MAX_S = 3600.0       # a call's whole deadline (oncectl's bound)
NODE_TIMEOUT_MAX_MS = 60000  # what one HTTP call may ask of a node
# libonce's timings (src/client/client.h).
BACKOFF_FIRST_S = 0.020
BACKOFF_MAX_S = 0.200
ATTEMPT_MIN_S = 1.0
# The node closes a connection idle for 10 s; one idle for longer than this
# is not reused, so a request is not lost to a close that crossed it.
IDLE_REUSE_S = 5.0

Duration = Union[int, float, datetime.timedelta]
"""Seconds (int or float) or a timedelta."""


@dataclass(frozen=True)
class TLS:
    """HTTPS with client certificates (docs/security.md): `ca` the PEM
    bundle the nodes' certificates chain to (each node's certificate
    carries its address's IP), `cert` and `key` this client's certificate
    chain and key (both or neither; nodes with TLS refuse a caller without
    one). Or pass an ssl.SSLContext as Client(tls=...)."""

    ca: str
    cert: Optional[str] = None
    key: Optional[str] = None

    def context(self) -> ssl.SSLContext:
        if (self.cert is None) != (self.key is None):
            raise InvalidArgumentError("tls: cert and key go together")
        for name in ("ca", "cert", "key"):
            p = getattr(self, name)
            if p is not None and not os.path.isfile(p):
                raise InvalidArgumentError("tls.%s: no such file: %s"
                                           % (name, p))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_verify_locations(self.ca)
        if self.cert is not None:
            ctx.load_cert_chain(self.cert, self.key)
        return ctx


@dataclass(frozen=True)
class _Node:
    url: str      # normalized base URL, what errors and answers name
    https: bool
    host: str
    port: int


class _NotSent(Exception):
    """The request did not leave: certainly not applied."""


class _Lost(Exception):
    """The request went out and no answer came back: perhaps applied."""


class _Pool:
    """Idle keep-alive connections of one node."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: List[Tuple[http.client.HTTPConnection, float]] = []

    def get(self) -> Optional[http.client.HTTPConnection]:
        now = time.monotonic()
        with self.lock:
            while self.idle:
                conn, t = self.idle.pop()
                if now - t < IDLE_REUSE_S and not _dropped(conn):
                    return conn
                conn.close()
        return None

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self.lock:
            self.idle.append((conn, time.monotonic()))

    def close(self) -> None:
        with self.lock:
            for conn, _ in self.idle:
                conn.close()
            self.idle.clear()


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle connection that is readable has been closed by its node (a
    restart, the idle timeout): a request sent on it would be lost after
    it went out, an outcome unknown for nothing."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


# --- argument checks: before any network call --------------------------------

def _bytes_arg(name: str, v: Any, lo: int, hi: int,
               nul_ok: bool = False) -> str:
    """@v (str, or UTF-8 bytes) as the str the JSON body carries."""
    if isinstance(v, (bytes, bytearray)):
        try:
            v = bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgumentError(
                "%s: not UTF-8 (the HTTP API carries text; binary keys "
                "need libonce)" % name)
    if not isinstance(v, str):
        raise InvalidArgumentError("%s: want a str, got %s"
                                   % (name, type(v).__name__))
    try:
        n = len(v.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError("%s: not encodable as UTF-8" % name)
    if n < lo or n > hi:
        raise InvalidArgumentError("%s: %d bytes, want %d..%d"
                                   % (name, n, lo, hi))
    if not nul_ok and "\x00" in v:
        raise InvalidArgumentError("%s: holds a NUL byte" % name)
    return v


def _hex_id(name: str, v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        if len(v) != 16:
            raise InvalidArgumentError("%s: want 16 bytes, got %d"
                                       % (name, len(v)))
        return bytes(v).hex()
    if not isinstance(v, str) or len(v) != 32:
        raise InvalidArgumentError("%s: want 32 hex digits, got %r"
                                   % (name, v))
    try:
        bytes.fromhex(v)
    except ValueError:
        raise InvalidArgumentError("%s: want 32 hex digits, got %r"
                                   % (name, v))
    return v.lower()


def _ms(name: str, v: Any, lo_ms: int = 1,
        hi_ms: Optional[int] = None) -> int:
    """A duration (seconds or timedelta) as whole milliseconds."""
    if isinstance(v, datetime.timedelta):
        s = v.total_seconds()
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        s = float(v)
    else:
        raise InvalidArgumentError("%s: want seconds (int, float) or a "
                                   "timedelta, got %r" % (name, v))
    if s != s or s in (float("inf"), float("-inf")):
        raise InvalidArgumentError("%s: not a finite duration" % name)
    ms = int(round(s * 1000))
    if ms < lo_ms or (hi_ms is not None and ms > hi_ms):
        raise InvalidArgumentError("%s: %r s is out of range (%s..%s ms)"
                                   % (name, v, lo_ms, hi_ms or "-"))
    return ms


def _timeout_s(name: str, v: Any) -> float:
    return _ms(name, v, 1, int(TIMEOUT_MAX_S * 1000)) / 1000.0


def _ts_ms(v: Any) -> int:
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            raise InvalidArgumentError("ts: a naive datetime; give one with "
                                       "a timezone, or unix ms")
        return int(v.timestamp() * 1000)
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgumentError("ts: want unix milliseconds (int) or an "
                                   "aware datetime, got %r" % (v,))
    if v < 0 or v >= 1 << 64:
        raise InvalidArgumentError("ts: out of range: %r" % v)
    return v


def _token_arg(v: Any) -> str:
    if isinstance(v, OwnerToken):
        return str(v)
    if isinstance(v, str):
        try:
            return str(OwnerToken.parse(v))
        except ValueError as e:
            raise InvalidArgumentError(str(e))
    raise InvalidArgumentError("owner_token: want an OwnerToken or "
                               "\"GROUP:INDEX:SLOT\", got %r" % (v,))


def _claim_body(c: ClaimRequest) -> Dict[str, Any]:
    """The JSON object of claim @c, every bound checked (docs/http-api.md,
    "Requests"); without request_id, timeout and cluster_id."""
    body: Dict[str, Any] = {
        "scope": _bytes_arg("scope", c.scope, 1, SCOPE_MAX),
        "key": _bytes_arg("key", c.key, 1, KEY_MAX),
    }
    if not isinstance(c.idempotent, bool):
        raise InvalidArgumentError("idempotent: want a bool")
    if not isinstance(c.sliding, bool):
        raise InvalidArgumentError("sliding: want a bool")
    if c.ttl is not None:
        body["ttl"] = _ms("ttl", c.ttl)
    if (c.ts is None) != (c.window is None):
        raise InvalidArgumentError("ts and window go together")
    if c.ts is not None:
        body["ts"] = _ts_ms(c.ts)
        body["window"] = _ms("window", c.window)
    if c.max_uses is not None:
        if isinstance(c.max_uses, bool) or not isinstance(c.max_uses, int):
            raise InvalidArgumentError("max_uses: want an int 1..%d, got %r"
                                       % (MAX_USES_MAX, c.max_uses))
        if not 1 <= c.max_uses <= MAX_USES_MAX:
            raise InvalidArgumentError("max_uses: %d, want 1..%d"
                                       % (c.max_uses, MAX_USES_MAX))
    if c.idempotent:
        body["idempotent"] = True
        if c.lease is not None:
            body["lease"] = _ms("lease", c.lease, 0)
        if c.payload_hash is not None:
            body["payload_hash"] = _payload_hash(c.payload_hash)
        if c.max_uses is not None:
            raise InvalidArgumentError("max_uses: for a NONCE only (not "
                                       "with idempotent=True)")
        if c.sliding:
            if c.ttl is None or c.ts is not None:
                raise InvalidArgumentError("sliding: needs ttl (and no ts)")
            body["sliding"] = True
    else:
        if c.lease is not None:
            raise InvalidArgumentError("lease: only with idempotent=True")
        if c.payload_hash is not None:
            raise InvalidArgumentError("payload_hash: only with "
                                       "idempotent=True")
        if c.sliding:
            raise InvalidArgumentError("sliding: only with idempotent=True "
                                       "(a NONCE cannot slide)")
        if c.max_uses is not None:
            body["max_uses"] = c.max_uses
    if c.execution_id is not None:
        body["execution_id"] = _bytes_arg("execution_id", c.execution_id,
                                          0, EXECUTION_ID_MAX)
    return body


def _payload_hash(v: Any) -> str:
    if isinstance(v, (bytes, bytearray)):
        ph = bytes(v)
    elif isinstance(v, str):
        try:
            ph = bytes.fromhex(v)
        except ValueError:
            raise InvalidArgumentError("payload_hash: not hex")
    else:
        raise InvalidArgumentError("payload_hash: want bytes or hex")
    if len(ph) > PAYLOAD_HASH_MAX:
        raise InvalidArgumentError("payload_hash: %d bytes, want 0..%d"
                                   % (len(ph), PAYLOAD_HASH_MAX))
    return ph.hex()


def _parse_node(spec: Any, https_default: bool) -> _Node:
    if not isinstance(spec, str) or not spec:
        raise InvalidArgumentError("nodes: want base URLs such as "
                                   "\"http://127.0.0.1:7121\", got %r"
                                   % (spec,))
    text = spec if "://" in spec else (
        ("https://" if https_default else "http://") + spec)
    try:
        u = urllib.parse.urlsplit(text)
        port = u.port
    except ValueError as e:
        raise InvalidArgumentError("nodes: %r: %s" % (spec, e))
    if u.scheme not in ("http", "https"):
        raise InvalidArgumentError("nodes: %r: the scheme must be http or "
                                   "https" % spec)
    if not u.hostname or port is None:
        raise InvalidArgumentError("nodes: %r: want HOST:PORT (the node's "
                                   "--http-addr)" % spec)
    if u.path not in ("", "/") or u.query or u.fragment or u.username:
        raise InvalidArgumentError("nodes: %r: a base URL has no path, "
                                   "query or user" % spec)
    host = u.hostname
    shown = "[%s]" % host if ":" in host else host
    return _Node("%s://%s:%d" % (u.scheme, shown, port), u.scheme == "https",
                 host, port)


# --- the client ----------------------------------------------------------------

class Client:
    """A client of one once cluster through its nodes' HTTP/JSON API.

    nodes       base URLs of some or all nodes' --http-addr
                ("http://127.0.0.1:7121"; "127.0.0.1:7121" takes http, or
                https when tls is given), 1..64
    cluster_id  32 hex digits: accept answers of this cluster only;
                None: pin the first cluster that answers
    timeout     the default deadline of each call, seconds (or timedelta)
    tls         TLS(ca, cert, key), or an ssl.SSLContext, for HTTPS nodes

    Calls return an Answer for every decision (ACCEPTED, REPLAYED,
    NOT_OWNER, ...: denials are answers, not errors) and raise an OnceError
    subclass when there is none (once_client.errors says which to retry).
    """

    def __init__(self, nodes: Sequence[str], cluster_id: Optional[str] = None,
                 timeout: Duration = 5.0,
                 tls: Union[TLS, ssl.SSLContext, None] = None) -> None:
        if isinstance(nodes, str) or not isinstance(nodes, (list, tuple)):
            raise InvalidArgumentError("nodes: want a list of base URLs")
        if not 1 <= len(nodes) <= NODES_MAX:
            raise InvalidArgumentError("nodes: %d given, want 1..%d"
                                       % (len(nodes), NODES_MAX))
        if tls is not None and not isinstance(tls, (TLS, ssl.SSLContext)):
            raise InvalidArgumentError("tls: want a once_client.TLS or an "
                                       "ssl.SSLContext")
        parsed = [_parse_node(n, tls is not None) for n in nodes]
        if len({n.url for n in parsed}) != len(parsed):
            raise InvalidArgumentError("nodes: a node is given twice")
        self._timeout = _timeout_s("timeout", timeout)
        self._pinned: Optional[str] = None
        if cluster_id is not None:
            self._pinned = _hex_id("cluster_id", cluster_id)
        self._ssl: Optional[ssl.SSLContext] = None
        if isinstance(tls, TLS):
            self._ssl = tls.context()
        elif isinstance(tls, ssl.SSLContext):
            self._ssl = tls
        elif any(n.https for n in parsed):
            self._ssl = ssl.create_default_context()
        self._nodes = parsed
        self._pools = [_Pool() for _ in parsed]
        self._lock = threading.Lock()
        self._preferred = 0
        self._closed = False

    # -- properties ---------------------------------------------------------

    @property
    def nodes(self) -> List[str]:
        return [n.url for n in self._nodes]

    @property
    def cluster_id(self) -> Optional[str]:
        """The pinned cluster id (hex), or None before the first answer."""
        return self._pinned

    @property
    def timeout(self) -> float:
        return self._timeout

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        for p in self._pools:
            p.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover (interpreter shutdown)
            pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- calls --------------------------------------------------------------

    def claim(self, scope: Union[str, bytes], key: Union[str, bytes], *,
              ttl: Optional[Duration] = None, ts: Any = None,
              window: Optional[Duration] = None, idempotent: bool = False,
              lease: Optional[Duration] = None,
              payload_hash: Union[bytes, str, None] = None,
              execution_id: Union[str, bytes, None] = None,
              request_id: Union[str, bytes, None] = None,
              max_uses: Optional[int] = None, sliding: bool = False,
              timeout: Optional[Duration] = None) -> Answer:
        """Claim (scope, key): a NONCE (with `ttl`, or a signed timestamp
        `ts` in unix ms with its `window`; neither: the node's 24 h TTL), or
        with idempotent=True an IDEMPOTENT record (`lease`, `payload_hash`
        as bytes or hex). ACCEPTED (with an `owner_token` for an idempotent
        claim) or a denial: REPLAYED, DUPLICATE (with `result`),
        IN_PROGRESS (with `retry_after_ms`), CONFLICT, STALE, FUTURE,
        FAILED (with `stored_error`). `max_uses` (1..64, NONCE only): the
        nonce takes that many request ids before REPLAYED (the first claim
        fixes it; another value is CONFLICT). `sliding=True` (IDEMPOTENT
        with `ttl` only): each DUPLICATE, IN_PROGRESS or FAILED answer
        moves the expiry to its log time + ttl. `request_id`: only to
        retry a call that raised OutcomeUnknownError."""
        body = _claim_body(ClaimRequest(
            scope, key, ttl=ttl, ts=ts, window=window,
            idempotent=idempotent, lease=lease, payload_hash=payload_hash,
            execution_id=execution_id, max_uses=max_uses, sliding=sliding))
        return self._write("/v1/claim", body, request_id, timeout)

    def claim_batch(self, items: Sequence[Union[ClaimRequest,
                                                Mapping[str, Any]]], *,
                    timeout: Optional[Duration] = None
                    ) -> List[BatchResult]:
        """Up to 4,096 claims in one call (POST /v1/claims), applied in
        order after one consensus round: one BatchResult per item, in
        order, whose `answer` is what claim() would have answered at that
        point (a key twice: ACCEPTED, then REPLAYED) or whose `error` is
        the item's own refusal. Items are ClaimRequests, or mappings of
        claim()'s keyword arguments with `scope` and `key`. Each item gets
        its own request id (or keeps the one it gives), sent again by every
        retry of the call, so a retried batch applies no item twice. A
        failure of the whole call (no leader, the deadline) raises, as
        claim() does."""
        if isinstance(items, (str, bytes, Mapping)) or \
                not isinstance(items, Sequence):
            raise InvalidArgumentError("items: want a list of ClaimRequest")
        if not 1 <= len(items) <= BATCH_MAX:
            raise InvalidArgumentError("items: %d given, want 1..%d"
                                       % (len(items), BATCH_MAX))
        bodies: List[Dict[str, Any]] = []
        rids: List[str] = []
        for i, it in enumerate(items):
            if isinstance(it, Mapping):
                try:
                    it = ClaimRequest(**it)
                except TypeError as e:
                    raise InvalidArgumentError("items[%d]: %s" % (i, e))
            if not isinstance(it, ClaimRequest):
                raise InvalidArgumentError(
                    "items[%d]: want a ClaimRequest or a mapping, got %s"
                    % (i, type(it).__name__))
            try:
                b = _claim_body(it)
                rid = (secrets.token_hex(16) if it.request_id is None
                       else _hex_id("request_id", it.request_id))
            except InvalidArgumentError as e:
                raise InvalidArgumentError("items[%d]: %s" % (i, e.message))
            b["request_id"] = rid
            bodies.append(b)
            rids.append(rid)
        # The JSON array bound of the listener (the node also bounds the
        # encoded RPC at 992 KiB and answers 400 past it).
        size = len(json.dumps({"items": bodies, "timeout": 60000,
                               "cluster_id": "0" * 32}).encode("utf-8"))
        if size > BATCH_BODY_MAX:
            raise InvalidArgumentError("items: %d bytes of JSON, want at "
                                       "most %d" % (size, BATCH_BODY_MAX))
        t = self._timeout if timeout is None else _timeout_s("timeout",
                                                              timeout)

        def decode(obj: Any, url: str) -> List[BatchResult]:
            if not isinstance(obj, list) or len(obj) != len(rids):
                raise ProtocolError("a batch answer: want %d items, got %r"
                                    % (len(rids), str(obj)[:200]))
            return [item_result(i, rids[i], o, url)
                    for i, o in enumerate(obj)]

        try:
            return self._call("POST", "/v1/claims", {"items": bodies},
                              decode, write=True, rid=None, timeout=t,
                              one_node=None)
        except OnceError as e:
            # What a retry of the same items must give again (an
            # OutcomeUnknownError: some items may have applied).
            e.request_ids = list(rids)
            raise

    def complete(self, scope: Union[str, bytes], key: Union[str, bytes],
                 owner_token: Union[OwnerToken, str],
                 result: Union[bytes, str] = b"", *,
                 request_id: Union[str, bytes, None] = None,
                 timeout: Optional[Duration] = None) -> Answer:
        """The owner stores its `result` (bytes, or str as UTF-8; 0..64
        KiB): COMPLETED (retry true when already completed with this
        token), or NOT_OWNER (fenced by a takeover: nothing stored),
        NOT_FOUND, CONFLICT."""
        body = {"scope": _bytes_arg("scope", scope, 1, SCOPE_MAX),
                "key": _bytes_arg("key", key, 1, KEY_MAX),
                "owner_token": _token_arg(owner_token)}
        if isinstance(result, str):
            result = result.encode("utf-8")
        if not isinstance(result, (bytes, bytearray)):
            raise InvalidArgumentError("result: want bytes or str")
        if len(result) > RESULT_MAX:
            raise InvalidArgumentError("result: %d bytes, want 0..%d"
                                       % (len(result), RESULT_MAX))
        body["result_b64"] = base64.b64encode(bytes(result)).decode("ascii")
        return self._write("/v1/complete", body, request_id, timeout)

    def release(self, scope: Union[str, bytes], key: Union[str, bytes],
                owner_token: Union[OwnerToken, str], *,
                terminal: bool = False,
                error: Union[str, bytes, None] = None,
                request_id: Union[str, bytes, None] = None,
                timeout: Optional[Duration] = None) -> Answer:
        """The owner gives the key up: RELEASED (the next claim takes over)
        or, with terminal=True, FAILED for good with `error` (0..1024
        bytes) stored; NOT_OWNER, NOT_FOUND, CONFLICT."""
        body: Dict[str, Any] = {
            "scope": _bytes_arg("scope", scope, 1, SCOPE_MAX),
            "key": _bytes_arg("key", key, 1, KEY_MAX),
            "owner_token": _token_arg(owner_token)}
        if not isinstance(terminal, bool):
            raise InvalidArgumentError("terminal: want a bool")
        if error is not None and not terminal:
            raise InvalidArgumentError("error: only with terminal=True")
        if terminal:
            body["terminal"] = True
            if error is not None:
                body["error"] = _bytes_arg("error", error, 0, ERROR_MAX)
        return self._write("/v1/release", body, request_id, timeout)

    def lookup(self, scope: Union[str, bytes], key: Union[str, bytes], *,
               timeout: Optional[Duration] = None) -> Answer:
        """Linearizable read: FOUND with every fact and the kept
        `attempts`, or NOT_FOUND. Records nothing."""
        s = _bytes_arg("scope", scope, 1, SCOPE_MAX)
        k = _bytes_arg("key", key, 1, KEY_MAX)
        path = "/v1/records/%s/%s" % (urllib.parse.quote(s, safe=""),
                                      urllib.parse.quote(k, safe=""))
        t = self._timeout if timeout is None else _timeout_s("timeout",
                                                              timeout)
        return self._call("GET", path, None, Answer.from_json, write=False,
                          rid=None, timeout=t, one_node=None)

    def status(self, node: Optional[str] = None, *,
               timeout: Optional[Duration] = None) -> StatusInfo:
        """One node's own view (never forwarded): of `node` (one of the
        client's nodes), or of the first that answers."""
        t = self._timeout if timeout is None else _timeout_s("timeout",
                                                              timeout)
        one = None
        if node is not None:
            want = _parse_node(node, self._nodes[0].https).url
            for i, n in enumerate(self._nodes):
                if n.url == want:
                    one = i
            if one is None:
                raise InvalidArgumentError("node: %r is not one of the "
                                           "client's nodes" % node)
        return self._call("GET", "/v1/status", None, StatusInfo.from_json,
                          write=False, rid=None, timeout=t, one_node=one)

    def once(self, scope: str, key: str, **opts: Any) -> "Once":
        """The idempotent helper as a context manager for (scope, key):
        once_client.Once(self, scope, key, **opts)."""
        from .idempotent import Once
        return Once(self, scope, key, **opts)

    # -- the call loop --------------------------------------------------------

    def _write(self, path: str, body: Dict[str, Any],
               request_id: Union[str, bytes, None],
               timeout: Optional[Duration]) -> Answer:
        rid = (secrets.token_hex(16) if request_id is None
               else _hex_id("request_id", request_id))
        body["request_id"] = rid
        t = self._timeout if timeout is None else _timeout_s("timeout",
                                                              timeout)
        return self._call("POST", path, body, Answer.from_json, write=True,
                          rid=rid, timeout=t, one_node=None)

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]],
              decode: Callable[..., T], *, write: bool, rid: Optional[str],
              timeout: float, one_node: Optional[int]) -> T:
        """Attempts until a decision, a final error or the deadline."""
        deadline = time.monotonic() + timeout
        n_nodes = len(self._nodes)
        i = self._preferred if one_node is None else one_node
        split = one_node is None and n_nodes > 1
        attempts = 0
        maybe_applied = False
        backoff = 0.0
        last: Optional[OnceError] = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            budget = left if (not split or left <= 2 * ATTEMPT_MIN_S) \
                else max(left / 2, ATTEMPT_MIN_S)
            node = self._nodes[i]
            data = None
            if body is not None:
                # The node answers within its share (a little less, so its
                # answer beats our socket timeout).
                ms = int(budget * 1000)
                ms = max(1, min(NODE_TIMEOUT_MAX_MS, ms - min(100, ms // 10)))
                body["timeout"] = ms
                # The pin travels with the write, for a node of another
                # cluster to refuse it before proposing.
                with self._lock:
                    if self._pinned is not None:
                        body["cluster_id"] = self._pinned
                data = json.dumps(body).encode("utf-8")
            attempts += 1
            try:
                status, obj = self._send(i, method, path, data, budget)
            except _NotSent as e:
                last = UnavailableError(
                    "%s: not reached: %s" % (node.url, e),
                    status="UNAVAILABLE", request_id=rid, node=node.url)
                self._leave(i, one_node)
            except _Lost as e:
                if write:
                    maybe_applied = True
                last = UnavailableError(
                    "%s: no answer after the request was sent: %s"
                    % (node.url, e), status="UNKNOWN",
                    applied="unknown" if write else "false",
                    request_id=rid, node=node.url)
                self._leave(i, one_node)
            else:
                decided, err, unknown, final = self._judge(
                    status, obj, node, decode, write, rid, maybe_applied)
                if decided is not None:
                    if one_node is None:
                        self._preferred = i
                    return decided
                assert err is not None
                if unknown and write:
                    maybe_applied = True
                if final:
                    raise self._sticky(err, maybe_applied)
                last = err
            if one_node is not None:
                break
            i = (i + 1) % n_nodes
            backoff = BACKOFF_FIRST_S if backoff == 0 else \
                min(BACKOFF_MAX_S, backoff * 2)
            delay = backoff
            left = deadline - time.monotonic()
            if delay >= left:
                # Keep trying into the deadline's last moments (a leader
                # may just have been elected), but not with a sliver.
                if left < 2 * BACKOFF_FIRST_S:
                    break
                delay = left / 2
            time.sleep(delay)
        if attempts == 0 or last is None:
            raise DeadlineExceededError(
                "deadline of %d ms passed before any attempt"
                % int(timeout * 1000), status="DEADLINE_EXCEEDED",
                request_id=rid)
        msg = "deadline of %d ms: %d attempts, no decision; last error: %s" \
            % (int(timeout * 1000), attempts, last.message)
        if one_node is not None:
            msg = last.message
        if maybe_applied:
            raise OutcomeUnknownError(
                msg, status=last.status if last.status != "UNAVAILABLE"
                else "UNKNOWN", request_id=rid, leader_hint=last.leader_hint,
                node=last.node, http_status=last.http_status,
                answer=last.answer)
        cls = type(last) if isinstance(last, (UnavailableError,
                                              ResourceExhaustedError)) \
            else UnavailableError
        raise cls(msg, status=last.status, applied="false", request_id=rid,
                  leader_hint=last.leader_hint, node=last.node,
                  http_status=last.http_status, answer=last.answer)

    def _leave(self, i: int, one_node: Optional[int]) -> None:
        """Node @i gave no answer: later calls should not start there
        (perhaps it is down); an error answer leaves the preference."""
        if one_node is None:
            with self._lock:
                if self._preferred == i:
                    self._preferred = (i + 1) % len(self._nodes)

    @staticmethod
    def _sticky(err: OnceError, maybe_applied: bool) -> OnceError:
        """Once unknown, never back to false (a final error included)."""
        if maybe_applied:
            err.applied = "unknown"
        return err

    def _judge(self, status: int, obj: Any, node: _Node,
               decode: Callable[..., T], write: bool, rid: Optional[str],
               maybe_applied: bool
               ) -> Tuple[Optional[T], Optional[OnceError], bool, bool]:
        """One HTTP answer: (the decoded decision, None, _, _) or (None,
        error, outcome unknown?, final?)."""
        # A batch's decision is a JSON array of per-item objects.
        batch = status == 200 and isinstance(obj, list)
        if not isinstance(obj, dict) and not batch:
            if status in (404, 405, 413, 415) or 400 <= status < 500:
                return None, InvalidArgumentError(
                    "%s answered HTTP %d: %s" % (node.url, status,
                                                 str(obj)[:200]),
                    request_id=rid, node=node.url, http_status=status), \
                    False, True
            # A proxy's or a broken node's answer: nothing to trust.
            return None, UnavailableError(
                "%s answered HTTP %d without a JSON object" % (
                    node.url, status), status="UNKNOWN" if write else
                "UNAVAILABLE", applied="unknown" if write else "false",
                request_id=rid, node=node.url, http_status=status), \
                write, False
        # Every object of the answer (each item of a batch) names its
        # cluster; any other than the pinned one refuses the whole answer.
        cids = [x.get("cluster_id") for x in (obj if batch else [obj])
                if isinstance(x, dict)]
        cids = [c.lower() for c in cids if isinstance(c, str) and c]
        with self._lock:
            pinned = self._pinned
        cid = next((c for c in cids if c != pinned), None) \
            if pinned is not None else (cids[0] if cids else None)
        if isinstance(cid, str) and cid:
            if pinned is not None and cid.lower() != pinned:
                # Another cluster must never decide for this one: fail
                # closed, no retry elsewhere.
                return None, ClusterMismatchError(
                    "cluster id mismatch: pinned %s, answered %s by %s"
                    % (pinned, cid, node.url), pinned=pinned,
                    answered=cid.lower(),
                    applied="unknown" if write and maybe_applied else "false",
                    request_id=rid, node=node.url, http_status=status,
                    answer=obj), False, True
        err = None if batch else obj.get("error")
        if status == 200 and err is None:
            try:
                decided = decode(obj, node.url)
                if batch and maybe_applied:
                    decided = [sticky(r) for r in decided]  # type: ignore
            except ProtocolError as e:
                # A malformed answer to a write: perhaps applied.
                return None, UnavailableError(
                    "%s: malformed answer: %s" % (node.url, e),
                    status="UNKNOWN" if write else "UNAVAILABLE",
                    applied="unknown" if write else "false",
                    request_id=rid, node=node.url, http_status=status,
                    answer=obj), write, False
            if isinstance(cid, str) and cid:
                with self._lock:
                    if self._pinned is None:
                        self._pinned = cid.lower()
            return decided, None, False, False
        name = err if isinstance(err, str) else "UNKNOWN"
        applied = obj.get("applied")
        msg = obj.get("message") if isinstance(obj.get("message"), str) \
            else (obj.get("reason") or name)
        kw: Dict[str, Any] = dict(
            status=name, request_id=rid, node=node.url, http_status=status,
            leader_hint=obj.get("leader_hint") if isinstance(
                obj.get("leader_hint"), str) else None, answer=obj)
        text = "%s: %s" % (node.url, msg)
        # A node that forwarded the call may answer its own deadline with
        # applied false although the leader had it: a deadline is always
        # unknown for a write (libonce's rule, src/client/wire.c).
        if applied == "unknown" or status == 504 or name in (
                "UNKNOWN", "DEADLINE_EXCEEDED"):
            if write:
                return None, OutcomeUnknownError(text, **kw), True, False
            return None, UnavailableError(text, **kw), False, False
        if name == "INVALID_ARGUMENT":
            return None, InvalidArgumentError(text, **kw), False, True
        if name == "PERMISSION_DENIED":
            return None, PermissionDeniedError(text, **kw), False, True
        if name == "FAILED_PRECONDITION":
            if isinstance(msg, str) and "cluster id mismatch" in msg:
                # The node refused our pin (an answer without its own
                # cluster id; one with it was caught above).
                return None, ClusterMismatchError(
                    text, pinned=self._pinned or "", answered="",
                    applied="unknown" if write and maybe_applied
                    else "false", **{k: v for k, v in kw.items()
                                     if k != "status"}), False, True
            return None, FailedPreconditionError(text, **kw), False, True
        if name == "RESOURCE_EXHAUSTED":
            return None, ResourceExhaustedError(text, **kw), False, False
        if status >= 500 or name == "UNAVAILABLE":
            return None, UnavailableError(text, **kw), False, False
        return None, DefiniteError(text, **kw), False, True

    # -- transport ------------------------------------------------------------

    def _connection(self, i: int, timeout: float
                    ) -> Tuple[http.client.HTTPConnection, bool]:
        conn = self._pools[i].get()
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        n = self._nodes[i]
        if n.https:
            conn = http.client.HTTPSConnection(n.host, n.port,
                                               timeout=timeout,
                                               context=self._ssl)
        else:
            conn = http.client.HTTPConnection(n.host, n.port,
                                              timeout=timeout)
        return conn, False

    def _send(self, i: int, method: str, path: str, data: Optional[bytes],
              timeout: float) -> Tuple[int, Any]:
        """One HTTP exchange with node @i: (status, parsed JSON or text).
        Raises _NotSent (certainly not applied) or _Lost."""
        conn, reused = self._connection(i, timeout)
        sent = False
        try:
            if not reused:
                try:
                    conn.connect()
                except (OSError, ssl.SSLError) as e:
                    raise _NotSent(_describe(e))
            headers = {"Accept": "application/json"}
            if data is not None:
                headers["Content-Type"] = "application/json"
            try:
                conn.request(method, path, body=data, headers=headers)
            except (OSError, http.client.HTTPException) as e:
                # Not all of the request went out: a node cannot serve a
                # request it did not read whole.
                raise _NotSent(_describe(e))
            sent = True
            resp = conn.getresponse()
            raw = resp.read()
            status = resp.status
            keep = not resp.will_close
        except (_NotSent, _Lost):
            conn.close()
            raise
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            conn.close()
            if sent:
                raise _Lost(_describe(e))
            raise _NotSent(_describe(e))
        if keep:
            self._pools[i].put(conn)
        else:
            conn.close()
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text.strip()


def _describe(e: BaseException) -> str:
    if isinstance(e, socket.timeout):
        return "timed out"
    return "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__


