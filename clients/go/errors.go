package once

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorKind says what a caller may do after an error.
type ErrorKind int

const (
	// NotApplied: the call certainly did not take effect; it may be
	// retried anywhere (a new call is fine).
	NotApplied ErrorKind = iota + 1
	// Unknown: the call may have taken effect; retry the SAME call with
	// its request id (Error.RequestID, ClaimRequest.RequestID...), which
	// the cluster makes safe, or look the record up.
	Unknown
	// Definite: the cluster (or this client) refused the call for a reason
	// a retry does not change: a bad argument, a missing right, another
	// cluster than the pinned one, a precondition.
	Definite
)

func (k ErrorKind) String() string {
	switch k {
	case NotApplied:
		return "not applied"
	case Unknown:
		return "outcome unknown"
	case Definite:
		return "definite"
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Sentinel errors: errors.Is(err, once.ErrUnknown) and the like match an
// *Error of that kind or status.
var (
	ErrNotApplied = errors.New("once: not applied")
	ErrUnknown    = errors.New("once: outcome unknown")
	ErrDefinite   = errors.New("once: definite error")

	ErrInvalidArgument    = errors.New("once: invalid argument")
	ErrPermissionDenied   = errors.New("once: permission denied")
	ErrUnavailable        = errors.New("once: unavailable")
	ErrDeadlineExceeded   = errors.New("once: deadline exceeded")
	ErrResourceExhausted  = errors.New("once: resource exhausted")
	ErrFailedPrecondition = errors.New("once: failed precondition")
	// ErrClusterMismatch: an answer came from another cluster than the
	// pinned one (an amnesiac or re-created cluster, or a wrong address).
	ErrClusterMismatch = errors.New("once: cluster id mismatch")

	// Do's definite non-success outcomes (an *OutcomeError matches them).
	// ErrFenced: another process took the key over while fn ran; its
	// result was not stored (the late owner learned NOT_OWNER).
	ErrFenced = errors.New("once: fenced: another owner took the key over")
	// ErrKeyFailed: the key failed for good (a terminal release).
	ErrKeyFailed = errors.New("once: the key failed for good")
	// ErrConflict: the record refuses this claim (another kind or payload hash).
	ErrConflict = errors.New("once: conflict")
	// ErrInProgress: another owner held the key until the deadline.
	ErrInProgress = errors.New("once: in progress elsewhere")
)

// Status names of the API (gRPC's), as Error.Status carries them.
const (
	StatusInvalidArgument    = "INVALID_ARGUMENT"
	StatusPermissionDenied   = "PERMISSION_DENIED"
	StatusUnavailable        = "UNAVAILABLE"
	StatusDeadlineExceeded   = "DEADLINE_EXCEEDED"
	StatusResourceExhausted  = "RESOURCE_EXHAUSTED"
	StatusFailedPrecondition = "FAILED_PRECONDITION"
	StatusUnknown            = "UNKNOWN"
)

// Error is every error of a call that got no decision: refused before the
// network (bad arguments: Kind Definite, Status INVALID_ARGUMENT, Node ""),
// refused by the cluster, or without an answer.
type Error struct {
	Kind ErrorKind
	// Status: the status name (INVALID_ARGUMENT, UNAVAILABLE, ...).
	Status string
	// Applied: "false" (certainly not applied) or "unknown".
	Applied string
	Message string
	// RequestID: the call's request id (claim, complete, release): what a
	// retry of the same call must carry.
	RequestID string
	// LeaderHint: the leader's client RPC address, when a node named it.
	LeaderHint string
	// Node: the base URL the last attempt went to ("" before the network).
	Node string
	// HTTPStatus: the last attempt's HTTP status (0 without an answer).
	HTTPStatus int
	// Attempts: how many requests the call sent or tried to send.
	Attempts int
	// Who answered, when a node did.
	ClusterID string
	NodeID    string
	BootID    string
	// Err: the cause (a transport error, context.DeadlineExceeded...).
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "once: %s (applied %s", e.Status, e.Applied)
	if e.RequestID != "" {
		fmt.Fprintf(&b, ", request_id %s", e.RequestID)
	}
	if e.Node != "" {
		fmt.Fprintf(&b, ", %s", e.Node)
	}
	b.WriteString("): ")
	b.WriteString(e.Message)
	if e.Err != nil && !strings.Contains(e.Message, e.Err.Error()) {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap gives the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the kind and status sentinels.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrNotApplied:
		return e.Kind == NotApplied
	case ErrUnknown:
		return e.Kind == Unknown
	case ErrDefinite:
		return e.Kind == Definite
	case ErrInvalidArgument:
		return e.Status == StatusInvalidArgument
	case ErrPermissionDenied:
		return e.Status == StatusPermissionDenied
	case ErrUnavailable:
		return e.Status == StatusUnavailable
	case ErrDeadlineExceeded:
		return e.Status == StatusDeadlineExceeded
	case ErrResourceExhausted:
		return e.Status == StatusResourceExhausted
	case ErrFailedPrecondition:
		return e.Status == StatusFailedPrecondition
	case ErrClusterMismatch:
		return errors.Is(e.Err, errMismatch)
	}
	return false
}

// errMismatch marks a cluster-id refusal inside Error.Err.
var errMismatch = errors.New("cluster id mismatch")

// OutcomeError is Do's error for a definite outcome that is not a success:
// FAILED (ErrKeyFailed), CONFLICT (ErrConflict), NOT_OWNER on complete or
// release (ErrFenced), IN_PROGRESS until the deadline (ErrInProgress).
type OutcomeError struct {
	// Op: "claim", "complete" or "release".
	Op      string
	Outcome Outcome
	// Answer: the cluster's answer (StoredError for FAILED).
	Answer *Answer
	// Err: a cause (the context's error for IN_PROGRESS, fn's error for
	// a fenced release).
	Err error
}

func (e *OutcomeError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "once: %s answered %s", e.Op, e.Outcome)
	switch e.Outcome {
	case NotOwner:
		b.WriteString(": fenced, another owner took the key over; nothing was stored")
	case Failed:
		if e.Answer != nil {
			fmt.Fprintf(&b, ": stored error %q", e.Answer.StoredError)
		}
	case InProgress:
		b.WriteString(": another owner held the key until the deadline")
	}
	if e.Answer != nil && e.Answer.Reason != "" {
		fmt.Fprintf(&b, " (%s)", e.Answer.Reason)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap gives the cause.
func (e *OutcomeError) Unwrap() error { return e.Err }

// Is matches ErrFenced, ErrKeyFailed, ErrConflict and ErrInProgress.
func (e *OutcomeError) Is(target error) bool {
	switch target {
	case ErrFenced:
		return e.Outcome == NotOwner
	case ErrKeyFailed:
		return e.Outcome == Failed
	case ErrConflict:
		return e.Outcome == Conflict
	case ErrInProgress:
		return e.Outcome == InProgress
	}
	return false
}

// invalid is an argument refused before any network call.
func invalid(format string, a ...interface{}) *Error {
	return &Error{
		Kind:    Definite,
		Status:  StatusInvalidArgument,
		Applied: "false",
		Message: fmt.Sprintf(format, a...),
	}
}
