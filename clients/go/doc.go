// Package once is the Go client of a once cluster, the replicated replay
// authority: "has this (scope, key) been used before?", answered
// linearizably and durably.
//
// It speaks the nodes' HTTP/JSON API (docs/http-api.md), with HTTPS and
// client certificates when Config.TLS is set, using the standard library
// only, and keeps libonce's guarantees (include/once.h, docs/design.md
// §5): a fresh 128-bit request id per call and the same one on every
// retry of that call; the next node, after a backoff, after an attempt
// that certainly did not apply and after one whose outcome is unknown
// alike (the state machine answers a repeated accepted request ACCEPTED
// with Retry set); the cluster id pinned at the first answer (or given),
// sent with every write so that a node of another cluster refuses it
// before proposing, and an answer from any other cluster refused
// (ErrClusterMismatch, not applied); every call bounded by its context's
// deadline.
//
// Decisions (ACCEPTED, REPLAYED, DUPLICATE, NOT_OWNER, ...) come back as an
// *Answer with an Outcome; a call without a decision returns an *Error
// whose Kind says what to do: NotApplied (retry anywhere), Unknown (retry
// with the same request id, Error.RequestID) or Definite (a retry does not
// help). ClaimBatch sends up to 4,096 claims in one call and returns one
// ClaimResult per item, in order. Do runs a function at most once per key
// across processes.
package once
