"""once_client: the Python client of a once cluster (HTTP/JSON API).

    from once_client import Client, Outcome
    c = Client(["http://127.0.0.1:7121", "http://127.0.0.1:7122"])
    a = c.claim("payments", "nonce-1", ttl=3600)
    if a.outcome is Outcome.ACCEPTED: ...
    for r in c.claim_batch([ClaimRequest("payments", "n-2", ttl=60),
                            ClaimRequest("payments", "n-2", ttl=60)]):
        print(r.outcome or r.error)         # ACCEPTED, then REPLAYED

Standard library only; Python >= 3.9. See README.md.
"""

from .batch import BatchResult, ClaimRequest
from .client import Client, Duration, TLS
from .errors import (ClusterMismatchError, ConflictError,
                     DeadlineExceededError, DefiniteError, FailedError,
                     FailedPreconditionError, InvalidArgumentError,
                     NotOwnerError, OnceError, OutcomeUnknownError,
                     PermissionDeniedError, ResourceExhaustedError,
                     RetryableError, StillInProgressError, UnavailableError)
from .idempotent import Once, idempotent
from .types import (Answer, Attempt, Kind, Member, Outcome, OwnerToken,
                    ProtocolError, RaftRole, Role, State, StatusInfo)

# One number for the repository: configure.ac's AC_INIT (the tests check).
__version__ = "0.1.0"

__all__ = [
    "Client", "TLS", "Duration", "Once", "idempotent",
    "ClaimRequest", "BatchResult",
    "Answer", "Attempt", "Kind", "Member", "Outcome", "OwnerToken",
    "RaftRole", "Role", "State", "StatusInfo", "ProtocolError",
    "OnceError", "RetryableError", "OutcomeUnknownError", "DefiniteError",
    "UnavailableError", "ResourceExhaustedError", "DeadlineExceededError",
    "InvalidArgumentError", "PermissionDeniedError",
    "FailedPreconditionError", "ClusterMismatchError", "NotOwnerError",
    "ConflictError", "FailedError", "StillInProgressError",
    "__version__",
]
